"""The benchmark's evaluation steps, one module each, and the one table of them.

A step's module holds everything about it: its prompt file(s) (the release's, under
prompts/), the parameters the release sends it, how its request is filled (``ask``, an
``Ask``), how its answer is read (``parse``), how a stored output is checked (``check``),
and what the released harness (kixlab/CUPID at a8560ca) made of it: of a failed call
(``RELEASE_ON_FAILED_CALL``: "drop" the instance or score it "zero"; None where the release
has no such step) and of an answer (``release_view``, see evaluation/release.py).

``STEPS`` is the list everything else takes its steps from: the pipeline (which steps an
instance needs, whose model answers, where the record goes), aggregation (which task a
failed step fails), the stored-value checks, the per-sample export, the dry run, the
context check and the report. Adding a step is one module and one row here.

``user_simulator.py`` (the release's user simulator, asked by synthesis's dialogues and by
``--task interaction``) has no row: its answers are recorded in dialogue files, not in
instance files, and checked there (evaluation/interaction.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from . import decompose, error_type, generate, infer, judge, match, summarize

TASKS = ("inference", "generation")


@dataclass(frozen=True)
class Step:
    name: str                 # its stored name: instance files, results.json, exports
    module: ModuleType        # its prompt, parameters, request, parser and checks
    tasks: tuple[str, ...]    # the tasks whose result it enters (none: an analysis of finished results)
    role: str                 # whose model answers: "evaluated", "evaluator" or "matcher"
    per_scorer: bool          # recorded under each scorer (evaluations[scorer].steps), else once (steps)

    def check(self, output) -> str | None:
        """What is wrong with a done step's stored output, or None when it is usable."""
        if not isinstance(output, dict):
            return f"{self.name}: output {type(output).__name__} is not an object"
        problem = self.module.check(output)
        return f"{self.name}: {problem}" if problem else None

    def release_view(self, record: dict | None) -> dict | None:
        """What the release would have made of this step's first answer (or of its failed
        call): ``{"outcome": same|differs|zero|drop, "value": ..., "note": ...}``."""
        if record is None or self.module.RELEASE_ON_FAILED_CALL is None:
            return None
        raw = record.get("raw") or []
        if not raw:
            return {"outcome": self.module.RELEASE_ON_FAILED_CALL, "value": None, "note": "the call failed"}
        output = record.get("output") if record.get("status") == "done" else None
        return self.module.release_view(raw[0], output, record.get("sent") or {})


SUMMARIZE = Step("summarize", summarize, TASKS, "evaluated", False)
INFER = Step("infer", infer, ("inference",), "evaluated", False)
GENERATE = Step("generate", generate, ("generation",), "evaluated", False)
DECOMPOSE = Step("decompose", decompose, ("inference",), "evaluator", True)
MATCH_PRECISION = Step("match_precision", match, ("inference",), "matcher", True)
MATCH_RECALL = Step("match_recall", match, ("inference",), "matcher", True)
JUDGE = Step("judge", judge, ("generation",), "evaluator", True)
ERROR_TYPE = Step("error_type", error_type, (), "evaluator", True)

STEPS = (SUMMARIZE, INFER, GENERATE, DECOMPOSE, MATCH_PRECISION, MATCH_RECALL, JUDGE, ERROR_TYPE)
BY_NAME = {step.name: step for step in STEPS}


def of_task(task: str) -> tuple[Step, ...]:
    """The steps whose failure fails ``task`` ("inference" or "generation")."""
    return tuple(step for step in STEPS if task in step.tasks)


def prompts_of(task: str, *, summaries: bool, preference_given: bool, prefmatcher: bool) -> list[str]:
    """The prompt files a task and setting send, for run.json's prompt versions."""
    prompts = [summarize.PROMPT] if summaries else []
    if task in ("inference", "both") and not preference_given:
        prompts += [infer.PROMPT_FROM_SUMMARIES if summaries else infer.PROMPT, decompose.PROMPT,
                    match.PROMPT_PREFMATCHER if prefmatcher else match.PROMPT]
    if task in ("generation", "both"):
        prompts += [generate.PROMPT_GIVEN_PREFERENCE if preference_given else
                    generate.PROMPT_FROM_SUMMARIES if summaries else generate.PROMPT, judge.PROMPT]
    return prompts
