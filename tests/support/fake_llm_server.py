"""A real HTTP server on 127.0.0.1 that plays an LLM provider, for tests.

It speaks enough of these wire protocols for the official SDKs to talk to it:

* OpenAI chat completions: ``POST /v1/chat/completions`` and ``GET /v1/models`` (also
  ``/v1beta/models`` in Gemini's shape; ``models_status``/``models_bare_list`` script it; the
  ``openai`` SDK with ``base_url=server.openai_base_url``: OpenAI, Together and vLLM-style
  servers);
* Anthropic messages: ``POST /v1/messages`` (the ``anthropic`` SDK with
  ``base_url=server.base_url``);
* Gemini: ``POST /v1beta/models/MODEL:generateContent`` (``google-genai`` with
  ``http_options={"base_url": server.base_url}``);
* the OpenAI and Anthropic batch APIs (tests/support/fake_batch_api.py);
* vLLM's OpenAI-compatible server, once ``serve_as_vllm({name: max_model_len})`` is called:
  ``/v1/models`` lists exactly those ids with their ``max_model_len``; a chat request for
  another id is answered 404 and one whose prompt + ``max_tokens`` exceeds the length 400,
  both in vLLM's words and error format; ``POST /tokenize`` counts a chat's tokens.

Usage::

    from fake_llm_server import FakeLLMServer, FakeResponse

    with FakeLLMServer(responder=lambda req: "Score: 7") as server:
        ...  # point OPENAI_BASE_URL at server.openai_base_url, ANTHROPIC_BASE_URL at
             # server.base_url (the ``fake_llm_env`` fixture of tests/conftest.py does it)
        server.script(FakeResponse(status=429, headers={"Retry-After": "0.2"}), "hello")
        ...
        server.requests  # what the server received, in order

API (kept stable: the evaluation and synthesis tests script their answers through it):

``FakeResponse(text=None, status=200, headers=None, delay=0.0, raw_body=None, hang=False,
finish=None, refusal=None, hide_text=False, thinking_only=False, block_reason=None, cached_tokens=0)``
    ``text``: the answer; ``None`` with status 200 gives an answer without text (OpenAI: null
    content; Anthropic: no content blocks; Gemini: no parts). ``status`` >= 400: an error in the API's own
    error format (``text`` becomes its message). ``headers``: extra response headers, e.g.
    ``{"Retry-After": "1"}``. ``delay``: seconds to wait before answering. ``raw_body``:
    these bytes are sent as the body instead (a malformed body). ``hang``: never answer
    (sleeps past any client timeout, at most ``HANG_SECONDS``, and stops early when the
    server stops).

    The providers' awkward answers, as each documents them: ``finish`` replaces the finish
    signal (OpenAI ``finish_reason: "content_filter"``, Anthropic ``stop_reason: "refusal"``,
    Gemini ``finishReason: "SAFETY"``); ``hide_text`` bills ``text`` but sends none of it (content
    null, no text block, no parts: a filter that withheld what was generated); ``refusal`` is
    OpenAI's ``message.refusal`` (billed as output), Anthropic's ``stop_details.explanation`` and
    Gemini's ``promptFeedback.blockReasonMessage``; ``thinking_only`` gives Anthropic's response
    holding only a thinking block; ``block_reason`` gives Gemini's prompt blocked before any
    candidate (``promptFeedback.blockReason``) with its prompt tokens in ``usageMetadata``;
    ``cached_tokens`` reports that many prompt tokens as read from the prompt cache (OpenAI
    ``prompt_tokens_details.cached_tokens``, Anthropic ``cache_read_input_tokens`` with
    ``input_tokens`` the rest, Gemini ``cachedContentTokenCount``). ``billed`` lists what each
    answer billed (``billed_totals()`` sums it), so a test can compare the run's counts.

``basic_auth = (user, password)``
    Play a proxy that asks for HTTP basic auth (nginx's ``auth_basic``): every request
    without ``Authorization: Basic base64(user:password)`` is answered 401 with
    ``WWW-Authenticate`` (``unauthorized`` counts them).

``serve_as_vllm(max_model_len: dict[str, int])``
    Validate as vLLM does (see above). Its token count is the fake tokenizer's (words), so
    a test can put a request just over or under a length (``tokenize_calls`` counts the
    /tokenize calls; ``tokenize_route = False`` removes the route). ``models`` lists what
    ``GET /v1/models`` names (default: nothing, as a proxy that lists no models).

``FakeLLMServer(responder=None, latency=0.0, token_limit=None, token_window=60.0)``
    ``start()``, ``stop()``, or use it as a context manager. ``base_url`` is
    ``"http://127.0.0.1:PORT"``; ``openai_base_url`` is ``base_url + "/v1"``.
    ``script(*items)`` queues ``FakeResponse`` objects or strings, consumed in order before
    the responder is asked. ``responder``: a callable ``(req: dict) -> str | FakeResponse``
    answering every unscripted request (default: ``"OK"``). ``latency``: seconds added to
    every answer. ``requests``: a snapshot list of the request dicts received, in arrival
    order, including those answered with errors.

Rate limit (``token_limit``): a token bucket of ``token_limit`` tokens refilled in full every
``token_window`` seconds, charged each answer's prompt + completion tokens when the request
arrives. Answers carry OpenAI's headers ``x-ratelimit-limit-tokens``,
``x-ratelimit-remaining-tokens`` and ``x-ratelimit-reset-tokens`` (e.g. ``"0.250s"``, the
time until the bucket is full); a request the bucket cannot pay is answered 429 with
``retry-after``/``retry-after-ms`` (the time until it could be paid) and is not charged; a
scripted answer refused this way stays queued. ``rate_limited`` counts the 429s sent,
``charged_tokens`` the tokens paid.

The request dict given to the responder and stored in ``requests``::

    {"api": "openai" | "anthropic" | "google", "model": str, "system": str (the system
     message of an OpenAI request, the ``system`` field of an Anthropic one, the system
     instruction of a Gemini one; "" when absent),
     "messages": [{"role": "user" | "assistant", "content": str}, ...] (without the OpenAI
     system message; Gemini's "model" role is given as "assistant"),
     "body": the full JSON body, "body_bytes": the body as received (bytes),
     "headers": {lower-cased name: value}, "path": str}

Documented refusals (``enforce_rules``, on by default): requests a provider's API rejects
are answered with its 400 body, as the provider sends it (``documented_refusal``):
OpenAI reasoning models (o-series, the gpt-5 family but its ``-chat`` models, and any name
in ``reasoning_models``) refuse ``max_tokens`` (``unsupported_parameter``) and a
temperature other than 1 (``unsupported_value``; gpt-5.1 and later accept one with
``reasoning_effort: "none"``) and a ``reasoning_effort`` their family does not take
(``OPENAI_EFFORTS``); other OpenAI models refuse ``reasoning_effort``. Anthropic
refuses thinking on models without it, a budget under 1024 or not below ``max_tokens``, a
temperature other than 1 with thinking, temperature with top_p on Claude Sonnet 4.5 /
Haiku 4.5 / Opus 4.1 and later (Sonnet 4.6 too), any sampling parameter or a thinking
budget on Claude Opus 4.7 and later and the Claude 5 models (sampling parameters also on the
names in ``anthropic_no_sampling``), and any sampling parameter under API version
2026-10-21 (the ``anthropic-version`` header). Gemini 2.5 Pro and Gemini 3 and later refuse a thinking budget
of 0.

Reasoning usage: an OpenAI reasoning model spends ``reasoning_tokens`` (default 0) hidden
tokens, reported in ``completion_tokens_details.reasoning_tokens`` and counted in
``completion_tokens``; Anthropic's thinking block's words count in ``output_tokens``; a
Gemini 2.5+ model spends its thinking budget (or ``gemini_thoughts``, default 0, when none is
set) in ``thoughtsTokenCount``. Thinking counts against the token limit (``max_tokens``,
``max_completion_tokens``, ``maxOutputTokens``): an answer that does not fit is cut to the
words left, with finish_reason ``length`` / stop_reason ``max_tokens`` / finishReason
``MAX_TOKENS`` (no text part when nothing is left).

Token usage in answers is whitespace token counts: prompt tokens are the words of the
system prompt and of every message; completion tokens are the words of the answer. Tests
can therefore check the accounting exactly (``FakeLLMServer.count_tokens``).
"""
from __future__ import annotations

