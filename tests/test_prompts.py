"""The evaluation prompt templates in prompts/evaluation/ (paper Figures 14-16, 21-23)."""
from __future__ import annotations

import json
import re

import pytest
import yaml

import config
from utils.prompts import load_prompt

EVAL_DIR = config.PROMPTS_DIR / "evaluation"

# The names the pipeline fills; a template that drifts from these breaks a step at run time.
EXPECTED_VARIABLES = {
    "infer_preference": ["previous_interactions", "current_request"],
    "decompose_preference": ["preference"],
    "match_checklist": ["preference", "checklist"],
    "match_checklist_prefmatcher": ["preference", "checklist"],
    "judge_response": ["preference", "checklist", "user_request", "ai_response"],
    "generate_response": ["interaction_sessions", "request"],
    "generate_response_oracle_preference": ["preference", "request"],
    "summarize_sessions": ["interaction_log"],
    "infer_preference_from_summaries": ["session_summaries", "current_request"],
    "generate_response_from_summaries": ["session_summaries", "request"],
}

# Which figure (or section) each template must cite.
EXPECTED_CITATION = {
    "infer_preference": "Figure 21",
    "decompose_preference": "Figure 15 not reproduced",
    "match_checklist": "Figure 14",
    "match_checklist_prefmatcher": "Figure 14",
    "judge_response": "Figure 16",
    "generate_response": "Figure 22",
    "generate_response_oracle_preference": "oracle preference",
    "summarize_sessions": "Figure 23",
    "infer_preference_from_summaries": "Figure 21 for the summary setting",
    "generate_response_from_summaries": "Figure 22 for the summary setting",
}

LABELS = {"Fully Covered", "Partially Covered", "Not Covered"}
ANY_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
JSON_BLOCK = re.compile(r"```json\n(.*?)\n```", re.S)
FENCED = re.compile(r"```\n(.*?)\n```", re.S)

ALL_FILES = sorted(p.stem for p in EVAL_DIR.glob("*.yaml"))


def _load(stem: str):
    return load_prompt(f"evaluation/{stem}")


def _json_blocks(text: str) -> list[dict]:
    """The ```json blocks of ``text`` that parse (the output-format skeletons hold <...> and do not)."""
    parsed = []
    for block in JSON_BLOCK.findall(text):
        try:
            parsed.append(json.loads(block))
        except json.JSONDecodeError:
            continue
    return parsed


def test_every_expected_template_exists_and_nothing_else():
    assert set(ALL_FILES) == set(EXPECTED_VARIABLES)


@pytest.mark.parametrize("stem", ALL_FILES)
def test_file_has_exactly_the_documented_keys(stem):
    data = yaml.safe_load((EVAL_DIR / f"{stem}.yaml").read_text(encoding="utf-8"))
    assert set(data) == {"source", "variables", "system_prompt", "user_prompt"}
    assert data["system_prompt"].strip() and data["user_prompt"].strip()


@pytest.mark.parametrize("stem", ALL_FILES)
def test_declared_variables_are_exactly_the_placeholders_used(stem):
    prompt = _load(stem)
    used = set(ANY_PLACEHOLDER.findall(prompt.system_prompt + "\n" + prompt.user_prompt))
    assert used == set(prompt.variables)
    assert list(prompt.variables) == EXPECTED_VARIABLES[stem]
    assert len(set(prompt.variables)) == len(prompt.variables)
    for name in prompt.variables:
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", name), name


@pytest.mark.parametrize("stem", ALL_FILES)
def test_render_fills_every_placeholder_and_keeps_json_braces(stem):
    prompt = _load(stem)
    values = {name: f"<<value of {name}>>" for name in prompt.variables}
    system, user = prompt.render(**values)
    for template, rendered in ((prompt.system_prompt, system), (prompt.user_prompt, user)):
        n_placeholders = len(ANY_PLACEHOLDER.findall(template))
        # Every brace that is not a placeholder survives, so JSON skeletons stay intact.
        assert rendered.count("{") == template.count("{") - n_placeholders
        assert rendered.count("}") == template.count("}") - n_placeholders
        assert not ANY_PLACEHOLDER.search(rendered)
    both = system + user
    for name, value in values.items():
        assert value in both, name
    # The JSON skeletons shown to the model keep their keys after rendering.
    for key in {"match_checklist": '"results"', "match_checklist_prefmatcher": '"results"',
                "decompose_preference": '"checklist"', "summarize_sessions": '"summaries"'}.get(stem, ()):
        assert key in both


