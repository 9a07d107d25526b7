"""Batch mode behind the seam: calls answered through the providers' batch APIs at the
batch price (config.BATCH_DISCOUNT of the online price).

How it works with the pipeline, unchanged: a model whose ``batch`` is a ``BatchRunner``
does not send a request that misses the response cache; the seam hands it to the runner
(``defer``), which raises ``BatchDeferred`` out of the step. The caller runs every
instance this way (a round), then ``run_round`` submits what was collected (one batch per
endpoint and key, split at ``max_items``), waits, and puts each answer into the response
cache. The next round replays those answers from the cache and collects the next step's
calls: infer + generate, then decompose + judge, then both matches.

Every submitted batch id is written to the run directory's ``batches.json`` as soon as the
provider accepts it. ``resume`` waits for and fetches the batches a killed run left, so a
restarted run polls them instead of submitting their requests again. An item that failed
in its batch is asked online in the next round (the seam's bounded retries), and if that
fails too the step is recorded failed like any other.

The providers' adapters are in utils/models/batch_adapters.py; models without one (Vertex
AI, vLLM servers, the embedded model, a user's ``__call__``) answer online.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO

import config
from utils.models.batch_adapters import batch_adapter
from utils.models.model import Model
from utils.models.request import Completion, Request
from utils.io import atomic_write_json


class BatchDeferred(Exception):
    """Raised by the seam for a call that will be answered by the next batch round.
    Not a ModelError: steps and the pipeline let it pass without recording anything."""


# ---------------------------------------------------------------------------------------
# The runner
# ---------------------------------------------------------------------------------------
class BatchRunner:
    """Collects deferred calls, submits them as batches, waits, and fills the cache."""

    def __init__(self, state_path: str | Path, *, poll_interval: float | None = None,
                 max_items: int | None = None, out: TextIO | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.state_path = Path(state_path)
        self.poll_interval = config.BATCH_POLL_INTERVAL if poll_interval is None else poll_interval
        self.max_items = max_items or config.BATCH_MAX_ITEMS
        self.max_bytes = config.BATCH_MAX_BYTES
        self.out = out or sys.stderr
        self._sleep = sleep
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[Model, Request]] = {}
        self.closed = False
        self.submitted_items = 0
        self.rounds = 0
        self.state = (json.loads(self.state_path.read_text(encoding="utf-8"))
                      if self.state_path.exists() else {"batches": []})
        # Keys whose batch item failed are asked online, also by a run started again after
        # a kill: batches.json keeps them.
        self._online: set[str] = {key for entry in self.state["batches"]
                                  for key in entry.get("failed_keys", ())}

    # -- called by the seam ---------------------------------------------------------------
    def defer(self, model: Model, request: Request, key: str | None) -> None:
        """Raise BatchDeferred for a call the next round answers; return to call online."""
        if self.closed or key is None or key in self._online or batch_adapter(model) is None:
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
            adapter = batch_adapter(model)
            for chunk in self._chunks([(key, adapter.line(key[:48], request)) for key, _, request in items]):
                ids = {key[:48]: key for key, _ in chunk}
                lines = [line for _, line in chunk]
                batch_id = adapter.submit(lines)
                self.submitted_items += len(lines)
                entry = {"batch_id": batch_id, "provider": adapter.provider, "model": name,
                         "round": self.rounds, "items": ids, "submitted_at": time.time(),
                         "fetched": False}
                self._record(entry)  # at once: a killed run resumes this batch
                opened.append((entry, model))
                print(f"batch round {self.rounds}: submitted {adapter.provider} batch {batch_id} "
                      f"({len(lines)} requests to {name})", file=self.out, flush=True)
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
        by_name = {m.name: m for m in models if m is not None and batch_adapter(m) is not None}
        opened = [(entry, by_name[entry["model"]]) for entry in self.state["batches"]
                  if not entry.get("fetched") and entry["model"] in by_name]
        if opened:
            print(f"resuming {len(opened)} submitted batch(es) from {self.state_path}",
                  file=self.out, flush=True)
            self._wait_and_fetch(opened)
        return len(opened)

    def _wait_and_fetch(self, opened: list[tuple[dict, Model]]) -> None:
        waiting = list(opened)
        while waiting:
            still = []
            for entry, model in waiting:
                adapter = batch_adapter(model)
                ended, status, done, total = adapter.poll(entry["batch_id"])
                print(f"batch {entry['batch_id']} ({entry['model']}): {status}, {done}/{total} done",
                      file=self.out, flush=True)
                if ended:
                    self._fetch(entry, model, adapter)
                else:
                    still.append((entry, model))
            waiting = still
            if waiting:
                self._sleep(self.poll_interval)

    def _fetch(self, entry: dict, model: Model, adapter: Any) -> None:
        results = adapter.fetch(entry["batch_id"])
        failed: list[str] = []
        for custom_id, key in entry["items"].items():
            answer = results.get(custom_id, results.get("*", "no answer in the batch's results"))
            if isinstance(answer, Completion):
                if answer.usage is not None:
                    answer.usage.batch = True
                model.usage.record_batch(answer.usage)
                if model.cache is not None:
                    model.cache.put(key, answer)
            else:
                failed.append(key)
                self._online.add(key)
        entry["fetched"] = True
        entry["failed_items"] = len(failed)
        entry["failed_keys"] = failed
        self._record(entry)
        if failed:
            print(f"batch {entry['batch_id']}: {len(failed)} request(s) failed; they are asked online",
                  file=self.out, flush=True)

    def _record(self, entry: dict) -> None:
        with self._lock:
            batches = self.state["batches"]
            for i, existing in enumerate(batches):
                if existing["batch_id"] == entry["batch_id"]:
                    batches[i] = entry
                    break
            else:
                batches.append(entry)
            atomic_write_json(self.state_path, self.state)
