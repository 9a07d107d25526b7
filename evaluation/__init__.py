"""CUPID evaluation: infer → decompose → match → judge.

``from cupid.evaluation import evaluate`` is the Python API (evaluation/api.py); importing the
package itself stays cheap (the API is loaded on first use)."""

if __name__ == "evaluation":  # ``python -m evaluation.…`` inside a checkout (utils/checkout.py)
    from utils.checkout import run_installed

    run_installed(__name__, "cupid-eval")


def __getattr__(name: str):
    if name in ("evaluate", "EvaluationResult"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'cupid.evaluation' has no attribute {name!r}")
