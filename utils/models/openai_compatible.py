"""The base of every model spoken to through the ``openai`` SDK's chat completions: OpenAI
(openai_models.py), Together's chat (together_models.py) and OpenAI-compatible servers such
as vLLM and llama.cpp's (vllm_models.py) are small subclasses of ``OpenAICompatibleModel``.

The base sends the request's system prompt and conversation, temperature, token limit, seed
and timeout; a subclass says how its provider differs through hooks: ``default_base_url``,
``token_field``, ``takes_temperature``, ``options`` (more body fields), ``make_client`` and
``batch_adapter``; the seam's own hooks (``name_guess``, ``parameter_adaptation``, ...) are
``Model``'s. OpenAI's batch format (``ChatCompletionsBatch``) is here too: Together's
batch API takes the same lines.

Nothing here runs at import: the SDK is imported, keys are read and clients are made on the
first call. One client is shared by every thread per (adapter class, base URL, API key); the
SDK's own retries are off (``max_retries=0``) because the seam in model.py retries.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from cupid.utils.models.batch import BatchItemError, Unanswered
from cupid.utils.models.errors import TransientModelError
from cupid.utils.models.hosted import HostedModel, call_sdk_with_headers, split_credentials
from cupid.utils.models.rate_limit_headers import header_family
from cupid.utils.models.request import Completion, Request, Usage


# OpenAI's rate-limit headers, which Together and vLLM's proxies send too
# (https://platform.openai.com/docs/guides/rate-limits, "Rate limits in headers"; the page is not
# in a stored source as of 2026-11-23, the names are as OpenAI sends them in
# community.openai.com/t/how-to-get-rate-limit-reset-time-for-response-api/1268905).
RATE_LIMIT_HEADERS = header_family(
    tokens=("x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
    requests=("x-ratelimit-limit-requests", "x-ratelimit-remaining-requests",
              "x-ratelimit-reset-requests"))


def chat_messages(request: Request, system_role: str = "system") -> list[dict]:
    """The OpenAI-style message list: the system prompt (if any) as a ``system_role``
    message, then the conversation."""
    messages = [{"role": system_role, "content": request.system_prompt}] if request.system_prompt else []
    messages.extend({"role": m["role"], "content": m["content"]} for m in request.messages)
    return messages


def parse_chat_completion(response: Any, model_name: str) -> Completion:
    """Text and usage of an OpenAI-style chat completion; a malformed one is transient."""
    choices = getattr(response, "choices", None)
    if not choices:
        raise TransientModelError(f"{model_name}: malformed response without choices")
    message = getattr(choices[0], "message", None)
    text = getattr(message, "content", None)
    if not isinstance(text, str):
        raise TransientModelError(f"{model_name}: malformed response without message content "
                                  f"(finish_reason={getattr(choices[0], 'finish_reason', None)!r})")
    usage = getattr(response, "usage", None)
    prompt_tokens = getattr(usage, "prompt_tokens", None)
    completion_tokens = getattr(usage, "completion_tokens", None)
    # completion_tokens counts the hidden reasoning tokens too (billed as output);
    # completion_tokens_details.reasoning_tokens says how many of them there were
    # (openai-python, src/openai/types/completion_usage.py).
    details = getattr(usage, "completion_tokens_details", None)
    reasoning_tokens = getattr(details, "reasoning_tokens", None) or 0
    return Completion(
        text=text,
        usage=(Usage(prompt_tokens or 0, completion_tokens or 0, reasoning_tokens=reasoning_tokens)
               if usage is not None else None),
        raw=response,
        # "length": the answer hit max_tokens / max_completion_tokens (or the context).
        truncated=getattr(choices[0], "finish_reason", None) == "length",
    )


def with_seed_and_timeout(params: dict, request: Request) -> dict:
    """The request's seed and timeout, where set, in an OpenAI-format call's parameters."""
    if request.seed is not None:
        params["seed"] = request.seed
    if request.timeout is not None:
        params["timeout"] = request.timeout
    return params


def apply_adaptations(params: dict, adaptations) -> dict:
    """Leave out (or rename) the parameters a provider refused for this model (adaptations.py)."""
    for adaptation in adaptations:
        if adaptation.parameter in params:
            value = params.pop(adaptation.parameter)
            if adaptation.renamed_to:
                params[adaptation.renamed_to] = value
    return params


def send_chat_completion(model: HostedModel, request: Request) -> Completion:
    """One chat completion through an OpenAI-format SDK client (OpenAI's, Together's), with
    the response headers the pacing reads."""
    client = model.client()
    response, headers = call_sdk_with_headers(model.name, client.chat.completions, "create",
                                              **model.build_params(request))
    completion = parse_chat_completion(response, model.name)
    completion.headers = headers
    return completion


class OpenAICompatibleModel(HostedModel):
    """A model behind an OpenAI-format chat-completions API, through the ``openai`` SDK."""

    # The role of the system prompt's message and the body field of the token limit
    # (OpenAI's roles may say "developer" and "max_completion_tokens": config.ROLE_PARAMS).
    system_role: str = "system"
    max_tokens_field: str = "max_tokens"

    def default_base_url(self) -> str | None:
        """The host's API root when neither ``base_url=`` nor ``base_url_env`` gives one
        (None: the SDK's own, OpenAI's)."""
        return None

    def resolved_base_url(self) -> str | None:
        return super().resolved_base_url() or self.default_base_url()

    def token_field(self) -> str:
        return self.max_tokens_field

    def takes_temperature(self, request: Request) -> bool:
        return True

    def options(self, request: Request) -> dict:
        """Body fields beyond the base's, after the token limit (OpenAI's reasoning effort)."""
        return {}

    def make_client(self, base_url: str | None, api_key: str) -> Any:
        """The SDK's client; a base URL's user and password go as HTTP basic auth
        (``split_credentials``), never in the URL the SDK keeps and shows."""
        import openai

        base_url, auth = split_credentials(base_url)
        return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0,
                             default_headers=auth or None)

    def build_params(self, request: Request) -> dict:
        params: dict[str, Any] = {"model": self.name,
                                  "messages": chat_messages(request, self.system_role)}
        if request.temperature is not None and self.takes_temperature(request):
            params["temperature"] = request.temperature
        if request.max_tokens is not None:
            params[self.token_field()] = request.max_tokens
        params.update(self.options(request))
        apply_adaptations(params, self.learned_adaptations())
        return with_seed_and_timeout(params, request)

    def complete(self, request: Request) -> Completion:
        return send_chat_completion(self, request)


# ---------------------------------------------------------------------------------------
# The Batch API's format (OpenAI's; Together's takes the same lines)
# ---------------------------------------------------------------------------------------
# OpenAI writes the requests an expired or cancelled batch did not run to its error file
# with these codes.
UNRUN_CODES = ("batch_expired", "batch_cancelled")


def chat_batch_answers(lines: list[str], model_name: str,
                       describe_error: Callable[[dict], Any]) -> dict[str, Completion | str | BatchItemError]:
    """The answers of an OpenAI-format batch output or error file (OpenAI's, Together's):
    custom id -> its Completion, or why it failed (``describe_error`` picks what the
    provider's error says). An item answered with an HTTP error (the line's ``response``
    holds its status and the body an online request gets, ``error`` is for failures without
    one: https://platform.openai.com/docs/api-reference/batch/request-output) is a
    BatchItemError whose body is the ``error`` object, as the openai SDK gives it online."""
    from openai.types.chat import ChatCompletion

    out: dict[str, Completion | str | BatchItemError] = {}
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
            status = response.get("status_code")
            reason = f"HTTP {status}: {describe_error(error)}"
            code = error.get("code") if isinstance(error, dict) else None
            if code in UNRUN_CODES:
                out[item["custom_id"]] = Unanswered(reason)
            elif isinstance(status, int) and status >= 400 and not item.get("error"):
                out[item["custom_id"]] = BatchItemError(reason, status, body.get("error", body))
            else:
                out[item["custom_id"]] = reason
    return out


class ChatCompletionsBatch:
    """OpenAI's Batch API: a JSONL file of chat-completion requests (Together's batch API
    takes the same lines and writes the same output files)."""

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

    def fetch(self, batch_id: str) -> dict[str, Completion | str | BatchItemError]:
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
