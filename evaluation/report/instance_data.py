"""The instances the runs evaluated, for report.html's instance pages and the sample export:
sessions, request and ground truth are not in the instance files, so they come from the
data each run names in run.json (``data_source``), or from the paths given
(``--data_dir`` / ``--data``)."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Iterable

from ..data import InstanceSource
from .results import Run
from ...utils.dataset import DataValidationError, Instance


def _source_specs(runs: list[Run], data_paths: Iterable[str | Path] | None,
                  results_dir: Path) -> tuple[list[dict], list[str]]:
    """Where to read instances from: the paths given, else each run's manifest."""
    if data_paths:
        return [{"data_path": Path(p)} for p in data_paths], []
    specs, notes, seen = [], [], set()
    for run in runs:
        for manifest in run.manifests:
            source = manifest.get("data_source")
            if isinstance(source, dict):  # {"path": ...} or {"dataset": ..., "split": ...}
                source = source.get("path") or (f"{source['dataset']}[{source.get('split', 'test')}]"
                                                 if source.get("dataset") else None)
            if not source or source in seen:
                continue
            seen.add(source)
            candidates = [Path(source), results_dir / source, results_dir.parent / source]
            found = next((c for c in candidates if c.exists()), None)
            hub = re.fullmatch(r"(?P<dataset>[^\[\]]+)\[(?P<split>[^\[\]]+)\]", str(source))
            if found is not None:
                specs.append({"data_path": found})
            elif hub and "/" in hub.group("dataset"):
                data = manifest.get("data") or {}  # the commit read, else the revision asked
                specs.append({"dataset": hub.group("dataset"), "split": hub.group("split"),
                              "revision": data.get("commit") or data.get("revision")})
            else:
                notes.append(f"data source {source!r} (named in run.json) not found; "
                             f"pass --data_dir to show sessions and ground truth")
    return specs, notes


def load_instance_data(runs: list[Run], results_dir: Path,
                       data_paths: Iterable[str | Path] | None = None) -> tuple[dict[str, Instance], list[str]]:
    wanted = {i for run in runs for i in run.instances}
    specs, notes = _source_specs(runs, data_paths, results_dir)
    found: dict[str, Instance] = {}
    # The instance types of a persona share most of their sessions: keep one copy of each.
    shared: dict[Any, Any] = {}
    for spec in specs:
        source = InstanceSource(**spec)
        try:
            for instance in source:
                if instance.instance_id in wanted and instance.instance_id not in found:
                    sessions = tuple(shared.setdefault((s.context_factor, s.contextual_preference,
                                                        tuple((t.role, t.content) for t in s.dialogue)), s)
                                     for s in instance.prior_interactions)
                    found[instance.instance_id] = dataclasses.replace(instance, prior_interactions=sessions)
        except (DataValidationError, OSError, ImportError, ValueError) as exc:
            notes.append(f"data source {source.name}: not read ({exc})")
        except Exception as exc:  # the hub: network, authentication, missing dataset
            notes.append(f"data source {source.name}: not read ({type(exc).__name__}: {exc})")
    missing = len(wanted - set(found))
    if specs and missing:
        notes.append(f"{missing} of {len(wanted)} instances not found in the data; "
                     f"their sessions and ground truth are not shown")
    return found, notes
