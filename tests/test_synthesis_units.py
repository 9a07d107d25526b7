"""Synthesis without LLM calls: taxonomies, templates, the journey, validators, instances."""
from __future__ import annotations

import json
import random
import re
from collections import Counter

import pytest
import yaml

from evaluation.data import load_instances
from synthesis import personas as P
from synthesis import schemas as S
from synthesis.instances import build_instances, ground_truth, kept_sessions
from synthesis.journey import A, A_CHANGED, B, FINAL, OTHER, Journey, check_journey, \
    format_journey_requirements, make_journey
from synthesis.parsing import InvalidGeneration, extract_block, parse_json, parse_yaml
from synthesis.taxonomy import BUNDLED_SEEDS_FILE, canonical_type, load_occupations, load_taxonomy
from synthesis.validate import (
    find_factor,
    fill_resource,
    validate_factors,
    validate_persona_batch,
    validate_sessions,
    validate_user_turn,
)
from utils.prompts import load_prompt

TAX = load_taxonomy()


# ---------------------------------------------------------------------------------------
# Taxonomies and prompts
# ---------------------------------------------------------------------------------------
def test_taxonomies_match_tables_5_and_7():
    assert len(TAX.career_levels) == 3
    assert TAX.personality_traits == ("Openness to Experience", "Conscientiousness",
                                      "Agreeableness", "Neuroticism")
    assert len(TAX.personal_values) == 10 and "Self-Direction" in TAX.personal_values
    assert TAX.decision_making_styles == ("Analytical", "Directive", "Conceptual", "Behavioral")
    assert len(TAX.factor_types) == 8
    assert [len(v) for v in TAX.preference_types.values()] == [6, 5, 5]  # 16 types
    assert len(TAX.task_types) == 12


def test_occupation_tokens_are_115_distinct_words():
    tokens = load_occupations()
    assert len(tokens) == 115 == len(set(tokens))
    assert all(t.isalpha() and t.islower() for t in tokens)


def test_canonical_type_is_lenient_but_not_loose():
    assert canonical_type("writing and editing", TAX.task_types) == "Writing & editing"
    assert canonical_type("Person", TAX.factor_types) == "Person/Group"
    assert canonical_type("Style: Tone", TAX.all_preference_types) == "Tone"
    assert canonical_type("Humour", TAX.all_preference_types) is None
    assert canonical_type(None, TAX.task_types) is None


@pytest.mark.parametrize("name,figure", [("persona_descriptions", 13), ("context_factors", 17),
                                         ("interaction_sessions", 18), ("user_simulator", 19)])
def test_prompts_load_cite_their_own_figure_and_have_no_pdf_artifacts(name, figure):
    prompt = load_prompt(f"synthesis/{name}")
    assert f"Figure {figure}" in prompt.source
    text = prompt.system_prompt + prompt.user_prompt
    for artifact in ("↪", "↳", "\\*", "\\_"):
        assert artifact not in text


def test_assistant_simulator_system_prompt_is_the_papers():
    from synthesis.dialogues import ASSISTANT_SYSTEM_PROMPT
    # Appendix B.4, word for word.
    assert ASSISTANT_SYSTEM_PROMPT == ("You are a conversational assistant. "
                                       "Limit your answers to 6 sentences.")


def test_session_examples_keep_the_same_details_in_both_request_versions():
    # Figure 18: the request with factor "should include all the same details"; only the
    # preference is removed. Our example must not teach the opposite.
    from synthesis.prompting import load_examples
    text = load_examples("synthesis/interaction_sessions")
    block = text.split("```yaml", 1)[1].split("```", 1)[0]
    for scenario in yaml.safe_load(block)["scenarios"]:
        plain = scenario["request_with_factor"].replace("[resource]", "").strip().rstrip("?.")
        full = scenario["request_with_factor_and_preference"]
        for number in re.findall(r"\d[\d,]*", plain):
            assert number in full
        assert len(full) > len(plain)


