"""An instance's two chains, written once (infer → decompose → match both ways; generate →
judge), against a ``StepAsker``: the pipeline's (pipeline.py ``InstanceSteps``) reads a step
back from the instance's file when it is done there, else asks its model and records the answer;
the dry run and the context check pass an ``AnswerlessAsker``, which renders the same requests
with stand-in answers; inspect's scorers (inspect_tasks/) pass theirs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from . import steps
from .metrics import InferenceCounts
from .strategies import Shown, Strategy
from .steps import decompose, generate, infer, judge, match, summarize
from ..utils.dataset import Instance, Session
from ..utils.errors import BadInput
from ..utils.io import StorageError
from ..utils.models.batch import BatchDeferred
from ..utils.models.call_errors import ModelConfigurationError, RunCancelled
from ..utils.models.model import Model

# What stops an instance's work without failing it: raised through, whoever's code it came
# through (a step's, or an LLM-backed strategy's).
STOPS = (ModelConfigurationError, RunCancelled, StorageError, BatchDeferred)


def scorer_name(evaluator: Model, matcher: Model) -> str:
    """The evaluator's label, with the matcher's when another model matches; a label carries
    the user's generation overrides, so overridden scores never mix with the default ones."""
    return evaluator.label if matcher is evaluator else f"{evaluator.label}+{matcher.label}"


class StepAsker:
    """What the chains ask a step through: ``asker(step, ask)`` is the step's output, or None
    when it failed (recorded by the asker); ``together(*calls)`` the calls' results, side by
    side where the asker can (here one after the other)."""

    def together(self, *calls: Callable[[], dict | None]) -> list[dict | None]:
        return [call() for call in calls]


@dataclass(frozen=True)
class ChainInput:
    """What a chain is given beside the instance's request: the history text (a strategy's
    ``Shown``, or the summaries of its sessions) and flags."""
    history: str = ""               # the session log, or the summaries
    from_summaries: bool = False
    preference_given: bool = False  # oracle_preference: the true preference, no sessions
    prefmatcher: bool = False       # PrefMatcher matches (its own prompt)


def inference_chain(instance: Instance, given: ChainInput, ask: StepAsker) -> InferenceCounts | None:
    """Infer, decompose the inference, match both ways: the instance's pooled counts."""
    truth = instance.current_contextual_preference
    inferred = ask(steps.INFER, infer.ask(given.history, instance.current_request,
                                          from_summaries=given.from_summaries))
    if inferred is None:
        return None
    checklist = ask(steps.DECOMPOSE, decompose.ask(inferred["preference"]))
    if checklist is None:
        return None
    precision, recall = ask.together(
        lambda: ask(steps.MATCH_PRECISION, match.ask(truth, checklist["checklist"],
                                                     prefmatcher=given.prefmatcher)),
        lambda: ask(steps.MATCH_RECALL, match.ask(inferred["preference"], instance.current_checklist,
                                                  prefmatcher=given.prefmatcher)))
    if precision is None or recall is None:
        return None
    return InferenceCounts.from_scores([r["score"] for r in precision["results"]],
                                       [r["score"] for r in recall["results"]])


def generation_chain(instance: Instance, given: ChainInput, ask: StepAsker) -> float | None:
    """Generate a response, judge it: the instance's judge score."""
    truth, request = instance.current_contextual_preference, instance.current_request
    response = ask(steps.GENERATE, generate.ask_given_preference(truth, request) if given.preference_given
                   else generate.ask(given.history, request, from_summaries=given.from_summaries))
    if response is None:
        return None
    judged = ask(steps.JUDGE, judge.ask(truth, instance.current_checklist, request, response["response"]))
    return None if judged is None else judged["score"]


CHAINS = {"inference": inference_chain, "generation": generation_chain}


class AnswerlessAsker(StepAsker):
    """The base of the ``StepAsker``s that send nothing (the dry run's, the context check's):
    they walk an instance's chains one call after the other, with stand-in answers."""

    def walk(self, instance: Instance, task: str, setting: Strategy, prefmatcher: bool) -> None:
        try:
            shown = None if setting.preference_given else self.shown(instance, setting)
        except Exception as exc:  # the strategy's own code (a user's) raised: a run fails the instance
            return self.strategy_failed(instance, exc)
        if shown is None:
            given = ChainInput(preference_given=True, prefmatcher=prefmatcher)
        elif setting.summaries:
            summaries = self.summaries(shown.sessions)
            given = ChainInput(summarize.history(summaries), from_summaries=True, prefmatcher=prefmatcher)
        else:
            given = ChainInput(shown.text, prefmatcher=prefmatcher)
        for name, chain in CHAINS.items():
            if task in (name, "both"):
                chain(instance, given, self)

    def summaries(self, sessions: Sequence[Session]) -> list[dict]:
        """Stand-ins of the sessions' summaries (the summary setting)."""
        raise NotImplementedError

    def shown(self, instance: Instance, setting: Strategy) -> Shown:
        """What the strategy shows of ``instance`` (its own ``shown``)."""
        return setting.shown(instance)

    def strategy_failed(self, instance: Instance, exc: Exception) -> None:
        """The strategy raised on ``instance`` (a run records it as the instance's failure):
        by default BadInput, one line naming the instance and the error."""
        raise BadInput(f"instance {instance.instance_id}: the context strategy raised (a run fails the instance): "
                       f"{type(exc).__name__}: {exc}") from exc


def needed_steps(task: str, setting: Strategy) -> list[steps.Step]:
    """The steps a task and strategy need for an instance."""
    return [step for step in steps.STEPS if (step is not steps.SUMMARIZE or setting.summaries)
            and any(t in step.tasks for t in (("inference", "generation") if task == "both" else (task,)))]
