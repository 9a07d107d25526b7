"""The registry of models by name and provider prefix, discovery of utils/models/, of the
user's own model code (``path/to/file.py:Class``, ``pkg.module:Class``) and of installed
plugins (the ``cupid.models`` entry-point group), and the resolution of a command-line name
into a configured ``Model``."""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import logging
import re
import sys
from pathlib import Path
from typing import Any, Sequence

from ... import config
from . import discover_models
from .call_errors import ModelConfigurationError, UnknownModelError
from .model import Model, register_model, register_provider  # noqa: F401 (re-exported)
from .model import MODEL_CLASSES as _REGISTRY, PROVIDER_CLASSES as _PROVIDERS


def registered_models() -> dict[str, type[Model]]:
    discover_models()
    return dict(_REGISTRY)


def guess_provider(name: str) -> str | None:
    """The prefix of the provider that claims a bare name most surely (each provider's
    ``name_guess``), or None."""
    discover_models()
    prefix, cls = max(sorted(_PROVIDERS.items()), key=lambda item: item[1].name_guess(name))
    return prefix if cls.name_guess(name) else None


# An Amazon Bedrock id of a Claude model, as the original release's README names its
# synthesizer ("anthropic.claude-3-5-sonnet-20241022-v2:0"), with an optional cross-region
# prefix ("us."). Group 1 is the Anthropic API's name of the same model.
_BEDROCK_CLAUDE = re.compile(r"^(?:[a-z]{2,4}\.)?anthropic\.(claude-[A-Za-z0-9.-]+?)-v\d+(?::\d+)?$")


