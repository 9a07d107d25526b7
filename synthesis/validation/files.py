"""What a validation writes from its rows: validation.jsonl, verified/, the annotation pages,
and summary.json (validation.py's module docstring shows the directory)."""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Sequence

from . import annotation
from .plan import EXPRESSED, FAILED, REQUEST
from ...utils.dataset import Instance
from ...utils.io import atomic_write_json, atomic_write_text, temporary_prefix
from ...utils.models.model import Model
from ...utils.prompts import load_prompt


def _pct(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 2) if whole else None


def summarize(rows: list[dict]) -> dict:
    prior = [e for r in rows for e in r["entries"] if e["preference_role"] != REQUEST]
    request = [e for r in rows for e in r["entries"] if e["preference_role"] == REQUEST]
    known = {key: [r[key] for r in rows if r[key] is not None] for key in ("solvable", "challenging")}
    decided = [e for e in prior if e["verdict"] != FAILED]
    ratings = Counter(e["rating"] for e in prior if e["verdict"] == EXPRESSED and e.get("rating"))
    by_role = {}
    for role in sorted({e["preference_role"] for e in prior}):
        mine = [e for e in decided if e["preference_role"] == role]
        by_role[role] = {"entries": len(mine), "expressed_pct": _pct(sum(e["verdict"] == EXPRESSED for e in mine), len(mine))}
    counts = {
        "instances": len(rows), "verified": sum(r["verified"] for r in rows),
        "solvable": sum(known["solvable"]), "solvable_unknown": len(rows) - len(known["solvable"]),
        "challenging": sum(known["challenging"]), "challenging_unknown": len(rows) - len(known["challenging"]),
        "instances_unknown": sum(r["solvable"] is None or r["challenging"] is None for r in rows),
        "entries": len(prior), "entries_expressed": sum(e["verdict"] == EXPRESSED for e in prior),
        "entries_failed": len(prior) - len(decided), "request_entries": len(request),
        "request_entries_stated": sum(e["verdict"] == EXPRESSED for e in request),
        "fragments_kept": sum(len(e["fragments"]) for r in rows for e in r["entries"]),
        "fragments_dropped": sum(len(e.get("dropped_fragments") or []) for r in rows for e in r["entries"]),
    }
    return {"counts": counts,
            "solvable_pct": _pct(counts["solvable"], len(known["solvable"])),
            "challenging_pct": _pct(counts["challenging"], len(known["challenging"])),
            "entries_expressed_pct": _pct(counts["entries_expressed"], len(decided)),
            "entries_by_preference": by_role,
            "rating_distribution": {str(k): ratings.get(k, 0) for k in range(1, 8)}}


def write_verified(directory: Path, instances: list[Instance], rows: list[dict]) -> list[dict]:
    """verified/: exactly this run's instances that passed (each row as the data had it),
    written into a fresh directory beside it and swapped in whole (``swap_in``), so no file
    of an earlier run (other data, a revoked verdict, instances past ``--limit``) is left in
    it and a reader never sees it half written."""
    passed = {r["instance_id"] for r in rows if r["verified"]}
    for stale in directory.parent.glob(f".{directory.name}.*"):  # of a run killed mid-swap
        shutil.rmtree(stale, ignore_errors=True)
    staging = directory.with_name(temporary_prefix(directory) + "new")
    staging.mkdir(parents=True)
    verified = [instance.to_row() for instance in instances if instance.instance_id in passed]
    for row, instance in zip(verified, (i for i in instances if i.instance_id in passed)):
        atomic_write_json(staging / f"{instance.instance_id}.json", row)
    swap_in(staging, directory)
    return verified


def swap_in(staging: Path, directory: Path) -> None:
    """``staging`` becomes ``directory``: on Linux in one step (renameat2's RENAME_EXCHANGE
    swaps the two, then the old one is removed); elsewhere the old one is renamed aside first,
    so for an instant there is no ``directory``, never a mix of the two."""
    if directory.exists() and _exchange(staging, directory):
        shutil.rmtree(staging)
        return
    if directory.exists():
        aside = staging.with_name(staging.name.removesuffix("new") + "old")
        directory.rename(aside)
        staging.rename(directory)
        shutil.rmtree(aside)
    else:
        staging.rename(directory)


def _exchange(a: Path, b: Path) -> bool:
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # not glibc 2.28+
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def write_outputs(out: Path, source, instances: list[Instance], rows: list[dict], validator: Model, *,
                  annotations: Sequence, tasks_per_page: int, wall_time_s: float, failed_now: int) -> tuple[dict, list[dict]]:
    requests = {i.instance_id: i.current_request for i in instances}
    tasks = annotation.annotation_tasks(rows, requests)
    pages = annotation.write_pages(out / "annotation", tasks, tasks_per_page)
    human, by_validator = None, summarize(rows)
    if annotations:
        human = annotation.fold(rows, tasks, annotation.read_annotations(annotations, {t["id"]: t for t in tasks}))
        human["validator_alone"] = {k: by_validator[k] for k in ("solvable_pct", "challenging_pct",
                                                                  "entries_expressed_pct")}
    atomic_write_text(out / "validation.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    verified = write_verified(out / "verified", instances, rows)
    failed_stored = sum(1 for path in (out / "answers").glob("*/*.json")
                        if json.loads(path.read_text(encoding="utf-8")).get("status") == "failed")
    summary = summarize(rows) if human is not None else by_validator
    summary["counts"]["extractions_failed"] = failed_stored
    summary["counts"]["failed_in_this_call"] = failed_now
    summary.update({
        "data": source.describe(), "validator": validator.label,
        "prompt_version": load_prompt("validation/extract_fragments").version,
        "annotation_pages": [str(p.relative_to(out)) for p in pages], "annotation_tasks": len(tasks),
        "usage": {"model": validator.name, **validator.usage.snapshot(validator.name)},
        "wall_time_s": round(wall_time_s, 2), "finished": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())})
    if human is not None:
        summary["human"] = human
    atomic_write_json(out / "summary.json", summary)
    return summary, verified
