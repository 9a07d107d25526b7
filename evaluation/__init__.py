"""CUPID evaluation: infer → decompose → match → judge.

``from cupid.evaluation import evaluate`` is the Python API (evaluation/api.py); importing the
package itself stays cheap (the API is loaded on first use)."""

if __name__ == "evaluation":  # imported from an uninstalled checkout, as ``python -m evaluation.…``
    import importlib.util

    if importlib.util.find_spec("cupid") is None:
        raise SystemExit("error: the harness is not installed: in this checkout run "
                         "`pip install -r requirements.txt` (or `pip install -e .`), then `cupid-eval --help`")


def __getattr__(name: str):
    if name in ("evaluate", "EvaluationResult"):
        from cupid.evaluation import api

        return getattr(api, name)
    raise AttributeError(f"module 'cupid.evaluation' has no attribute {name!r}")
