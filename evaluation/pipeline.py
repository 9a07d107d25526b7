"""One instance through the benchmark: (summarize →) infer → decompose → match ×2, and
generate → judge (the aggregate over a run is aggregate.py's).

Steps already done in the instance's file are read back, not asked again; every finished
step is saved at once. A failed step is recorded with its reason and raw answers and makes
the instance count as failed; nothing is scored 0 in its place.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterable, Sequence

from cupid.utils.benchmark.answers import release as release_parsing
from cupid.evaluation import steps as S
from cupid.evaluation.aggregate import InstanceOutcome, release_outcomes_of_record
from cupid.evaluation.prompt_layouts import format_session_log, relevant_positions
from cupid.evaluation.metrics import InferenceCounts
from cupid.evaluation.store import InstanceRecord, RunStore, now
from cupid.evaluation.stored_values import record_problems, step_output_problem
from cupid.utils.benchmark.dataset import Instance, Session
from cupid.utils.io import atomic_write_json, read_json
from cupid.utils.benchmark.decomposer import decompose
from cupid.utils.models.batch import BatchDeferred, BatchRunner, run_in_rounds
from cupid.utils.models.errors import ModelConfigurationError, RunCancelled
from cupid.utils.models.model import Model
from cupid.utils.models.retry import cancel_all
from cupid.utils.benchmark.step_runner import StepFailed, StepResult

log = logging.getLogger("cupid.evaluation")

TASKS = ("inference", "generation", "both")


def select_sessions(instance: Instance, setting: str) -> tuple[Session, ...]:
    """The prior sessions a setting shows the model. Oracle (§4.1): only the sessions whose
    preference equals the current one, in their original order."""
    if setting == "oracle":
        keep = set(relevant_positions(instance))
        return tuple(s for i, s in enumerate(instance.prior_interactions, start=1) if i in keep)
    return instance.prior_interactions


def scorer_name(evaluator: Model, matcher: Model) -> str:
    """The evaluator's label, with the matcher's when another model matches; a label carries
    the user's generation overrides, so overridden scores never mix with the default ones."""
    return evaluator.label if matcher is evaluator else f"{evaluator.label}+{matcher.label}"