def test_values_are_inserted_verbatim_even_when_they_hold_braces():
    # A checklist or a session log may contain braces or text that looks like a placeholder.
    prompt = _load("match_checklist")
    tricky = '1. Does the response return {"ok": true}?\n2. Does it mention {preference}?'
    _, user = prompt.render(preference="Answers must be JSON.", checklist=tricky)
    assert tricky in user
    assert "Answers must be JSON." in user


@pytest.mark.parametrize("stem", ALL_FILES)
def test_each_file_cites_its_source(stem):
    source = _load(stem).source
    assert EXPECTED_CITATION[stem] in source
    assert re.search(r"Figure \d+|§\d", source)


@pytest.mark.parametrize("stem", ALL_FILES)
def test_no_pdf_conversion_artifacts_left(stem):
    prompt = _load(stem)
    text = prompt.system_prompt + prompt.user_prompt
    for artifact in ("↪", "↩", "↳", "\\*", "\\_", "```\n\n```"):
        assert artifact not in text, artifact
    # Doubled fences: an opening fence directly followed by another fence.
    assert not re.search(r"```\w*\n\s*```", text)
    # Code fences (at the start of a line; "(```)" in a sentence is not one) are balanced.
    assert len(re.findall(r"^```", text, re.M)) % 2 == 0


def _matcher_examples() -> str:
    system = _load("match_checklist").system_prompt
    assert system.count("### Examples") == 1
    return system.split("### Examples", 1)[1]


def test_matcher_has_eight_well_formed_examples():
    section = _matcher_examples()
    chunks = [c for c in re.split(r"\n---\n", section) if c.strip()]
    assert len(chunks) == 8
    labels_seen = set()
    for chunk in chunks:
        # Each example: a fenced preference, a fenced numbered checklist, the JSON answer.
        fenced = FENCED.findall(chunk)
        assert len(fenced) == 2, chunk[:80]
        preference, checklist = fenced
        assert preference.strip() and "\n" not in preference.strip()
        entries = [re.sub(r"^\d+\. ", "", line) for line in checklist.splitlines()]
        assert [int(line.split(".", 1)[0]) for line in checklist.splitlines()] == \
            list(range(1, len(entries) + 1))
        answers = _json_blocks(chunk)
        assert len(answers) == 1
        results = answers[0]["results"]
        assert [r["index"] for r in results] == list(range(1, len(entries) + 1))
        assert [r["entry"] for r in results] == entries
        assert all(e.endswith("?") for e in entries)
        assert {r["label"] for r in results} <= LABELS
        labels_seen |= {r["label"] for r in results}
    assert labels_seen == LABELS
    # The parsed JSON answers of the whole section count the same.
    assert sum("results" in block for block in _json_blocks(section)) == 8


def test_matcher_examples_show_wording_differences():
    section = _matcher_examples()
    entries = [r["entry"] for block in _json_blocks(section) for r in block["results"]]
    assert any(e.startswith("Does the response") for e in entries)
    # Entries that name the subject otherwise, as the figure's "response" vs "report".
    assert any(re.match(r"Does the (report|proposal|review|summary|itinerary|post)\b", e)
               for e in entries)


def test_matcher_user_prompt_has_fenced_preference_and_checklist():
    _, user = _load("match_checklist").render(preference="PREF", checklist="1. Q?")
    assert "#### Preference\n\n```\nPREF\n```" in user
    assert "#### Checklist\n\n```\n1. Q?\n```" in user


