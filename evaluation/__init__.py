"""CUPID evaluation: infer → decompose → match → judge.

``from evaluation import evaluate`` is the Python API (evaluation/api.py); importing the
package itself stays cheap (the API is loaded on first use)."""
import runpy as _runpy
from pathlib import Path as _Path

# utils/shadowing.py run by its path: ``utils`` may itself be the module another project shadows.
_runpy.run_path(str(_Path(__file__).resolve().parent.parent / "utils" / "shadowing.py"),
                run_name="_cupid_shadowing")["check_own_modules"]()


def __getattr__(name: str):
    if name in ("evaluate", "EvaluationResult"):
        from evaluation import api

        return getattr(api, name)
    raise AttributeError(f"module 'evaluation' has no attribute {name!r}")
