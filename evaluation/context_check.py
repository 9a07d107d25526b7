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

from typing import Callable, Iterable

from . import steps
from .chains import AnswerlessAsker
from .strategies import Shown, Strategy
from .steps import summarize
from .steps.ask import Ask
from ..utils.dataset import Instance
from ..utils.models.call_errors import ModelConfigurationError
from ..utils.models.model import Model
from ..utils.models.tokens import lower_bound_tokens

# The flag that sets each role's max_tokens.
ROLE_FLAGS = {"evaluated": "--model_args", "evaluator": "--evaluator_args",
              "matcher": "--matcher_args"}


class _Blank(dict):
    """An earlier step's answer, not known before the run: empty, whatever is read of it."""

    def __missing__(self, key):
        return ""


class RequestRecorder(AnswerlessAsker):
    """A ``StepAsker`` (pipeline.py) that records the requests the chains would send, each
    with the role that receives it, and answers with blanks."""

    def __init__(self, use_matcher: bool, recorded: Callable[[Instance], Shown | None] | None = None):
        self.use_matcher = use_matcher
        self.recorded = recorded
        self.requests: list[tuple[str, steps.Step, Ask]] = []

    def __call__(self, step: steps.Step, ask: Ask) -> dict:
        role = "evaluator" if step.role == "matcher" and not self.use_matcher else step.role
        self.requests.append((role, step, ask))
        return _Blank()

    def summaries(self, sessions) -> list[dict]:
        for session in sessions:
            self(steps.SUMMARIZE, summarize.ask(session))
        return []

    def shown(self, instance: Instance, setting: Strategy) -> Shown:
        """An LLM-backed strategy is not asked before the run (its calls are paid, and it may
        keep what it is answered): its infer and generate requests are checked without history."""
        kept = self.recorded(instance) if self.recorded is not None else None
        if kept is not None:  # what the run showed the instance before: the strategy is not asked again
            return kept
        if setting.uses_model:
            return Shown("", (), ())
        return setting.shown(instance)

    def strategy_failed(self, instance: Instance, exc: Exception) -> None:
        """The strategy raised on ``instance``: it sends nothing, and the run records the failure."""


def run_requests(instance: Instance, *, task: str, setting: Strategy, use_matcher: bool,
                 recorded: Callable[[Instance], Shown | None] | None = None) -> list[tuple[str, steps.Step, Ask]]:
    """(role, step, request) of every request a run sends for ``instance``, an earlier step's
    answer left empty (a summary setting's summaries too). ``recorded``: what the run
    directory says the strategy showed an instance, if anything."""
    recorder = RequestRecorder(use_matcher, recorded)
    recorder.walk(instance, task, setting, use_matcher)
    return recorder.requests


def check_context(models: dict[str, Model | None], instances: Iterable[Instance], *,
                  task: str, setting: Strategy, recorded: Callable[[Instance], Shown | None] | None = None) -> None:
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
        for role, step, ask in run_requests(instance, task=task, setting=setting, use_matcher=use_matcher,
                                            recorded=recorded):
            if role not in served:
                continue
            system_prompt, user_prompt = ask.render()
            size = len(system_prompt) + len(user_prompt)
            if size > longest.get((role, step.name), (-1,))[0]:
                # An empty value is an earlier step's answer, not known yet.
                partial = any(value == "" for value in ask.values.values())
                longest[(role, step.name)] = (size, system_prompt, user_prompt, ask.max_tokens, partial)
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
