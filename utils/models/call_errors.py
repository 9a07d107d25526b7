"""The model layer's errors: what a call raises, and which of them retrying may fix."""
from __future__ import annotations

from ..errors import SetupError
from .endings import describe


class ModelError(Exception):
    """Base class of every error raised by the model layer."""


class ModelConfigurationError(ModelError, SetupError):
    """A missing key, an unreachable server, an unknown name: fix the setup, not the call."""


class UnknownModelError(ModelConfigurationError):
    pass


class AuthenticationFailed(ModelConfigurationError):
    """The server refused the key (HTTP 401/403): every further call would fail the same way."""


class RunCancelled(ModelError):
    """The run is stopping (Ctrl-C, or a refused key elsewhere): no new attempt is made."""


class TransientModelError(ModelError):
    """An error that retrying may fix (rate limit, overload, timeout, dropped connection)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class PermanentModelError(ModelError):
    """An error that retrying cannot fix (bad request, context length, auth, unknown model)."""


class ModelCallFailed(ModelError):
    """Raised by the seam when a call failed for good; says why and after how many attempts
    (0: refused before it was sent). ``answer``: what a re-ask loop (reask.py) had received
    before this call, when it made it."""

    answer = None

    def __init__(self, model: str, reason: str, attempts: int):
        after = f" (after {attempts} attempt{'s' * (attempts != 1)})" if attempts else ""
        super().__init__(f"{model}: {reason}{after}")
        self.reason = reason
        self.attempts = attempts


class AnswerWithheld(ModelCallFailed):
    """The provider answered (and billed) but gave no text: the answer was filtered or
    refused, the prompt blocked, or it was empty (endings.py). ``completion`` is that answer
    (its usage, ending and the provider's words); ``reason`` says it in those words."""

    def __init__(self, model: str, completion) -> None:
        super().__init__(model, describe(completion.ending, completion.finish, completion.refusal), 1)
        self.completion = completion


class ContextWindowExceeded(ModelCallFailed):
    """A request longer than the model's context window: refused before it is sent, since no
    retry can make it fit."""

    def __init__(self, model: str, prompt_tokens: int, max_tokens: int, window: int):
        super().__init__(model, f"the request does not fit the context window: at least {prompt_tokens} "
                         f"prompt tokens + {max_tokens} max_tokens = {prompt_tokens + max_tokens} > "
                         f"{window} tokens; not sent", 0)
