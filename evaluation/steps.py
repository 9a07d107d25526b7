"""The evaluation's steps: prompt in, parsed output out.

Each step renders its template from prompts/evaluation/, calls the model through the seam,
and parses the answer. An unparseable answer is asked again (``config.MAX_PARSE_RETRIES``
times, as a distinct request so a cache does not replay it); if every answer fails, or the
call itself fails after the seam's retries, the step raises ``StepFailed`` carrying the
reason and every raw answer, which the pipeline records.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import config
from evaluation import parsing
from evaluation.data import Session, format_checklist, format_session_log
from evaluation.models.model import Model, ModelCallFailed, ModelConfigurationError
from evaluation.parsing import ParseError
from utils.prompts import load_prompt

PROMPTS = {
    "infer": "evaluation/infer_preference",
    "infer_from_summaries": "evaluation/infer_preference_from_summaries",
    "decompose": "evaluation/decompose_preference",
    "match": "evaluation/match_checklist",
    "match_prefmatcher": "evaluation/match_checklist_prefmatcher",
    "generate": "evaluation/generate_response",
    "generate_from_summaries": "evaluation/generate_response_from_summaries",
    "generate_oracle_preference": "evaluation/generate_response_oracle_preference",
    "judge": "evaluation/judge_response",
    "summarize": "evaluation/summarize_sessions",
}


class StepFailed(Exception):
    def __init__(self, reason: str, raw: Sequence[str] = (), attempts: int = 0, next_variant: int = 0):
        super().__init__(reason)
        self.reason = reason
        self.raw = list(raw)
        self.attempts = attempts
        self.next_variant = next_variant


@dataclass
class StepResult:
    output: dict
    raw: list[str]
    attempts: int
    model: str
    prompt_version: str
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})


def run_step(model: Model, prompt_key: str, values: dict, parse: Callable[[str], dict], *,
             json_schema: dict | None = None, answer_grammar: str | None = None,
             first_variant: int = 0) -> StepResult:
    """Ask, parse, re-ask. ``first_variant`` > 0 continues after attempts recorded by an
    earlier run, so a rerun gets fresh answers instead of the cached unparseable ones."""
    prompt = load_prompt(PROMPTS[prompt_key])
    system_prompt, user_prompt = prompt.render(**values)
    raw: list[str] = []
    usage = {"prompt_tokens": 0, "completion_tokens": 0}
    reason = ""
    for variant in range(first_variant, first_variant + config.MAX_PARSE_RETRIES + 1):
        try:
            completion = model.generate(system_prompt, [{"role": "user", "content": user_prompt}],
                                        json_schema=json_schema, answer_grammar=answer_grammar,
                                        variant=variant)
        except ModelCallFailed as exc:
            raise StepFailed(f"{type(exc).__name__}: {exc.reason}", raw, len(raw) + 1,
                             next_variant=variant) from exc
        except ModelConfigurationError:
            raise
        raw.append(completion.text)
        if completion.usage is not None:
            usage["prompt_tokens"] += completion.usage.prompt_tokens
            usage["completion_tokens"] += completion.usage.completion_tokens
            if completion.usage.batch:  # priced at the batch price in results.json
                usage["batch_prompt_tokens"] = usage.get("batch_prompt_tokens", 0) + \
                    completion.usage.prompt_tokens
                usage["batch_completion_tokens"] = usage.get("batch_completion_tokens", 0) + \
                    completion.usage.completion_tokens
        try:
            output = parse(completion.text)
        except ParseError as exc:
            reason = f"unparseable answer: {exc}"
            continue
        return StepResult(output=output, raw=raw, attempts=len(raw), model=model.name,
                          prompt_version=prompt.version, usage=usage)
    raise StepFailed(reason, raw, len(raw), next_variant=first_variant + len(raw))


def prompt_version(prompt_key: str) -> str:
    return load_prompt(PROMPTS[prompt_key]).version


# ---------------------------------------------------------------------------------------
# Evaluated-model steps
# ---------------------------------------------------------------------------------------
def infer_preference(model: Model, history: str, request: str, *, from_summaries: bool = False,
                     first_variant: int = 0) -> StepResult:
    """Figure 21: the user's most likely preference for the current request."""
    if from_summaries:
        return run_step(model, "infer_from_summaries",
                        {"session_summaries": history, "current_request": request},
                        parsing.parse_inferred_preference,
                        answer_grammar=parsing.INFERENCE_ANSWER_GRAMMAR, first_variant=first_variant)
    return run_step(model, "infer", {"previous_interactions": history, "current_request": request},
                    parsing.parse_inferred_preference,
                    answer_grammar=parsing.INFERENCE_ANSWER_GRAMMAR, first_variant=first_variant)