# ---------------------------------------------------------------------------------------
# Stage 1: seeds and templates
# ---------------------------------------------------------------------------------------
def test_bundled_seeds_each_name_an_occupation_token():
    seeds = P.read_seed_file(BUNDLED_SEEDS_FILE)
    assert 25 <= len(seeds) <= 40
    tokens = load_occupations()
    for seed in seeds:
        assert any(P.occupation_pattern(t).search(seed) for t in tokens), seed


def test_seed_file_formats(tmp_path):
    (tmp_path / "a.txt").write_text("A nurse on nights.\n\n# comment\nA pilot.\n")
    assert P.read_seed_file(tmp_path / "a.txt") == ["A nurse on nights.", "A pilot."]
    (tmp_path / "b.jsonl").write_text('{"input persona": "A chef."}\n{"persona": "A judge."}\n')
    assert P.read_seed_file(tmp_path / "b.jsonl") == ["A chef.", "A judge."]
    (tmp_path / "c.jsonl").write_text('{"other": 1}\n')
    with pytest.raises(P.SeedSourceError, match="entry 1"):
        P.read_seed_file(tmp_path / "c.jsonl")
    with pytest.raises(P.SeedSourceError, match="no such"):
        P.read_seed_file(tmp_path / "missing.txt")


def test_hub_is_the_default_and_falls_back_to_the_bundled_list(caplog):
    calls = []

    def hub():
        calls.append(1)
        return ["A teacher from the hub."]

    seeds, source = P.load_seeds(None, hub)
    assert calls and seeds == ["A teacher from the hub."] and source.startswith("hub:proj-persona/PersonaHub")

    def unreachable():
        raise P.SeedSourceError("could not load proj-persona/PersonaHub (instruction): offline")

    seeds, source = P.load_seeds(None, unreachable)
    assert source.startswith("bundled:") and "hub unreachable" in source
    assert seeds == P.read_seed_file(BUNDLED_SEEDS_FILE)
    assert "Falling back to the bundled seed list" in caplog.text


def test_templates_have_distinct_tokens_and_balanced_traits():
    seeds = P.read_seed_file(BUNDLED_SEEDS_FILE)
    templates = P.make_templates(seeds, 20, load_occupations(), TAX, random.Random(3))
    tokens = [t["occupation_token"] for t in templates]
    assert len(set(tokens)) == 20
    assert len({t["seed_description"] for t in templates}) == 20
    assert len({t["persona_id"] for t in templates}) == 20
    for t in templates:
        assert P.occupation_pattern(t["occupation_token"]).search(t["seed_description"])
        assert len({x["trait"] for x in t["personality_traits"]}) == 2
        assert len(set(t["personal_values"])) == 2
    # Balanced: least-used first, so counts differ by at most one.
    for values in (Counter(t["career_level"] for t in templates),
                   Counter(t["decision_making_style"] for t in templates),
                   Counter(v for t in templates for v in t["personal_values"]),
                   Counter(x["trait"] for t in templates for x in t["personality_traits"])):
        assert max(values.values()) - min(values.values()) <= 1, values
    levels = Counter((x["trait"], x["level"]) for t in templates for x in t["personality_traits"])
    for trait in TAX.personality_traits:
        assert abs(levels[(trait, "High")] - levels[(trait, "Low")]) <= 1


def test_templates_extend_an_existing_list_without_changing_it():
    seeds = P.read_seed_file(BUNDLED_SEEDS_FILE)
    first = P.make_templates(seeds, 3, load_occupations(), TAX, random.Random(0))
    more = P.make_templates(seeds, 6, load_occupations(), TAX, random.Random(1), existing=first)
    assert more[:3] == first and len(more) == 6
    assert len({t["occupation_token"] for t in more}) == 6


def test_templates_reuse_tokens_only_when_needed_and_never_seeds():
    seeds = ["A nurse in a clinic.", "A nurse on a ship.", "A pilot of gliders."]
    templates = P.make_templates(seeds, 3, load_occupations(), TAX, random.Random(0))
    assert sorted(t["occupation_token"] for t in templates) == ["nurse", "nurse", "pilot"]
    with pytest.raises(P.SeedSourceError, match="only 3 distinct"):
        P.make_templates(seeds, 4, load_occupations(), TAX, random.Random(0))


