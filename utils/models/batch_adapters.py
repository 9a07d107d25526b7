"""The providers' batch APIs, one adapter each: ``line`` (one request as the provider's
batch item), ``submit`` (a list of items -> batch id), ``poll`` (ended, status, done,
total) and ``fetch`` (custom id -> Completion, or why it failed). ``batch_adapter`` picks a
model's adapter; the runner that uses them is utils/models/batch.py.

OpenAI (``files.create`` + ``batches.create``, results in the output file), Anthropic
(``messages.batches``), Together (its SDK's ``files.upload`` + ``batches.create``) and the
Gemini API (``batches.create`` with inline requests). Other models (Vertex AI, vLLM
servers, the embedded model, a user's ``__call__``) have none and answer online.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from utils.models.model import Model
from utils.models.request import Completion, Request


class Unanswered(str):
    """Why a batch item has no answer when its batch ended before answering it (failed,
    cancelled, expired), as opposed to an item that failed on its own: the runner submits
    it again."""


# OpenAI writes the requests an expired or cancelled batch did not run to its error file
# with these codes.
UNRUN_CODES = ("batch_expired", "batch_cancelled")


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
            reason = f"HTTP {response.get('status_code')}: {describe_error(error)}"
            code = error.get("code") if isinstance(error, dict) else None
            out[item["custom_id"]] = Unanswered(reason) if code in UNRUN_CODES else reason
    return out


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
        return batch.status in ("completed", *self.ended_early_states), batch.status, done, total

    ended_early_states = ("failed", "expired", "cancelled")

    def ended_early(self, status: str) -> bool:
        """Whether a batch ended before answering every item (they are submitted again)."""
        return status in self.ended_early_states

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
            out["*"] = Unanswered(f"batch {batch_id} ended {batch.status}")
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
        return (status in ("COMPLETED", *self.ended_early_states), status,
                int(job.progress or 0), 100)

    ended_early_states = ("FAILED", "EXPIRED", "CANCELLED")

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
            out["*"] = Unanswered(f"batch {batch_id} ended {job.status}: {job.error}")
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

    def ended_early(self, status: str) -> bool:  # noqa: ARG002 - each item says it (fetch)
        return False

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
            elif result.type in ("canceled", "expired"):  # the batch ended before this item
                out[item.custom_id] = Unanswered(f"it ended with requests {result.type}")
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

    def ended_early(self, status: str) -> bool:
        return status in self.ended_states and status != "JOB_STATE_SUCCEEDED"

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
            out["*"] = Unanswered(f"batch {batch_id} ended {self._state(job)}")
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
