"""The scorers: the pipeline's own chains (evaluation/pipeline.py ``inference_chain``,
``generation_chain``) run with an asker whose evaluated-model step is the one the solver
already answered and whose other steps ask the grader (or PrefMatcher) through inspect.

A chain runs in a worker thread and each of its calls goes back to inspect's event loop,
so the grader's calls are the sample's own events in the log. A step whose answers all stay
unusable leaves the sample unscored with the step and the reason (cupid-eval counts such an
instance as failed, never as 0); a call that fails for good is inspect's sample error,
which ``inspect eval-retry`` runs again.
"""
from __future__ import annotations

from dataclasses import dataclass

import anyio
from inspect_ai.model import Model
from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState

from ..evaluation import steps
from ..evaluation.chains import ChainInput, StepAsker, generation_chain, inference_chain
from ..evaluation.steps.ask import Ask
from .pooled_metrics import CLUSTER, macro, micro, micro_stderr
from .requests import Unparsed, answer
from .samples import Data
from ..utils.dataset import Instance

# What the solver leaves in the sample's store.
ANSWERED = "cupid:answered"   # the evaluated model's step: its parsed output
FAILED = "cupid:failed"       # {"step", "reason"}: the evaluated model's step (or the summaries) failed


@dataclass(frozen=True)
class Graders:
    """Who answers the scoring steps, with the parameters of which role: the grader decomposes
    and judges (the evaluator's role); it matches too, unless PrefMatcher does (its role)."""
    grader: Model
    matcher: Model | None = None  # PrefMatcher, with its own prompt

    def _repr_params_(self) -> dict:
        """What inspect logs of the scorer's argument: the models' names."""
        return {"grader": str(self.grader), "matcher": str(self.matcher or self.grader)}

    def model_for(self, step: steps.Step) -> tuple[Model, str]:
        if step.role == "matcher" and self.matcher is not None:
            return self.matcher, "matcher"
        return self.grader, "evaluator"


class GraderSteps(StepAsker):
    """The chains' asker inside a scorer. ``asked``: each step's output; ``failures``: (step,
    reason) of the steps whose answers stayed unusable."""

    def __init__(self, answered: dict, graders: Graders):
        self.asked = dict(answered)
        self.graders = graders
        self.failures: list[tuple[str, str]] = []

    def __call__(self, step: steps.Step, ask: Ask) -> dict | None:
        if step.role == "evaluated":  # answered by the solver (the same request, see samples.py)
            return self.asked.get(step.name)
        model, role = self.graders.model_for(step)
        try:
            output = anyio.from_thread.run(answer, model, ask, role)
        except Unparsed as exc:
            self.failures.append((step.name, exc.reason))
            return None
        self.asked[step.name] = output
        return output


def not_answered(state: TaskState) -> str | None:
    """Why the solver left nothing to score, or None."""
    metadata = state.metadata
    if metadata.get("skipped"):
        return f"skipped: {metadata['skipped']}"
    if metadata.get("context_error"):
        return f"context failed: {metadata['context_error']}"
    failed = state.store.get(FAILED)
    return f"{failed['step']} failed: {failed['reason']}" if failed else None


async def run_chain(chain, instance: Instance, asker: GraderSteps, given: ChainInput):
    """The chain's result, or an unscored Score naming the step that failed."""
    result = await anyio.to_thread.run_sync(chain, instance, given, asker)
    if result is None:
        step, reason = asker.failures[0]
        return Score.unscored(reason=f"{step} failed", explanation=f"{step} failed: {reason}")
    return result


def labelled(results: list[dict]) -> str:
    return "\n".join(f"{r['index']}. {r['entry']} — {r['label']} ({r['score']:g})" for r in results)


@scorer(metrics=[micro(), micro_stderr(CLUSTER), macro()])
def checklist_match(data: Data, graders: Graders) -> Scorer:
    """The inferred preference decomposed into a checklist, matched against the true
    preference (precision) and the true checklist against the inference (recall)."""

    async def score(state: TaskState, target: Target) -> Score:
        problem = not_answered(state)
        if problem:
            return Score.unscored(reason=problem.split(":")[0], explanation=problem)
        inferred = state.store.get(ANSWERED)
        asker = GraderSteps({steps.INFER.name: inferred}, graders)
        counts = await run_chain(inference_chain, data.instance(state.sample_id), asker,
                                 ChainInput(prefmatcher=graders.matcher is not None))
        if isinstance(counts, Score):
            return counts
        checklist = asker.asked[steps.DECOMPOSE.name]["checklist"]
        precision = asker.asked[steps.MATCH_PRECISION.name]["results"]
        recall = asker.asked[steps.MATCH_RECALL.name]["results"]
        explanation = (f"Inferred preference: {inferred['preference']}\n\n"
                       f"Its checklist against the true preference (precision "
                       f"{counts.n_predicted_matched:g}/{counts.n_predicted}):\n\n{labelled(precision)}\n\n"
                       f"The true checklist against the inference (recall "
                       f"{counts.n_true_matched:g}/{counts.n_true}):\n\n{labelled(recall)}")
        value = {name: getattr(counts, name) or 0.0 for name in ("precision", "recall", "f1")}
        return Score(value=value, answer=inferred["preference"], explanation=explanation,
                     metadata={"counts": counts.as_dict(), "inferred_preference": inferred["preference"],
                               "inferred_checklist": checklist, "precision_matches": precision,
                               "recall_matches": recall})

    return score


@scorer(metrics=[mean(), stderr(cluster=CLUSTER)])
def judge_score(data: Data, graders: Graders) -> Scorer:
    """The grader's 1-10 score of the response against the true preference and its checklist."""

    async def score(state: TaskState, target: Target) -> Score:
        problem = not_answered(state)
        if problem:
            return Score.unscored(reason=problem.split(":")[0], explanation=problem)
        response = state.store.get(ANSWERED)
        asker = GraderSteps({steps.GENERATE.name: response}, graders)
        value = await run_chain(generation_chain, data.instance(state.sample_id), asker, ChainInput())
        if isinstance(value, Score):
            return value
        judged = asker.asked[steps.JUDGE.name]
        return Score(value=float(value), answer=response["response"],
                     explanation=f"{judged['analysis']}\n\nScore: {value:g}".strip(),
                     metadata={"judge": judged})

    return score
