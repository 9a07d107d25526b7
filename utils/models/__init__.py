"""The model layer: ``from cupid.utils.models import Model, register_model`` is what a user's
model needs (model.py's ``__all__`` lists the rest of the extension point).

``discover_models()`` imports every module of this package once, so that each provider's
declarations are known: its model classes (model.py's tables, which registry.py resolves names
in), its dated catalog (catalog.py) and its rate-limit headers (rate_limit_headers.py). The
modules are found by listing the package, so nothing names a provider; none may do I/O at
import (SDKs are imported lazily)."""
import importlib
import pkgutil
import threading

_discovery = threading.RLock()
_discovered = False


def discover_models() -> None:
    global _discovered
    with _discovery:
        if not _discovered:
            for info in pkgutil.iter_modules(__path__):
                if not info.name.startswith("_"):
                    importlib.import_module(f"{__name__}.{info.name}")
            _discovered = True


def __getattr__(name: str):
    model = importlib.import_module("cupid.utils.models.model")
    if name in model.__all__:
        return getattr(model, name)
    raise AttributeError(f"module 'cupid.utils.models' has no attribute {name!r}")
