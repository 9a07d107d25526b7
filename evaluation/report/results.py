"""Reading a results directory for the report (docs/results_format.md): the runs, merged
by (model, setting), and each task's per-instance outcome under each scorer.

Every per-instance number is recomputed from the instance files (the `inference` counts and
`generation.score` of each scorer), never read from results.json, so a partial run can be
analysed: instances whose steps failed or have not run yet are counted and left out. Which
file is an instance file and what a manifest is are store.py's rules, not restated here.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

from .. import steps
from ..metrics import read_generation, read_inference
from ..strategies import PAPER_STRATEGIES
from ..store import MANIFEST, is_instance_file, is_results_file, step_record
from ...utils.io import read_json

# The model's steps that belong to one task only: a record holding one performed that task.
_OWN_STEPS = {task: [s.name for s in steps.of_task(task) if s.tasks == (task,) and not s.per_scorer]
              for task in steps.TASKS}


@dataclass
class Run:
    """All instance files of one (model, setting), possibly from several run directories."""
    model: str
    setting: str
    directories: list[Path] = field(default_factory=list)
    manifests: list[dict] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)      # results.json files, if any
    instances: dict[str, dict] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return self.model, self.setting

    @property
    def uses_labels(self) -> bool:
        """Whether the run's strategy read the instances' labels (run.json's
        ``setting_uses_labels``; a run.json without it: the oracle settings)."""
        marked = [m["setting_uses_labels"] for m in self.manifests if "setting_uses_labels" in m]
        return any(marked) if marked else self.setting in ("oracle", "oracle_preference")

    @property
    def setting_label(self) -> str:
        """The setting as the report names it: "(uses labels)" after one that read them."""
        return f"{self.setting} (uses labels)" if self.uses_labels else self.setting

    def instance_type(self, instance_id: str) -> str:
        return str(self.instances[instance_id].get("instance_type") or "unknown")

    def persona(self, instance_id: str) -> Any:
        """The cluster the intervals resample an instance with: its persona_id (a persona's
        instances share its sessions); an instance file without one is a cluster of its own."""
        return self.instances[instance_id].get("persona_id") or ("instance", instance_id)

    def ids(self, instance_type: str | None = None) -> list[str]:
        return sorted(i for i in self.instances
                      if instance_type in (None, "all") or self.instance_type(i) == instance_type)

    @cached_property
    def scorers(self) -> list[str]:
        found = {scorer for data in self.instances.values() for scorer in (data.get("evaluations") or {})}
        found.update(scorer for results in self.results if (scorer := (results.get("settings") or {}).get("scorer")))
        return sorted(found)

    @property
    def expected_instances(self) -> int | None:
        """How many instances results.json says the run has (None without results.json)."""
        totals = [(r.get("counts") or {}).get("instances") for r in self.results]
        totals = [t for t in totals if isinstance(t, int)]
        return max(totals) if totals else None

    @cached_property
    def tasks(self) -> set[str]:
        """The tasks this run performed: from its steps, or results.json's settings.task."""
        tasks: set[str] = set()
        for data in self.instances.values():
            recorded = data.get("steps") or {}
            tasks.update(task for task, names in _OWN_STEPS.items() if any(n in recorded for n in names))
            for evaluation in (data.get("evaluations") or {}).values():
                if isinstance(evaluation, dict):
                    tasks.update(task for task in steps.TASKS if evaluation.get(task) is not None)
        for results in self.results:
            task = (results.get("settings") or {}).get("task")
            tasks.update(t for t in steps.TASKS if task in (t, "both"))
        return tasks

    @cached_property
    def _judged(self) -> set[str]:
        """The scorers that hold a judge result or step in some instance."""
        judge_steps = [s.name for s in steps.of_task("generation") if s.per_scorer]
        return {scorer for data in self.instances.values()
                for scorer, evaluation in (data.get("evaluations") or {}).items()
                if isinstance(evaluation, dict) and (evaluation.get("generation") is not None
                                                     or any(s in (evaluation.get("steps") or {}) for s in judge_steps))}

    def has_task(self, task: str, scorer: str) -> bool:
        """Whether to report ``task`` under ``scorer``. A matcher scorer
        ("<evaluator>+<matcher>") reports generation only when it holds judge results."""
        return task in self.tasks and not (task == "generation" and "+" in scorer and scorer not in self._judged)


