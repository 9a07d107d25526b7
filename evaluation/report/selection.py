"""What a context strategy kept of the prior sessions, per run (docs/strategies.md): the
sessions shown, their session recall and precision, the history's tokens and the evaluated
model's input tokens, as means with persona-clustered intervals."""
from __future__ import annotations

from . import statistics as S
from .results import Run
from ..session_recall import instance_selection
from ..steps import GENERATE, INFER, SUMMARIZE

SELECTION_METRICS = ("sessions_shown", "recall", "precision", "history_tokens", "model_input_tokens")
_MODEL_STEPS = (INFER.name, GENERATE.name, SUMMARIZE.name)  # the steps whose requests carry the history


def selection_estimates(run: Run, ids: list[str], n_bootstrap: int, seed: int) -> dict[str, S.Estimate]:
    """Means over the instances, with intervals resampling personas: the sessions shown, their
    session recall and precision, the history text's tokens (estimated) and the evaluated
    model's input tokens as its provider counted them (infer, generate, summarize)."""
    values: dict[str, dict[str, float]] = {m: {} for m in SELECTION_METRICS}
    for i in ids:
        data = run.instances[i]
        found = instance_selection(data) or {}
        for metric, key in (("sessions_shown", "n_shown"), ("recall", "recall"), ("precision", "precision"),
                            ("history_tokens", "tokens")):
            if found.get(key) is not None:
                values[metric][i] = found[key]
        usage = [((data.get("steps") or {}).get(name) or {}).get("usage") or {} for name in _MODEL_STEPS]
        if any(usage):
            values["model_input_tokens"][i] = sum(int(u.get("prompt_tokens") or 0) for u in usage)
    return {metric: S.bootstrap(list(found.values()), "mean", clusters=[run.persona(i) for i in found],
                                n_bootstrap=n_bootstrap, seed=seed)
            for metric, found in values.items()}
