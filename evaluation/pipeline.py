"""One instance through the benchmark: its two chains (evaluation/chains.py; the summaries
first in the summary setting) asked through ``InstanceSteps``, which reads a step back from the
instance's file when it is done there, else asks its model and records the answer at once; and
the batch-mode pass. A failed step is recorded with its reason and raw answers and makes the
instance count as failed; nothing is scored 0 in its place.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterable, Sequence

from . import steps
from .chains import CHAINS, STOPS, ChainInput, StepAsker, needed_steps, scorer_name
from .aggregate import InstanceOutcome, record_problems, release_outcomes_of_record
from .session_recall import kept_shown, shown_record
from .strategies import Strategy
from .steps import summarize
from .steps.ask import Ask
from .steps.layouts import format_session_log
from .store import InstanceRecord, RunStore, now, step_record
from ..utils.dataset import Instance, Session
from ..utils.executor import iter_with_progress
from ..utils.io import atomic_write_json, read_json
from ..utils.models.reask import Answer, UnusableAnswer
from ..utils.models.batch import BatchDeferred, BatchRunner, run_in_rounds
from ..utils.models.call_errors import AnswerWithheld, ModelCallFailed, RunCancelled
from ..utils.models.model import Model
from ..utils.models.retry import CANCEL, cancel_all
from ..utils.prompts import load_prompt
from ..utils.redact import redact

log = logging.getLogger("cupid.evaluation")

# ---------------------------------------------------------------------------------------
# The pipeline
# ---------------------------------------------------------------------------------------
class Pipeline:
    """Evaluates instances of one run directory with one model, evaluator and matcher."""

    def __init__(self, *, model: Model, evaluator: Model, matcher: Model | None = None,
                 store: RunStore, task: str, setting: Strategy, inner_workers: int = 4):
        self.models = {"evaluated": model, "evaluator": evaluator, "matcher": matcher or evaluator}
        self.prefmatcher = matcher is not None and matcher is not evaluator
        self.store, self.task, self.setting = store, task, setting
        self.scorer = scorer_name(evaluator, self.models["matcher"])
        self.needed = needed_steps(task, setting)
        # Overlap inside an instance: the generation chain runs beside the inference chain,
        # and the two match directions and the session summaries run side by side. Leaves
        # (single calls) have their own pool so a chain waiting on them can never starve it.
        self._chains = ThreadPoolExecutor(max_workers=max(1, inner_workers), thread_name_prefix="cupid-chain")
        self._leaves = ThreadPoolExecutor(max_workers=max(2, 2 * inner_workers), thread_name_prefix="cupid-leaf")
        self._closed = False

    def close(self, wait: bool = True) -> None:
        """Stop the inner pools; ``wait=False`` (a stopping run) leaves hung calls behind."""
        self._closed = True
        self._chains.shutdown(wait=wait, cancel_futures=not wait)
        self._leaves.shutdown(wait=wait, cancel_futures=not wait)

    def submit(self, pool: ThreadPoolExecutor, fn: Callable, *args) -> Future:
        """``pool.submit``, except that an instance still being worked on when the run stops
        (its pools shut) ends with RunCancelled, as its next model call would."""
        try:
            return pool.submit(fn, *args)
        except RuntimeError:
            if self._closed:
                raise RunCancelled("the run is stopping") from None
            raise

    def is_finished(self, data: dict) -> bool:
        """Whether an instance file already holds every step this invocation needs."""
        if data.get("skipped"):
            return True
        return (all(step_record(data, step, self.scorer).get("status") == "done" for step in self.needed)
                and not record_problems(data, self.scorer))

    # -- one instance ----------------------------------------------------------------------
    def run(self, instance: Instance) -> InstanceOutcome:
        """Evaluate one instance holding its lock (one another process holds is "busy", not
        waited for). An unexpected error is recorded as the instance's failure, never lost."""
        lock = self.store.instance_lock(instance.instance_id)
        if not lock.acquire(blocking=False):
            log.info("%s: in progress in another process; skipped for now", instance.instance_id)
            return InstanceOutcome(instance.instance_id, instance.instance_type, "busy")
        started = time.perf_counter()
        outcome = InstanceOutcome(instance.instance_id, instance.instance_type, "done")
        try:
            record = self.store.load(instance, self.setting.name, self.models["evaluated"].name)
            outcome.already_done = self.is_finished(record.data)
            record.ensure_scorer(self.scorer, self.models["evaluator"].label, self.models["matcher"].label)
            asker = InstanceSteps(self, record)
            # A finished instance's strategy is not asked again: its file says what it did.
            outcome.skip_reason = record.data.get("skipped") if outcome.already_done \
                else self._skip_reason(instance, record, asker)
            if outcome.skip_reason:
                outcome.status = "skipped"
                record.set_field("skipped", outcome.skip_reason)
            else:
                given = None if asker.failures else self._chain_input(instance, record, asker)
                if given is not None:
                    tasks = [t for t in ("inference", "generation") if self.task in (t, "both")]
                    # The last chain runs beside, in the chain pool; the first in this thread.
                    side = self.submit(self._chains, CHAINS[tasks[-1]], instance, given, asker) \
                        if len(tasks) > 1 else None
                    # Each chain's result is recorded as soon as it is there.
                    self._keep(record, outcome, tasks[0], CHAINS[tasks[0]](instance, given, asker))
                    if side is not None:
                        self._keep(record, outcome, tasks[-1], side.result())
                outcome.failures = asker.failures
                outcome.status = "failed" if outcome.failures else "done"
                with record.lock:
                    outcome.release = release_outcomes_of_record(record.data, self.scorer)
                if outcome.release:
                    record.set_field("release", outcome.release, self.scorer)
        except STOPS:
            raise
        except Exception as exc:
            if CANCEL.is_set():  # the run is stopping and its pools are shut: left for a rerun
                raise RunCancelled(f"{instance.instance_id}: the run is stopping") from exc
            log.exception("%s: unexpected error", instance.instance_id)
            outcome.status, outcome.failures = "failed", [("internal", redact(f"{type(exc).__name__}: {exc}"))]
        finally:
            lock.release()
        log.info("%s: %s in %.2fs%s", instance.instance_id, outcome.status, time.perf_counter() - started,
                 "".join(f"; {step} failed: {reason}" for step, reason in outcome.failures))
        return outcome

    def _keep(self, record: InstanceRecord, outcome: InstanceOutcome, task: str, result) -> None:
        if result is None:
            return
        if task == "inference":
            outcome.inference = result
            record.set_field("inference", result.as_dict(), self.scorer)
        else:
            outcome.generation_score = result
            record.set_field("generation", {"score": result}, self.scorer)

    def _skip_reason(self, instance: Instance, record: InstanceRecord, asker: "InstanceSteps") -> str | None:
        """The strategy's reason to skip the instance; its error is the instance's failure."""
        try:
            return self.setting.skip_reason(instance)
        except STOPS:
            raise
        except Exception as exc:  # the strategy's own code (a user's) raised
            self._strategy_failed(record, asker, exc)
            return None

    @staticmethod
    def _strategy_failed(record: InstanceRecord, asker: "InstanceSteps", exc: Exception) -> None:
        reason = redact(f"{type(exc).__name__}: {exc}")
        record.set_field("shown", {"positions": None, "history_tokens": None, "error": reason})
        asker.failures.append(("context", reason))

    def _chain_input(self, instance: Instance, record: InstanceRecord, asker: "InstanceSteps") -> ChainInput | None:
        """What the chains show, with the sessions the strategy kept recorded in the instance
        file (session_recall.py); None when the strategy or the summaries it needs failed
        (recorded as the instance's failure)."""
        if self.setting.preference_given:
            record.save()
            return ChainInput(preference_given=True, prefmatcher=self.prefmatcher)
        # What the strategy returned for this instance before: shown again, not asked again.
        shown = kept_shown(self.setting, instance, record.data)
        if shown is None:
            try:
                shown = self.setting.shown(instance)
            except STOPS:  # an LLM-backed strategy's model refused its key, the run is stopping...
                raise
            except Exception as exc:  # the strategy's own code (a user's) raised
                self._strategy_failed(record, asker, exc)
                return None
        record.set_field("shown", shown_record(shown, self.setting.summaries))
        if not self.setting.summaries:
            return ChainInput(shown.text, prefmatcher=self.prefmatcher)
        summaries = asker.summaries(shown.sessions)
        if summaries is None:
            return None
        return ChainInput(summarize.history(summaries["summaries"]), from_summaries=True,
                     prefmatcher=self.prefmatcher)