def generate_response(model: Model, history: str, request: str, *, from_summaries: bool = False,
                     first_variant: int = 0) -> StepResult:
    """Figure 22: a response to the current request, given the session log."""
    if from_summaries:
        return run_step(model, "generate_from_summaries",
                        {"session_summaries": history, "request": request}, parsing.parse_response, first_variant=first_variant)
    return run_step(model, "generate", {"interaction_sessions": history, "request": request},
                    parsing.parse_response, first_variant=first_variant)


def generate_with_preference(model: Model, preference: str, request: str, *, first_variant: int = 0) -> StepResult:
    """The oracle-preference setting (§4.1): the model is told the true preference."""
    return run_step(model, "generate_oracle_preference", {"preference": preference, "request": request},
                    parsing.parse_response, first_variant=first_variant)


def summarize_session(model: Model, session: Session, *, first_variant: int = 0) -> StepResult:
    """Figure 23 on one session, so a summary is made once and shared by every instance
    (and both tasks) whose history holds that session."""
    return run_step(model, "summarize", {"interaction_log": format_session_log([session])},
                    lambda text: parsing.parse_summaries(text, 1), json_schema=parsing.SUMMARY_SCHEMA,
                    first_variant=first_variant)


def format_summaries(summaries: Sequence[dict]) -> str:
    blocks = []
    for i, summary in enumerate(summaries, start=1):
        context = "\n".join(f"- {c}" for c in summary["context"]) or "- (none)"
        preferences = "\n".join(f"- {p}" for p in summary["preferences"]) or "- (none)"
        blocks.append(f"### Session {i}\n\nContext:\n{context}\n\nPreferences:\n{preferences}")
    return "\n\n".join(blocks)


# ---------------------------------------------------------------------------------------
# Evaluator steps
# ---------------------------------------------------------------------------------------
def decompose(model: Model, preference: str, *, first_variant: int = 0) -> StepResult:
    """Figure 15 (written from §2.3): a preference → an atomic yes/no checklist."""
    return run_step(model, "decompose", {"preference": preference}, parsing.parse_checklist,
                    json_schema=parsing.CHECKLIST_SCHEMA, first_variant=first_variant)


def decompose_preference(model: Model, preference: str, *, first_variant: int = 0) -> list[str]:
    """The checklist alone; synthesis uses this for its session preferences."""
    return decompose(model, preference, first_variant=first_variant).output["checklist"]


def match_checklist(model: Model, preference: str, checklist: Sequence[str], *,
                    prefmatcher: bool = False, first_variant: int = 0) -> StepResult:
    """Figure 14: label how much ``preference`` covers each checklist entry."""
    checklist = list(checklist)
    return run_step(model, "match_prefmatcher" if prefmatcher else "match",
                    {"preference": preference, "checklist": format_checklist(checklist)},
                    lambda text: parsing.parse_match(text, checklist),
                    json_schema=parsing.match_schema(len(checklist)), first_variant=first_variant)


def judge_response(model: Model, preference: str, checklist: Sequence[str], request: str,
                   response: str, *, first_variant: int = 0) -> StepResult:
    """Figure 16: a 1-10 score of the response against the true preference and checklist."""
    return run_step(model, "judge",
                    {"preference": preference, "checklist": format_checklist(checklist),
                     "user_request": request, "ai_response": response},
                    parsing.parse_judge, answer_grammar=parsing.JUDGE_ANSWER_GRAMMAR,
                    first_variant=first_variant)
