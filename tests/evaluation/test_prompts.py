"""The evaluation's prompt templates: the released harness's files (kixlab/CUPID at a8560ca)
reproduced verbatim, and the few written from the paper for settings the release lacks."""
from __future__ import annotations

import json
import re

import pytest
import yaml

from cupid import config
from cupid.evaluation.steps.match import few_shot_block
from cupid.utils.prompts import format_fields, load_prompt
from repo_paths import GOLDEN_DIR

# The release's own prompt files (tests/golden/release/, written from the release by
# benchmarks/make_release_golden.py and committed with the commit they came from).
RELEASE_PROMPT_FILES = json.loads((GOLDEN_DIR / "release" / "prompts.json")
                                  .read_text(encoding="utf-8"))["prompt_files"]

# Files reproduced from the release: name -> variables, in the file's order.
RELEASE_FILES = {
    "evaluation/preference_inferrer": ["interaction_log", "curr_request"],
    "evaluation/response_generator": ["interaction_log", "curr_request"],
    "evaluation/preference_matcher": ["examples", "checklist", "preference"],
    "evaluation/preference_matcher_model": ["checklist", "preference"],
    "evaluation/response_judger": ["user_request", "ai_response", "preference", "checklist"],
    "synthesis/preference_decomposer": ["preferences"],
}
# Files for the paper's settings that the release does not have.
OUR_FILES = {
    "evaluation/summarize_sessions": (["interaction_log"], "Figure 23"),
    "evaluation/infer_preference_from_summaries": (["session_summaries", "curr_request"], "Figure 21"),
    "evaluation/generate_response_from_summaries": (["session_summaries", "curr_request"], "Figure 22"),
    "evaluation/generate_response_oracle_preference": (["preference", "request"], "oracle preference"),
    "evaluation/error_type": (["sessions", "context", "request", "true_preference", "inferred_preference"],
                              "Table 2"),
}
LABELS = {"Fully Covered", "Partially Covered", "Not Covered"}
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def test_every_evaluation_template_is_accounted_for():
    on_disk = {f"evaluation/{p.stem}" for p in (config.PROMPTS_DIR / "evaluation").glob("*.yaml")}
    assert on_disk == {n for n in (*RELEASE_FILES, *OUR_FILES) if n.startswith("evaluation/")}