class Evaluation:
    """Evaluates instances of one run directory with one model, evaluator and matcher."""

    def __init__(self, *, model: Model, evaluator: Model, matcher: Model | None = None,
                 store: RunStore, task: str = "inference", setting: str = "default",
                 inner_workers: int = 4):
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}")
        if setting == "oracle_preference" and task != "generation":
            raise ValueError("the oracle_preference setting applies to the generation task only")
        self.model = model
        self.evaluator = evaluator
        self.matcher = matcher or evaluator
        self.use_prefmatcher = matcher is not None and matcher is not evaluator
        self.store = store
        self.task = task
        self.setting = setting
        self.scorer = scorer_name(evaluator, self.matcher)
        # Overlap inside an instance: the generation chain runs beside the inference chain,
        # and the two match directions and the session summaries run side by side. Leaves
        # (single calls) have their own pool so a chain waiting on them can never starve it.
        self._chains = ThreadPoolExecutor(max_workers=max(1, inner_workers),
                                          thread_name_prefix="cupid-chain")
        self._leaves = ThreadPoolExecutor(max_workers=max(2, 2 * inner_workers),
                                          thread_name_prefix="cupid-leaf")
        self._closed = False

    def close(self, wait: bool = True) -> None:
        """Stop the inner pools; ``wait=False`` (a stopping run) leaves hung calls behind."""
        self._closed = True
        self._chains.shutdown(wait=wait, cancel_futures=not wait)
        self._leaves.shutdown(wait=wait, cancel_futures=not wait)

    def _submit(self, pool: ThreadPoolExecutor, fn: Callable, *args) -> Future:
        """``pool.submit``, except that an instance still being worked on when the run
        stops (its pools shut) ends with RunCancelled, as its next model call would."""
        try:
            return pool.submit(fn, *args)
        except RuntimeError:
            if self._closed:
                raise RunCancelled("the run is stopping") from None
            raise

    def needed_steps(self) -> list[tuple[str, str | None]]:
        """(step, scorer or None) that this task and setting need for an instance."""
        steps: list[tuple[str, str | None]] = []
        if self.setting == "summary":
            steps.append(("summarize", None))
        if self.task in ("inference", "both"):
            steps += [("infer", None), ("decompose", self.scorer), ("match_precision", self.scorer),
                      ("match_recall", self.scorer)]
        if self.task in ("generation", "both"):
            steps += [("generate", None), ("judge", self.scorer)]
        return steps

    def is_finished(self, data: dict) -> bool:
        """Whether an instance file already holds every step this invocation needs."""
        if data.get("skipped"):
            return True
        for name, scorer in self.needed_steps():
            steps = data.get("steps", {}) if scorer is None else \
                (data.get("evaluations", {}).get(scorer) or {}).get("steps", {})
            if (steps.get(name) or {}).get("status") != "done":
                return False
        return not self.stored_problems(data)

    def stored_problems(self, data: dict) -> list[str]:
        """The values of an instance file this run would use that no parser could have
        produced (stored_values.py): their steps are run again."""
        return record_problems(data, self.scorer)

    # -- step bookkeeping ------------------------------------------------------------------
    def _run(self, record: InstanceRecord, name: str, call: Callable[[int], StepResult],
             scorer: str | None = None) -> dict:
        """Return a done step's output, or run ``call(first_variant)`` and record it. A step
        that failed in an earlier run is asked again from where its attempts stopped."""
        existing = record.step(name, scorer)
        if existing and existing.get("status") == "done":
            problem = step_output_problem(name, existing.get("output"))
            if problem is None:
                return existing["output"]
            # Asked again from the first variant: the cache replays the answer once paid
            # for, so a damaged file heals without a new call.
            log.warning("%s: stored %s", record.path, problem)
            existing = None
        first_variant = (existing or {}).get("next_variant", 0)
        try:
            result = call(first_variant)
        except StepFailed as exc:
            step = {"status": "failed", "model": None, "prompt_version": None,
                    "output": None, "raw": exc.raw, "error": exc.reason,
                    "attempts": exc.attempts, "usage": None,
                    "next_variant": exc.next_variant, "sent": exc.sent,
                    "latency_s": exc.latency_s, "finished_at": now()}
            if exc.truncated:
                step["truncated"] = exc.truncated
            step["release"] = self._release_view(name, step)
            record.set_step(name, step, scorer)
            log.warning("%s: step %s failed: %s", record.data["instance_id"], name, exc.reason)
            raise _ChainFailed(name, exc.reason) from exc
        step = {"status": "done", "model": result.model,
                "prompt_version": result.prompt_version, "output": result.output,
                "raw": result.raw, "error": None, "attempts": result.attempts,
                "usage": result.usage, "sent": result.sent, "latency_s": result.latency_s,
                "finished_at": now()}
        if result.truncated:  # answers cut at the token limit (results.json: truncated_answers)
            step["truncated"] = result.truncated
        step["release"] = self._release_view(name, step)
        record.set_step(name, step, scorer)
        return result.output

    def _release_view(self, name: str, step: dict) -> dict | None:
        if self.setting != "default":
            return None  # the release has only the default setting
        return release_parsing.step_view(name, step, prefmatcher=self.use_prefmatcher)

    def _release_outcomes(self, record: InstanceRecord) -> dict:
        with record.lock:
            return release_outcomes_of_record(record.data, self.scorer)

    def _parallel(self, *calls: Callable[[], object]) -> list:
        """Run calls side by side; collect every chain failure instead of the first only."""
        futures = [self._submit(self._leaves, call) for call in calls]
        results, failures = [], []
        for future in futures:
            try:
                results.append(future.result())
            except _ChainFailed as exc:
                failures.extend(exc.failures)
                results.append(None)
        if failures:
            raise _ChainFailed.many(failures)
        return results

    # -- history ---------------------------------------------------------------------------
    def _history(self, instance: Instance, record: InstanceRecord) -> tuple[str, bool]:
        sessions = select_sessions(instance, self.setting)
        if self.setting != "summary":
            return format_session_log(sessions), False
        summaries = self._run(record, "summarize", lambda v: self._summaries(sessions, v))
        return S.format_summaries(summaries["summaries"]), True

    def _summaries(self, sessions: Sequence[Session], first_variant: int = 0) -> StepResult:
        """Each session summarized once per run directory and shared by every instance
        and both tasks (the three instances of a persona share most sessions)."""
        def one(session: Session) -> tuple[dict, StepResult | None]:
            text = format_session_log([session])
            path = self.store.summary_path(text)
            with self.store.summary_lock(text):
                if path.exists():
                    return read_json(path)["summary"], None
                result = S.summarize_session(self.model, session, first_variant=first_variant)
                summary = result.output["summaries"][0]
                atomic_write_json(path, {"session": text, "summary": summary,
                                         "model": result.model, "raw": result.raw,
                                         "prompt_version": result.prompt_version})
                return summary, result

        futures = [self._submit(self._leaves, one, s) for s in sessions]
        summaries, raw, usage, reasons = [], [], {"prompt_tokens": 0, "completion_tokens": 0}, []
        next_variants: list[int] = []
        for future in futures:
            try:
                summary, result = future.result()
            except StepFailed as exc:
                reasons.append(exc.reason)
                raw.extend(exc.raw)
                next_variants.append(exc.next_variant)
                continue
            summaries.append(summary)
            if result is not None:
                raw.extend(result.raw)
                for k in usage:
                    usage[k] += result.usage[k]
        if reasons:
            raise StepFailed(f"{len(reasons)} of {len(sessions)} sessions: {reasons[0]}", raw, len(raw),
                             next_variant=max(next_variants))
        return StepResult(output={"summaries": summaries}, raw=raw, attempts=len(raw),
                          model=self.model.name, prompt_version=S.prompt_version("summarize"),
                          usage=usage)

    # -- the two tasks -----------------------------------------------------------------------
    def _inference(self, instance: Instance, record: InstanceRecord, history: str,
                   from_summaries: bool) -> InferenceCounts:
        truth = instance.current_contextual_preference
        inferred = self._run(record, "infer", lambda v: S.infer_preference(
            self.model, history, instance.current_request, from_summaries=from_summaries,
            first_variant=v))
        preference = inferred["preference"]
        checklist = self._run(record, "decompose", lambda v: decompose(
            self.evaluator, preference, first_variant=v), self.scorer)["checklist"]
        precision, recall = self._parallel(
            lambda: self._run(record, "match_precision", lambda v: S.match_checklist(
                self.matcher, truth, checklist, prefmatcher=self.use_prefmatcher,
                first_variant=v), self.scorer),
            lambda: self._run(record, "match_recall", lambda v: S.match_checklist(
                self.matcher, preference, instance.current_checklist,
                prefmatcher=self.use_prefmatcher, first_variant=v), self.scorer),
        )
        counts = InferenceCounts.from_scores([r["score"] for r in precision["results"]],
                                             [r["score"] for r in recall["results"]])
        record.set_scorer_field(self.scorer, "inference", counts.as_dict())
        return counts

    def _generation(self, instance: Instance, record: InstanceRecord, history: str,
                    from_summaries: bool) -> float:
        truth = instance.current_contextual_preference
        if self.setting == "oracle_preference":
            call = lambda v: S.generate_with_preference(self.model, truth, instance.current_request,
                                                        first_variant=v)
        else:
            call = lambda v: S.generate_response(self.model, history, instance.current_request,
                                                 from_summaries=from_summaries, first_variant=v)
        response = self._run(record, "generate", call)["response"]
        judgement = self._run(record, "judge", lambda v: S.judge_response(
            self.evaluator, truth, instance.current_checklist, instance.current_request, response,
            first_variant=v), self.scorer)
        record.set_scorer_field(self.scorer, "generation", {"score": judgement["score"]})
        return judgement["score"]

    # -- one instance ------------------------------------------------------------------------
    def evaluate(self, instance: Instance) -> InstanceOutcome:
        """Evaluate one instance holding its lock; an instance another process holds is not
        waited for: its outcome is "busy"."""
        lock = self.store.instance_lock(instance.instance_id)
        if not lock.acquire(blocking=False):
            log.info("%s: in progress in another process; skipped for now", instance.instance_id)
            return InstanceOutcome(instance.instance_id, instance.instance_type, "busy")
        started = time.perf_counter()
        try:
            outcome = self._evaluate(instance)
        finally:
            lock.release()
        log.info("%s: %s in %.2fs%s", instance.instance_id, outcome.status,
                 time.perf_counter() - started,
                 "".join(f"; {step} failed: {reason}" for step, reason in outcome.failures))
        return outcome

    def _evaluate(self, instance: Instance) -> InstanceOutcome:
        outcome = InstanceOutcome(instance.instance_id, instance.instance_type, "done")
        record = self.store.load(instance, self.setting, self.model.name)
        outcome.already_done = self.is_finished(record.data)
        record.ensure_scorer(self.scorer, self.evaluator.label, self.matcher.label)
        if self.setting == "oracle" and not relevant_positions(instance):
            outcome.status, outcome.skip_reason = "skipped", "no prior session has the current preference"
            record.set_field("skipped", outcome.skip_reason)
            return outcome
        record.save()
        try:
            history, from_summaries = ("", False) if self.setting == "oracle_preference" \
                else self._history(instance, record)
        except _ChainFailed as exc:
            outcome.status, outcome.failures = "failed", exc.failures
            return outcome
        chains: list[Callable[[], object]] = []
        if self.task in ("inference", "both"):
            chains.append(lambda: self._inference(instance, record, history, from_summaries))
        if self.task in ("generation", "both"):
            chains.append(lambda: self._generation(instance, record, history, from_summaries))
        # The last chain runs beside in the chain pool; the first in this thread.
        side = self._submit(self._chains, chains[-1]) if len(chains) > 1 else None
        results = []
        for i, chain in enumerate(chains):
            try:
                results.append(side.result() if side is not None and i == len(chains) - 1
                               else chain())
            except _ChainFailed as exc:
                outcome.failures.extend(exc.failures)
                results.append(None)
        for chain_name, result in zip([c for c in ("inference", "generation")
                                       if self.task in (c, "both")], results):
            if chain_name == "inference":
                outcome.inference = result
            else:
                outcome.generation_score = result
        if outcome.failures:
            outcome.status = "failed"
        outcome.release = self._release_outcomes(record)
        if outcome.release:
            record.set_scorer_field(self.scorer, "release", outcome.release)
        return outcome