# ---------------------------------------------------------------------------------------
# The journey template
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_sessions", [9, 13, 20])
def test_journey_structure_over_many_seeds(n_sessions):
    finals_a_first = Counter()
    positions = Counter()
    for seed in range(400):
        journey = make_journey(random.Random(seed), n_sessions, ("F1", "F2"))
        check_journey(journey)
        roles = journey.roles
        assert roles[-1] == FINAL and len(roles) == n_sessions
        a, changed, b = journey.positions(A), journey.positions(A_CHANGED), journey.positions(B)
        assert len(a) == len(changed) == len(b) == 2
        assert max(a) < min(changed)          # original preference before the changed one
        assert n_sessions not in a + changed + b
        assert roles.count(OTHER) == n_sessions - 7
        finals_a_first[journey.main_factor] += 1
        positions.update(a + changed + b)
    # Random positions: every position before the last is used; both factors drawn as A.
    assert set(positions) == set(range(1, n_sessions))
    assert min(finals_a_first.values()) > 120


def test_journey_requirements_text_has_one_line_per_scenario():
    journey = Journey(roles=(OTHER, A, B, A, OTHER, A_CHANGED, B, OTHER, A_CHANGED, FINAL),
                      main_factor="X", contrastive_factor="Y")
    lines = format_journey_requirements(journey).splitlines()
    assert len(lines) == 10
    assert lines[1] == "Scenario 2: Context factor A with its preference A"
    assert lines[5] == "Scenario 6: Context factor A with the changed preference A'"
    assert lines[-1] == "Scenario 10: Context factor A with the changed preference A' (final scenario)"


def test_check_journey_rejects_broken_structures():
    with pytest.raises(ValueError, match="before"):
        check_journey(Journey((OTHER, A_CHANGED, B, A, OTHER, A, B, OTHER, A_CHANGED, FINAL), "X", "Y"))
    with pytest.raises(ValueError, match="last session"):
        check_journey(Journey((OTHER, A, B, A, OTHER, A_CHANGED, B, OTHER, A_CHANGED, OTHER), "X", "Y"))


# ---------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------
def test_extract_block_prefers_the_wanted_language():
    text = "intro\n```python\nx = 1\n```\nthen\n```yaml\na: 1\n```\n"
    assert extract_block(text, ("yaml",)) == "a: 1"
    assert parse_yaml(text) == {"a": 1}
    assert parse_json('Sure! {"a": [1, 2]} hope it helps') == {"a": [1, 2]}
    with pytest.raises(InvalidGeneration, match="not valid YAML"):
        parse_yaml("```yaml\na: [1\n```")
    with pytest.raises(InvalidGeneration, match="not valid JSON"):
        parse_json("```json\n{\"a\": \n```")


# ---------------------------------------------------------------------------------------
# Validators, good and broken
# ---------------------------------------------------------------------------------------
SIX = " ".join(f"Sentence {i} about the persona." for i in range(1, 7))


def test_validate_persona_batch():
    good = json.dumps([{"description": SIX, "occupation": "nurse"},
                       {"description": SIX, "occupation": "pilot"}])
    assert [p["occupation"] for p in validate_persona_batch(f"```json\n{good}\n```", 2)] == ["nurse", "pilot"]
    with pytest.raises(InvalidGeneration, match="expected 3"):
        validate_persona_batch(good, 3)
    with pytest.raises(InvalidGeneration, match="occupation"):
        validate_persona_batch(json.dumps([{"description": SIX}]), 1)
    with pytest.raises(InvalidGeneration, match="six sentences"):
        validate_persona_batch(json.dumps([{"description": "Too short.", "occupation": "x"}]), 1)


def factor(i, related="N/A", ftype="Tool/Technology", preference=None):
    return {"factor_type": ftype, "backstory": f"Backstory {i}.", "context_factor": f"Factor {i}",
            "task_types": ["Planning", "writing and editing"], "preference_type": "Format",
            "contextual_preference": preference or f"Preference number {i} with its own words {i * 7}.",
            "related_factor": related}


