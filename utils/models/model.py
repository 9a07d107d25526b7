"""The one seam every LLM call in the project goes through.

A model is a small class. Users write the shape the original README shows:

    from cupid.utils.models.model import Model, register_model

    @register_model
    class YourModel(Model):
        model_name = "your-model-name"
        def __call__(self, system_prompt, user_prompt):
            return "..."

Provider adapters instead implement ``complete(request) -> Completion``: one attempt, no
retries. Pipelines never call either directly; they call ``generate``/``chat``, which add,
once for every model: retries with backoff, pacing to the endpoint's rate limits
(pacing.py), token and latency accounting, and an optional response cache. A user's
``__call__``-only class gets all of that too.

This module is the extension point: besides ``Model`` it re-exports (``__all__``) only what a
user's model may need; the project imports everything else from its own module.
"""
from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from dataclasses import asdict
from typing import Any, Callable, ClassVar, Sequence

from ... import config
from . import pacing
from .adaptations import ADAPTATIONS
from .cache import ResponseCache
from .catalog import context_window_of
from .embedded_grammar import unfollowed
from .endings import ending_of, is_withheld
from .call_errors import (AnswerWithheld, AuthenticationFailed, ContextWindowExceeded, ModelCallFailed,
                          ModelConfigurationError, ModelError, PermanentModelError, RunCancelled,
                          TransientModelError)
from .request import Completion, Layout, Message, Request, Usage, validate_messages
from .retry import CANCEL, backoff_delay, classify_error, headers_of, retry_after_of, status_code
from .tokens import lower_bound_tokens
from .usage import UsageTracker
from ..redact import redact

__all__ = [
    "Model", "register_model", "register_provider", "Completion", "Message", "Request", "Usage",
    "ModelError", "ModelConfigurationError", "TransientModelError", "PermanentModelError",
    "ResponseCache",
]

log = logging.getLogger("cupid.models")

# The classes registry.py resolves names to: by ``model_name``, and by ``provider:`` prefix.
# They are filled here, where a model class is defined, so that the seam imports nothing of
# the resolution above it.
MODEL_CLASSES: dict[str, type["Model"]] = {}
PROVIDER_CLASSES: dict[str, type["Model"]] = {}


