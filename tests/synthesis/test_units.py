"""Synthesis without LLM calls: taxonomies, templates, the journey, validators, instances."""
from __future__ import annotations

import json
import random
import re
from collections import Counter

import pytest
import yaml

from cupid.evaluation.data import load_instances
from cupid.synthesis import personas as P
from cupid.synthesis.factors import factors_schema, validate_factors
from cupid.synthesis.instances import build_instances, ground_truth, kept_sessions
from cupid.synthesis.journey import A, A_CHANGED, B, FINAL, OTHER, Journey, check_journey, \
    format_series_structure, make_journey
from cupid.synthesis.documents import find_factor
from cupid.utils.answers import ParseError as InvalidGeneration, extract_block, parse_json, parse_yaml
from cupid.synthesis.taxonomy import BUNDLED_SEEDS_FILE, canonical_type, load_occupations, load_taxonomy
from cupid.synthesis.personas import SIX_SENTENCES, persona_batch_schema, validate_persona_batch
from cupid.synthesis.sessions import fill_resource, sessions_schema, validate_sessions
from cupid.utils.prompts import load_prompt
from repo_paths import GOLDEN_DIR

TAX = load_taxonomy()


# ---------------------------------------------------------------------------------------
# Taxonomies and prompts
# ---------------------------------------------------------------------------------------
# What the release (kixlab/CUPID@a8560ca) ships, as benchmarks/make_release_golden.py read
# it from the release: its prompt files and its occupation tokens.
RELEASE = json.loads((GOLDEN_DIR / "release" / "prompts.json")
                     .read_text(encoding="utf-8"))


def test_persona_attributes_are_the_releases_and_table_7_is_kept():
    names = [a.name for a in TAX.persona_attributes]
    assert names == ["career_level", "personality_traits", "personal_values", "decision_making_styles"]
    career, traits, values, styles = TAX.persona_attributes
    assert (career.n_choices, traits.n_choices, values.n_choices, styles.n_choices) == (1, 2, 2, 1)
    assert career.options[0] == "entry-level/beginner/junior/novice"
    assert traits.options[:2] == ("High Openness to Experience", "Low Openness to Experience")
    assert "High Extroversion" in traits.options and len(traits.options) == 10
    assert values.options[:3] == ("Self-Direction", "Achievement", "Universalism")
    assert styles.options == ("Analytical", "Directive", "Conceptual", "Behavioral")
    assert len(TAX.factor_types) == 8
    assert [len(v) for v in TAX.preference_types.values()] == [6, 5, 5]  # 16 types
    assert len(TAX.task_types) == 12


def test_occupation_tokens_are_the_releases_114_in_order():
    tokens = load_occupations()
    assert len(tokens) == 114 == len(set(tokens))
    assert tokens[:3] == ("historian", "teacher", "analyst") and tokens[-1] == "commentator"
    assert list(tokens) == RELEASE["occupation_tokens"]


RELEASE_PROMPTS = ["persona_generator", "context_factors_generator", "sessions_generator",
                   "user_simulator", "assistant_simulator"]


@pytest.mark.parametrize("name", RELEASE_PROMPTS)
def test_synthesis_prompts_are_the_releases_verbatim(name):
    prompt = load_prompt(f"synthesis/{name}")
    assert prompt.source == f"kixlab/CUPID@a8560ca prompts/synthesis/{name}.yaml (MIT)"
    assert prompt.style == "format"
    data = yaml.safe_load(RELEASE["prompt_files"][f"prompts/synthesis/{name}.yaml"])
    assert prompt.system_prompt == data["system_prompt"]
    assert prompt.user_prompt == data.get("user_prompt", "")


def test_assistant_simulator_system_prompt_is_the_releases():
    assert load_prompt("synthesis/assistant_simulator").system_prompt == (
        "You are a conversational assistant. Limit your answers to 6 sentences.")


def test_str_format_prompts_keep_braces_and_fill_names():
    system, user = load_prompt("synthesis/persona_generator").render(seed_descriptions="1. x")
    assert '{\n  "personas": [' in system and "{{" not in system
    assert user == "## List of Basic Personas\n\n1. x"