def find_run_dirs(root: str | Path) -> list[Path]:
    """Every directory under ``root`` (itself included) that holds a run.json."""
    root = Path(root)
    return sorted(p.parent for p in root.rglob(MANIFEST) if p.is_file())


def not_a_run(manifest: Any) -> str | None:
    """Why a run.json is not an evaluation run's manifest, or None when it is one."""
    if not isinstance(manifest, dict):
        return "its run.json is not an object"
    if isinstance(manifest.get("settings"), dict) and "model" not in manifest:
        return "a synthesis output (its run.json holds synthesis settings)"
    if not isinstance(manifest.get("model"), str) or not manifest["model"]:
        return "its run.json names no model"
    return None


def load_runs(root: str | Path, ignored: list[str] | None = None, keep_raw: bool = True) -> list[Run]:
    """Read every run directory under ``root``; runs of the same (model, setting) merge.

    Unreadable or foreign files are skipped with a warning on the run, never silently; a
    directory whose run.json is not an evaluation run's (a synthesis output, say) is left
    out with a note appended to ``ignored``. ``keep_raw=False`` drops the raw answers of
    steps done at the first attempt (their parsed output holds what the report shows), about
    half of a run's memory at paper scale.
    """
    runs: dict[tuple[str, str], Run] = {}
    ignored = [] if ignored is None else ignored
    for directory in find_run_dirs(root):
        try:
            manifest = read_json(directory / MANIFEST)
        except (OSError, ValueError) as exc:
            ignored.append(f"{directory}: left out, its run.json cannot be read ({exc})")
            continue
        reason = not_a_run(manifest)
        if reason:
            ignored.append(f"{directory}: left out, not an evaluation run: {reason}")
            continue
        model = str(manifest["model"])
        setting = str(manifest.get("setting") or "default")
        run = runs.setdefault((model, setting), Run(model, setting))
        run.directories.append(directory)
        run.manifests.append(manifest)
        for path in sorted(directory.iterdir()):
            if not path.is_file():
                continue
            if is_results_file(path.name):
                # Aggregates are never used for numbers; only their settings and counts.
                try:
                    results = read_json(path)
                    if isinstance(results, dict):
                        run.results.append(results)
                except (OSError, ValueError) as exc:
                    run.warnings.append(f"{path}: unreadable ({exc}); not used")
                continue
            if not is_instance_file(path):
                continue
            try:
                data = read_json(path)
            except (OSError, ValueError) as exc:
                run.warnings.append(f"{path}: unreadable, left out ({exc})")
                continue
            if not isinstance(data, dict) or not data.get("instance_id"):
                run.warnings.append(f"{path}: not an instance file (no instance_id), left out")
                continue
            if not keep_raw:
                _drop_first_try_raw(data)
            instance_id = str(data["instance_id"])
            if instance_id in run.instances:
                run.warnings.append(f"{path}: instance {instance_id} already read from another "
                                    f"directory of the same model and setting; this copy is left out")
                continue
            run.instances[instance_id] = data
    for run in runs.values():
        anonymous = sum(1 for data in run.instances.values() if not data.get("persona_id"))
        if anonymous:
            run.warnings.append(f"{anonymous} instance file(s) name no persona_id: each is a persona of its own "
                                f"in the intervals, which are too narrow if they share another's sessions")
    return sorted(runs.values(), key=lambda r: (r.model, setting_order(r.setting)))


def _drop_first_try_raw(data: dict) -> None:
    groups = [data.get("steps")] + [e.get("steps") for e in (data.get("evaluations") or {}).values() if isinstance(e, dict)]
    for group in groups:
        for step in (group or {}).values() if isinstance(group, dict) else ():
            if isinstance(step, dict) and step.get("status") == "done" and (step.get("attempts") or 1) <= 1:
                step.pop("raw", None)