def failure_reason(exc: UnusableAnswer | ModelCallFailed) -> str:
    """A failed step's reason, as its record and results.json say it (a withheld answer's in
    the provider's words)."""
    if isinstance(exc, UnusableAnswer):
        return f"unparseable answer: {exc.reason}"
    return f"{type(exc).__name__}: {exc.reason}"


class InstanceSteps(StepAsker):
    """The pipeline's ``StepAsker`` over one instance's record: a step done there is read
    back; any other is asked and its record written at once. ``failures``: (step, reason)
    of the steps that failed in this invocation."""

    def __init__(self, pipeline: Pipeline, record: InstanceRecord):
        self.pipeline, self.record = pipeline, record
        self.failures: list[tuple[str, str]] = []

    def _recorded(self, step: steps.Step) -> tuple[dict | None, int]:
        """A usable done output (or None) and where new attempts start."""
        scorer = self.pipeline.scorer if step.per_scorer else None
        existing = self.record.step(step.name, scorer)
        if existing and existing.get("status") == "done":
            problem = step.check(existing.get("output"))
            if problem is None:
                return existing["output"], 0
            # Asked again from the first variant: the cache replays the answer once paid
            # for, so a damaged file heals without a new call.
            log.warning("%s: stored %s", self.record.path, problem)
            return None, 0
        return None, (existing or {}).get("next_variant", 0)

    def __call__(self, step: steps.Step, ask: Ask) -> dict | None:
        output, first_variant = self._recorded(step)
        if output is not None:
            return output
        model = self.pipeline.models[step.role]
        try:
            answer = ask.answer(model, first_variant=first_variant)
        except (UnusableAnswer, ModelCallFailed) as exc:
            answer = exc.answer or Answer(next_variant=first_variant)
            # The answers received, and the call that failed for good (a withheld one is an answer).
            attempts = len(answer.raws) + (isinstance(exc, ModelCallFailed) and not isinstance(exc, AnswerWithheld))
            return self.failed(step, answer, failure_reason(exc), attempts, model)
        self.write(step, {"status": "done", "model": model.name, "prompt_version": answer.sent["prompt_version"],
                          "output": answer.value, "raw": answer.raws, "error": None,
                          "attempts": answer.attempts, "usage": answer.usage}, answer)
        return answer.value

    def together(self, *calls: Callable[[], dict | None]) -> list[dict | None]:
        futures = [self.pipeline.submit(self.pipeline._leaves, call) for call in calls]
        return [future.result() for future in futures]

    def failed(self, step: steps.Step, answer: Answer, reason: str, attempts: int, model: Model) -> None:
        # Its usage is what its answers were billed, withheld or unusable ones too.
        self.write(step, {"status": "failed", "model": model.name, "prompt_version": None, "output": None,
                          "raw": answer.raws, "error": reason, "attempts": attempts, "usage": answer.usage,
                          "next_variant": answer.next_variant}, answer)
        log.warning("%s: step %s failed: %s", self.record.data["instance_id"], step.name, reason)
        self.failures.append((step.name, reason))

    def write(self, step: steps.Step, entry: dict, answer: Answer, flagged: str | None = None) -> None:
        entry.update({"sent": answer.sent or None, "latency_s": answer.latency_s, "finished_at": now()})
        # How each raw answer ended, when one did not "stop" (results.json: answer_endings), and
        # the ending that marks the scores read from the value (filtered, refused).
        if any(ending != "stop" for ending in answer.endings):
            entry["endings"] = answer.endings
        flagged = flagged or answer.flagged
        if entry["status"] == "done" and flagged:
            entry["flagged"] = flagged
        scorer = self.pipeline.scorer if step.per_scorer else None
        earlier = self.record.step(step.name, scorer) or {}
        if earlier.get("status") == "failed" and isinstance(earlier.get("usage"), dict):
            # An earlier invocation's failed attempts were billed too: the step's usage keeps them.
            entry["usage"] = {k: entry["usage"].get(k, 0) + earlier["usage"].get(k, 0)
                              for k in dict.fromkeys([*entry["usage"], *earlier["usage"]])}
        # What the release would have made of it; the release has only the default setting.
        entry["release"] = step.release_view(entry) if self.pipeline.setting.name == "default" else None
        self.record.set_step(step.name, entry, scorer)

    def summaries(self, sessions: Sequence[Session]) -> dict | None:
        """The summarize step: each session summarized once per run directory and shared by
        every instance and both tasks (the three instances of a persona share most
        sessions); recorded in the instance file as one step."""
        output, first_variant = self._recorded(steps.SUMMARIZE)
        if output is not None:
            return output
        model = self.pipeline.models["evaluated"]
        futures = [self.pipeline.submit(self.pipeline._leaves, self._summary, s, first_variant)
                   for s in sessions]
        total, summaries, reasons, flagged = Answer(next_variant=first_variant), [], [], None
        for future in futures:
            try:
                summary, answer = future.result()
            except (UnusableAnswer, ModelCallFailed) as exc:
                answer = exc.answer or Answer(next_variant=first_variant)
                reasons.append(failure_reason(exc))
                total.next_variant = max(total.next_variant, answer.next_variant)
            else:
                summaries.append(summary)
            if answer is not None:
                total.raws += answer.raws
                total.endings += answer.endings
                flagged = flagged or answer.flagged
                for key, tokens in answer.usage.items():
                    total.usage[key] = total.usage.get(key, 0) + tokens
        if reasons:
            return self.failed(steps.SUMMARIZE, total, f"{len(reasons)} of {len(sessions)} sessions: "
                                                       f"{reasons[0]}", len(total.raws), model)
        total.value = {"summaries": summaries}
        self.write(steps.SUMMARIZE, {"status": "done", "model": model.name,
                                     "prompt_version": load_prompt(summarize.PROMPT).version,
                                     "output": total.value, "raw": total.raws, "error": None,
                                     "attempts": len(total.raws), "usage": total.usage}, total, flagged)
        return total.value

    def _summary(self, session: Session, first_variant: int) -> tuple[dict, Answer | None]:
        store = self.pipeline.store
        text = format_session_log([session])
        path = store.summary_path(text)
        with store.summary_lock(text):
            if path.exists():
                return read_json(path)["summary"], None
            model = self.pipeline.models["evaluated"]
            answer = summarize.ask(session).answer(model, first_variant=first_variant)
            summary = answer.value["summaries"][0]
            atomic_write_json(path, {"session": text, "summary": summary, "model": model.name,
                                     "raw": answer.raws, "prompt_version": answer.sent["prompt_version"]})
            return summary, answer


