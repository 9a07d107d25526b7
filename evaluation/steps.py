"""The evaluation's steps: prompt in, parsed output out.

Each step renders its template, calls the model through the seam, and parses the answer.
The requests are the released harness's (kixlab/CUPID at a8560ca): its prompt files, its
session-log and checklist layouts (evaluation/formatting.py), its few-shot examples, and its
parameters (temperature 0, max_tokens 8192; 4096 for the decomposer). No JSON schema is
sent, except to the embedded model as a decoding aid (the release never ran it).

An unparseable answer is asked again (``config.MAX_PARSE_RETRIES`` times, as a distinct
request so a cache does not replay it); if every answer fails, or the call itself fails
after the seam's retries, the step raises ``StepFailed`` carrying the reason, every raw
answer and what was sent, which the pipeline records.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Callable, Sequence

import config
from evaluation import parsing
from evaluation.formatting import format_checklist, format_checklist_bullets, format_session_log
from utils.dataset import Session
from utils.models.asking import NoUsableAnswer, ask_until_usable
from utils.models.model import Model
from evaluation.parsing import ParseError
from utils.prompts import Prompt, load_prompt

PROMPTS = {
    "infer": "evaluation/preference_inferrer",
    "infer_from_summaries": "evaluation/infer_preference_from_summaries",
    "decompose": "synthesis/preference_decomposer",
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


class StepFailed(Exception):
    def __init__(self, reason: str, raw: Sequence[str] = (), attempts: int = 0, next_variant: int = 0,
                 sent: dict | None = None, latency_s: float = 0.0):
        super().__init__(reason)
        self.reason = reason
        self.raw = list(raw)
        self.attempts = attempts
        self.next_variant = next_variant
        self.sent = sent
        self.latency_s = latency_s


@dataclass
class StepResult:
    output: dict
    raw: list[str]
    attempts: int
    model: str
    prompt_version: str
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    sent: dict | None = None      # what was asked (see sent_record)
    latency_s: float = 0.0        # seconds spent in the model calls of this step


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sent_record(prompt: Prompt, values: dict, refs: dict, system_prompt: str, user_prompt: str,
                temperature: object, max_tokens: object) -> dict:
    """What a step sent, compactly: the prompt file and version, the values it was filled
    with (a value listed in ``refs`` is named, with its hash, instead of copied), the
    hashes of the rendered texts, and the generation parameters. ``rebuild_request`` turns
    it back into the exact system prompt and user message."""
    filled = {}
    for name, value in values.items():
        if name in refs:
            filled[name] = {"ref": refs[name], "sha256": _sha256(str(value))}
        else:
            filled[name] = value
    return {"prompt": prompt.name, "prompt_version": prompt.version, "values": filled,
            "system_sha256": _sha256(system_prompt), "user_sha256": _sha256(user_prompt),
            "temperature": temperature, "max_tokens": max_tokens}


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
            if _sha256(value_text) != value["sha256"]:
                raise ValueError(f"{sent['prompt']}: {name} is not the text this step was sent")
            values[name] = value_text
        else:
            values[name] = value
    system_prompt, user_prompt = prompt.render(**values)
    if _sha256(system_prompt) != sent["system_sha256"] or _sha256(user_prompt) != sent["user_sha256"]:
        raise ValueError(f"{sent['prompt']}: the rebuilt request differs from the one sent")
    return {"system_prompt": system_prompt,
            "messages": [{"role": "user", "content": user_prompt}],
            "temperature": sent["temperature"], "max_tokens": sent["max_tokens"]}


def decoding_aid(model: Model, schema: dict | None) -> dict | None:
    """A JSON schema for the models that follow decoding aids (the embedded model only):
    the benchmark's requests carry none, as the release's did."""
    return schema if model.supports_answer_grammar else None


def run_step(model: Model, prompt_key: str, values: dict, parse: Callable[[str], dict], *,
             json_schema: dict | None = None, answer_grammar: str | None = None,
             max_tokens: int | None = None, refs: dict | None = None,
             first_variant: int = 0) -> StepResult:
    """Ask, parse, re-ask. ``first_variant`` > 0 continues after attempts recorded by an
    earlier run, so a rerun gets fresh answers instead of the cached unparseable ones.
    ``max_tokens`` overrides the model's own limit for this step."""
    prompt = load_prompt(PROMPTS[prompt_key])
    system_prompt, user_prompt = prompt.render(**values)
    options = {} if max_tokens is None else {"max_tokens": max_tokens}
    sent = sent_record(prompt, values, refs or {}, system_prompt, user_prompt,
                       getattr(model, "temperature", None),
                       max_tokens if max_tokens is not None else getattr(model, "max_tokens", None))
    try:
        answer = ask_until_usable(model, system_prompt, [{"role": "user", "content": user_prompt}], parse,
                                  tries=config.MAX_PARSE_RETRIES + 1, invalid=(ParseError,),
                                  first_variant=first_variant, json_schema=json_schema,
                                  answer_grammar=answer_grammar, **options)
    except NoUsableAnswer as exc:
        if exc.call_failed is not None:
            raise StepFailed(f"{type(exc.call_failed).__name__}: {exc.call_failed.reason}", exc.raws,
                             len(exc.raws) + 1, next_variant=exc.next_variant, sent=sent,
                             latency_s=exc.latency_s) from exc.call_failed
        raise StepFailed(f"unparseable answer: {exc.reason}", exc.raws, len(exc.raws),
                         next_variant=exc.next_variant, sent=sent, latency_s=exc.latency_s) from None
    return StepResult(output=answer.value, raw=answer.raws, attempts=answer.attempts, model=model.name,
                      prompt_version=prompt.version, usage=answer.usage, sent=sent,
                      latency_s=answer.latency_s)


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
# Evaluator steps
# ---------------------------------------------------------------------------------------
def decompose(model: Model, preference: str, *, first_variant: int = 0) -> StepResult:
    """A preference -> a yes/no checklist of at most 4 entries (the release's decomposer,
    with its own max_tokens)."""
    return run_step(model, "decompose", {"preferences": preference}, parsing.parse_checklist,
                    json_schema=decoding_aid(model, parsing.CHECKLIST_SCHEMA),
                    max_tokens=config.DECOMPOSER_MAX_TOKENS, first_variant=first_variant)


def decompose_preference(model: Model, preference: str, *, first_variant: int = 0) -> list[str]:
    """The checklist alone; synthesis uses this for its session preferences."""
    return decompose(model, preference, first_variant=first_variant).output["checklist"]


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