def setting_order(setting: str) -> tuple[int, list]:
    """The paper's settings in its order, then the other strategies by name, numbers as numbers
    (``recent:k=2`` before ``recent:k=10``)."""
    order = list(PAPER_STRATEGIES)
    return (order.index(setting) if setting in order else len(order),
            [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", setting)])


# =======================================================================================
# Per-instance outcomes
# =======================================================================================
@dataclass
class Outcome:
    """One task under one scorer in one run: the usable per-instance values, and the
    instances left out (failed: the first failed step and its error; missing: not done yet;
    skipped: the strategy does not apply, i.e. oracle with no relevant prior session)."""
    values: dict[str, Any] = field(default_factory=dict)
    failed: dict[str, tuple[str, str]] = field(default_factory=dict)   # id -> (step, error)
    missing: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    # id -> "step: ending" of the results read from a filtered or refused answer (in
    # ``values``, or in ``excluded`` when the report leaves them out: --exclude_filtered).
    flagged: dict[str, str] = field(default_factory=dict)
    excluded: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def n_applicable(self) -> int:
        """Instances the task applies to: evaluated + failed + missing + excluded (not skipped)."""
        return len(self.values) + len(self.failed) + len(self.missing) + len(self.excluded)

    def failed_by_step(self) -> Counter:
        return Counter(step for step, _ in self.failed.values())

    def restrict(self, ids: Iterable[str]) -> "Outcome":
        ids = set(ids)
        return Outcome({k: v for k, v in self.values.items() if k in ids},
                       {k: v for k, v in self.failed.items() if k in ids},
                       [k for k in self.missing if k in ids],
                       [k for k in self.skipped if k in ids],
                       {k: v for k, v in self.flagged.items() if k in ids},
                       [k for k in self.excluded if k in ids])


def _first_failed_step(data: dict, scorer: str, task: str) -> tuple[str, str] | None:
    if isinstance(data.get("shown"), dict) and data["shown"].get("error"):  # the context strategy raised
        return "context", str(data["shown"]["error"])
    evaluation = (data.get("evaluations") or {}).get(scorer)
    for step in steps.of_task(task):
        record = step_record(data, step, scorer) if isinstance(evaluation, dict) or not step.per_scorer else {}
        if record.get("status") == "failed":
            return step.name, str(record.get("error") or "")
    return None


def outcome(run: Run, scorer: str, task: str, exclude_filtered: bool = False) -> Outcome:
    """Per-instance values of ``task`` ("inference": InferenceCounts, "generation": judge
    score) under ``scorer``, and which instances are left out and why; a value read from a
    filtered or refused answer is flagged, and left out with ``exclude_filtered``."""
    from ..aggregate import flagged_tasks

    if task not in steps.TASKS:
        raise ValueError(f"unknown task {task!r}")
    read = read_inference if task == "inference" else read_generation
    result = Outcome()
    for instance_id in run.ids():
        data = run.instances[instance_id]
        evaluation = (data.get("evaluations") or {}).get(scorer)
        value = None
        if isinstance(evaluation, dict) and evaluation.get(task) is not None:
            try:
                value = read(evaluation[task])
            except (KeyError, TypeError, ValueError) as exc:
                result.failed[instance_id] = (f"{task} result", f"malformed: {exc}")
                continue
        if value is not None:
            flag = flagged_tasks(data, scorer).get(task)
            if flag:
                result.flagged[instance_id] = flag
                if exclude_filtered:
                    result.excluded.append(instance_id)
                    continue
            result.values[instance_id] = value
            continue
        failure = _first_failed_step(data, scorer, task)
        if failure:
            result.failed[instance_id] = failure
        elif data.get("skipped") or (run.setting == "oracle" and history_of(data).get("relevant_positions") == []):
            result.skipped.append(instance_id)
        else:
            result.missing.append(instance_id)
    return result


def history_of(data: dict) -> dict:
    history = data.get("history")
    return history if isinstance(history, dict) else {}