def factors_yaml(items):
    return "```yaml\n" + yaml.safe_dump({"context_factors": items}, sort_keys=False) + "```"


def good_factors(n=5):
    items = [factor(i) for i in range(1, n - 1)]
    items.append(factor(n - 1, related=f"Factor {n}", preference="Formal and impersonal, no anecdotes."))
    items.append(factor(n, related=f"factor {n - 1}", preference="Chatty, personal, opening with an anecdote."))
    return items


def test_validate_factors_good():
    doc = validate_factors(factors_yaml(good_factors()), 5, TAX)
    factors = doc["factors"]
    assert len(factors) == 5 and doc["warnings"] == []
    assert factors[0]["task_types"] == ["Planning", "Writing & editing"]
    assert factors[-1]["related_factor"] == "Factor 4"  # canonical spelling
    assert all(f["related_factor"] == "N/A" for f in factors[:-2])


@pytest.mark.parametrize("mutate, reason", [
    (lambda f: f.pop(), "expected 5 context factors"),
    (lambda f: f[-1].update(related_factor="N/A"), "contrastive pair"),
    (lambda f: f[-1].update(related_factor="Factor 1"), "contrastive pair"),
    (lambda f: f[0].update(related_factor="Factor 2"), "only the last two"),
    (lambda f: f[1].update(context_factor="Factor 1"), "unique"),
    (lambda f: f[0].update(factor_type="Animal"), "factor_type"),
    (lambda f: f[0].update(task_types=["Knitting"]), "task type"),
    (lambda f: f[0].update(preference_type="Humour"), "preference_type"),
    (lambda f: f[0].update(contextual_preference=""), "contextual_preference"),
    (lambda f: f[-1].update(contextual_preference=f[-2]["contextual_preference"]), "contradict"),
])
def test_validate_factors_broken(mutate, reason):
    items = good_factors()
    mutate(items)
    with pytest.raises(InvalidGeneration, match=reason):
        validate_factors(factors_yaml(items), 5, TAX)


def test_validate_factors_malformed_yaml_and_pair_type_warning():
    with pytest.raises(InvalidGeneration, match="not valid YAML"):
        validate_factors("```yaml\ncontext_factors:\n  - factor_type: [Tool\n```", 5, TAX)
    items = good_factors()
    items[-1]["factor_type"] = "Person/Group"
    assert "different factor types" in validate_factors(factors_yaml(items), 5, TAX)["warnings"][0]


JOURNEY = Journey(roles=(OTHER, A, B, A, OTHER, A_CHANGED, B, OTHER, A_CHANGED, FINAL),
                  main_factor="Factor 4", contrastive_factor="Factor 5")
CHANGED = "Everything must now be one dense paragraph with no lists at all."


def good_scenarios(factors, a="Factor 4", b="Factor 5"):
    by_name = {f["context_factor"]: f for f in factors}
    others = ["Factor 1", "Factor 2", "Factor 3"]
    out = []
    for i, role in enumerate(JOURNEY.roles, start=1):
        name = {A: a, A_CHANGED: a, FINAL: a, B: b}.get(role) or others[i % 3]
        preference = CHANGED if role in (A_CHANGED, FINAL) else by_name[name]["contextual_preference"]
        out.append({"id": i, "context_factor": name, "contextual_preference": preference,
                    "task_type": "Planning", "story": f"Story {i}.",
                    "request_with_factor_and_preference": f"Request {i} with {name}, {preference}",
                    "request_with_factor": f"Request {i} with {name}." + (" [resource]" if i == 10 else ""),
                    "resource": "the notes" if i == 10 else ""})
    return out


def sessions_yaml(items):
    return "```yaml\n" + yaml.safe_dump({"scenarios": items}, sort_keys=False) + "```"


