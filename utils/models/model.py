"""The one seam every LLM call in the project goes through.

A model is a small class. Users write the shape the original README shows:

    from utils.models.model import Model, register_model

    @register_model
    class YourModel(Model):
        model_name = "your-model-name"
        def __call__(self, system_prompt, user_prompt):
            return "..."

Provider adapters instead implement ``complete(request) -> Completion``: one attempt, no
retries. Pipelines never call either directly; they call ``generate``/``chat``, which add,
once for every model: retries with backoff, pacing to the endpoint's rate limits
(limits.py), token and latency accounting, and an optional response cache. A user's
``__call__``-only class gets all of that too.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import logging
import random
import re
import sqlite3
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

import config
from utils.redact import redact

Message = dict
log = logging.getLogger("cupid.models")  # {"role": "user" | "assistant", "content": str}


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------
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


# Set when the process is stopping: the seam starts no new attempt and cuts its backoff
# sleeps short, so worker threads return within moments of a Ctrl-C instead of retrying.
CANCEL = threading.Event()


def cancel_all() -> None:
    CANCEL.set()


def reset_cancel() -> None:
    CANCEL.clear()


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


# ---------------------------------------------------------------------------------------
# Requests and completions
# ---------------------------------------------------------------------------------------
@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    batch: bool = False  # answered through a provider's batch API, at the batch price


@dataclass
class Completion:
    text: str
    usage: Usage | None = None
    raw: Any = None
    # The answer's HTTP headers, when the adapter has them: the limiter reads the
    # provider's rate-limit statement from them.
    headers: Any = None


@dataclass(frozen=True)
class Request:
    system_prompt: str
    messages: tuple[Message, ...]
    temperature: float | None = None
    max_tokens: int | None = None
    json_schema: dict | None = None
    # The layout of a free-text answer as a llama.cpp GBNF grammar (headers in order, a
    # score's digits). Only the embedded model uses it: a 135M model does not keep a
    # markdown layout on its own. Hosted and server adapters ignore it, so the benchmark's
    # models answer unconstrained, as in the paper.
    answer_grammar: str | None = None
    timeout: float | None = None
    # Sent to providers that take one (OpenAI, Together, Google, vLLM, the embedded model);
    # None leaves the provider's default. Set only by a user's --seed or seed= override.
    seed: int | None = None
    # Distinguishes a deliberate re-ask (e.g. after an unparseable answer) from the first
    # ask in the cache key. It is never sent to the model.
    variant: int = 0

    @property
    def user_prompt(self) -> str:
        """The conversation as one user prompt, for models that take a single turn."""
        if len(self.messages) == 1:
            return self.messages[0]["content"]
        lines = []
        for message in self.messages:
            speaker = "User" if message["role"] == "user" else "AI Assistant"
            lines.append(f"{speaker}: {message['content']}")
        return "\n\n".join(lines)

    def cache_key(self, model_name: str) -> str:
        fields = [model_name, self.system_prompt, list(self.messages), self.temperature,
                  self.max_tokens, self.json_schema, self.answer_grammar, self.variant]
        if self.seed is not None:  # keeps the keys of unseeded requests as they were
            fields.append({"seed": self.seed})
        payload = json.dumps(fields, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def validate_messages(messages: Sequence[Message]) -> tuple[Message, ...]:
    if not messages:
        raise ValueError("a request needs at least one message")
    out = []
    for i, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant"):
            raise ValueError(f"message {i}: role must be 'user' or 'assistant', got {role!r}")
        if not isinstance(content, str):
            raise ValueError(f"message {i}: content must be a string")
        out.append({"role": role, "content": content})
    if out[-1]["role"] != "user":
        raise ValueError("the last message must come from the user")
    return tuple(out)


# ---------------------------------------------------------------------------------------
# Accounting
# ---------------------------------------------------------------------------------------
class UsageTracker:
    """Calls, retries, tokens and latency of one model; safe to update from many threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.failed_calls = 0
        self.attempts = 0
        self.retries = 0
        self.cache_hits = 0
        self.rate_limited = 0
        self.batch_calls = 0
        self.batch_prompt_tokens = 0
        self.batch_completion_tokens = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.latencies: list[float] = []

    def record_attempt(self, retry: bool) -> None:
        with self._lock:
            self.attempts += 1
            self.retries += int(retry)

    def record_success(self, usage: Usage | None, latency: float) -> None:
        with self._lock:
            self.calls += 1
            if usage is not None:
                self.prompt_tokens += usage.prompt_tokens
                self.completion_tokens += usage.completion_tokens
            self.latencies.append(latency)

    def record_batch(self, usage: Usage | None) -> None:
        """A call answered in a batch (batch.py): counted as a call, priced as a batch one."""
        with self._lock:
            self.calls += 1
            self.batch_calls += 1
            if usage is not None:
                self.prompt_tokens += usage.prompt_tokens
                self.completion_tokens += usage.completion_tokens
                self.batch_prompt_tokens += usage.prompt_tokens
                self.batch_completion_tokens += usage.completion_tokens

    def record_failure(self) -> None:
        with self._lock:
            self.failed_calls += 1

    def record_rate_limited(self) -> None:
        with self._lock:
            self.rate_limited += 1

    def record_cache_hit(self) -> None:
        with self._lock:
            self.cache_hits += 1

    def snapshot(self, model_name: str | None = None) -> dict:
        with self._lock:
            latencies = list(self.latencies)
            out = {
                "calls": self.calls,
                "failed_calls": self.failed_calls,
                "attempts": self.attempts,
                "retries": self.retries,
                "cache_hits": self.cache_hits,
                "rate_limited": self.rate_limited,
                "batch_calls": self.batch_calls,
                "batch_prompt_tokens": self.batch_prompt_tokens,
                "batch_completion_tokens": self.batch_completion_tokens,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "latency_total_s": round(sum(latencies), 3),
                "latency_median_s": round(statistics.median(latencies), 4) if latencies else None,
            }
        out["estimated_cost_usd"] = estimate_cost(model_name, out["prompt_tokens"],
                                                  out["completion_tokens"],
                                                  out["batch_prompt_tokens"],
                                                  out["batch_completion_tokens"])
        return out


