"""Batch mode behind the seam: calls answered through the providers' batch APIs at the
batch price (config.BATCH_DISCOUNT of the online price). What a user sees (rounds, resume,
what happens to a request that fails in its batch): docs/batch_and_costs.md.

How it works with the pipeline, unchanged: a model whose ``batch_runner`` is a ``BatchRunner``
does not send a request that misses the response cache; the seam hands it to the runner
(``defer``), which raises ``BatchDeferred`` out of the step. The caller runs every
instance this way (a round), then ``run_round`` submits what was collected (one batch per
endpoint and key, split at ``max_items``), waits, and puts each answer into the response
cache. The next round replays those answers from the cache and collects the next step's
calls. ``run_in_rounds`` is that driver for both pipelines; they say what a pass is
(evaluation/pipeline.py ``run_batch_rounds``, synthesis/scheduler.py ``run_batched``).

Every submitted batch is written to the run directory's ``batches.json`` as soon as the
provider accepts it, and written fetched only once its answers are in the response cache
on disk: when the cache could not write them (they live in this process's memory), a rerun
fetches the batch again (free) rather than submit its requests again. An item refused a
parameter the model does not take (``Model.parameter_adaptation``, the rule online) is
learned (adaptations.py) and submitted again, adapted, in the next round.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TextIO

from ... import config
from .. import events
from .model import Model
from .request import Completion, Request
from .retry import status_code
from ..io import atomic_write_json
from .batch_state import SUBMITTED_FIELDS, read_state


log = logging.getLogger("cupid.batch")

MAX_ROUNDS = 20


class BatchDeferred(Exception):
    """Raised by the seam for a call that will be answered by the next batch round.
    Not a ModelError: steps and the pipeline let it pass without recording anything."""


class Unanswered(str):
    """Why a batch item has no answer when its batch ended before answering it (failed,
    cancelled, expired), as opposed to an item that failed on its own: the runner submits
    it again."""


class BatchItemError(Exception):
    """An item of a batch that the provider answered with an HTTP error, shaped as the
    provider's SDK raises that error online (``status_code``; ``body`` as the SDK gives it),
    so that the model's ``parameter_adaptation`` reads it with the rule it applies online.
    A refused parameter is learned and the item submitted again, adapted; any other error
    is asked online."""

    def __init__(self, reason: str, status_code: int | None, body: Any = None) -> None:
        super().__init__(reason)
        self.status_code = status_code
        self.body = body


class BatchAdapter:
    """A provider's batch API for ``model`` (``Model.batch_adapter``): ``line`` (one request
    as the provider takes it), ``submit`` (lines -> batch id), ``poll`` (-> ended, status,
    items done, items in all) and ``fetch`` (-> custom id: its Completion, or an Unanswered,
    a BatchItemError or the reason it failed). A batch that ended in one of
    ``ended_early_states`` did not answer every item: the runner submits the rest again."""

    ended_early_states: tuple[str, ...] = ()

    def __init__(self, model: Any) -> None:
        self.model = model
        self.provider = model.provider

    def ended_early(self, status: str) -> bool:
        return status in self.ended_early_states


# ---------------------------------------------------------------------------------------
# The runner
# ---------------------------------------------------------------------------------------
class BatchRunner:
    """Collects deferred calls, submits them as batches, waits, and fills the cache."""

    def __init__(self, state_path: str | Path, *, poll_interval: float | None = None,
                 max_items: int | None = None, out: TextIO | None = None) -> None:
        self.state_path = Path(state_path)
        self.poll_interval = config.BATCH_POLL_INTERVAL if poll_interval is None else poll_interval
        self.max_items = max_items or config.BATCH_MAX_ITEMS
        self.max_bytes = config.BATCH_MAX_BYTES
        self.out = out  # None: its lines are events (utils/events.py)
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[Model, Request]] = {}
        self.closed = False
        self.submitted_items = 0
        self.rounds = 0
        # This invocation's work, for the summary and run.json (``counts``).
        self._counts = {"batches_submitted": 0, "items_resubmitted": 0, "items_answered": 0,
                        "items_failed": 0, "items_adapted": 0, "batches_resumed": 0,
                        "batches_lost": 0}
        self.state, warnings = read_state(self.state_path)
        for warning in warnings:
            self._say(warning, "warning")
        # Keys whose batch item failed are asked online, also by a run started again after
        # a kill: batches.json keeps them. A key a batch left unanswered (the batch ended
        # failed, cancelled or expired, or the provider forgot it) is submitted once more,
        # then asked online.
        self._online: set[str] = set()
        self._unanswered_once: set[str] = set()
        # The parameters each key was refused in a batch and is now sent without (or renamed).
        self._adapted: dict[str, set[str]] = {}
        # Batches fetched whose answers the response cache could not write: unfetched on disk.
        self._answers_not_kept: set[str] = set()
        for entry in self.state["batches"]:
            self._online.update(entry.get("failed_keys", ()))
            for key in entry.get("unanswered_keys", ()):
                (self._online if key in self._unanswered_once else self._unanswered_once).add(key)

    # -- called by the seam ---------------------------------------------------------------
    def defer(self, model: Model, request: Request, key: str | None) -> None:
        """Raise BatchDeferred for a call the next round answers; return to call online."""
        if self.closed or key is None or key in self._online or model.batch_adapter() is None:
            return
        with self._lock:
            self._pending[key] = (model, request)
        raise BatchDeferred(f"{model.name}: answered by the next batch round")

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    # -- rounds -----------------------------------------------------------------------------
    def run_round(self) -> None:
        """Submit every deferred call, wait for the batches, and cache their answers."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return
        self.rounds += 1
        groups: dict[tuple, list[tuple[str, Model, Request]]] = {}
        for key, (model, request) in pending.items():
            groups.setdefault((type(model).__name__, model.name, model.limiter_key()), []).append(
                (key, model, request))
        opened = []
        for (_, name, _), items in groups.items():
            model = items[0][1]
            adapter = model.batch_adapter()
            for chunk in self._chunks([(key, adapter.line(key[:48], request)) for key, _, request in items]):
                ids = {key[:48]: key for key, _ in chunk}
                lines = [line for _, line in chunk]
                batch_id = adapter.submit(lines)
                self.submitted_items += len(lines)
                self._counts["batches_submitted"] += 1
                self._counts["items_resubmitted"] += sum(key in self._unanswered_once for key, _ in chunk)
                entry = {"batch_id": batch_id, "provider": adapter.provider, "model": name,
                         "round": self.rounds, "items": ids, "submitted_at": time.time(),
                         "fetched": False}
                self._record(entry)  # at once: a killed run resumes this batch
                opened.append((entry, model))
                self._say(f"batch round {self.rounds}: submitted {adapter.provider} batch {batch_id} "
                      f"({len(lines)} requests to {name})")
        self._wait_and_fetch(opened)

    def _chunks(self, keyed_lines: list[tuple[str, dict]]) -> Iterable[list[tuple[str, dict]]]:
        """Split at ``max_items`` requests or ``max_bytes`` of JSONL, whichever comes first
        (OpenAI takes 200 MB a file, Anthropic 256 MB a batch)."""
        chunk: list[tuple[str, dict]] = []
        size = 0
        for key, line in keyed_lines:
            length = len(json.dumps(line, ensure_ascii=False).encode("utf-8")) + 1
            if chunk and (len(chunk) >= self.max_items or size + length > self.max_bytes):
                yield chunk
                chunk, size = [], 0
            chunk.append((key, line))
            size += length
        if chunk:
            yield chunk

    def resume(self, models: Iterable[Model]) -> int:
        """Wait for and fetch the batches an earlier, interrupted run submitted; returns
        how many were open."""
        by_name = {m.name: m for m in models if m is not None and m.batch_adapter() is not None}
        opened = [(entry, by_name[entry["model"]]) for entry in self.state["batches"]
                  if not entry.get("fetched") and entry["model"] in by_name]
        if opened:
            self._say(f"resuming {len(opened)} submitted batch(es) from {self.state_path}")
            self._counts["batches_resumed"] += len(opened)
            self._wait_and_fetch(opened)
        return len(opened)

    def counts(self) -> dict:
        """What this invocation did in batch mode (run.json's ``batch``, as
        docs/results_format.md describes it)."""
        return {"rounds": self.rounds, "items_submitted": self.submitted_items, **self._counts}

    def _wait_and_fetch(self, opened: list[tuple[dict, Model]]) -> None:
        waiting = list(opened)
        while waiting:
            still = []
            for entry, model in waiting:
                adapter = model.batch_adapter()
                try:
                    ended, status, done, total = adapter.poll(entry["batch_id"])
                except Exception as exc:
                    if status_code(exc) != 404:  # the provider does not know the batch
                        raise
                    self._lost(entry, list(entry["items"].values()),
                               "the provider no longer knows it (404)")
                    continue
                self._say(f"batch {entry['batch_id']} ({entry['model']}): {status}, {done}/{total} done")
                if ended:
                    self._fetch(entry, model, adapter, status)
                else:
                    still.append((entry, model))
            waiting = still
            if waiting:
                time.sleep(self.poll_interval)

    def _fetch(self, entry: dict, model: Model, adapter: Any, status: str = "") -> None:
        results = adapter.fetch(entry["batch_id"])
        # An item the batch did not answer because it ended first (failed, cancelled,
        # expired) is submitted again; one refused a parameter is submitted again adapted;
        # an item that failed on its own otherwise is asked online.
        missing = Unanswered(f"the batch ended {status}") if adapter.ended_early(status) \
            else "no answer in the batch's results"
        failed: list[str] = []
        adapted: list[str] = []
        unanswered: list[str] = []
        why = f"it ended {status}"
        for custom_id, key in entry["items"].items():
            answer = results.get(custom_id, missing)
            if isinstance(answer, Completion):
                if answer.usage is not None:
                    answer.usage.batch = True
                # How it ended, by the rule online answers follow; a withheld one is cached
                # as it is, and the seam raises it when the next pass replays it.
                answer.ending = model.ending(answer)
                model.usage.count(answer.usage, answer.ending, calls=1, batch_calls=1)
                if model.cache is not None:
                    model.cache.put(key, answer)
                self._counts["items_answered"] += 1
            elif isinstance(answer, Unanswered):
                unanswered.append(key)
                why = why if adapter.ended_early(status) else str(answer)
            elif isinstance(answer, BatchItemError) and model.learn_from_refusal(
                    answer, self._adapted.setdefault(key, set())):
                adapted.append(key)  # deferred again by the next pass, built adapted
            else:
                failed.append(key)
                self._online.add(key)
        self._counts["items_failed"] += len(failed)
        self._counts["items_adapted"] += len(adapted)
        if model.cache is not None and not model.cache.writable:
            self._answers_not_kept.add(entry["batch_id"])
            self._say(f"batch {entry['batch_id']}: its answers could not be written to the response "
                  f"cache (kept in memory); {self.state_path.name} keeps it unfetched, so that a "
                  f"rerun fetches it again instead of submitting it")
        entry["fetched"] = True
        entry["failed_items"] = len(failed)
        entry["failed_keys"] = failed
        if adapted:
            entry["adapted_keys"] = adapted
        if unanswered:
            self._lost(entry, unanswered, why)
        else:
            self._record(entry)
        if failed:
            self._say(f"batch {entry['batch_id']}: {len(failed)} request(s) failed; they are asked online")
        if adapted:
            self._say(f"batch {entry['batch_id']}: {len(adapted)} request(s) refused a parameter; they "
                  f"are submitted again, adapted, in the next round")

    def _lost(self, entry: dict, keys: list[str], why: str) -> None:
        """A batch that left ``keys`` unanswered: each is submitted again in the next round,
        or asked online if a batch left it unanswered before."""
        again = [k for k in keys if k not in self._unanswered_once]
        online = [k for k in keys if k in self._unanswered_once]
        self._unanswered_once.update(again)
        self._online.update(online)
        self._counts["batches_lost"] += 1
        entry["fetched"] = True
        entry["unanswered_keys"] = keys
        entry["lost"] = why
        self._record(entry)
        fates = [f"{len(again)} submitted again in the next round" if again else "",
                 f"{len(online)} asked online (unanswered by a batch before)" if online else ""]
        self._say(f"batch {entry['batch_id']} ({entry['model']}): {why}; of its {len(keys)} unanswered "
              f"request(s), {' and '.join(f for f in fates if f)}")

    def _say(self, line: str, kind: str = "note") -> None:
        if self.out is None:
            (events.warning if kind == "warning" else events.note)(line)
        else:
            self.out.write(f"{'warning: ' if kind == 'warning' else ''}{line}\n")
            self.out.flush()

    def _record(self, entry: dict) -> None:
        with self._lock:
            batches = self.state["batches"]
            if all(existing is not entry for existing in batches):  # an entry is updated in place
                batches.append(entry)
            atomic_write_json(self.state_path, {**self.state, "batches": [
                {**{k: e[k] for k in SUBMITTED_FIELDS if k in e}, "fetched": False}
                if e["batch_id"] in self._answers_not_kept else e for e in batches]})