def test_validate_sessions_good_and_the_model_may_swap_a_and_b():
    factors = validate_factors(factors_yaml(good_factors()), 5, TAX)["factors"]
    doc = validate_sessions(sessions_yaml(good_scenarios(factors)), JOURNEY, factors, TAX)
    assert doc["current_factor"] == "Factor 4" and doc["contrastive_factor"] == "Factor 5"
    assert doc["changed_preference"] == CHANGED
    assert doc["original_preference"] == factors[3]["contextual_preference"]
    assert [s["role"] for s in doc["sessions"]] == list(JOURNEY.roles)
    assert doc["sessions"][-1]["request"] == "Request 10 with Factor 4. the notes"
    swapped = validate_sessions(sessions_yaml(good_scenarios(factors, a="Factor 5", b="Factor 4")),
                                JOURNEY, factors, TAX)
    assert swapped["current_factor"] == "Factor 5" and swapped["contrastive_factor"] == "Factor 4"


def test_validate_sessions_canonicalizes_close_copies():
    factors = validate_factors(factors_yaml(good_factors()), 5, TAX)["factors"]
    items = good_scenarios(factors)
    items[0]["contextual_preference"] = items[0]["contextual_preference"].upper().rstrip(".")
    items[1]["context_factor"] = "factor 4"
    doc = validate_sessions(sessions_yaml(items), JOURNEY, factors, TAX)
    assert doc["sessions"][0]["contextual_preference"] == factors[1]["contextual_preference"]
    assert doc["sessions"][1]["context_factor"] == "Factor 4"


def _set(index, **values):
    return lambda items: items[index].update(values)


@pytest.mark.parametrize("mutate, reason", [
    (lambda s: s.pop(), "expected 10 scenarios"),
    (_set(0, id=5), "numbered 1 to 10"),
    (_set(0, context_factor="Factor 4"), "other than"),          # A outside its slots
    (_set(2, context_factor="Factor 1"), "context factor B"),    # B slot with another factor
    (_set(3, context_factor="Factor 5"), "context factor A"),
    (_set(0, context_factor="Unknown Factor"), "not in the list"),
    (_set(1, contextual_preference="Something else entirely, unrelated to the factor."), "must be the one listed"),
    (_set(5, contextual_preference="Another changed preference, not the same as the final one."), "same in every A'"),
    (lambda s: [s[i].update(contextual_preference=s[1]["contextual_preference"]) for i in (5, 8, 9)],
     "must differ"),
    (_set(0, task_type="Knitting"), "task_type"),
    (_set(9, resource=""), "resource"),
    (_set(4, story=None), "story"),
])
def test_validate_sessions_broken(mutate, reason):
    factors = validate_factors(factors_yaml(good_factors()), 5, TAX)["factors"]
    items = good_scenarios(factors)
    mutate(items)
    with pytest.raises(InvalidGeneration, match=reason):
        validate_sessions(sessions_yaml(items), JOURNEY, factors, TAX)


def test_fill_resource():
    assert fill_resource("Fix [resource] please", "code") == ("Fix code please", [])
    text, warnings = fill_resource("Fix this", "code")
    assert text == "Fix this\n\ncode" and warnings
    with pytest.raises(InvalidGeneration):
        fill_resource("Fix [resource]", "")


def test_find_factor_needs_a_single_close_match():
    factors = [{"context_factor": "Riverside Market"}, {"context_factor": "Riverside Marker"}]
    assert find_factor("riverside market", factors) is factors[0]
    assert find_factor("Riverside Marke", factors) is None  # two equally close names


def test_validate_user_turn():
    good = {"evaluation": [{"item": 1, "satisfied": False}], "score": "7", "end_conversation": False,
            "selected_items": [1], "thinking": "t", "message": " Hmm, not quite. "}
    turn = validate_user_turn("```json\n" + json.dumps(good) + "\n```", 2)
    assert turn["score"] == 7 and turn["message"] == "Hmm, not quite." and not turn["end_conversation"]
    assert validate_user_turn(json.dumps({**good, "score": 10}), 2)["end_conversation"]
    for broken, reason in (({**good, "score": 11}, "score"), ({**good, "score": None}, "score"),
                           ({**good, "message": ""}, "message"),
                           ({**good, "selected_items": [3]}, "items 1 to 2"),
                           ({**good, "evaluation": "fine"}, "evaluation")):
        with pytest.raises(InvalidGeneration, match=reason):
            validate_user_turn(json.dumps(broken), 2)
    with pytest.raises(InvalidGeneration, match="JSON object"):
        validate_user_turn("[1, 2]", 2)