def test_canonical_type_is_lenient_but_not_loose():
    assert canonical_type("writing and editing", TAX.task_types) == "Writing & editing"
    assert canonical_type("Person", TAX.factor_types) == "Person/Group"
    assert canonical_type("Style: Tone", TAX.all_preference_types) == "Tone"
    assert canonical_type("Humour", TAX.all_preference_types) is None
    assert canonical_type(None, TAX.task_types) is None


# ---------------------------------------------------------------------------------------
# Stage 1: seeds and templates
# ---------------------------------------------------------------------------------------
def test_bundled_seeds_each_hold_an_occupation_token():
    seeds = P.read_seed_file(BUNDLED_SEEDS_FILE)
    assert 25 <= len(seeds) <= 40
    tokens = load_occupations()
    assert sum(any(t in seed for t in tokens) for seed in seeds) >= 20


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


def test_hub_is_the_default_and_falls_back_to_the_bundled_list(caplog, monkeypatch):
    calls = []

    def hub():
        calls.append(1)
        return ["A teacher from the hub."]

    monkeypatch.setattr(P, "load_hub_seeds", hub)
    seeds, source = P.load_seeds(None)
    assert calls and seeds == ["A teacher from the hub."] and source.startswith("hub:proj-persona/PersonaHub")

    def unreachable():
        raise P.SeedSourceError("could not load proj-persona/PersonaHub (instruction): offline")

    monkeypatch.setattr(P, "load_hub_seeds", unreachable)
    seeds, source = P.load_seeds(None)
    assert source.startswith("bundled:") and "hub unreachable" in source
    assert seeds == P.read_seed_file(BUNDLED_SEEDS_FILE)
    assert "Falling back to the bundled seed list" in caplog.text


def test_templates_draw_distinct_tokens_and_one_level_per_trait():
    seeds = P.read_seed_file(BUNDLED_SEEDS_FILE)
    templates = P.make_templates(seeds, 12, load_occupations(), TAX, 42)
    assert templates == P.make_templates(seeds, 12, load_occupations(), TAX, 42)  # seeded
    tokens = [t["occupation_token"] for t in templates]
    assert len(set(tokens)) == 12
    assert [t["template_id"] for t in templates] == list(range(12))
    assert len({t["persona_id"] for t in templates}) == 12
    for t in templates:
        assert t["occupation_token"] in t["seed_description"]  # a substring, as in the release
        traits = [" ".join(x.split(" ")[1:]) for x in t["personality_traits"]]
        assert len(set(traits)) == 2
        assert len(set(t["personal_values"])) == 2
        assert isinstance(t["career_level"], str) and isinstance(t["decision_making_styles"], str)
    # The least-selected half is drawn from, so no option runs far ahead.
    counts = Counter(t["decision_making_styles"] for t in templates)
    assert max(counts.values()) - min(counts.values()) <= 2


def test_template_is_shown_as_the_release_shows_it():
    template = {"persona_id": "p", "template_id": 0, "seed_description": "A teacher's aide.",
                "occupation_token": "teacher", "career_level": "senior-level/advanced/lead/expert",
                "personality_traits": ["High Extroversion", "Low Neuroticism"],
                "personal_values": ["Power", "Security"], "decision_making_styles": "Analytical"}
    assert P.format_template(1, template) == (
        "1. {'id': 0, 'seed': \"A teacher's aide.\", 'career_level': 'senior-level/advanced/lead/expert', "
        "'personality_traits': ['High Extroversion', 'Low Neuroticism'], "
        "'personal_values': ['Power', 'Security'], 'decision_making_styles': 'Analytical'}")


def test_templates_extend_an_existing_list_without_changing_it():
    seeds = P.read_seed_file(BUNDLED_SEEDS_FILE)
    first = P.make_templates(seeds, 3, load_occupations(), TAX, 42)
    more = P.make_templates(seeds, 6, load_occupations(), TAX, 42, existing=first)
    assert more[:3] == first and len(more) == 6
    assert not {t["seed_description"] for t in more[3:]} & {t["seed_description"] for t in first}
    assert [t["template_id"] for t in more[3:]] == [0, 1, 2]  # as the release numbers a new draw