# ---------------------------------------------------------------------------------------
# The driver: passes and rounds
# ---------------------------------------------------------------------------------------
def runner_for(model: Model, state_path: str | Path) -> BatchRunner | None:
    """A runner for ``model``'s calls, or None (with the reason logged) when they cannot go
    through a batch API: the provider has none, or no response cache keeps the answers."""
    if model.batch_adapter() is None:
        log.warning("--batch: %s has no batch API; its calls are asked online", model.name)
        return None
    if model.cache is None:
        log.warning("--batch: %s has no response cache to keep the batches' answers in; its calls "
                    "are asked online", model.name)
        return None
    return BatchRunner(state_path)


def run_in_rounds(run_pass: Callable[[], None], runner: BatchRunner, models: Sequence[Model], *,
                  max_rounds: int = MAX_ROUNDS, finish_online: bool = False) -> int:
    """Give ``models`` the runner, fetch the batches an interrupted run left, then alternate
    passes and rounds until a pass defers nothing, or ``max_rounds`` rounds have run. The
    runner is closed at the end: later calls go online. ``finish_online``: when the rounds
    ran out, one more pass (online) uses the last round's answers and asks the rest;
    otherwise the caller's own pass does that. Returns the number of rounds."""
    for model in models:
        model.batch_runner = runner
        if model.batch_adapter() is None:
            log.warning("batch mode: %s has no batch API; its calls are asked online", model.name)
    runner.resume(models)
    finished = False
    for _ in range(max_rounds):
        run_pass()
        if runner.pending == 0:
            finished = True
            break
        runner.run_round()
    runner.closed = True
    if not finished:
        log.warning("batch mode: %d rounds did not finish the work; the rest is asked online",
                    max_rounds)
        if finish_online:
            run_pass()
    return runner.rounds