def estimate_cost(model_name: str | None, prompt_tokens: int, completion_tokens: int,
                  batch_prompt_tokens: int = 0, batch_completion_tokens: int = 0) -> float | None:
    """USD at config.PRICES_PER_MTOK; the batch_* tokens (included in the totals) are
    priced at config.BATCH_DISCOUNT of the online price."""
    price = config.PRICES_PER_MTOK.get(model_name or "")
    if price is None:
        return None
    online = (prompt_tokens - batch_prompt_tokens) * price[0] + \
        (completion_tokens - batch_completion_tokens) * price[1]
    batch = (batch_prompt_tokens * price[0] + batch_completion_tokens * price[1]) * config.BATCH_DISCOUNT
    return round((online + batch) / 1e6, 6)


# ---------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------
class ResponseCache:
    """Completed answers on disk (SQLite), keyed by the full request and the model name.

    A rerun after an interruption then replays finished calls instead of paying for them
    again, also inside a multi-turn dialogue. One connection, guarded by a lock.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # A cache that is not a database (a truncated copy, another file under its name) is
        # moved aside and a fresh one made: it only saves money, it holds no results.
        self.moved_aside: tuple[Path, str] | None = None
        try:
            self._db = self._open()
        except sqlite3.DatabaseError as exc:
            self.moved_aside = (self._move_aside(), str(exc))
            log.warning("%s is not a usable SQLite database (%s); moved to %s and started afresh",
                        self.path, exc, self.moved_aside[0])
            self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # WAL with NORMAL sync survives a killed process (only a power cut may lose the
            # last answers, which are then asked again); FULL would fsync every answer.
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS completions ("
                " key TEXT PRIMARY KEY, text TEXT NOT NULL,"
                " prompt_tokens INTEGER, completion_tokens INTEGER, batch INTEGER DEFAULT 0)"
            )
            columns = {row[1] for row in db.execute("PRAGMA table_info(completions)")}
            if "batch" not in columns:  # a cache written before batch mode existed
                db.execute("ALTER TABLE completions ADD COLUMN batch INTEGER DEFAULT 0")
            db.execute("SELECT count(*) FROM completions WHERE key = ''").fetchone()
            db.commit()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def _move_aside(self) -> Path:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{self.path}{suffix}")
            if source.exists():
                source.replace(Path(f"{target}{suffix}"))
        return target

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._db.execute(
                "SELECT text, prompt_tokens, completion_tokens, batch FROM completions WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None:
            return None
        usage = Usage(row[1], row[2], bool(row[3])) if row[1] is not None else None
        return Completion(text=row[0], usage=usage)

    def put(self, key: str, completion: Completion) -> None:
        usage = completion.usage
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?)",
                (key, completion.text, usage.prompt_tokens if usage else None,
                 usage.completion_tokens if usage else None, int(bool(usage and usage.batch))),
            )
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()


# ---------------------------------------------------------------------------------------
# Retry policy
# ---------------------------------------------------------------------------------------
_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}
_PERMANENT_STATUS = {400, 401, 402, 403, 404, 405, 413, 422}


def _status_code(exc: BaseException) -> int | None:
    for attr in ("status_code", "code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and 100 <= value < 600:
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def _retry_after(exc: BaseException) -> float | None:
    value = getattr(exc, "retry_after", None)
    if isinstance(value, (int, float)):
        return float(value)
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000.0
        if headers.get("retry-after"):
            return float(headers["retry-after"])
    except (TypeError, ValueError):
        return None  # an HTTP-date or garbage: fall back to our own backoff
    return None


def _headers_of(exc: BaseException) -> Any:
    return getattr(getattr(exc, "response", None), "headers", None)


def classify_error(exc: BaseException) -> tuple[bool, float | None, str]:
    """Return (retryable, retry_after_seconds, reason) for an exception from one attempt."""
    if isinstance(exc, TransientModelError):
        return True, exc.retry_after, str(exc)
    if isinstance(exc, (PermanentModelError, ModelConfigurationError)):
        return False, None, str(exc)
    status = _status_code(exc)
    reason = redact(f"{type(exc).__name__}: {exc}")
    if status is not None:
        if status in _RETRYABLE_STATUS or status >= 500:
            return True, _retry_after(exc), f"HTTP {status}: {exc}"
        if status in _PERMANENT_STATUS or 400 <= status < 500:
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


def backoff_delay(attempt: int, retry_after: float | None) -> float:
    """Exponential backoff with full jitter; a server's Retry-After is a floor."""
    ceiling = min(config.RETRY_MAX_DELAY, config.RETRY_BASE_DELAY * (2 ** attempt))
    delay = random.uniform(0.5 * ceiling, ceiling)
    if retry_after is not None:
        delay = max(delay, min(retry_after, config.RETRY_MAX_DELAY * 2))
    return delay