def test_templates_need_enough_seeds_with_tokens():
    seeds = ["A nurse in a clinic.", "A pilot of gliders and a teacher."]
    templates = P.make_templates(seeds, 1, load_occupations(), TAX, 0)
    assert templates[0]["seed_description"] == seeds[1]
    with pytest.raises(P.SeedSourceError, match="unused seed descriptions"):
        P.make_templates(seeds, 2, load_occupations(), TAX, 0)


# ---------------------------------------------------------------------------------------
# The journey template
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_sessions", [9, 13, 20])
def test_journey_structure_over_many_seeds(n_sessions):
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
        assert n_sessions - 1 not in a + changed  # the release draws A among the first n-2
        positions.update(a + changed + b)
    # Random positions: every position before the last is used.
    assert set(positions) == set(range(1, n_sessions))


def test_series_structure_is_the_releases_text():
    journey = Journey(roles=(OTHER, A, B, A, OTHER, A_CHANGED, B, OTHER, A_CHANGED, FINAL),
                      main_factor="X", contrastive_factor="Y")
    assert format_series_structure(journey) == "\n".join([
        "    - Scenario ID 2: Context factor A with original preference A.",
        "    - Scenario ID 3: Context factor B with original preference B.",
        "    - Scenario ID 4: Context factor A with original preference A.",
        "    - Scenario ID 6: Context factor A with changed preference A'.",
        "    - Scenario ID 7: Context factor B with original preference B.",
        "    - Scenario ID 9: Context factor A with changed preference A'.",
        "    - Scenario ID 10: Context factor A with changed preference A'."])


