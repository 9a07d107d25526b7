"""A run's ``batches.json``: every batch it submitted (id, provider, model, round, the
items' cache keys), written as soon as the provider accepts the batch, and each batch's
outcome once fetched. Reading it tolerates a damaged file: what is readable is kept (those
batches are still resumed), the file is moved aside and named with what was wrong."""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from ..io import atomic_write_json

# What batches.json holds of a batch from its submission (its fetch adds the outcome).
SUBMITTED_FIELDS = ("batch_id", "provider", "model", "round", "items", "submitted_at")


def read_state(path: Path) -> tuple[dict, list[str]]:
    """The batches of ``path`` and warnings. A file that cannot be read whole (truncated,
    not the expected shape) is moved aside and named with what is wrong and the batch ids
    it lists; its entries that can be used are kept, so their batches are still resumed."""
    if not path.exists():
        return {"batches": []}, []
    text, kept = "", []
    try:
        text = path.read_text(encoding="utf-8")
        state = json.loads(text)
    except UnicodeDecodeError as exc:
        problem = f"not UTF-8 text ({exc.reason})"
    except json.JSONDecodeError as exc:
        problem = f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
    else:
        if not isinstance(state, dict) or not isinstance(state.get("batches"), list):
            problem = (f"expected an object with a 'batches' list, found "
                       f"{type(state).__name__ if not isinstance(state, dict) else 'no batches list'}")
        else:
            bad = []
            for n, entry in enumerate(state["batches"], start=1):
                why = _entry_problem(entry)
                if why:
                    bad.append(f"entry {n} {why}")
                else:
                    kept.append(entry)
            if not bad:
                return state, []
            problem = "; ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
    dropped = sorted(set(re.findall(r'"batch_id"\s*:\s*"([^"\\]+)"', text)) - {e["batch_id"] for e in kept})
    target = path.with_name(f"{path.name}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}")
    os.replace(path, target)
    state = {"batches": kept}
    if kept:
        atomic_write_json(path, state)
    listed = (f"batches not resumed: {', '.join(dropped)} (their requests are submitted again "
              f"unless already answered)") if dropped else "no batch id in it could be read"
    return state, [f"{path}: {problem}; moved to {target.name}; {listed}"
                   + (f"; {len(kept)} readable batch(es) kept" if kept else "")]


def _entry_problem(entry: Any) -> str:
    if not isinstance(entry, dict):
        return f"is not an object ({type(entry).__name__})"
    name = entry.get("batch_id", "")
    for field, kind in (("batch_id", str), ("model", str), ("items", dict)):
        if not isinstance(entry.get(field), kind) or not entry.get(field):
            what = "missing" if field not in entry else f"not a {'name' if kind is str else 'mapping'}"
            return f"({name or 'no id'}): '{field}' {what}"
    return ""
