"""The model layer's errors: what a call raises, and which of them retrying may fix."""
from __future__ import annotations


class ModelError(Exception):
    """Base class of every error raised by the model layer."""


class ModelConfigurationError(ModelError):
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
    """Raised by the seam when a call failed for good; says why and after how many attempts."""

    def __init__(self, model: str, reason: str, attempts: int, last_error: BaseException | None):
        super().__init__(f"{model}: {reason} (after {attempts} attempt{'s' * (attempts != 1)})")
        self.model = model
        self.reason = reason
        self.attempts = attempts
        self.last_error = last_error