def test_journey_draws_are_the_releases():
    # SessionsGenerator.create_series_structure: sample(range(n-2), 4), then 2 of the rest.
    rng, mirror = random.Random(5), random.Random(5)
    journey = make_journey(rng, 13, ("X", "Y"))
    a = sorted(mirror.sample(range(11), 4))
    b = mirror.sample([i for i in range(13) if i not in a + [12]], 2)
    assert journey.positions(A) == [a[0] + 1, a[1] + 1]
    assert journey.positions(A_CHANGED) == [a[2] + 1, a[3] + 1]
    assert sorted(journey.positions(B)) == sorted(i + 1 for i in b)


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
    return {"factor_type": ftype, "background": f"Backstory {i}.", "factor": f"Factor {i}",
            "task_types": ["Planning", "writing and editing"], "preference_type": "Format",
            "preference": preference or f"Preference number {i} with its own words {i * 7}.",
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
    (lambda f: f[1].update(factor="Factor 1"), "unique"),
    (lambda f: f[0].update(factor_type="Animal"), "factor_type"),
    (lambda f: f[0].update(task_types=["Knitting"]), "task type"),
    (lambda f: f[0].update(preference_type="Humour"), "preference_type"),
    (lambda f: f[0].update(preference=""), "preference"),
    (lambda f: f[-1].update(preference=f[-2]["preference"]), "contradict"),
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
        out.append({"id": i, "context_factor": name, "preference": preference,
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
    items[0]["preference"] = items[0]["preference"].upper().rstrip(".")
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
    (_set(1, preference="Something else entirely, unrelated to the factor."), "must be the one listed"),
    (_set(5, preference="Another changed preference, not the same as the final one."), "same in every A'"),
    (lambda s: [s[i].update(preference=s[1]["preference"]) for i in (5, 8, 9)],
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


def test_fill_resource_as_the_release():
    assert fill_resource("Fix [resource] please\n", "code\n") == ("Fix code\n please\n", [])
    text, warnings = fill_resource("Fix this", "code")
    assert text == "Fix this" and "left out" in warnings[0]
    with pytest.raises(InvalidGeneration):
        fill_resource("Fix [resource]", "")


def test_find_factor_needs_a_single_close_match():
    factors = [{"context_factor": "Riverside Market"}, {"context_factor": "Riverside Marker"}]
    assert find_factor("riverside market", factors) is factors[0]
    assert find_factor("Riverside Marke", factors) is None  # two equally close names


def test_user_simulator_answers_parse_as_the_release_reads_them():
    from cupid.synthesis.dialogues import InvalidUserTurn, opening_turn, parse_user_turn

    answer = ("#### Evaluation of AI Assistant's Response\n\n1. **x**: ok\n\n#### Evaluation Score\n\n"
              "7\n\n#### Continue or End?\n\nCONTINUE\n\n#### Selected Checklist Items\n\n- 1. x\n\n"
              "#### Thinking\n\nt\n\n#### Your Message\n\n Hmm, not quite. ")
    assert parse_user_turn(answer) == ("Hmm, not quite.", False, 7)
    assert parse_user_turn(answer.replace("CONTINUE", "END").replace("\n7\n", "\n10\n")) == \
        ("Hmm, not quite.", True, 10)
    assert parse_user_turn(opening_turn("Do X.")) == ("Do X.", False, None)
    for broken in (answer.replace("#### Your Message", "## Message"),
                   answer.replace("#### Continue or End?", "Continue?"),
                   answer.replace("CONTINUE", "MAYBE"),
                   answer.split("#### Your Message")[0] + "#### Your Message\n\n"):
        with pytest.raises(InvalidUserTurn):
            parse_user_turn(broken)


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
    names = [f["context_factor"] for f in parsed_factors]
    cases = [
        (persona_batch_schema(1), personas, lambda raw: validate_persona_batch(raw, 1)),
        (factors_schema(5, TAX), factors, lambda raw: validate_factors(raw, 5, TAX)),
        (sessions_schema(10, names, TAX), scenarios,
         lambda raw: validate_sessions(raw, JOURNEY, parsed_factors, TAX)),
    ]
    for schema, document, validate in cases:
        jsonschema.validate(document, schema)
        validate(json.dumps(document))  # the YAML stages read JSON too

    broken = [
        (persona_batch_schema(2), personas),                                   # one too few
        (persona_batch_schema(1), {"personas": [{"description": "Too short. Two.",
                                                   "occupation": "nurse"}]}),  # not six sentences
        (persona_batch_schema(1), {"personas": [{"description": SIX.replace(" ", "\n", 1),
                                                   "occupation": "nurse"}]}),
        (factors_schema(5, TAX), {"context_factors": [{**f, "factor_type": "Animal"}
                                                        for f in _canonical_factors()]}),
        (sessions_schema(10, names[:4], TAX), scenarios),                      # factor 5 unknown
    ]
    for schema, document in broken:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(document, schema)


def test_six_sentence_pattern():
    import re

    for text in (SIX, "Ana is 40. She runs! Is she calm? Yes. No. Maybe.", SIX + " Seven.",
                 "Dr. Ruiz, 42, is a nurse. B. C. D. E.", "It costs 3.5 dollars. B. C. D. E. F."):
        assert re.fullmatch(SIX_SENTENCES, text), text
    for text in ("One. Two. Three. Four. Five.", "One sentence only.", SIX[:-1],
                 SIX.replace(" ", "\n", 1), 'A "quoted" one. B. C. D. E. F.',
                 "x" * 401 + ". B. C. D. E. F."):
        assert not re.fullmatch(SIX_SENTENCES, text), text


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


def test_a_seed_file_line_ends_at_a_newline_only_and_a_bad_line_is_named(tmp_path):
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"persona": "A nurse\u2028on nights\u0085and weekends."}\n{"persona": "A pilot."}\r\n',
                     encoding="utf-8")
    assert P.read_seed_file(seeds) == ["A nurse\u2028on nights\u0085and weekends.", "A pilot."]
    text = tmp_path / "seeds.txt"
    text.write_text("A nurse\u2028on nights.\n# a comment\nA pilot.\n", encoding="utf-8")
    assert P.read_seed_file(text) == ["A nurse\u2028on nights.", "A pilot."]
    seeds.write_text('{"persona": "A nurse."}\n{"persona": \n', encoding="utf-8")
    with pytest.raises(P.SeedSourceError, match=r"seeds.jsonl: line 2 is not valid JSON"):
        P.read_seed_file(seeds)