# ---------------------------------------------------------------------------------------
# Schemas for constrained decoding: what they admit, the validators accept
# ---------------------------------------------------------------------------------------
def _canonical_factors():
    items = good_factors()
    for item in items:
        item["task_types"] = ["Planning", "Writing & editing"]
    return items


def test_schema_documents_pass_the_validators_and_broken_ones_fail_the_schema():
    jsonschema = pytest.importorskip("jsonschema")
    # Each stage: a document as a constrained model writes it (bare JSON, schema's root key).
    personas = {"personas": [{"description": SIX, "occupation": "nurse"}]}
    factors = {"context_factors": _canonical_factors()}
    parsed_factors = validate_factors(json.dumps(factors), 5, TAX)["factors"]
    scenarios = {"scenarios": good_scenarios(parsed_factors)}
    turn = {"evaluation": [{"item": 1, "strengths": "s", "weaknesses": "w", "satisfied": False},
                           {"item": 2, "strengths": "s", "weaknesses": "w", "satisfied": True}],
            "score": 7, "end_conversation": False, "selected_items": [1], "thinking": "t",
            "message": "Not quite."}
    names = [f["context_factor"] for f in parsed_factors]
    cases = [
        (S.persona_batch_schema(1), personas, lambda raw: validate_persona_batch(raw, 1)),
        (S.factors_schema(5, TAX), factors, lambda raw: validate_factors(raw, 5, TAX)),
        (S.sessions_schema(10, names, TAX), scenarios,
         lambda raw: validate_sessions(raw, JOURNEY, parsed_factors, TAX)),
        (S.user_turn_schema(2), turn, lambda raw: validate_user_turn(raw, 2)),
    ]
    for schema, document, validate in cases:
        jsonschema.validate(document, schema)
        validate(json.dumps(document))  # the YAML stages read JSON too

    broken = [
        (S.persona_batch_schema(2), personas),                                   # one too few
        (S.persona_batch_schema(1), {"personas": [{"description": "Too short. Two.",
                                                   "occupation": "nurse"}]}),  # not six sentences
        (S.persona_batch_schema(1), {"personas": [{"description": SIX.replace(" ", "\n", 1),
                                                   "occupation": "nurse"}]}),
        (S.factors_schema(5, TAX), {"context_factors": [{**f, "factor_type": "Animal"}
                                                        for f in _canonical_factors()]}),
        (S.sessions_schema(10, names[:4], TAX), scenarios),                      # factor 5 unknown
        (S.user_turn_schema(2), {**turn, "score": 11}),
        (S.user_turn_schema(2), {**turn, "selected_items": [3]}),
        (S.user_turn_schema(2), {**turn, "extra": 1}),
    ]
    for schema, document in broken:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(document, schema)


def test_six_sentence_pattern():
    import re

    for text in (SIX, "Ana is 40. She runs! Is she calm? Yes. No. Maybe.", SIX + " Seven.",
                 "Dr. Ruiz, 42, is a nurse. B. C. D. E.", "It costs 3.5 dollars. B. C. D. E. F."):
        assert re.fullmatch(S.SIX_SENTENCES, text), text
    for text in ("One. Two. Three. Four. Five.", "One sentence only.", SIX[:-1],
                 SIX.replace(" ", "\n", 1), 'A "quoted" one. B. C. D. E. F.',
                 "x" * 401 + ". B. C. D. E. F."):
        assert not re.fullmatch(S.SIX_SENTENCES, text), text


# ---------------------------------------------------------------------------------------
# Instances (B.5)
# ---------------------------------------------------------------------------------------
ROLES13 = [OTHER, A, OTHER, B, A, OTHER, A_CHANGED, OTHER, B, OTHER, A_CHANGED, OTHER, FINAL]