# ---------------------------------------------------------------------------------------
# Batch mode (``--batch``): the pass of utils/models/batch.py's driver
# ---------------------------------------------------------------------------------------
def run_batch_rounds(make_pipeline: Callable[[], Pipeline], instances: Iterable,
                     runner: BatchRunner, models: Sequence[Model], n_workers: int = 4) -> int:
    """Run passes and rounds until no call is deferred; returns the number of batch rounds.

    Each pass evaluates every unfinished instance with the models' calls deferred to the
    batch runner: steps whose answers are cached or recorded go on, and each chain stops at
    its first call not yet answered. With the task ``both``: round 1 infer + generate,
    round 2 decompose + judge, round 3 the two matches (a re-ask after an unparseable answer
    adds a round). When no call is left to defer, the caller's ordinary online pass writes
    the results from the cache, and asks online only what failed in its batch."""
    unfinished = list(instances)

    def one_pass() -> None:
        nonlocal unfinished
        pipeline = make_pipeline()
        deferred: list = []

        def one(instance) -> None:
            try:
                pipeline.run(instance)
            except BatchDeferred:
                deferred.append(instance)

        try:
            list(iter_with_progress(one, unfinished, n_workers=n_workers, show=False))
        except BaseException as exc:
            # A stop (Ctrl-C, SIGTERM, SIGHUP) or an error: the caller is not made to wait
            # for calls in flight; a hung one would hold it for its timeout.
            if isinstance(exc, KeyboardInterrupt):
                cancel_all()
            pipeline.close(wait=False)
            raise
        pipeline.close()  # waits for side chains still deferring their calls
        if runner.pending:
            waiting = {id(i) for i in deferred}
            unfinished = [i for i in unfinished if id(i) in waiting] or unfinished

    return run_in_rounds(one_pass, runner, models)