import base64
import dataclasses
import json
import re
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import fake_batch_api

HANG_SECONDS = 30.0

_OPENAI_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_api_key",
                       404: "model_not_found", 429: "rate_limit_exceeded"}
_ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                          403: "permission_error", 404: "not_found_error",
                          413: "request_too_large", 429: "rate_limit_error",
                          529: "overloaded_error"}
_GOOGLE_STATUSES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                    404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                    503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


# -- the providers' documented rules -----------------------------------------------------------
def openai_is_reasoning(model: str, extra: set) -> bool:
    """o-series and gpt-5 family (not its -chat models): OpenAI's reasoning guide."""
    name = (model or "").lower()
    if name in extra:
        return True
    if re.match(r"gpt-5(\.\d+)?-chat", name):
        return False
    return re.match(r"(o\d|gpt-5)", name) is not None


# The reasoning_effort values each OpenAI family takes (utils/models/openai_models.py gives
# the sources): checked in this order, the first pattern that matches the name decides.
OPENAI_EFFORTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"o1-(mini|preview)", ()),
    (r"o\d", ("low", "medium", "high")),
    (r"gpt-5(\.\d+)?-pro", ("high",)),
    (r"gpt-5\.1(\D|$)", ("none", "low", "medium", "high")),
    (r"gpt-5\.\d", ("none", "low", "medium", "high", "xhigh")),
    (r"gpt-5(-|$)", ("minimal", "low", "medium", "high")),
)


