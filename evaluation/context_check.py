"""Before any paid call: does the run's longest request fit each served model's context?

vLLM refuses a request whose prompt plus ``max_tokens`` exceeds the ``max_model_len`` it was
started with (a 400), so a server started too short fails every such call, after the run
has paid for the hosted models' calls before it. The models list of an OpenAI-compatible
server (``VLLMModel.check``) gives that length; this module renders, from the
data, the longest request each role will send to such a server and stops the run when it
cannot fit.

A request's prompt is counted by the server when it offers vLLM's ``/tokenize``; otherwise
``utils.models.tokens.lower_bound_tokens`` estimates it from its length (a count it is all
but certain to reach), so an estimate never refuses a run that would fit. Steps whose prompt
holds an earlier step's answer (the inferred preference, its checklist, the response) are
rendered without it: their figure is a floor of what will be sent.
"""
from __future__ import annotations

from typing import Iterable

from cupid import config
from cupid.evaluation import steps as S
from cupid.evaluation.prompt_layouts import format_checklist, format_checklist_bullets, format_session_log
from cupid.evaluation.pipeline import select_sessions
from cupid.utils.benchmark.dataset import Instance
from cupid.utils.benchmark.decomposer import PROMPT as DECOMPOSE_PROMPT
from cupid.utils.models.errors import ModelConfigurationError
from cupid.utils.models.model import Model
from cupid.utils.models.tokens import lower_bound_tokens
from cupid.utils.prompts import load_prompt

# The flag that sets each role's max_tokens.
ROLE_FLAGS = {"evaluated": "--model_args", "evaluator": "--evaluator_args",
              "matcher": "--matcher_args"}


def role_requests(instance: Instance, role: str, *, task: str, setting: str,
                  use_matcher: bool) -> list[tuple[str, str, dict, int | None]]:
    """(step, prompt file, values, the step's own max_tokens or None) of the requests
    ``role`` receives for ``instance``; an earlier step's answer is left empty."""
    truth = instance.current_contextual_preference
    request = instance.current_request
    wanted: list[tuple[str, str, dict, int | None]] = []
    inference = task in ("inference", "both")
    generation = task in ("generation", "both")
    if role == "evaluated":
        log = format_session_log(select_sessions(instance, setting))
        if setting == "summary":
            for session in instance.prior_interactions:
                wanted.append(("summarize", S.PROMPTS["summarize"],
                               {"interaction_log": format_session_log([session])}, None))
        if inference and setting != "oracle_preference":
            if setting == "summary":
                wanted.append(("infer", S.PROMPTS["infer_from_summaries"],
                               {"session_summaries": "", "curr_request": request}, None))
            else:
                wanted.append(("infer", S.PROMPTS["infer"],
                               {"interaction_log": log, "curr_request": request}, None))
        if generation:
            if setting == "oracle_preference":
                wanted.append(("generate", S.PROMPTS["generate_oracle_preference"],
                               {"preference": truth, "request": request}, None))
            elif setting == "summary":
                wanted.append(("generate", S.PROMPTS["generate_from_summaries"],
                               {"session_summaries": "", "curr_request": request}, None))
            else:
                wanted.append(("generate", S.PROMPTS["generate"],
                               {"interaction_log": log, "curr_request": request}, None))
    match_key = "match_prefmatcher" if role == "matcher" else "match"
    matches = role == "matcher" or (role == "evaluator" and not use_matcher)
    if inference and matches:
        examples = {}
        if match_key == "match":
            examples["examples"] = S.render_matcher_examples(
                load_prompt(S.PROMPTS["match"]).data["examples"])
        wanted.append(("match_precision", S.PROMPTS[match_key],
                       {"preference": truth, "checklist": format_checklist([]), **examples}, None))
        wanted.append(("match_recall", S.PROMPTS[match_key],
                       {"preference": "", "checklist": format_checklist(instance.current_checklist),
                        **examples}, None))
    if role == "evaluator":
        if inference:
            wanted.append(("decompose", DECOMPOSE_PROMPT, {"preferences": ""},
                           config.DECOMPOSER_MAX_TOKENS))
        if generation:
            wanted.append(("judge", S.PROMPTS["judge"],
                           {"preference": truth,
                            "checklist": format_checklist_bullets(instance.current_checklist),
                            "user_request": request, "ai_response": ""}, None))
    return wanted


def check_context(models: dict[str, Model | None], instances: Iterable[Instance], *,
                  task: str, setting: str) -> None:
    """Raise ModelConfigurationError (one line, naming the numbers and the fix) when a
    served model's stated context cannot hold the longest request the run sends it."""
    served = {role: m for role, m in models.items()
              if m is not None and getattr(m, "max_model_len", None)}
    # A model in several roles (the evaluator matching too) is checked once per role.
    if not served:
        return
    use_matcher = models.get("matcher") is not None
    longest: dict[tuple[str, str], tuple[int, str, str, int | None, bool]] = {}
    for instance in instances:
        for role in served:
            for step, prompt_name, values, step_max in role_requests(
                    instance, role, task=task, setting=setting, use_matcher=use_matcher):
                system_prompt, user_prompt = load_prompt(prompt_name).render(**values)
                size = len(system_prompt) + len(user_prompt)
                if size > longest.get((role, step), (-1,))[0]:
                    # An empty value is an earlier step's answer, not known yet.
                    partial = any(value == "" for value in values.values())
                    longest[(role, step)] = (size, system_prompt, user_prompt, step_max, partial)
    for role, model in served.items():
        worst = None
        for (step_role, step), (_, system_prompt, user_prompt, step_max, partial) in longest.items():
            if step_role != role:
                continue
            counted = getattr(model, "count_prompt_tokens", lambda *_: None)(system_prompt, user_prompt)
            tokens = counted if counted is not None else lower_bound_tokens(system_prompt + user_prompt)
            max_tokens = model.overrides.get("max_tokens", step_max if step_max is not None
                                             else model.max_tokens) or 0
            need = tokens + max_tokens
            if worst is None or need > worst[0]:
                worst = (need, step, tokens, max_tokens, counted is not None, partial)
        if worst is None or worst[0] <= model.max_model_len:
            continue
        need, step, tokens, max_tokens, exact, partial = worst
        counted_how = ("counted by the server's /tokenize" if exact else
                       "estimated from its length, 8 characters a token")
        if partial:
            counted_how = f"at least: without the earlier steps' answers it will hold; {counted_how}"
        # A power of two leaves room for the answers a floor leaves out (8,333 -> 16,384).
        restart = 1 << (need - 1).bit_length()
        room = model.max_model_len - tokens
        lower = (f", or lower {ROLE_FLAGS[role]} max_tokens to {room} or less (the run's "
                 f"requests then differ from the release's, and the run is recorded as such)"
                 if room > 0 else "")
        raise ModelConfigurationError(
            f"{model.name} ({role}): the server's max_model_len {model.max_model_len} cannot "
            f"hold the run's longest {step} request: {tokens} prompt tokens ({counted_how}) + "
            f"max_tokens {max_tokens} = {need}; restart vLLM with --max-model-len {restart} or "
            f"more{lower}")