# ---------------------------------------------------------------------------------------
# The Model base class
# ---------------------------------------------------------------------------------------
class Model:
    """Base class of every LLM. See the module docstring for the two ways to subclass it."""

    model_name: ClassVar[str | None] = None
    provider: ClassVar[str] = "custom"
    # True when the adapter can constrain decoding to a JSON schema (llama.cpp, vLLM).
    supports_json_schema: ClassVar[bool] = False
    # True when the adapter follows Request.answer_grammar (the embedded model only).
    supports_answer_grammar: ClassVar[bool] = False
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
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.name = name or self.model_name or type(self).__name__
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = config.REQUEST_TIMEOUT if timeout is None else timeout
        self.max_retries = config.MAX_RETRIES if max_retries is None else max_retries
        self.cache = cache
        self.usage = UsageTracker()
        self._sleep = sleep

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

    def preflight(self) -> None:
        """What a run does once per configured model before any instance starts."""
        self.check()
        self.probe()

    def limiter_key(self) -> tuple | None:
        """The endpoint and key this model's calls count against (hosted adapters say);
        None: no provider limits to keep, unless the user set some for this model."""
        return None

    def rate_limiter(self):
        """The limiter shared by every model on this endpoint and key, or None."""
        from utils.models import limits

        key = self.limiter_key()
        if key is None:
            if not limits.has_user_limits(self.name):
                return None
            key = ("model", self.name)
        return limits.limiter_for(key, self.name)

    # -- the seam ---------------------------------------------------------------------------
    def chat(self, system_prompt: str, messages: Sequence[Message], **options: Any) -> str:
        """A system prompt and a conversation (simulators use this); returns the text."""
        return self.generate(system_prompt, messages, **options).text

    def generate(self, system_prompt: str, messages: Sequence[Message], *,
                 json_schema: dict | None = None, answer_grammar: str | None = None,
                 temperature: float | None = ...,  # type: ignore[assignment]
                 max_tokens: int | None = ..., variant: int = 0) -> Completion:  # type: ignore[assignment]
        settings = {"temperature": self.temperature if temperature is ... else temperature,
                    "max_tokens": self.max_tokens if max_tokens is ... else max_tokens,
                    "seed": None}
        settings.update(self.overrides)  # the user's explicit choice beats the step's default
        request = Request(
            system_prompt=system_prompt or "",
            messages=validate_messages(messages),
            json_schema=json_schema,
            answer_grammar=answer_grammar,
            timeout=self.timeout,
            variant=variant,
            **settings,
        )
        key = request.cache_key(self.name) if self.cache is not None else None
        if key is not None:
            cached = self.cache.get(key)
            if cached is not None:
                if not (cached.usage is not None and cached.usage.batch and self.batch_runner):
                    self.usage.record_cache_hit()  # a batch answer was counted when fetched
                return cached
        if self.batch_runner is not None:
            self.batch_runner.defer(self, request, key)  # raises BatchDeferred, or goes on

        limiter = self.rate_limiter()
        prompt_chars = len(request.system_prompt) + sum(len(m["content"]) for m in request.messages)
        last_error: BaseException | None = None
        reason = "no attempt made"
        attempts = 0
        waited_pause = False
        for attempt in range(self.max_retries + 1):
            if CANCEL.is_set():
                raise RunCancelled(f"{self.name}: the run is stopping")
            attempts = attempt + 1
            ticket = (limiter.acquire(prompt_chars, request.max_tokens, waited_pause=waited_pause)
                      if limiter is not None else None)
            self.usage.record_attempt(retry=attempt > 0)
            started = time.perf_counter()
            try:
                completion = self.complete(request)
                if not isinstance(completion, Completion):
                    completion = Completion(text=completion)
                if not isinstance(completion.text, str):
                    raise PermanentModelError(
                        f"{self.name} returned {type(completion.text).__name__}, not text")
            except BaseException as exc:  # classified below; nothing is swallowed
                status = _status_code(exc)
                if ticket is not None:
                    ticket.fail(status, _retry_after(exc), _headers_of(exc))
                if not isinstance(exc, Exception):
                    raise  # KeyboardInterrupt, SystemExit: the ticket is released, go
                if status == 429:
                    self.usage.record_rate_limited()
                last_error = exc
                if isinstance(exc, AuthenticationFailed):
                    raise
                retryable, retry_after, reason = classify_error(exc)
                reason = redact(reason)
                if _status_code(exc) in (401, 403):
                    log.warning("%s: the server refused the key: %s", self.name, reason)
                    raise AuthenticationFailed(
                        f"{self.name}: the server refused the API key ({reason})") from None
                if not retryable or attempt == self.max_retries:
                    break
                delay = backoff_delay(attempt, retry_after)
                log.info("%s: attempt %d of %d failed after %.2fs (%s); retrying in %.2fs",
                         self.name, attempts, self.max_retries + 1,
                         time.perf_counter() - started, reason, delay)
                # After a 429 the limiter holds every other caller on the endpoint until the
                # retry-after; this one waits it out here (at least as long) and skips that hold.
                self._pause(delay)
                waited_pause = ticket is not None and ticket.rate_limited
                continue
            if ticket is not None:
                ticket.settle(completion.usage, completion.headers)
            latency = time.perf_counter() - started
            self.usage.record_success(completion.usage, latency)
            if attempt:
                log.info("%s: answered on attempt %d in %.2fs", self.name, attempts, latency)
            completion.text = redact(completion.text)
            if key is not None:
                self.cache.put(key, completion)
            return completion
        self.usage.record_failure()
        log.warning("%s: call failed after %d attempt%s: %s", self.name, attempts,
                    "s" * (attempts != 1), reason)
        raise ModelCallFailed(self.name, reason, attempts, last_error) from last_error

    def _pause(self, delay: float) -> None:
        """Back off; a stopping run wakes at once instead of sleeping out the delay."""
        if self._sleep is time.sleep:
            CANCEL.wait(delay)
        else:
            self._sleep(delay)