def _construct(cls: type[Model], name: str | None, params: dict) -> Model:
    """Instantiate, passing only the keyword arguments the class accepts: its __init__'s and,
    through a ``**params`` it passes on, its bases' (``Model.__init__``'s at the end)."""
    accepted: set[str] = set()
    for klass in cls.__mro__:
        if "__init__" in vars(klass):
            parameters = inspect.signature(klass.__init__).parameters.values()
            accepted |= {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
            if not any(p.kind is p.VAR_KEYWORD for p in parameters):
                break
    kwargs = {k: v for k, v in params.items() if k in accepted}
    if name is not None and "name" in accepted:
        kwargs["name"] = name
    model = cls(**kwargs)
    if not hasattr(model, "usage"):  # a user __init__ that forgot super().__init__()
        Model.__init__(model, name)
        for key in ("temperature", "max_tokens", "timeout", "max_retries", "cache"):
            if key in params:
                setattr(model, key, params[key])
    return model


def resolve_model(spec: str | Model, *, role: str | None = None, overrides: dict | None = None,
                  **params: Any) -> Model:
    """Turn a command-line name into a Model.

    Order: an explicit ``provider:`` prefix; a registered ``model_name``; a guess from the
    name (gpt-/o1/o3/o4 → OpenAI, claude- → Anthropic, gemini- → Google, org/name → Together;
    a Bedrock Claude id such as anthropic.claude-3-5-sonnet-20241022-v2:0 → Anthropic).
    ``role`` picks the generation parameters of config.ROLE_PARAMS; ``params`` override them.
    ``overrides`` (temperature, max_tokens, seed) are the user's choices: they replace the
    parameters of every request, whatever the step asks for, and appear in ``model.label``.

    ``spec`` may also be the user's own code, ``path/to/file.py:ClassName`` or
    ``package.module:ClassName`` (the module's ``@register_model`` classes register too), the
    name of a model an installed plugin declares in the ``cupid.models`` entry-point group,
    or a ``Model`` instance, used as it is (only ``overrides`` are applied to it).
    """
    if isinstance(spec, Model):
        model = spec
        spec = model.name
    elif not isinstance(spec, str) or not spec:
        raise UnknownModelError(f"a model is a name or a Model instance, got {spec!r}")
    else:
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
    if is_code_spec(spec):
        return _construct(load_model_class(spec), None, merged)
    plugin = _entry_point_model(spec)
    if plugin is not None:
        return _construct(plugin, None if plugin.model_name else spec, merged)
    bedrock = _BEDROCK_CLAUDE.match(spec)
    if bedrock is not None and "anthropic" in _PROVIDERS:
        # The same model weights behind Anthropic's own API, so that the original README's
        # synthesis command runs verbatim with ANTHROPIC_API_KEY.
        logging.getLogger(__name__).info("%s is a Bedrock id; calling %s through the Anthropic API",
                                         spec, bedrock.group(1))
        return _construct(_PROVIDERS["anthropic"], bedrock.group(1), merged)
    provider = guess_provider(spec)
    if provider is not None and provider in _PROVIDERS:
        return _construct(_PROVIDERS[provider], spec, merged)
    known = ", ".join(sorted(set(_REGISTRY) | set(_entry_points()))) or "none"
    bare = ", ".join(f"{getattr(cls, 'bare_names', '')} ({prefix})"
                     for prefix, cls in sorted(_PROVIDERS.items()) if getattr(cls, "bare_names", ""))
    raise UnknownModelError(
        f"unknown model {spec!r}. Registered models: {known}. Hosted models are named by "
        f"provider: {bare}, or with a prefix: "
        f"{', '.join(p + ':' for p in sorted(_PROVIDERS))}NAME. Your own class: "
        f"path/to/file.py:ClassName or package.module:ClassName.")


# -- the user's own code and installed plugins ----------------------------------------------

ENTRY_POINT_GROUP = "cupid.models"
_MODULE_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def is_code_spec(spec: str) -> bool:
    """``file.py:Class`` or ``package.module:Class`` (a Bedrock id's ``...-v2:0`` is not:
    its tail is no class name, and its head no module path)."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr.isidentifier():
        return False
    return target.endswith(".py") or bool(_MODULE_PATH.match(target))


def portable_spec(spec: str) -> str:
    """The spec as it runs from any directory: a ``file.py:Class``'s file made absolute."""
    target, _, attr = spec.rpartition(":")
    if is_code_spec(spec) and target.endswith(".py"):
        return f"{Path(target).expanduser().resolve()}:{attr}"
    return spec


def _import_file(path: Path):
    """Import a Python file once per process and content (an edited file is imported again),
    under a name made from its absolute path (so two files named model.py do not collide). Its directory goes to the end of sys.path, so
    it may import its neighbours without them shadowing the harness's modules."""
    path = path.resolve()
    module_name = f"cupid_user_code_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}"
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise UnknownModelError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    loaded = sys.modules.get(module_name)
    if loaded is not None and getattr(loaded, "__cupid_source_sha256__", None) == digest:
        return loaded  # an edited file is imported again: the code that runs is the file's
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UnknownModelError(f"{path}: not a Python file that can be imported")
    module = importlib.util.module_from_spec(spec)
    module.__cupid_source_sha256__ = digest  # what the file held when imported (a strategy's identity)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        if loaded is not None:
            sys.modules[module_name] = loaded
        else:
            del sys.modules[module_name]
        raise
    return module


def _import_module(name: str):
    """Import ``name`` from sys.path, else from the working directory (put at the end of
    sys.path, so that the user's package is found without PYTHONPATH and without shadowing)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        top = name.split(".")[0]
        cwd = str(Path.cwd())
        if exc.name not in (top, name) or cwd in sys.path:
            raise
        sys.path.append(cwd)
        return importlib.import_module(name)


def load_code_attribute(spec: str, error: type[Exception] = UnknownModelError):
    """What ``path/to/file.py:Name`` (relative to the working directory) or
    ``package.module:Name`` names; ``error`` says why not. The user's models and context
    strategies (evaluation/strategies.py) are both loaded here."""
    target, _, attr = spec.rpartition(":")
    try:
        if target.endswith(".py"):
            path = Path(target).expanduser()
            if not path.is_file():
                raise error(f"{spec}: no such file {target} (relative to {Path.cwd()})")
            module = _import_file(path)
        else:
            module = _import_module(target)
    except error:
        raise
    except Exception as exc:  # the user's module failed to import: say which and why, in one line
        raise error(f"{spec}: importing {target} failed: {type(exc).__name__}: {exc}") from exc
    found = getattr(module, attr, None)
    if found is None:
        raise error(f"{spec}: {target} has no {attr}")
    return found


def load_model_class(spec: str) -> type[Model]:
    """The class named by ``path/to/file.py:ClassName`` or ``package.module:ClassName``.
    Importing the module also registers its ``@register_model`` classes by name."""
    cls = load_code_attribute(spec)
    if not (isinstance(cls, type) and issubclass(cls, Model)):
        raise UnknownModelError(f"{spec}: {spec.rpartition(':')[2]} is not a subclass of utils.models.Model")
    return cls


def _entry_points(group: str = ENTRY_POINT_GROUP) -> dict:
    """The entry points of installed distributions in ``group`` (``cupid.models``), by name."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=group)}


def _entry_point_model(name: str) -> type[Model] | None:
    """The class an installed plugin declares as ``name = "package.module:ClassName"`` in
    its ``cupid.models`` entry points (or, for ``name = "package.module"``, the class of that
    name its ``@register_model`` classes register)."""
    ep = _entry_points().get(name)
    if ep is None:
        return None
    try:
        loaded = ep.load()
    except Exception as exc:
        raise UnknownModelError(f"{name}: the plugin's entry point {ep.value} failed to load: "
                                f"{type(exc).__name__}: {exc}") from exc
    if isinstance(loaded, type) and issubclass(loaded, Model):
        return loaded
    if name in _REGISTRY:
        return _REGISTRY[name]
    raise UnknownModelError(f"{name}: the plugin's entry point {ep.value} is neither a Model "
                            f"subclass nor a module that registers a model of that name")
