"""CUPID evaluation: infer → decompose → match → judge.

``from evaluation import evaluate`` is the Python API (evaluation/api.py); importing the
package itself stays cheap (the API is loaded on first use)."""
from evaluation.shadowing import check_own_modules

check_own_modules()


def __getattr__(name: str):
    if name in ("evaluate", "EvaluationResult"):
        from evaluation import api

        return getattr(api, name)
    raise AttributeError(f"module 'evaluation' has no attribute {name!r}")