# ---------------------------------------------------------------------------------------
# Registry and name resolution
# ---------------------------------------------------------------------------------------
_REGISTRY: dict[str, type[Model]] = {}
_PROVIDERS: dict[str, type[Model]] = {}
_registry_lock = threading.Lock()
_discovered = False


def register_model(cls: type[Model]) -> type[Model]:
    """Class decorator: make ``cls`` available by its ``model_name``."""
    if not (isinstance(cls, type) and issubclass(cls, Model)):
        raise TypeError("@register_model decorates subclasses of Model")
    name = cls.model_name
    if not name or not isinstance(name, str):
        raise TypeError(f"{cls.__name__} needs a model_name class attribute to be registered")
    existing = _REGISTRY.get(name)
    if existing is not None and existing.__qualname__ != cls.__qualname__:
        raise ValueError(f"model name {name!r} is registered twice: "
                         f"{existing.__module__}.{existing.__qualname__} and "
                         f"{cls.__module__}.{cls.__qualname__}")
    _REGISTRY[name] = cls
    return cls


def register_provider(prefix: str) -> Callable[[type[Model]], type[Model]]:
    """Class decorator for provider adapters, addressed as ``prefix:model-name``."""
    def decorate(cls: type[Model]) -> type[Model]:
        _PROVIDERS[prefix] = cls
        return cls
    return decorate