class Model:
    """Base class of every LLM. See the module docstring for the two ways to subclass it."""

    model_name: ClassVar[str | None] = None
    provider: ClassVar[str] = "custom"
    # True when the adapter can constrain decoding to a JSON schema (llama.cpp, vLLM).
    supports_json_schema: ClassVar[bool] = False
    # Batch mode (batch.py): set to a BatchRunner, calls that miss the cache are deferred
    # to the provider's batch API instead of being sent.
    batch_runner: Any = None
    # Generation parameters the user chose for this model's role (--model_args, --seed...):
    # they replace what each step asks for, and they name the model's runs and scores
    # (``label``), since such a run is not the benchmark's. Set by resolve_model.
    overrides: dict[str, Any] = {}

    def __init__(self, name: str | None = None, *, temperature: float | None = 0.0,
                 max_tokens: int | None = None, timeout: float | None = None,
                 max_retries: int | None = None, cache: ResponseCache | None = None,
                 sleep: Callable[[float], Any] | None = None) -> None:
        self.name = name or self.model_name or type(self).__name__
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = config.REQUEST_TIMEOUT if timeout is None else timeout
        self.max_retries = config.MAX_RETRIES if max_retries is None else max_retries
        self.cache = cache
        self.usage = UsageTracker()
        self._sleep = sleep or CANCEL.wait  # a stopping run wakes from a backoff at once

    @property
    def label(self) -> str:
        """The name, with the user's generation overrides when there are any:
        ``gpt-4o-2024-11-20[temperature=0.2,seed=1]``."""
        if not self.overrides:
            return self.name
        return f"{self.name}[{','.join(f'{k}={v}' for k, v in sorted(self.overrides.items()))}]"

    # -- what users and adapters implement ------------------------------------------------
    def __call__(self, system_prompt: str, user_prompt: str) -> str:
        """One turn. Users override this; pipelines call ``chat``/``generate`` instead."""
        return self.chat(system_prompt, [{"role": "user", "content": user_prompt}])

    def complete(self, request: Request) -> Completion:
        """One attempt at a request, no retries. Provider adapters override this."""
        if type(self).__call__ is Model.__call__:
            raise NotImplementedError(
                f"{type(self).__name__} must implement __call__(system_prompt, user_prompt) "
                "or complete(request)")
        # A __call__-only model: a conversation is flattened into one user prompt.
        return Completion(text=type(self).__call__(self, request.system_prompt, request.user_prompt))

    def check(self) -> None:
        """Fail fast, before any work, when a key is missing (no network)."""

    def probe(self) -> None:
        """One cheap request to the model's endpoint (a models list): raise
        ModelConfigurationError naming the URL when it cannot be reached or refuses the
        key. Models without an endpoint (embedded, a user's __call__) have nothing to probe."""

    def endpoint(self) -> str | None:
        """The server that answers (normalised base URL, a farm's set of URLs), which the
        cache key and run.json name. None: no endpoint (a user's ``__call__`` model, the
        embedded model) or the provider's default one."""
        return None

    def limiter_key(self) -> tuple | None:
        """The endpoint and key this model's calls count against (hosted adapters say);
        None: no provider limits to keep, unless the user set some for this model."""
        return None

    def rate_limiter(self):
        """The limiter shared by every model on this endpoint and key, or None."""
        return pacing.limiter_for(self.limiter_key(), self.name)

    # How this provider's raw finish signals (``Completion.finish``) map to the six endings
    # (endings.py): each provider's file declares its table; a signal not in it is "stop".
    finish_signals: ClassVar[dict[str, str]] = {}

    def ending(self, completion: Completion) -> str:
        """How ``completion`` ended (endings.py's rule over ``finish_signals``); an ending an
        adapter set itself without a raw signal (not "stop") is kept."""
        if completion.finish is None and completion.ending != "stop":
            return completion.ending
        return ending_of(self.finish_signals, completion.finish, completion.text)

    # -- parameter rules (provider adapters override) --------------------------------------
    # The reasoning options (--model_args) this model takes; adapters validate their values.
    reasoning_options: ClassVar[tuple[str, ...]] = ()

    def validate_overrides(self, overrides: dict) -> None:
        """Refuse, before any work, a generation override this model cannot take (raise
        ModelConfigurationError naming it)."""
        for option in ("reasoning_effort", "thinking_budget"):
            if option in overrides and option not in self.reasoning_options:
                takes = (f"it takes {', '.join(self.reasoning_options)}" if self.reasoning_options
                         else "it takes no reasoning options")
                raise ModelConfigurationError(
                    f"{self.name}: {option} is not supported by {self.provider} models ({takes}; "
                    f"reasoning_effort is OpenAI's, thinking_budget Anthropic's and Google's)")

    def parameter_adaptation(self, exc: BaseException):
        """The Adaptation (adaptations.py) a provider's refusal calls for, or None."""
        return None

    @property
    def learns_parameters(self) -> bool:
        """Whether the adapter reads a provider's refusal of a parameter (it has a
        ``parameter_adaptation``) and applies what was learned when it builds a request."""
        return type(self).parameter_adaptation is not Model.parameter_adaptation

    def reasoning_forecast(self, request: Request) -> tuple[int, str]:
        """(the hidden reasoning (thinking) tokens one call of ``request`` is expected to
        spend, billed as output, for ``--dry_run`` (utils/forecast.py); where that figure comes
        from): each provider's file says its families' figures from the effort or budget the
        request sets. 0: no reasoning, or none known (a run that recorded some is read
        instead: ``recorded_reasoning``)."""
        return 0, ""

    def forecast_reasoning_tokens(self, request: Request) -> int:
        return self.reasoning_forecast(request)[0]

    def reasoning_forecast_basis(self, request: Request) -> str:
        return self.reasoning_forecast(request)[1]

    def wire_parameters(self, request: Request) -> dict | None:
        """The generation parameters as this adapter sends ``request`` (for the step's
        record of what was sent), or None when the adapter does not say."""
        return None

    # How the bare names ``name_guess`` claims look, for messages ("claude-*").
    bare_names: ClassVar[str] = ""
    # The model families this provider's rules know, each with the reasoning option it takes
    # (registry.py ``model_listing``); ``family_of`` names a model's.
    families: ClassVar[tuple[tuple[str, str], ...]] = ()

    @classmethod
    def family_of(cls, name: str) -> str:
        """The family of ``families`` whose rules ``name`` follows, or ""."""
        return ""

    @classmethod
    def name_guess(cls, name: str) -> int:
        """How surely a bare model name is this provider's, for a name given without a
        ``provider:`` prefix (registry.py ``guess_provider``): 0 not at all, 1 by its shape
        only (``org/name``), 2 by a prefix the provider owns (``gpt-``, ``claude-``)."""
        return 0

    def batch_adapter(self) -> Any | None:
        """The ``BatchAdapter`` of this model's provider (batch.py), or None: its calls are
        asked online."""
        return None

    def context_window(self) -> int | None:
        """Prompt plus output tokens the model accepts (catalog.py), or None: unchecked."""
        return context_window_of(self.name)

    def adaptation_key(self) -> tuple:
        """What an adaptation is learned for: the model name at its provider and endpoint
        (a proxy may refuse what the provider takes)."""
        return (self.provider, self.endpoint(), self.name)

    def learned_adaptations(self) -> tuple:
        return ADAPTATIONS.learned(self.adaptation_key()) if self.learns_parameters else ()

    def _check_context_window(self, request: Request) -> None:
        window = self.context_window()
        if window is None:
            return
        prompt_tokens = lower_bound_tokens(
            request.system_prompt + "".join(m["content"] for m in request.messages))
        max_tokens = request.max_tokens or 0
        if prompt_tokens + max_tokens > window:
            self.usage.count(failed_calls=1)
            error = ContextWindowExceeded(self.name, prompt_tokens, max_tokens, window)
            log.warning("%s", error)
            raise error

    def learn_from_refusal(self, exc: BaseException, adapted: set) -> bool:
        """True when ``exc`` refuses a parameter this call has not yet been adapted for
        (``adapted``: the parameters it was already sent without): the adaptation is recorded
        for the model (printed once, whichever call learns it first) and the request is to be
        sent again, adapted (at once online; in the next round in batch mode, batch.py). The
        same refusal after the adaptation means it did not help: False, and the call fails
        as any 400 does."""
        adaptation = self.parameter_adaptation(exc)
        if adaptation is None or adaptation.parameter in adapted:
            return False
        adapted.add(adaptation.parameter)
        ADAPTATIONS.learn(self.adaptation_key(), adaptation)
        return True

    def constrain(self, request: Request) -> Request:
        """``request`` as this model follows its layout (answer_layout.py), before the cache key."""
        return unfollowed(request)

    # -- the seam ---------------------------------------------------------------------------
    def chat(self, system_prompt: str, messages: Sequence[Message], **options: Any) -> str:
        """A system prompt and a conversation (simulators use this); returns the text."""
        return self.generate(system_prompt, messages, **options).text

    def generate(self, system_prompt: str, messages: Sequence[Message], *,
                 json_schema: dict | None = None, layout: Layout | None = None,
                 temperature: float | None = ...,  # type: ignore[assignment]
                 max_tokens: int | None = ..., variant: int = 0) -> Completion:  # type: ignore[assignment]
        settings = {"temperature": self.temperature if temperature is ... else temperature,
                    "max_tokens": self.max_tokens if max_tokens is ... else max_tokens,
                    "seed": None}
        settings.update(self.overrides)  # the user's explicit choice beats the step's default
        request = self.constrain(Request(
            system_prompt=system_prompt or "",
            messages=validate_messages(messages),
            json_schema=json_schema,
            layout=layout,
            timeout=self.timeout,
            variant=variant,
            **settings,
        ))
        key = request.cache_key(self.name, self.provider, self.endpoint()) if self.cache is not None else None
        cached = self.cache.get(key) if key is not None else None
        if cached is not None:
            if not (cached.usage is not None and cached.usage.batch and self.batch_runner):
                self.usage.count(cache_hits=1)  # a batch answer was counted when fetched
            return self._delivered(cached, request)
        self._check_context_window(request)
        if self.batch_runner is not None:
            self.batch_runner.defer(self, request, key)  # raises BatchDeferred, or goes on
        with ADAPTATIONS.first_call(self.adaptation_key()) if self.learns_parameters else nullcontext():
            completion = self._send(request)
        if key is not None:
            self.cache.put(key, completion)
        return self._delivered(completion, request)

    def _delivered(self, completion: Completion, request: Request) -> Completion:
        """Attach what was sent (the parameters on the wire and the adaptations applied);
        an answer withheld without text (endings.py) is raised as ``AnswerWithheld``, which
        the re-ask loop (reask.py) asks again at most once. It is cached all the same, so
        a rerun replays it instead of paying for it again."""
        completion.parameters = self.wire_parameters(request)
        completion.adaptations = tuple(asdict(a) for a in self.learned_adaptations())
        if is_withheld(completion.ending, completion.text):
            raise AnswerWithheld(self.name, completion)
        return completion

    def _send(self, request: Request) -> Completion:
        """One request through retries and pacing; a refused parameter is learned and the
        request sent again at once (not counted as a retry)."""
        limiter = self.rate_limiter()
        prompt_chars = len(request.system_prompt) + sum(len(m["content"]) for m in request.messages)
        last_error: BaseException | None = None
        reason = "no attempt made"
        attempts = 0
        attempt = 0
        adapted: set[str] = set()  # parameters this call was resent without
        waited_pause = False
        while attempt <= self.max_retries:
            if CANCEL.is_set():
                raise RunCancelled(f"{self.name}: the run is stopping")
            attempts += 1
            ticket = (limiter.acquire(prompt_chars, request.max_tokens, waited_pause=waited_pause)
                      if limiter is not None else None)
            self.usage.count(attempts=1, retries=int(attempt > 0))
            started = time.perf_counter()
            try:
                completion = self.complete(request)
                if not isinstance(completion, Completion):
                    completion = Completion(text=completion)
                if not isinstance(completion.text, str):
                    raise PermanentModelError(
                        f"{self.name} returned {type(completion.text).__name__}, not text")
            except BaseException as exc:  # classified below; nothing is swallowed
                status = status_code(exc)
                if ticket is not None:
                    ticket.fail(status, retry_after_of(exc), headers_of(exc))
                if not isinstance(exc, Exception):
                    raise  # KeyboardInterrupt, SystemExit: the ticket is released, go
                if isinstance(exc, RunCancelled) or CANCEL.is_set():
                    # Ended by the stop (an adapter cut short, a client closed under it): no
                    # fault of the model, so neither retried nor a failed call.
                    raise RunCancelled(f"{self.name}: the run is stopping") from exc
                if status == 429:
                    self.usage.count(rate_limited=1)
                last_error = exc
                if isinstance(exc, AuthenticationFailed):
                    raise
                if self.learn_from_refusal(exc, adapted):
                    continue  # the same request, adapted: not a retry of a fault
                retryable, retry_after, reason = classify_error(exc)
                reason = redact(reason)
                if status in (401, 403):
                    log.warning("%s: the server refused the key: %s", self.name, reason)
                    raise AuthenticationFailed(
                        f"{self.name}: the server refused the API key ({reason})") from None
                if not retryable or attempt == self.max_retries:
                    break
                delay = backoff_delay(attempt, retry_after)
                log.info("%s: attempt %d of %d failed after %.2fs (%s); retrying in %.2fs",
                         self.name, attempt + 1, self.max_retries + 1,
                         time.perf_counter() - started, reason, delay)
                # After a 429 the limiter holds every other caller on the endpoint until the
                # retry-after; this one waits it out here (at least as long) and skips that hold.
                self._sleep(delay)
                waited_pause = ticket is not None and ticket.rate_limited
                attempt += 1
                continue
            if ticket is not None:
                ticket.settle(completion.usage, completion.headers)
            latency = time.perf_counter() - started
            completion.ending = self.ending(completion)
            self.usage.count(completion.usage, completion.ending, latency, calls=1)
            if attempts > 1:
                log.info("%s: answered on attempt %d in %.2fs", self.name, attempts, latency)
            completion.text = redact(completion.text)
            return completion
        self.usage.count(failed_calls=1)
        log.warning("%s: call failed after %d attempt%s: %s", self.name, attempts,
                    "s" * (attempts != 1), reason)
        raise ModelCallFailed(self.name, reason, attempts) from last_error


def register_model(cls: type[Model]) -> type[Model]:
    """Class decorator: make ``cls`` available by its ``model_name``."""
    if not (isinstance(cls, type) and issubclass(cls, Model)):
        raise TypeError("@register_model decorates subclasses of Model")
    name = cls.model_name
    if not name or not isinstance(name, str):
        raise TypeError(f"{cls.__name__} needs a model_name class attribute to be registered")
    existing = MODEL_CLASSES.get(name)
    if existing is not None and existing.__qualname__ != cls.__qualname__:
        raise ValueError(f"model name {name!r} is registered twice: "
                         f"{existing.__module__}.{existing.__qualname__} and "
                         f"{cls.__module__}.{cls.__qualname__}")
    MODEL_CLASSES[name] = cls
    return cls


def register_provider(prefix: str) -> Callable[[type[Model]], type[Model]]:
    """Class decorator for provider adapters, addressed as ``prefix:model-name``."""
    def decorate(cls: type[Model]) -> type[Model]:
        PROVIDER_CLASSES[prefix] = cls
        return cls
    return decorate