class _ChainFailed(Exception):
    def __init__(self, step: str, reason: str):
        super().__init__(f"{step}: {reason}")
        self.failures = [(step, reason)]

    @classmethod
    def many(cls, failures: list[tuple[str, str]]) -> "_ChainFailed":
        exc = cls(*failures[0])
        exc.failures = list(failures)
        return exc


# ---------------------------------------------------------------------------------------
# Batch mode (``--batch``): the pass of utils/models/batch.py's driver
# ---------------------------------------------------------------------------------------
def run_batch_rounds(make_evaluation: Callable[[], object], instances: Iterable,
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
        evaluation = make_evaluation()
        deferred: list = []

        def one(instance) -> None:
            try:
                evaluation.evaluate(instance)
            except BatchDeferred:
                deferred.append(instance)
            except (ModelConfigurationError, RunCancelled):
                raise
            except Exception as exc:  # the online pass records it against the instance
                log.warning("%s: %s in a batch round; recorded by the online pass",
                            instance.instance_id, exc)

        pool = ThreadPoolExecutor(max_workers=max(1, n_workers))
        try:
            list(pool.map(one, unfinished))
        except BaseException as exc:
            # A stop (Ctrl-C, SIGTERM, SIGHUP) or an error: the caller is not made to wait
            # for calls in flight; a hung one would hold it for its timeout.
            if isinstance(exc, KeyboardInterrupt):
                cancel_all()
            pool.shutdown(wait=False, cancel_futures=True)
            evaluation.close(wait=False)
            raise
        pool.shutdown()
        evaluation.close()  # waits for side chains still deferring their calls
        if runner.pending:
            waiting = {id(i) for i in deferred}
            unfinished = [i for i in unfinished if id(i) in waiting] or unfinished

    return run_in_rounds(one_pass, runner, models)