def discover_models() -> None:
    """Import every module in utils/models/ once, so that their classes register.

    Modules must not open connections or read keys at import; SDKs are imported lazily.
    """
    global _discovered
    with _registry_lock:
        if _discovered:
            return
        import importlib
        import pkgutil

        package = importlib.import_module("utils.models")
        for info in pkgutil.iter_modules(package.__path__):
            if not info.name.startswith("_"):
                importlib.import_module(f"utils.models.{info.name}")
        _discovered = True


def registered_models() -> dict[str, type[Model]]:
    discover_models()
    return dict(_REGISTRY)


def provider_prefixes() -> list[str]:
    discover_models()
    return sorted(_PROVIDERS)


def guess_provider(name: str) -> str | None:
    lowered = name.lower()
    if lowered.startswith(("gpt-", "o1", "o3", "o4", "chatgpt-")):
        return "openai"
    if lowered.startswith("claude-"):
        return "anthropic"
    if lowered.startswith("gemini-"):
        return "google"
    if "/" in name:
        return "together"
    return None


# An Amazon Bedrock id of a Claude model, as the original release's README names its
# synthesizer ("anthropic.claude-3-5-sonnet-20241022-v2:0"), with an optional cross-region
# prefix ("us."). Group 1 is the Anthropic API's name of the same model.
_BEDROCK_CLAUDE = re.compile(r"^(?:[a-z]{2,4}\.)?anthropic\.(claude-[A-Za-z0-9.-]+?)-v\d+(?::\d+)?$")


def anthropic_name_of_bedrock_id(spec: str) -> str | None:
    """``claude-3-5-sonnet-20241022`` for ``anthropic.claude-3-5-sonnet-20241022-v2:0``;
    None for anything that is not a Bedrock Claude id."""
    found = _BEDROCK_CLAUDE.match(spec)
    return found.group(1) if found else None