@pytest.mark.parametrize("seed", range(20))
def test_kept_sessions_per_instance_type(seed):
    by_role = {r: [i for i, x in enumerate(ROLES13, 1) if x == r] for r in (A, A_CHANGED, B, OTHER)}
    rng = random.Random(seed)
    consistent = kept_sessions(ROLES13, "consistent", rng)
    assert consistent == sorted(by_role[A] + by_role[OTHER])  # no A', no B
    contrastive = kept_sessions(ROLES13, "contrastive", rng)
    changing = kept_sessions(ROLES13, "changing", rng)
    for kept in (consistent, contrastive, changing):
        assert len(kept) == 8 and kept == sorted(kept) and 13 not in kept
    assert set(by_role[A]) <= set(contrastive) and set(by_role[B]) <= set(contrastive)
    assert not set(by_role[A_CHANGED]) & set(contrastive)
    assert set(by_role[A] + by_role[A_CHANGED]) <= set(changing)
    assert not set(by_role[B]) & set(changing)
    assert len(set(by_role[OTHER]) & set(contrastive)) == 4
    assert len(set(by_role[OTHER]) & set(changing)) == 4


def test_ground_truth_follows_spec_3_7():
    assert ground_truth("consistent", "A", "A'") == "A"
    assert ground_truth("contrastive", "A", "A'") == "A"
    assert ground_truth("changing", "A", "A'") == "A'"


def make_sessions_doc():
    prefs = {A: "Pref A.", A_CHANGED: "Pref A changed.", FINAL: "Pref A changed.", B: "Pref B."}
    sessions = []
    for i, role in enumerate(ROLES13, start=1):
        factor = {A: "FA", A_CHANGED: "FA", FINAL: "FA", B: "FB"}.get(role, f"F{i}")
        sessions.append({"index": i, "role": role, "context_factor": factor,
                         "contextual_preference": prefs.get(role, f"Pref {i}."),
                         "request": f"Request {i}"})
    return {"sessions": sessions, "current_factor": "FA", "contrastive_factor": "FB",
            "original_preference": "Pref A.", "changed_preference": "Pref A changed.",
            "contrastive_preference": "Pref B."}


def test_build_instances_rows_load_with_the_evaluation_parser(tmp_path):
    doc = make_sessions_doc()
    checklists = {s["contextual_preference"]: [f"Is it {s['contextual_preference']}?"]
                  for s in doc["sessions"]}
    dialogues = {s["index"]: {"dialogue": [{"role": "user", "content": s["request"]},
                                           {"role": "assistant", "content": "ok"}]}
                 for s in doc["sessions"][:-1]}
    rows = build_instances("p1", doc, checklists, dialogues, seed=0)
    assert [r["instance_type"] for r in rows] == ["consistent", "contrastive", "changing"]
    by_type = {r["instance_type"]: r for r in rows}
    assert by_type["consistent"]["current_contextual_preference"] == "Pref A."
    assert by_type["contrastive"]["current_contextual_preference"] == "Pref A."
    assert by_type["changing"]["current_contextual_preference"] == "Pref A changed."
    assert by_type["changing"]["current_checklist"] == ["Is it Pref A changed.?"]
    for row in rows:
        assert row["current_request"] == "Request 13" and row["current_context_factor"] == "FA"
        assert len(row["prior_interactions"]) == 8
    prefs = lambda r: [s["contextual_preference"] for s in r["prior_interactions"]]  # noqa: E731
    assert "Pref B." not in prefs(by_type["consistent"]) and "Pref A changed." not in prefs(by_type["consistent"])
    assert prefs(by_type["contrastive"]).count("Pref B.") == 2
    assert prefs(by_type["changing"]).count("Pref A changed.") == 2
    # Same seed, same instances; and the evaluation's loader reads them from a directory.
    assert build_instances("p1", doc, checklists, dialogues, seed=0) == rows
    for row in rows:
        (tmp_path / "instances").mkdir(exist_ok=True)
        (tmp_path / "instances" / f"{row['instance_id']}.json").write_text(json.dumps(row))
    loaded = load_instances(data_path=tmp_path)
    assert sorted(i.instance_id for i in loaded) == sorted(r["instance_id"] for r in rows)
    assert {i.instance_id: i.extra["metadata"]["session_indices"] for i in loaded} == \
        {r["instance_id"]: r["metadata"]["session_indices"] for r in rows}
