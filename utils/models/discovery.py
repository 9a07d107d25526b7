"""Every module of utils/models/ imported once, so that each provider's declarations are
known: its model classes (model.py's tables, which registry.py resolves names in), its dated
table of prices and context windows (catalog.py) and its rate-limit header family
(pacing.py). The modules are found by listing the package, so nothing here names a provider;
no module does I/O at import (SDKs are imported lazily)."""
from __future__ import annotations

import importlib
import pkgutil
import threading

_lock = threading.RLock()
_imported = False


def import_model_modules() -> None:
    global _imported
    if _imported:
        return
    with _lock:
        if _imported:
            return
        package = importlib.import_module("cupid.utils.models")
        for info in pkgutil.iter_modules(package.__path__):
            if not info.name.startswith("_"):
                importlib.import_module(f"cupid.utils.models.{info.name}")
        _imported = True