def _construct(cls: type[Model], name: str | None, params: dict) -> Model:
    """Instantiate, passing only the keyword arguments the class's __init__ accepts."""
    signature = inspect.signature(cls.__init__)
    accepts_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    kwargs = {k: v for k, v in params.items() if accepts_all or k in signature.parameters}
    if name is not None and (accepts_all or "name" in signature.parameters):
        kwargs["name"] = name
    model = cls(**kwargs)
    if not hasattr(model, "usage"):  # a user __init__ that forgot super().__init__()
        Model.__init__(model, name)
        for key in ("temperature", "max_tokens", "timeout", "max_retries", "cache"):
            if key in params:
                setattr(model, key, params[key])
    return model


def resolve_model(spec: str, *, role: str | None = None, overrides: dict | None = None,
                  **params: Any) -> Model:
    """Turn a command-line name into a Model.

    Order: an explicit ``provider:`` prefix; a registered ``model_name``; a guess from the
    name (gpt-/o1/o3/o4 → OpenAI, claude- → Anthropic, gemini- → Google, org/name → Together;
    a Bedrock Claude id such as anthropic.claude-3-5-sonnet-20241022-v2:0 → Anthropic).
    ``role`` picks the generation parameters of config.ROLE_PARAMS; ``params`` override them.
    ``overrides`` (temperature, max_tokens, seed) are the user's choices: they replace the
    parameters of every request, whatever the step asks for, and appear in ``model.label``.
    """
    model = _resolve(spec, role, params)
    if overrides:
        unknown = sorted(set(overrides) - set(OVERRIDABLE))
        if unknown:
            raise ModelConfigurationError(f"{spec}: cannot override {', '.join(unknown)}; "
                                          f"overridable: {', '.join(OVERRIDABLE)}")
        model.overrides = dict(overrides)
    return model


def check_models(models: Sequence[Model | None], probe: bool = True) -> None:
    """Every model's preflight (``check()`` then ``probe()``) before any work, reporting every
    problem at once (all the missing keys in one message) rather than one per attempt."""
    models = [m for m in models if m is not None]
    problems: list[str] = []
    # Keys first (no network), then one probe per endpoint, each pass reporting all it finds.
    for stage in ("check", "probe") if probe else ("check",):
        for model in models:
            try:
                getattr(model, stage)()
            except ModelConfigurationError as exc:
                if str(exc) not in problems:
                    problems.append(str(exc))
        if problems:
            break
    if len(problems) == 1:
        raise ModelConfigurationError(problems[0])
    if problems:
        raise ModelConfigurationError(f"{len(problems)} problems: " + " | ".join(problems))


# The request fields a user may override (Request's own fields, translated by every adapter).
OVERRIDABLE = ("temperature", "max_tokens", "seed")


def _resolve(spec: str, role: str | None, params: dict) -> Model:
    discover_models()
    merged = dict(config.ROLE_PARAMS.get(role, {})) if role else {}
    merged.update({k: v for k, v in params.items() if v is not None})
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in _PROVIDERS:
        return _construct(_PROVIDERS[prefix], rest, merged)
    if spec in _REGISTRY:
        return _construct(_REGISTRY[spec], None, merged)
    bedrock_name = anthropic_name_of_bedrock_id(spec)
    if bedrock_name is not None and "anthropic" in _PROVIDERS:
        # The same model weights behind Anthropic's own API, so that the original README's
        # synthesis command runs verbatim with ANTHROPIC_API_KEY.
        logging.getLogger(__name__).info("%s is a Bedrock id; calling %s through the Anthropic API",
                                         spec, bedrock_name)
        return _construct(_PROVIDERS["anthropic"], bedrock_name, merged)
    provider = guess_provider(spec)
    if provider is not None and provider in _PROVIDERS:
        return _construct(_PROVIDERS[provider], spec, merged)
    known = ", ".join(sorted(_REGISTRY)) or "none"
    raise UnknownModelError(
        f"unknown model {spec!r}. Registered models: {known}. Hosted models are named by "
        f"provider: gpt-*/o1*/o3*/o4* (OpenAI), claude-* (Anthropic), gemini-* (Google), "
        f"org/name (Together), or with a prefix: "
        f"{', '.join(p + ':' for p in sorted(_PROVIDERS))}NAME.")
