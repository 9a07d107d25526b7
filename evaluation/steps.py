"""The evaluation's steps: prompt in, parsed output out.

Each step renders its template, calls the model through the seam, and parses the answer
(utils/benchmark/step_runner.py's ``run_prompt``: the re-asks, ``StepFailed``, the record of what was
sent). The requests are the released harness's (kixlab/CUPID at a8560ca): its prompt
files, its session-log and checklist layouts (evaluation/prompt_layouts.py), its few-shot
examples, and its parameters (temperature 0, max_tokens 8192; 4096 for the decomposer,
which synthesis shares: utils/benchmark/decomposer.py). No JSON schema is sent, except to the
embedded model as a decoding aid (the release never ran it).
"""
from __future__ import annotations

import json
from typing import Callable, Sequence

from cupid.utils.benchmark.answers import ours as parsing
from cupid.evaluation.prompt_layouts import format_checklist, format_checklist_bullets, format_session_log
from cupid.utils.benchmark import decomposer
from cupid.utils.benchmark.dataset import Session
from cupid.utils.models.model import Model
from cupid.utils.prompts import load_prompt
from cupid.utils.benchmark.step_runner import StepResult, decoding_aid, run_prompt, text_sha256

PROMPTS = {
    "infer": "evaluation/preference_inferrer",
    "infer_from_summaries": "evaluation/infer_preference_from_summaries",
    "decompose": decomposer.PROMPT,
    "match": "evaluation/preference_matcher",
    "match_prefmatcher": "evaluation/preference_matcher_model",
    "generate": "evaluation/response_generator",
    "generate_from_summaries": "evaluation/generate_response_from_summaries",
    "generate_oracle_preference": "evaluation/generate_response_oracle_preference",
    "judge": "evaluation/response_judger",
    "summarize": "evaluation/summarize_sessions",
}

# Values that a step record names instead of copying (see ``sent_record``): the instance's
# session log (rebuilt from the data) and the matcher's few-shot block (from its prompt file).
SESSION_LOG = "session_log"
PROMPT_EXAMPLES = "prompt_examples"


def rebuild_request(sent: dict, session_log: str | None = None) -> dict:
    """The request a step record describes: ``{"system_prompt", "messages", "temperature",
    "max_tokens"}``. ``session_log`` is the instance's log as the run showed it (for the
    default and oracle settings, ``format_session_log`` of the sessions shown). Raises
    ValueError when the prompt file or a referenced value is not the one the run used."""
    prompt = load_prompt(sent["prompt"])
    if prompt.version != sent["prompt_version"]:
        raise ValueError(f"{sent['prompt']}: the prompt file changed since this step ran "
                         f"(version {sent['prompt_version']} then, {prompt.version} now)")
    values = {}
    for name, value in sent["values"].items():
        if isinstance(value, dict) and "ref" in value:
            if value["ref"] == SESSION_LOG:
                if session_log is None:
                    raise ValueError(f"{sent['prompt']}: needs the instance's session log")
                value_text = session_log
            elif value["ref"] == PROMPT_EXAMPLES:
                value_text = render_matcher_examples(prompt.data["examples"])
            else:
                raise ValueError(f"{sent['prompt']}: unknown reference {value['ref']!r}")
            if text_sha256(value_text) != value["sha256"]:
                raise ValueError(f"{sent['prompt']}: {name} is not the text this step was sent")
            values[name] = value_text
        else:
            values[name] = value
    system_prompt, user_prompt = prompt.render(**values)
    if text_sha256(system_prompt) != sent["system_sha256"] or text_sha256(user_prompt) != sent["user_sha256"]:
        raise ValueError(f"{sent['prompt']}: the rebuilt request differs from the one sent")
    return {"system_prompt": system_prompt,
            "messages": [{"role": "user", "content": user_prompt}],
            "temperature": sent["temperature"], "max_tokens": sent["max_tokens"]}


def run_step(model: Model, prompt_key: str, values: dict, parse: Callable[[str], dict],
             **options) -> StepResult:
    """``run_prompt`` on the prompt file of one of evaluation's steps (``PROMPTS``)."""
    return run_prompt(model, PROMPTS[prompt_key], values, parse, **options)


def prompt_version(prompt_key: str) -> str:
    return load_prompt(PROMPTS[prompt_key]).version


# ---------------------------------------------------------------------------------------
# Evaluated-model steps
# ---------------------------------------------------------------------------------------
def infer_preference(model: Model, history: str, request: str, *, from_summaries: bool = False,
                     first_variant: int = 0) -> StepResult:
    """The user's most likely preference for the current request (the paper's Figure 21)."""
    if from_summaries:
        return run_step(model, "infer_from_summaries",
                        {"session_summaries": history, "curr_request": request},
                        parsing.parse_inferred_preference,
                        answer_grammar=parsing.INFERENCE_ANSWER_GRAMMAR, first_variant=first_variant)
    return run_step(model, "infer", {"interaction_log": history, "curr_request": request},
                    parsing.parse_inferred_preference, refs={"interaction_log": SESSION_LOG},
                    answer_grammar=parsing.INFERENCE_ANSWER_GRAMMAR, first_variant=first_variant)


