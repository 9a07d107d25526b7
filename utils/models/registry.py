"""The registry of models by name and provider prefix, discovery of utils/models/, and
the resolution of a command-line name into a configured ``Model``."""
from __future__ import annotations

import inspect
import logging
import re
import threading
from typing import TYPE_CHECKING, Any, Callable, Sequence

import config
from utils.models.errors import ModelConfigurationError, UnknownModelError

if TYPE_CHECKING:
    from utils.models.model import Model

# model.py re-exports register_model and register_provider (the extension point), so this
# module imports model.py only inside the functions that need the class.

_REGISTRY: dict[str, type[Model]] = {}
_PROVIDERS: dict[str, type[Model]] = {}
_registry_lock = threading.Lock()
_discovered = False


def register_model(cls: type[Model]) -> type[Model]:
    """Class decorator: make ``cls`` available by its ``model_name``."""
    from utils.models.model import Model

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
    from utils.models.model import Model

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
        model.validate_overrides(model.overrides)
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


# The request fields a user may override (Request's own fields, translated by every adapter;
# the reasoning options only by the providers that take them: Model.validate_overrides).
OVERRIDABLE = ("temperature", "max_tokens", "seed", "reasoning_effort", "thinking_budget")


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
