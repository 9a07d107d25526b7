"""What a context strategy kept, measured apart from what the model made of it: per instance,
the sessions shown (``shown`` in the instance file) against the relevant ones (those holding
the current preference, ``history.relevant_positions``); per run, results.json's
``session_selection``: session recall (the share of the relevant sessions shown, over the
instances that have one) and precision (the share of the shown sessions that are relevant,
over the instances shown any), averaged over instances, in all and per instance type."""
from __future__ import annotations

from typing import Iterable

from .metrics import mean
from .strategies import Shown, Strategy
from ..utils.dataset import INSTANCE_TYPES, Instance


def shown_record(shown: Shown, summaries: bool) -> dict:
    """The instance file's ``shown``: the 1-based positions shown (None when the strategy
    only rendered text), the history text's size (None when summaries are shown instead),
    estimated as the file's ``history.history_tokens`` is, 4 characters a token, and the
    text a strategy rendered (``text``), so that a resumed instance shows what it showed."""
    record = {"positions": None if shown.positions is None else list(shown.positions),
              "history_tokens": None if summaries else max(1, round(len(shown.text) / 4))}
    if shown.rendered:
        record["text"] = shown.text
    if shown.model_usage is not None:  # an LLM-backed strategy's calls for this instance
        record["model_usage"] = shown.model_usage
    return record


def recorded_selection(record: dict, n_sessions: int) -> tuple[list[int] | None, str | None, dict | None] | None:
    """What an instance file records its strategy returned, (positions, rendered text, the
    usage of its LLM calls), when it can be shown again as it was; None when it records
    none, or a failure."""
    shown = record.get("shown")
    if not isinstance(shown, dict) or shown.get("error") or "positions" not in shown:
        return None
    positions, text = shown.get("positions"), shown.get("text")
    if positions is None and not isinstance(text, str):
        return None  # rendered text not kept (an older file): the strategy is asked again
    if positions is not None and not (isinstance(positions, list) and all(
            isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= n_sessions for p in positions)):
        return None
    usage = shown.get("model_usage")
    return positions, text if isinstance(text, str) else None, usage if isinstance(usage, dict) else None


def kept_shown(setting: Strategy, instance: Instance, record: dict) -> Shown | None:
    """What an instance file says its strategy showed, to be shown again without asking the
    strategy (the run directory is the strategy's identity's); None when the file does not
    say it in full (a rendering strategy's text not kept: an older file)."""
    kept = recorded_selection(record, len(instance.prior_interactions))
    if kept is None or (kept[1] is None and callable(getattr(setting.impl, "render", None))):
        return None
    return setting.recorded_shown(instance, *kept)


def instance_selection(record: dict) -> dict | None:
    """An instance file's shown sessions and its session recall and precision (None where
    undefined), or None when it records none."""
    shown = record.get("shown")
    if not isinstance(shown, dict):
        return None
    positions = shown.get("positions")
    if positions is None:  # the strategy only rendered text
        return {"n_shown": None, "tokens": shown.get("history_tokens"), "recall": None, "precision": None}
    picked, relevant = set(positions), set((record.get("history") or {}).get("relevant_positions") or ())
    kept = len(picked & relevant)
    return {"n_shown": len(positions), "tokens": shown.get("history_tokens"),
            "recall": kept / len(relevant) if relevant else None,
            "precision": kept / len(picked) if picked else None}


def _block(selections: list[dict]) -> dict:
    return {"instances": len(selections),
            "sessions_shown": mean([s["n_shown"] for s in selections]),
            "recall": mean([s["recall"] for s in selections]),
            "n_recall": sum(s["recall"] is not None for s in selections),
            "precision": mean([s["precision"] for s in selections]),
            "n_precision": sum(s["precision"] is not None for s in selections),
            "history_tokens": mean([s["tokens"] for s in selections])}


def session_selection(records: Iterable[dict]) -> dict | None:
    """results.json's ``session_selection``; None when no instance file records what was shown."""
    found = [(str(r.get("instance_type")), s) for r in records if (s := instance_selection(r)) is not None]
    if not found:
        return None
    out = _block([s for _, s in found])
    out["by_instance_type"] = {t: _block([s for kind, s in found if kind == t])
                               for t in INSTANCE_TYPES if any(kind == t for kind, _ in found)}
    return out