def generate_response(model: Model, history: str, request: str, *, from_summaries: bool = False,
                      first_variant: int = 0) -> StepResult:
    """A response to the current request, given the session log (the paper's Figure 22)."""
    if from_summaries:
        return run_step(model, "generate_from_summaries",
                        {"session_summaries": history, "curr_request": request},
                        parsing.parse_response, first_variant=first_variant)
    return run_step(model, "generate", {"interaction_log": history, "curr_request": request},
                    parsing.parse_response, refs={"interaction_log": SESSION_LOG},
                    first_variant=first_variant)


def generate_with_preference(model: Model, preference: str, request: str, *, first_variant: int = 0) -> StepResult:
    """The oracle-preference setting (§4.1): the model is told the true preference."""
    return run_step(model, "generate_oracle_preference", {"preference": preference, "request": request},
                    parsing.parse_response, first_variant=first_variant)


def summarize_session(model: Model, session: Session, *, first_variant: int = 0) -> StepResult:
    """Figure 23 on one session, so a summary is made once and shared by every instance
    (and both tasks) whose history holds that session."""
    return run_step(model, "summarize", {"interaction_log": format_session_log([session])},
                    lambda text: parsing.parse_summaries(text, 1),
                    json_schema=decoding_aid(model, parsing.SUMMARY_SCHEMA),
                    first_variant=first_variant)


def format_summaries(summaries: Sequence[dict]) -> str:
    """Session summaries in the session log's layout: ``### Session i``, then ``#### Context``
    and ``#### Preferences`` bullet lists, ``---`` after each session."""
    parts = []
    for number, summary in enumerate(summaries, start=1):
        context = "\n".join(f"- {c}" for c in summary["context"]) or "- (none)"
        preferences = "\n".join(f"- {p}" for p in summary["preferences"]) or "- (none)"
        parts.append(f"### Session {number}\n\n#### Context\n\n{context}\n\n"
                     f"#### Preferences\n\n{preferences}\n\n---\n\n")
    return "".join(parts).strip()


# ---------------------------------------------------------------------------------------
# Evaluator steps (the decomposer is utils/benchmark/decomposer.py's, shared with synthesis)
# ---------------------------------------------------------------------------------------
def matcher_score_to_label(score: float) -> str:
    if score == 1:
        return "Fully Covered"
    if score == 0.5:
        return "Partially Covered"
    return "Not Covered"


def render_matcher_examples(examples: Sequence[dict]) -> str:
    """The matcher's few-shot block: per example its preference and, as the expected output,
    a ```json block of its labelled checklist, then a ``---`` line."""
    blocks = []
    for example in examples:
        results = {"results": [
            {"index": i, "entry": entry, "label": matcher_score_to_label(score)}
            for i, (entry, score) in enumerate(example["checklist"].items(), start=1)]}
        blocks.append(f"#### Preference\n\n{example['preference']}\n\n#### Output\n\n```json\n"
                      f"{json.dumps(results, indent=2)}\n```\n\n---\n\n")
    return "".join(blocks).strip()


def match_checklist(model: Model, preference: str, checklist: Sequence[str], *,
                    prefmatcher: bool = False, first_variant: int = 0) -> StepResult:
    """Label how much ``preference`` covers each checklist entry (the paper's Figure 14)."""
    checklist = list(checklist)
    values = {"preference": preference, "checklist": format_checklist(checklist)}
    refs = {}
    if not prefmatcher:
        prompt = load_prompt(PROMPTS["match"])
        values["examples"] = render_matcher_examples(prompt.data["examples"])
        refs["examples"] = PROMPT_EXAMPLES
    return run_step(model, "match_prefmatcher" if prefmatcher else "match", values,
                    lambda text: parsing.parse_match(text, checklist), refs=refs,
                    json_schema=decoding_aid(model, parsing.match_schema(len(checklist))),
                    first_variant=first_variant)


def judge_response(model: Model, preference: str, checklist: Sequence[str], request: str,
                   response: str, *, first_variant: int = 0) -> StepResult:
    """A 1-10 score of the response against the true preference and its checklist
    (the paper's Figure 16)."""
    return run_step(model, "judge",
                    {"preference": preference, "checklist": format_checklist_bullets(checklist),
                     "user_request": request, "ai_response": response},
                    parsing.parse_judge, answer_grammar=parsing.JUDGE_ANSWER_GRAMMAR,
                    first_variant=first_variant)
