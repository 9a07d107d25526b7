"""CUPID evaluation: infer → decompose → match → judge.

``from evaluation import evaluate`` is the Python API (evaluation/api.py); importing the
package itself stays cheap (the API is loaded on first use)."""
import importlib.util as _importlib_util
from pathlib import Path as _Path


def _check_own_modules() -> None:
    # utils/shadowing.py by its path: ``utils`` may itself be the module another project shadows.
    spec = _importlib_util.spec_from_file_location(
        "_cupid_shadowing", _Path(__file__).resolve().parent.parent / "utils" / "shadowing.py")
    guard = _importlib_util.module_from_spec(spec)
    spec.loader.exec_module(guard)
    guard.check_own_modules()


_check_own_modules()


def __getattr__(name: str):
    if name in ("evaluate", "EvaluationResult"):
        from evaluation import api

        return getattr(api, name)
    raise AttributeError(f"module 'evaluation' has no attribute {name!r}")
