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

Adapters: OpenAI (``files.create`` + ``batches.create``, results in the output file),
Anthropic (``messages.batches``), Together (``files.upload`` + ``batches.create``) and
the Gemini API (``batches.create`` with inline requests). Other models (Vertex AI, vLLM
servers, the embedded model, a user's ``__call__``) answer online.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO

import config
from utils.models.model import Model
from utils.models.request import Completion, Request
from utils.io import atomic_write_json



def chat_batch_answers(lines: list[str], model_name: str,
                       describe_error: Callable[[dict], Any]) -> dict[str, Completion | str]:
    """The answers of an OpenAI-format batch output file (OpenAI's, Together's): custom id ->
    its Completion, or why it failed (``describe_error`` picks what the provider's error says)."""
    from openai.types.chat import ChatCompletion

    from utils.models.openai_models import parse_chat_completion

    out: dict[str, Completion | str] = {}
    for line in lines:
        if not line.strip():
            continue
        item = json.loads(line)
        response = item.get("response") or {}
        body = response.get("body") or {}
        if response.get("status_code") == 200 and not item.get("error"):
            try:
                out[item["custom_id"]] = parse_chat_completion(ChatCompletion.model_validate(body),
                                                               model_name)
            except Exception as exc:  # a malformed item fails alone
                out[item["custom_id"]] = f"malformed batch answer: {exc}"
        else:
            error = item.get("error") or body.get("error") or {}
            out[item["custom_id"]] = f"HTTP {response.get('status_code')}: {describe_error(error)}"
    return out

class BatchDeferred(Exception):
    """Raised by the seam for a call that will be answered by the next batch round.
    Not a ModelError: steps and the pipeline let it pass without recording anything."""


# ---------------------------------------------------------------------------------------
# Provider adapters: submit / poll / fetch
# ---------------------------------------------------------------------------------------
class OpenAIBatch:
    """OpenAI's Batch API: a JSONL file of chat-completion requests."""

    provider = "openai"
    endpoint = "/v1/chat/completions"

    def __init__(self, model: Any) -> None:
        self.model = model

    def line(self, custom_id: str, request: Request) -> dict:
        body = {k: v for k, v in self.model.build_params(request).items() if k != "timeout"}
        return {"custom_id": custom_id, "method": "POST", "url": self.endpoint, "body": body}

    def submit(self, lines: list[dict]) -> str:
        client = self.model.client()
        data = "\n".join(json.dumps(line, ensure_ascii=False) for line in lines).encode("utf-8")
        uploaded = client.files.create(file=("cupid_batch.jsonl", data), purpose="batch")
        batch = client.batches.create(input_file_id=uploaded.id, endpoint=self.endpoint,
                                      completion_window="24h")
        return batch.id

    def poll(self, batch_id: str) -> tuple[bool, str, int, int]:
        """(ended, status, items done, items in all)."""
        batch = self.model.client().batches.retrieve(batch_id)
        counts = batch.request_counts
        done = (counts.completed + counts.failed) if counts else 0
        total = counts.total if counts else 0
        return batch.status in ("completed", "failed", "expired", "cancelled"), batch.status, done, total

    def fetch(self, batch_id: str) -> dict[str, Completion | str]:
        """custom id -> its Completion, or the reason it failed."""
        client = self.model.client()
        batch = client.batches.retrieve(batch_id)
        out: dict[str, Completion | str] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                out.update(chat_batch_answers(client.files.content(file_id).text.splitlines(),
                                              self.model.name, lambda e: e.get("message", e)))
        if batch.status != "completed" and not out:
            out["*"] = f"batch {batch_id} ended {batch.status}"
        return out


class TogetherBatch(OpenAIBatch):
    """Together's batch API: OpenAI's JSONL lines and output files, its own upload (a
    presigned PUT) and job objects."""

    provider = "together"

    def line(self, custom_id: str, request: Request) -> dict:
        body = {k: v for k, v in self.model.build_params(request).items() if k != "timeout"}
        return {"custom_id": custom_id, "body": body}

    def submit(self, lines: list[dict]) -> str:
        import tempfile

        client = self.model.batch_client()
        with tempfile.TemporaryDirectory(prefix="cupid_batch_") as tmp:
            path = Path(tmp) / "cupid_batch.jsonl"
            path.write_text("\n".join(json.dumps(line, ensure_ascii=False) for line in lines),
                            encoding="utf-8")
            uploaded = client.files.upload(file=path, purpose="batch-api", check=False)
        created = client.batches.create(input_file_id=uploaded.id, endpoint=self.endpoint)
        return created.job.id

    def poll(self, batch_id: str) -> tuple[bool, str, int, int]:
        job = self.model.batch_client().batches.retrieve(batch_id)
        status = (job.status or "").upper()
        return (status in ("COMPLETED", "FAILED", "EXPIRED", "CANCELLED"), status,
                int(job.progress or 0), 100)

    def fetch(self, batch_id: str) -> dict[str, Completion | str]:
        client = self.model.batch_client()
        job = client.batches.retrieve(batch_id)
        out: dict[str, Completion | str] = {}
        for file_id in (job.output_file_id, job.error_file_id):
            if file_id:
                out.update(chat_batch_answers(
                    client.files.content(file_id).read().decode("utf-8").splitlines(),
                    self.model.name, lambda e: e))
        if (job.status or "").upper() != "COMPLETED" and not out:
            out["*"] = f"batch {batch_id} ended {job.status}: {job.error}"
        return out


class AnthropicBatch:
    """Anthropic's Message Batches API."""

    provider = "anthropic"

    def __init__(self, model: Any) -> None:
        self.model = model

    def line(self, custom_id: str, request: Request) -> dict:
        params = self.model.build_params(request)
        body = {k: v for k, v in params.items() if k not in ("timeout", "extra_body", "extra_headers")}
        body.update(params.get("extra_body") or {})
        return {"custom_id": custom_id, "params": body}

    def submit(self, lines: list[dict]) -> str:
        client = self.model.client()
        # The API version under which a request may carry a temperature (see the adapter).
        headers = {"anthropic-version": self.model.legacy_api_version} \
            if any("temperature" in line["params"] for line in lines) else None
        return client.messages.batches.create(requests=lines, extra_headers=headers).id

    def poll(self, batch_id: str) -> tuple[bool, str, int, int]:
        batch = self.model.client().messages.batches.retrieve(batch_id)
        c = batch.request_counts
        done = c.succeeded + c.errored + c.canceled + c.expired
        return batch.processing_status == "ended", batch.processing_status, done, done + c.processing

    def fetch(self, batch_id: str) -> dict[str, Completion | str]:
        from utils.models.anthropic_models import parse_message

        out: dict[str, Completion | str] = {}
        for item in self.model.client().messages.batches.results(batch_id):
            result = item.result
            if result.type == "succeeded":
                try:
                    out[item.custom_id] = parse_message(result.message, self.model.name)
                except Exception as exc:  # a malformed item fails alone
                    out[item.custom_id] = f"malformed batch answer: {exc}"
            else:
                error = getattr(result, "error", None)
                out[item.custom_id] = f"{result.type}: {getattr(error, 'error', error)}"
        return out


class GeminiBatch:
    """Gemini batch mode with inline requests (``client.batches``), each keyed by metadata."""

    provider = "google"
    ended_states = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED",
                    "JOB_STATE_EXPIRED")

    def __init__(self, model: Any) -> None:
        self.model = model

    def line(self, custom_id: str, request: Request) -> dict:
        params = self.model.build_request(request)
        config = {k: v for k, v in params["config"].items() if k != "http_options"}
        return {"contents": params["contents"], "config": config, "metadata": {"key": custom_id}}

    def submit(self, lines: list[dict]) -> str:
        job = self.model.client().batches.create(model=self.model.name, src=lines)
        return job.name

    def _state(self, job: Any) -> str:
        return str(getattr(job.state, "value", job.state))

    def poll(self, batch_id: str) -> tuple[bool, str, int, int]:
        job = self.model.client().batches.get(name=batch_id)
        state = self._state(job)
        responses = (job.dest.inlined_responses if job.dest is not None else None) or []
        return state in self.ended_states, state, len(responses), len(responses)

    def fetch(self, batch_id: str) -> dict[str, Completion | str]:
        from utils.models.google_models import parse_response

        job = self.model.client().batches.get(name=batch_id)
        out: dict[str, Completion | str] = {}
        for item in (job.dest.inlined_responses if job.dest is not None else None) or []:
            key = (item.metadata or {}).get("key")
            if key is None:
                continue
            if item.error is not None or item.response is None:
                out[key] = f"failed in the batch: {item.error}"
                continue
            try:
                out[key] = parse_response(item.response, self.model.name)
            except Exception as exc:  # a blocked or malformed item fails alone
                out[key] = f"{type(exc).__name__}: {exc}"
        if self._state(job) != "JOB_STATE_SUCCEEDED" and not out:
            out["*"] = f"batch {batch_id} ended {self._state(job)}"
        return out


def batch_adapter(model: Model) -> Any | None:
    """The batch adapter of a model's provider, or None (the model answers online)."""
    from utils.models.anthropic_models import AnthropicModel
    from utils.models.openai_models import OpenAICompatibleModel, OpenAIModel
    from utils.models.google_models import GoogleModel
    from utils.models.together_models import TogetherModel

    if isinstance(model, OpenAIModel) and not isinstance(model, OpenAICompatibleModel):
        return OpenAIBatch(model)
    if isinstance(model, AnthropicModel):
        return AnthropicBatch(model)
    if isinstance(model, TogetherModel):
        return TogetherBatch(model)
    if isinstance(model, GoogleModel) and not model.uses_vertex():
        return GeminiBatch(model)
    return None


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