@pytest.mark.parametrize("name", sorted(RELEASE_FILES))
def test_release_file_keys_variables_and_source(name):
    data = yaml.safe_load((config.PROMPTS_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    extra = {"examples"} if name == "evaluation/preference_matcher" else set()
    assert set(data) == {"source", "template", "variables", "system_prompt", "user_prompt"} | extra
    prompt = load_prompt(name)
    assert prompt.style == "format"
    assert list(prompt.variables) == RELEASE_FILES[name]
    assert set(format_fields(prompt.system_prompt) + format_fields(prompt.user_prompt)) == set(prompt.variables)
    assert prompt.source == f"kixlab/CUPID@a8560ca prompts/{name}.yaml (MIT)"
    text = (config.PROMPTS_DIR / f"{name}.yaml").read_text(encoding="utf-8")
    assert "MIT" in text and "THIRD_PARTY_NOTICES" in text


@pytest.mark.parametrize("name", sorted(RELEASE_FILES))
def test_release_file_is_the_releases_byte_for_byte(name):
    original = RELEASE_PROMPT_FILES[f"prompts/{name}.yaml"]
    theirs = yaml.safe_load(original)
    prompt = load_prompt(name)
    assert (prompt.system_prompt, prompt.user_prompt) == (theirs["system_prompt"], theirs["user_prompt"])
    # The two fields are also the file's own text, unchanged, after our header.
    assert original.strip() in (config.PROMPTS_DIR / f"{name}.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(OUR_FILES))
def test_our_files_declare_their_variables_and_cite_the_paper(name):
    variables, citation = OUR_FILES[name]
    prompt = load_prompt(name)
    assert list(prompt.variables) == variables
    if prompt.style == "format":
        used = format_fields(prompt.system_prompt) + format_fields(prompt.user_prompt)
    else:
        used = PLACEHOLDER.findall(prompt.system_prompt + prompt.user_prompt)
    assert set(used) == set(variables)
    assert citation in prompt.source


def test_format_templates_keep_literal_braces_and_insert_values_verbatim():
    prompt = load_prompt("evaluation/preference_matcher")
    tricky = '1. Does the response return {"ok": true}?\n2. Does it mention {preference}?'
    system, user = prompt.render(examples="EX", preference="Answers must be JSON.", checklist=tricky)
    assert tricky in user and "Answers must be JSON." in user
    assert '```json\n{\n  "results": [\n    {\n' in system  # {{ }} became literal braces
    assert "{{" not in system and "EX" in system
    with pytest.raises(KeyError):
        prompt.render(preference="p", checklist="c")


def test_matcher_examples_are_the_eight_annotated_pairs():
    examples = load_prompt("evaluation/preference_matcher").data["examples"]
    assert len(examples) == 8
    assert [len(e["checklist"]) for e in examples] == [3, 4, 4, 3, 3, 3, 4, 4]
    assert all(score in (0, 0.5, 1) for e in examples for score in e["checklist"].values())
    assert examples[0]["preference"].startswith("Procedures must prioritize equipment security")
    assert examples[7]["checklist"]["Do the procedures apply to all content types to ensure "
                                    "comprehensive input?"] == 0


def test_matcher_examples_render_as_the_release_laid_them_out():
    examples = load_prompt("evaluation/preference_matcher").data["examples"]
    text = few_shot_block()
    # Each example ends with a "---" line, the last one too (the release strips only the
    # blank lines after it).
    assert text.endswith("\n```\n\n---")
    blocks = text[: -len("\n\n---")].split("\n\n---\n\n")
    assert len(blocks) == 8
    for block, example in zip(blocks, examples):
        head, answer = block.split("\n\n#### Output\n\n```json\n")
        assert head == f"#### Preference\n\n{example['preference']}"
        assert answer.endswith("\n```")
        results = json.loads(answer[:-4])["results"]
        assert answer[:-4] == json.dumps({"results": results}, indent=2)
        assert [r["entry"] for r in results] == list(example["checklist"])
        assert [r["index"] for r in results] == list(range(1, len(results) + 1))
        labels = {1: "Fully Covered", 0.5: "Partially Covered", 0: "Not Covered"}
        assert [r["label"] for r in results] == [labels[s] for s in example["checklist"].values()]
    assert {r["label"] for b in blocks for r in json.loads(b.split("```json\n")[1][:-4])["results"]} == LABELS


def test_prefmatcher_prompt_says_criterion_and_has_no_examples_or_format():
    system, user = load_prompt("evaluation/preference_matcher_model").render(preference="CRIT", checklist="1. Q?")
    assert "criterion" in system.lower() and "json" not in (system + user).lower()
    assert user == "#### Criterion\n\nCRIT\n\n#### Checklist\n\n1. Q?"


def test_no_invented_examples_remain():
    everything = "\n".join(p.read_text(encoding="utf-8")
                           for p in (config.PROMPTS_DIR / "evaluation").glob("*.yaml"))
    for invented in ("steering committee", "Hollis", "tree nuts", "overseas supplier",
                     "Does the response"):
        assert invented not in everything


RELEASE_TO_SUMMARY = {
    "evaluation/preference_inferrer": (
        "evaluation/infer_preference_from_summaries",
        [("You will be provided with a log of interaction sessions",
          "You will be provided with summaries of interaction sessions"),
         ("The sessions are presented in chronological order",
          "The summaries are presented in chronological order"),
         ("by analyzing the log of previous interaction sessions",
          "by analyzing the summaries of previous interaction sessions"),
         ("## Log of Previous Interaction Sessions\n\n{interaction_log}",
          "## Summaries of Previous Interaction Sessions\n\n{session_summaries}"),
         ("based on the interaction log as you will",
          "based on the summaries of previous interaction sessions as you will"),
         ("<Describe your analysis of the log of previous interaction sessions>",
          "<Describe your analysis of the summaries of previous interaction sessions>")]),
    "evaluation/response_generator": (
        "evaluation/generate_response_from_summaries",
        [("you will be provided with an interaction log that contains the history of interaction "
          "sessions between the user and an AI assistant. Each session presents the messages that "
          "were sent between the user and the AI. The interaction log is presented",
          "you will be provided with summaries of the history of interaction sessions between the "
          "user and an AI assistant. Each summary describes the user's context in that session and "
          "the preferences, expectations, and intentions that the user expressed to the AI. The "
          "summaries are presented"),
         ("from the log to craft a response", "from the summaries to craft a response"),
         ("## Log of Previous Interaction Sessions\n\n{interaction_log}",
          "## Summaries of Previous Interaction Sessions\n\n{session_summaries}")]),
}


@pytest.mark.parametrize("release_name", sorted(RELEASE_TO_SUMMARY))
def test_summary_variants_differ_from_the_release_only_in_naming_the_log(release_name):
    summary_name, replacements = RELEASE_TO_SUMMARY[release_name]
    release, summary = load_prompt(release_name), load_prompt(summary_name)
    system, user = release.system_prompt, release.user_prompt
    for old, new in replacements:
        assert (system + user).count(old) == 1, old
        system, user = system.replace(old, new), user.replace(old, new)
    assert (system, user) == (summary.system_prompt, summary.user_prompt)


def test_oracle_preference_prompt_has_preference_and_no_log():
    system, user = load_prompt("evaluation/generate_response_oracle_preference").render(
        preference="PREF", request="REQ")
    assert "## User's Preference\n\nPREF" in user and "## User's Request\n\nREQ" in user
    assert "log" not in (system + user).lower()


def test_summarizer_format_names_every_field():
    _, user = load_prompt("evaluation/summarize_sessions").render(interaction_log="LOG")
    for field in ('"summaries"', '"session_id"', '"analysis"', '"context"', '"preferences"'):
        assert field in user
    assert user.index("LOG") < user.index("```json")


def test_a_stray_brace_or_undeclared_field_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "PROMPTS_DIR", tmp_path)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "one.yaml").write_text(
        'template: format\nvariables: [a]\nsystem_prompt: "x {b}"\nuser_prompt: "{a}"\n')
    (tmp_path / "bad" / "two.yaml").write_text(
        'template: format\nvariables: [a]\nsystem_prompt: "{ not json"\nuser_prompt: "{a}"\n')
    load_prompt.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"\{b\}"):
            load_prompt("bad/one")
        with pytest.raises(ValueError, match="format string"):
            load_prompt("bad/two")
    finally:
        load_prompt.cache_clear()