def openai_efforts(model: str) -> tuple[str, ...] | None:
    """The efforts a known reasoning family takes, or None (a name no rule knows)."""
    for pattern, efforts in OPENAI_EFFORTS:
        if re.match(pattern, model):
            return efforts
    return None


def _openai_refusal(message: str, param: str, code: str) -> FakeResponse:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
    return FakeResponse(status=400, raw_body=json.dumps(body).encode("utf-8"))


def _anthropic_refusal(message: str) -> FakeResponse:
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": message},
            "request_id": "req_fake"}
    return FakeResponse(status=400, raw_body=json.dumps(body).encode("utf-8"))


def _google_refusal(message: str) -> FakeResponse:
    body = {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
    return FakeResponse(status=400, raw_body=json.dumps(body).encode("utf-8"))


def documented_refusal(req: dict, reasoning_models: set,
                       anthropic_no_sampling: frozenset = frozenset()) -> "FakeResponse | None":
    """The 400 a provider sends for this request, or None when it accepts it."""
    body, model = req["body"], (req["model"] or "").lower()
    if req["api"] == "openai":
        if openai_is_reasoning(model, reasoning_models):
            if "max_tokens" in body:
                return _openai_refusal("Unsupported parameter: 'max_tokens' is not supported with "
                                       "this model. Use 'max_completion_tokens' instead.",
                                       "max_tokens", "unsupported_parameter")
            effort, efforts = body.get("reasoning_effort"), openai_efforts(model)
            if effort is not None and efforts == ():
                return _openai_refusal("Unsupported parameter: 'reasoning_effort' is not supported "
                                       "with this model.", "reasoning_effort", "unsupported_parameter")
            if effort is not None and efforts and effort not in efforts:
                # OpenAI's wording for gpt-5.1 (github.com/anomalyco/opencode/issues/4451).
                listed = (", ".join(f"'{e}'" for e in efforts[:-1]) + f", and '{efforts[-1]}'"
                          if len(efforts) > 1 else f"'{efforts[0]}'")
                return _openai_refusal(f"Unsupported value: '{effort}' is not supported with the "
                                       f"'{req['model']}' model. Supported values are: {listed}.",
                                       "reasoning_effort", "unsupported_value")
            no_effort = re.match(r"gpt-5\.\d", model) and effort == "none"
            if "temperature" in body and body["temperature"] != 1 and not no_effort:
                return _openai_refusal(f"Unsupported value: 'temperature' does not support "
                                       f"{body['temperature']} with this model. Only the default "
                                       f"(1) value is supported.", "temperature", "unsupported_value")
        elif "reasoning_effort" in body and (model.startswith(("gpt-4", "gpt-3.5"))
                                             or re.match(r"gpt-5(\.\d+)?-chat", model)):
            return _openai_refusal("Unsupported parameter: 'reasoning_effort' is not supported "
                                   "with this model.", "reasoning_effort", "unsupported_parameter")
    elif req["api"] == "anthropic":
        thinking = body.get("thinking") or {}
        # API version 2026-10-21 removed the sampling parameters on every model: "A request that
        # sends any" of them is a 400 (https://platform.claude.com/docs/en/api/versioning); the
        # wording as users report it (github.com/ttlequals0/MinusPod/releases/tag/v2.101.10).
        if (req["headers"].get("anthropic-version") or "") >= "2026-10-21":
            for param in ("temperature", "top_p", "top_k"):
                if param in body:
                    return _anthropic_refusal(f"{param}: Extra inputs are not permitted")
        # Claude Opus 4.7+ and Claude 5: no sampling parameters, no manual thinking (Anthropic's
        # error reference, github.com/anthropics/skills skills/claude-api/shared/error-codes.md:
        # "sending any of them returns 400"; the Sonnet 5 migration guide refuses non-default
        # values only, and this fake refuses any). The wordings as users report them:
        # github.com/Comfy-Org/ComfyUI/issues/13923 (temperature),
        # github.com/NousResearch/hermes-agent/issues/11137 (thinking).
        if re.search(r"claude-([a-z]+-4-[7-9]|[a-z]+-[5-9])(\b|-|$)", model) or model in anthropic_no_sampling:
            for param in ("temperature", "top_p", "top_k"):
                if param in body:
                    return _anthropic_refusal(f"`{param}` is deprecated for this model.")
            if thinking.get("type") == "enabled" and model not in anthropic_no_sampling:
                return _anthropic_refusal('"thinking.type.enabled" is not supported for this model. '
                                          'Use "thinking.type.adaptive" and "output_config.effort" '
                                          'to control thinking behavior.')
        if thinking.get("type") == "enabled":
            if not re.search(r"claude-(3-7-sonnet|(opus|sonnet|haiku)-4)", model):
                return _anthropic_refusal(f"'{req['model']}' does not support thinking.")
            budget = thinking.get("budget_tokens") or 0
            if budget < 1024:
                return _anthropic_refusal("thinking.enabled.budget_tokens: Input should be greater "
                                          "than or equal to 1024")
            if budget >= (body.get("max_tokens") or 0):
                return _anthropic_refusal("`max_tokens` must be greater than `thinking.budget_tokens`. "
                                          "Please consult our documentation at https://docs.claude.com/"
                                          "en/docs/build-with-claude/extended-thinking#max-tokens-and-"
                                          "context-window-size")
            if "temperature" in body and body["temperature"] != 1:
                return _anthropic_refusal("`temperature` may only be set to 1 when thinking is "
                                          "enabled. Please consult our documentation at https://"
                                          "docs.claude.com/en/docs/build-with-claude/extended-"
                                          "thinking#feature-compatibility")
        # temperature with top_p: refused on Opus 4.1 and later, Sonnet 4.5 / 4.6 and Haiku 4.5
        # (utils/models/anthropic_models.py gives the reports).
        if "temperature" in body and "top_p" in body and re.search(
                r"claude-(sonnet-4-[5-9]|haiku-4-[5-9]|opus-4-[1-9])", model):
            return _anthropic_refusal("`temperature` and `top_p` cannot both be specified for this "
                                      "model. Please use only one.")
    elif req["api"] == "google":
        if gemini_thinking_budget(body) == 0 and re.match(r"gemini-(2\.5-pro|[3-9]|\d\d)", model):
            return _google_refusal("Budget 0 is invalid. This model only works in thinking mode.")
    return None


def gemini_thinking_budget(body: dict) -> int | None:
    """generationConfig.thinkingConfig.thinkingBudget. Google's JSON parser, as any proto3 JSON
    parser, accepts a field's lowerCamelCase name and its proto name (thinking_budget) alike
    (https://protobuf.dev/programming-guides/json/), and the SDK sends a dict's keys as given."""
    generation = body.get("generationConfig") or {}
    thinking = generation.get("thinkingConfig") or generation.get("thinking_config") or {}
    return thinking.get("thinkingBudget", thinking.get("thinking_budget"))


def _cut(text: str | None, words: int) -> str | None:
    """The first ``words`` words of an answer (what fits under a token limit)."""
    if text is None:
        return None
    return " ".join(text.split()[:max(0, words)])


@dataclass
class FakeResponse:
    text: str | None = None
    status: int = 200
    headers: dict | None = None
    delay: float = 0.0
    raw_body: bytes | None = None
    hang: bool = False
    # The providers' awkward answers, shaped as each documents them (the module docstring).
    finish: str | None = None      # finish_reason / stop_reason / finishReason sent instead
    refusal: str | None = None     # OpenAI's message.refusal, Anthropic's stop_details.explanation,
    #                                Gemini's blockReasonMessage
    hide_text: bool = False        # ``text`` is generated and billed but not sent (filtered)
    thinking_only: bool = False    # Anthropic: a thinking block and no text block
    block_reason: str | None = None  # Gemini: promptFeedback.blockReason, no candidate
    cached_tokens: int = 0         # prompt tokens reported as read from the prompt cache


def count_tokens(text: str | None) -> int:
    """The fake tokenizer: whitespace-separated words."""
    return len(text.split()) if text else 0


def _content_text(content: Any) -> str:
    """The text of a message content: a string, or a list of text blocks/parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(_content_text(block.get("text", "")) if isinstance(block, dict) else str(block)
                        for block in content)
    return "" if content is None else str(content)


def _prompt_tokens(req: dict) -> int:
    return count_tokens(req["system"]) + sum(count_tokens(m["content"]) for m in req["messages"])


def parse_body(api: str, body: dict, path: str, headers: dict) -> dict:
    """The request dict (see the module docstring) of one API body."""
    if api == "openai":
        system_parts, messages = [], []
        for message in body.get("messages") or []:
            role = message.get("role")
            text = _content_text(message.get("content"))
            if role in ("system", "developer"):
                system_parts.append(text)
            else:
                messages.append({"role": role, "content": text})
        system = "\n".join(system_parts)
    elif api == "google":
        instruction = body.get("systemInstruction") or body.get("system_instruction") or {}
        system = _content_text(instruction.get("parts") if isinstance(instruction, dict)
                               else instruction)
        messages = [{"role": "assistant" if c.get("role") == "model" else "user",
                     "content": _content_text(c.get("parts"))}
                    for c in body.get("contents") or []]
    else:
        system = _content_text(body.get("system"))
        messages = [{"role": m.get("role"), "content": _content_text(m.get("content"))}
                    for m in body.get("messages") or []]
    return {"api": api, "model": body.get("model"), "system": system, "messages": messages,
            "body": body, "headers": headers, "path": path}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # many client threads connect at once
    allow_reuse_address = True
    owner: "FakeLLMServer"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect
    # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and
    # the client's delayed ACK add ~40 ms to many answers.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return  # keep test output clean

    # -- routing ----------------------------------------------------------------------------
    def _refused_credentials(self) -> bool:
        """Answer 401 as a proxy that asks for HTTP basic auth does (nginx's auth_basic), for
        a request without ``basic_auth``'s user and password."""
        owner = self.server.owner
        if owner.basic_auth is None:
            return False
        expected = base64.b64encode(":".join(owner.basic_auth).encode("utf-8")).decode("ascii")
        if self.headers.get("Authorization") == f"Basic {expected}":
            return False
        with owner._lock:
            owner.unauthorized += 1
        self.close_connection = True
        self._send_bytes(401, b"<html><head><title>401 Authorization Required</title></head></html>",
                         "text/html", {"WWW-Authenticate": 'Basic realm="fake"', "Connection": "close"})
        return True

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.split("?", 1)[0].rstrip("/")
        if self._refused_credentials():
            return
        if fake_batch_api.route(self, "GET", path, b""):
            return
        if path in ("/v1/models", "/models", "/v1beta/models"):
            owner = self.server.owner
            owner._record_model_list(path, {k.lower(): v for k, v in self.headers.items()})
            if owner.models_status != 200:
                self._send_json(owner.models_status, {"error": {
                    "code": owner.models_status, "message": "scripted models answer",
                    "status": "UNAUTHENTICATED", "type": "authentication_error"}})
            elif path == "/v1beta/models":  # Gemini's shape
                self._send_json(200, {"models": [{"name": f"models/{name}"} for name in owner.models]})
            else:
                data = [{"id": name, "object": "model", "created": 0, "owned_by": "fake",
                         "type": "model", "display_name": name, "created_at": "2025-01-01T00:00:00Z"}
                        for name in owner.models]
                for entry in data:  # vLLM's model card: its owner and context length
                    if entry["id"] in owner.max_model_len:
                        entry.update(owned_by="vllm", root=entry["id"], parent=None,
                                     max_model_len=owner.max_model_len[entry["id"]], permission=[])
                # Together answers with a bare list; OpenAI, vLLM and Anthropic with a page.
                self._send_json(200, data if owner.models_bare_list else
                                {"object": "list", "data": data, "has_more": False})
        else:
            self._send_json(404, {"error": {"message": f"no route GET {path}", "type": "not_found"}})

    def do_PUT(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0].rstrip("/")
        if self._refused_credentials():
            return
        if not fake_batch_api.route(self, "PUT", path, raw):
            self._send_json(404, {"error": {"message": f"no route PUT {path}", "type": "not_found"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0].rstrip("/")
        if self._refused_credentials():
            return
        if fake_batch_api.route(self, "POST", path, raw):
            return
        model_in_path = None
        if path == "/tokenize" and self.server.owner.max_model_len and self.server.owner.tokenize_route:
            self._tokenize(raw)
            return
        if path.endswith("/chat/completions"):
            api = "openai"
        elif path.endswith("/messages"):
            api = "anthropic"
        elif path.endswith(":generateContent") and "/models/" in path:
            api = "google"
            model_in_path = path.rsplit("/models/", 1)[1][: -len(":generateContent")]
        else:
            self._send_json(404, {"error": {"message": f"no route POST {path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            self._send_error(api, 400, f"request body is not JSON: {exc}", None)
            return
        req = self._parse_request(api, body, path)
        req["body_bytes"] = raw
        if model_in_path is not None:
            req["model"] = model_in_path
        owner = self.server.owner
        owner._record(req)
        if api == "openai" and owner.max_model_len and self._refused_as_vllm(req):
            return
        refusal = (documented_refusal(req, owner.reasoning_models, frozenset(owner.anthropic_no_sampling))
                   if owner.enforce_rules else None)
        if refusal is not None:
            owner._record_refusal(req)
            self._answer(api, req, refusal)
            return
        try:
            response, scripted = owner._next_response(req)
        except Exception as exc:  # a bug in a test's responder: answer 500 and say why
            owner._record_responder_error(exc)
            self._send_error(api, 500, f"responder raised {type(exc).__name__}: {exc}", None)
            return
        if owner.token_limit is not None and response.status < 400 and not response.hang \
                and response.raw_body is None:
            cost = _prompt_tokens(req) + count_tokens(response.text)
            limit_headers, refused_for = owner._charge(cost)
            if refused_for is not None:
                if scripted:
                    owner._requeue(response)
                limit_headers.update({"retry-after": f"{refused_for:.3f}",
                                      "retry-after-ms": str(int(refused_for * 1000) + 1)})
                self._send_error(api, 429, "Rate limit reached for tokens per min", limit_headers)
                return
            response = dataclasses.replace(response, headers={**(response.headers or {}), **limit_headers})
        self._answer(api, req, response)

    # -- vLLM -------------------------------------------------------------------------------
    def _vllm_error(self, status: int, message: str, kind: str, param: str | None) -> None:
        self._send_json(status, {"error": {"message": message, "type": kind, "param": param,
                                           "code": status}})

    def _refused_as_vllm(self, req: dict) -> bool:
        """Answer as vLLM refuses a request (unknown model, longer than max_model_len)."""
        lengths = self.server.owner.max_model_len
        model = req["model"]
        if model not in lengths:
            self._vllm_error(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
            return True
        limit = lengths[model]
        body = req["body"]
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        token_num = _prompt_tokens(req)
        if token_num >= limit:
            self._vllm_error(400, f"This model's maximum context length is {limit} tokens. "
                                  f"However, your request has {token_num} input tokens. Please "
                                  f"reduce the length of the input messages. "
                                  f"(parameter=input_tokens, value={token_num})",
                             "BadRequestError", "input_tokens")
            return True
        if max_tokens is not None and token_num + max_tokens > limit:
            self._vllm_error(400, "'max_tokens' or 'max_completion_tokens' is too large: "
                                  f"{max_tokens}. This model's maximum context length is {limit} "
                                  f"tokens and your request has {token_num} input tokens "
                                  f"({max_tokens} > {limit} - {token_num}). "
                                  f"(parameter=max_tokens, value={max_tokens})",
                             "BadRequestError", "max_tokens")
            return True
        return False

    def _tokenize(self, raw: bytes) -> None:
        """vLLM's ``POST /tokenize`` for a chat: the prompt's tokens (the fake tokenizer's)."""
        body = json.loads(raw.decode("utf-8"))
        req = parse_body("openai", body, "/tokenize", {})
        lengths = self.server.owner.max_model_len
        if req["model"] not in lengths:
            self._vllm_error(404, f"The model `{req['model']}` does not exist.", "NotFoundError", "model")
            return
        count = _prompt_tokens(req)
        self.server.owner.tokenize_calls += 1
        self._send_json(200, {"count": count, "max_model_len": lengths[req["model"]],
                              "tokens": list(range(count)), "token_strs": None})

    # -- requests and answers -----------------------------------------------------------------
    def _parse_request(self, api: str, body: dict, path: str) -> dict:
        headers = {name.lower(): value for name, value in self.headers.items()}
        return parse_body(api, body, path, headers)

    def _answer(self, api: str, req: dict, response: FakeResponse) -> None:
        owner = self.server.owner
        wait = owner.latency + response.delay
        if wait > 0 and owner._stopping.wait(wait):
            self.close_connection = True
            return
        if response.hang:
            owner._stopping.wait(HANG_SECONDS)
            self.close_connection = True  # the client has long given up; just drop it
            return
        if response.raw_body is not None:
            self._send_bytes(response.status, response.raw_body, "application/json", response.headers)
            return
        if response.status >= 400:
            self._send_error(api, response.status, response.text, response.headers)
            return
        prompt_tokens = _prompt_tokens(req)
        model = req["model"] or "fake-model"
        body = req["body"]
        text = response.text
        cached = min(response.cached_tokens, prompt_tokens)
        if api == "openai":
            reasoning = (owner.reasoning_tokens if openai_is_reasoning(model, owner.reasoning_models)
                         else 0)
            limit = body.get("max_completion_tokens") or body.get("max_tokens")
            finish = "stop"
            if limit is not None and reasoning + count_tokens(text) > limit:
                reasoning = min(reasoning, limit)
                text, finish = _cut(text, limit - reasoning), "length"
            # A refusal's words are generated output too (billed as completion tokens).
            completion_tokens = count_tokens(text) + count_tokens(response.refusal) + reasoning
            payload = {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
                "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "finish_reason": response.finish or finish, "logprobs": None,
                             "message": {"role": "assistant",
                                         "content": None if response.hide_text else text,
                                         "refusal": response.refusal}}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens,
                          "prompt_tokens_details": {"cached_tokens": cached},
                          "completion_tokens_details": {"reasoning_tokens": reasoning}},
            }
        elif api == "google" and response.block_reason:
            # The prompt refused before any candidate: its tokens are billed all the same.
            completion_tokens = 0
            feedback = {"blockReason": response.block_reason}
            if response.refusal:
                feedback["blockReasonMessage"] = response.refusal
            payload = {"promptFeedback": feedback, "modelVersion": model,
                       "usageMetadata": {"promptTokenCount": prompt_tokens,
                                         "totalTokenCount": prompt_tokens}}
        elif api == "google":
            generation = body.get("generationConfig") or {}
            budget = gemini_thinking_budget(body)
            thinks = re.match(r"gemini-(2\.5|[3-9])", model.lower()) is not None
            thoughts = 0
            if thinks and budget != 0:
                thoughts = budget if budget is not None and budget > 0 else owner.gemini_thoughts
            limit = generation.get("maxOutputTokens")
            finish = "STOP"
            if limit is not None and thoughts + count_tokens(text) > limit:
                thoughts = min(thoughts, limit)
                text, finish = _cut(text, limit - thoughts), "MAX_TOKENS"
            parts = [] if not text or response.hide_text else [{"text": text}]
            completion_tokens = count_tokens(text) + thoughts
            usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": count_tokens(text),
                     "totalTokenCount": prompt_tokens + completion_tokens}
            if thoughts:
                usage["thoughtsTokenCount"] = thoughts
            if cached:
                usage["cachedContentTokenCount"] = cached
            payload = {
                "candidates": [{"content": {"role": "model", "parts": parts},
                                "finishReason": response.finish or finish, "index": 0}],
                "usageMetadata": usage,
                "modelVersion": model,
            }
        else:
            content = []
            thinking_words = 0
            stop = "end_turn"
            if text is not None or response.thinking_only:
                thinking = body.get("thinking") or {}
                if thinking.get("type") == "enabled" or response.thinking_only:
                    thought = owner.anthropic_thinking
                    content.append({"type": "thinking", "thinking": thought,
                                    "signature": "fake-signature"})
                    thinking_words = count_tokens(thought)
                limit = body.get("max_tokens")
                if limit is not None and thinking_words + count_tokens(text) > limit:
                    thinking_words = min(thinking_words, limit)
                    text, stop = _cut(text, limit - thinking_words), "max_tokens"
                if text and not response.hide_text and not response.thinking_only:
                    content.append({"type": "text", "text": text})
            completion_tokens = count_tokens(text) + thinking_words
            payload = {
                "id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message", "role": "assistant",
                "model": model, "content": content, "stop_reason": response.finish or stop,
                "stop_sequence": None,
                # Thinking tokens are billed as output and counted in output_tokens; input_tokens
                # leaves out the prompt tokens read from the cache (cache_read_input_tokens).
                "usage": {"input_tokens": prompt_tokens - cached, "cache_read_input_tokens": cached,
                          "cache_creation_input_tokens": 0, "output_tokens": completion_tokens},
            }
            if response.refusal:
                payload["stop_details"] = {"type": "refusal", "category": None,
                                           "explanation": response.refusal}
        owner._bill(api, model, prompt_tokens, completion_tokens, cached)
        self._send_json(response.status, payload, response.headers)

    def _send_error(self, api: str, status: int, message: str | None, headers: dict | None) -> None:
        message = message or f"fake error {status}"
        if api == "anthropic":
            kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
            payload = {"type": "error", "error": {"type": kind, "message": message}}
        elif api == "google":
            payload = {"error": {"code": status, "message": message,
                                 "status": _GOOGLE_STATUSES.get(status, "UNKNOWN")}}
        else:
            kind = _OPENAI_ERROR_TYPES.get(status, "server_error")
            payload = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
        self._send_json(status, payload, headers)

    def _send_json(self, status: int, payload: Any, headers: dict | None = None) -> None:
        self._send_bytes(status, json.dumps(payload).encode("utf-8"), "application/json", headers)

    def _send_bytes(self, status: int, data: bytes, content_type: str,
                    headers: dict | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, str(value))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a timeout test)


class FakeLLMServer:
    """A loopback LLM server; see the module docstring for its API."""

    count_tokens = staticmethod(count_tokens)

    def __init__(self, responder: Callable[[dict], "str | FakeResponse"] | None = None,
                 latency: float = 0.0, token_limit: int | None = None,
                 token_window: float = 60.0) -> None:
        self.responder = responder
        self.latency = latency
        self.token_limit = token_limit
        self.token_window = token_window
        self._bucket_level = float(token_limit or 0)
        self._bucket_stamp = time.monotonic()
        self.rate_limited = 0
        self.charged_tokens = 0
        # Batch APIs (tests/support/fake_batch_api.py).
        self.batch_delay = 0.0
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.together_files: set[str] = set()
        self.batch_items = 0
        self.batch_order_seed = 0  # seeds the order batch results come back in
        self.batch_endings: list[str] = []  # "expired"/"cancelled"/"failed": the next batches end so
        # What GET /v1/models lists (vLLM's check() asks for it): nothing, as a proxy that
        # lists no models, until a test names them (serve_as_vllm does).
        self.models: list[str] = []
        self.max_model_len: dict[str, int] = {}  # vLLM mode: served ids and their lengths
        self.tokenize_calls = 0
        self.tokenize_route = True  # False: a vLLM-like server without /tokenize
        self.models_status = 200        # another status answers the models route with an error
        self.basic_auth: tuple[str, str] | None = None  # (user, password) every request must send
        self.unauthorized = 0                            # requests answered 401 for want of them
        self.models_bare_list = False   # True: the list alone, as Together answers
        # The providers' documented refusals and reasoning usage (see the module docstring).
        self.enforce_rules = True
        self.reasoning_models: set[str] = set()  # more OpenAI names under reasoning rules
        self.anthropic_no_sampling: set[str] = set()  # more Claude names refusing temperature
        self.reasoning_tokens = 0                # an OpenAI reasoning model's hidden tokens
        self.gemini_thoughts = 0                 # a Gemini 2.5+ model's thoughts, no budget set
        self.anthropic_thinking = "Let me think about this."
        self.refused: list[dict] = []            # requests answered with a documented 400
        # What the server billed, one entry per answer it generated (refused, filtered and
        # blocked ones included): {"api", "model", "prompt_tokens", "completion_tokens",
        # "cached_tokens"}.
        self.billed: list[dict] = []
        self._lock = threading.Lock()
        self._script: deque[FakeResponse] = deque()
        self._requests: list[dict] = []
        self._model_list_requests: list[dict] = []
        self._responder_errors: list[BaseException] = []
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> "FakeLLMServer":
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-llm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()  # wakes hanging and delayed handlers
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "FakeLLMServer":
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the fake server is not running")
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return self.base_url + "/v1"

    # -- scripting ------------------------------------------------------------------------------
    def serve_as_vllm(self, max_model_len: dict[str, int]) -> "FakeLLMServer":
        """Validate and list models as ``vllm serve --max-model-len N`` does (module docstring)."""
        self.max_model_len = dict(max_model_len)
        self.models = list(max_model_len)
        return self

    def script(self, *items: "FakeResponse | str") -> None:
        """Queue answers, consumed in order before the responder is asked."""
        with self._lock:
            for item in items:
                if isinstance(item, str):
                    item = FakeResponse(text=item)
                if not isinstance(item, FakeResponse):
                    raise TypeError(f"script() takes FakeResponse or str, not {type(item).__name__}")
                self._script.append(item)

    @property
    def pending(self) -> int:
        """Scripted answers not yet consumed."""
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[dict]:
        with self._lock:
            return list(self._requests)

    @property
    def model_list_requests(self) -> list[dict]:
        """Every GET of a models route (a probe): {"path": str, "headers": {lower-cased: value}}."""
        with self._lock:
            return list(self._model_list_requests)

    @property
    def responder_errors(self) -> list[BaseException]:
        """Exceptions raised by the responder (each was answered with a 500)."""
        with self._lock:
            return list(self._responder_errors)

    # -- used by the handler --------------------------------------------------------------------
    def _record(self, req: dict) -> None:
        with self._lock:
            self._requests.append(req)

    def _bill(self, api: str, model: str, prompt_tokens: int, completion_tokens: int,
              cached_tokens: int) -> None:
        with self._lock:
            self.billed.append({"api": api, "model": model, "prompt_tokens": prompt_tokens,
                                "completion_tokens": completion_tokens, "cached_tokens": cached_tokens})

    def billed_totals(self, model: str | None = None) -> dict:
        """The tokens billed so far (to ``model``, or to all): prompt, completion and cached."""
        with self._lock:
            billed = [b for b in self.billed if model is None or b["model"] == model]
            return {k: sum(b[k] for b in billed) for k in ("prompt_tokens", "completion_tokens", "cached_tokens")}

    def _record_refusal(self, req: dict) -> None:
        with self._lock:
            self.refused.append(req)

    def _record_model_list(self, path: str, headers: dict) -> None:
        with self._lock:
            self._model_list_requests.append({"path": path, "headers": headers})

    def _record_responder_error(self, exc: BaseException) -> None:
        with self._lock:
            self._responder_errors.append(exc)

    def _charge(self, cost: int) -> tuple[dict, float | None]:
        """Pay ``cost`` tokens from the bucket: (rate-limit headers, None), or (headers,
        seconds until it could be paid) when it cannot."""
        limit = float(self.token_limit)
        rate = limit / self.token_window
        with self._lock:
            now = time.monotonic()
            self._bucket_level = min(limit, self._bucket_level + (now - self._bucket_stamp) * rate)
            self._bucket_stamp = now
            refused_for = None
            if self._bucket_level >= min(cost, limit):
                self._bucket_level -= cost
                self.charged_tokens += cost
            else:
                refused_for = (min(cost, limit) - self._bucket_level) / rate
                self.rate_limited += 1
            level = self._bucket_level
        headers = {"x-ratelimit-limit-tokens": str(int(limit)),
                   "x-ratelimit-remaining-tokens": str(max(0, int(level))),
                   "x-ratelimit-reset-tokens": f"{max(0.0, limit - level) / rate:.3f}s"}
        return headers, refused_for

    def _parse_body(self, api: str, body: dict, path: str) -> dict:
        return parse_body(api, body, path, {})

    def _requeue(self, response: FakeResponse) -> None:
        with self._lock:
            self._script.appendleft(response)

    def _next_response(self, req: dict) -> tuple[FakeResponse, bool]:
        """The answer to give, and whether it came from the script."""
        with self._lock:
            scripted = self._script.popleft() if self._script else None
        if scripted is not None:
            return scripted, True
        responder = self.responder
        answer = responder(req) if responder is not None else "OK"
        if isinstance(answer, str):
            return FakeResponse(text=answer), False
        if isinstance(answer, FakeResponse):
            return answer, False
        raise TypeError(f"the responder returned {type(answer).__name__}, not str or FakeResponse")
