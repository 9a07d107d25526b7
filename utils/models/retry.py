"""The retry policy of the seam: which errors are retried, how long to back off, and the
stop flag that ends retrying when the run is stopping."""
from __future__ import annotations

import json
import random
import re
import threading
from typing import Any

from ... import config
from .call_errors import ModelConfigurationError, PermanentModelError, TransientModelError
from .rate_limit_headers import parse_duration
from ..redact import redact

# Set when the process is stopping: the seam starts no new attempt and cuts its backoff
# sleeps short, so worker threads return within moments of a Ctrl-C instead of retrying.
CANCEL = threading.Event()


def cancel_all() -> None:
    CANCEL.set()


def reset_cancel() -> None:
    CANCEL.clear()


# The client errors a retry may fix (a timeout, a conflict, too early, too many requests); every
# other 4xx is permanent, every 5xx is retried.
_RETRYABLE_CLIENT_ERRORS = {408, 409, 425, 429}


def status_code(exc: BaseException) -> int | None:
    for attr in ("status_code", "code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and 100 <= value < 600:
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def retry_after_of(exc: BaseException) -> float | None:
    """The seconds a refusal asks to wait: the error's own ``retry_after``, else its answer's
    ``retry-after-ms`` or ``retry-after`` (seconds, or an HTTP date: RFC 9110 10.2.3); None when
    there is none or it is garbage (our own backoff applies)."""
    value = getattr(exc, "retry_after", None)
    if isinstance(value, (int, float)):
        return float(value)
    headers = headers_of(exc)
    try:
        if headers and headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000.0
        return parse_duration(headers.get("retry-after")) if headers else None
    except (TypeError, ValueError):
        return None


def headers_of(exc: BaseException) -> Any:
    return getattr(getattr(exc, "response", None), "headers", None)


def classify_error(exc: BaseException) -> tuple[bool, float | None, str]:
    """Return (retryable, retry_after_seconds, reason) for an exception from one attempt."""
    if isinstance(exc, TransientModelError):
        return True, exc.retry_after, str(exc)
    if isinstance(exc, (PermanentModelError, ModelConfigurationError)):
        return False, None, str(exc)
    status = status_code(exc)
    reason = redact(f"{type(exc).__name__}: {exc}")
    too_long = context_length_message(exc)
    if too_long is not None:
        # The same request can never fit: fail the step now, with the server's numbers.
        return False, None, f"the request does not fit the model's context (HTTP {status}): {too_long}"
    if status is not None:
        if status in _RETRYABLE_CLIENT_ERRORS or status >= 500:
            return True, retry_after_of(exc), f"HTTP {status}: {exc}"
        if status >= 400:
            return False, None, f"HTTP {status}: {exc}"
    name = type(exc).__name__.lower()
    if isinstance(exc, (TimeoutError, ConnectionError)) or "timeout" in name or "connection" in name:
        return True, None, reason
    if isinstance(exc, json.JSONDecodeError):
        # A malformed body from the server (truncated, an HTML error page): ask again.
        return True, None, f"malformed response body: {exc}"
    if isinstance(exc, (ValueError, TypeError, KeyError, AttributeError, NotImplementedError)):
        # A programming or request-building error: the same call would fail the same way.
        return False, None, reason
    # Unknown errors from a user's own __call__ (an HTTP library we do not know, say) are
    # retried: the number of attempts is bounded, so a real bug still surfaces quickly.
    return True, None, reason


# A server's refusal of a request longer than its context, in the wordings of vLLM ("This
# model's maximum context length is N tokens. However, your request has M input tokens" and
# "'max_tokens' or 'max_completion_tokens' is too large: ..."), llama-cpp-python's server
# (OpenAI's old wording, code context_length_exceeded), llama.cpp's llama-server ("request
# (N tokens) exceeds the available context size (M tokens)", exceed_context_size_error),
# OpenAI's (code context_length_exceeded), Anthropic's (a 400 invalid_request_error "prompt is
# too long: 208656 tokens > 200000 maximum", as reported in github.com/sojohnnysaid/
# project-guide/issues/2 and github.com/boldsoftware/exe.dev/issues/62) and Google's (400
# INVALID_ARGUMENT "The input token count (1200293) exceeds the maximum number of tokens allowed
# (1048576).", as reported in github.com/google-gemini/gemini-cli/issues/6678).
_CONTEXT_LENGTH = re.compile(
    r"maximum context length is \d+|context_length_exceeded|exceed_context_size_error"
    r"|exceeds the available context size|prompt is too long: \d+ tokens > \d+ maximum"
    r"|the input token count \(\d+\) exceeds the maximum number of tokens", re.IGNORECASE)


def context_length_message(exc: BaseException) -> str | None:
    """The server's own message when ``exc`` is a refusal of a request longer than the
    model's context (a 400 from an OpenAI-compatible server), else None."""
    status = status_code(exc)
    if status is not None and not 400 <= status < 500:
        return None
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    text = " ".join(str(error[part]) for part in ("message", "code", "type") if error.get(part)) or str(exc)
    if not _CONTEXT_LENGTH.search(text):
        return None
    return redact(str(error.get("message") or exc))


def backoff_delay(attempt: int, retry_after: float | None) -> float:
    """Exponential backoff with full jitter; a server's Retry-After is a floor."""
    ceiling = min(config.RETRY_MAX_DELAY, config.RETRY_BASE_DELAY * (2 ** attempt))
    delay = random.uniform(0.5 * ceiling, ceiling)
    if retry_after is not None:
        delay = max(delay, min(retry_after, config.RETRY_MAX_DELAY * 2))
    return delay