def test_prefmatcher_variant_says_criterion_and_has_no_examples():
    prompt = _load("match_checklist_prefmatcher")
    system, user = prompt.render(preference="CRIT", checklist="1. Q?")
    both = system + user
    assert "criterion" in system.lower()
    # No code fences around the values: the layout the finetuned matcher was trained on.
    assert "#### Criterion\n\nCRIT\n\n#### Checklist\n\n1. Q?" in user
    assert "preference" not in both.lower()
    assert "Examples" not in both and "Example 1" not in both
    assert not _json_blocks(both)  # only the output-format skeleton, which is not JSON
    assert '"results"' in system and LABELS <= set(re.findall(r"\*\*([A-Za-z ]+)\*\*:", system))


def test_prefmatcher_variant_is_figure_14_with_criterion_minus_examples():
    # Apart from the examples and the word, the two matchers give the same instructions.
    gpt = _load("match_checklist").system_prompt.split("---\n\n### Examples", 1)[0]
    ours = _load("match_checklist_prefmatcher").system_prompt
    assert gpt.replace("preference", "criterion").strip() == ours.strip()


def test_decomposer_asks_for_atomic_checklist_and_its_examples_follow_the_rules():
    system = _load("decompose_preference").system_prompt
    assert "at most 4" in system and "single sub-preference" in system
    assert '"checklist"' in system
    examples = [b for b in _json_blocks(system) if "checklist" in b]
    assert len(examples) == 2
    for block in examples:
        items = block["checklist"]
        assert 1 <= len(items) <= 4
        assert all(q.startswith("Does the response") and q.endswith("?") for q in items)


def test_inference_prompt_keeps_figure_21_format():
    system, user = _load("infer_preference").render(previous_interactions="LOG", current_request="REQ")
    assert "### Analysis" in user
    # The paper's own spelling, which the models saw; the parser reads it leniently.
    assert "### Most Likely Preferneces" in user
    assert "a single sentence with at most 30 words" in user
    assert user.index("LOG") < user.index("REQ")


def _example_preferences(stem: str) -> list[str]:
    system = _load(stem).system_prompt
    tail = system.split("Examples of preferences:", 1)[1]
    return [line[2:] for line in tail.strip().splitlines() if line.startswith("- ")]


def test_inference_examples_are_a_short_bulleted_list():
    examples = _example_preferences("infer_preference")
    assert 4 <= len(examples) <= 5
    assert all(len(e.split()) <= 30 and e.endswith(".") for e in examples)


def test_summary_variants_differ_from_the_figures_only_in_the_log():
    infer = _load("infer_preference_from_summaries")
    assert _example_preferences("infer_preference_from_summaries") == \
        _example_preferences("infer_preference")
    _, user = infer.render(session_summaries="SUMS", current_request="REQ")
    assert "## Summaries of Previous Interaction Sessions\n\nSUMS" in user
    assert "### Most Likely Preferneces" in user
    assert "Log of Previous" not in user

    _, user = _load("generate_response_from_summaries").render(session_summaries="SUMS", request="REQ")
    assert "## Summaries of Previous Interaction Sessions\n\nSUMS" in user
    assert user.rstrip().endswith("## User's Request\n\nREQ")
    _, user = _load("generate_response").render(interaction_sessions="LOG", request="REQ")
    assert "## Log of Previous Interaction Sessions\n\nLOG" in user
    assert user.rstrip().endswith("## User's Request\n\nREQ")


def test_oracle_preference_prompt_has_preference_and_no_log():
    system, user = _load("generate_response_oracle_preference").render(preference="PREF", request="REQ")
    assert "## User's Preference\n\nPREF" in user and "## User's Request\n\nREQ" in user
    assert "log" not in (system + user).lower()


def test_judge_score_section_and_inputs():
    system, user = _load("judge_response").render(
        preference="PREF", checklist="1. Q?", user_request="REQ", ai_response="RESP")
    assert '**Preference:** "PREF"' in system
    assert "**Evaluation Checklist:**\n1. Q?" in system
    assert "### Evaluation Score" in system and "1~10" in system
    assert user.index("### User's Request\n\nREQ") < user.index("### AI Assistant's Response\n\nRESP")


def test_summarizer_format_names_every_field():
    _, user = _load("summarize_sessions").render(interaction_log="LOG")
    for field in ('"summaries"', '"session_id"', '"analysis"', '"context"', '"preferences"'):
        assert field in user
    assert user.index("LOG") < user.index("```json")
