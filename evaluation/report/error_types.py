"""Table 2's error types over a results directory (``cupid-report RESULTS --error_types``):
which low-F1 inferences are drawn, the evaluator's classification of each
(evaluation/steps/error_type.py), where the records live (``error_types/`` beside the run's
instance files), and reading them back. The draw and the files: docs/report.md and
docs/results_format.md.

Each drawn inference is asked by the pipeline's own asker (``InstanceSteps``) through the
Model seam, so a record is written at once, an unusable answer is asked again, and a
classification that still fails is recorded failed with its reason and raw answers: counted
in Table 2, never dropped. A rerun reads the done records back and asks again only what
failed (from the next answer variant) or was not reached; a record whose inferred preference
is no longer the run's is asked afresh.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from ...utils import events
from .. import steps
from . import statistics as S
from .analysis import Analysis
from .results import Run
from ..store import InstanceRecord, instance_file_name, now
from ...utils.errors import BadInput
from ...utils.io import FileLock, atomic_write_json, move_aside, read_json
from ...utils.prompts import load_prompt

DIRECTORY = "error_types"
SAMPLE = "sample.json"
BATCHES = ".error_type_batches.json"   # under the results directory; hidden: never an instance file
F1_BELOW = 0.20
PER_MODEL = 50
SAMPLE_KEYS = ("model", "scorer", "classifier", "f1_below", "per_model", "seed", "written", "eligible", "drawn")


@dataclass
class Classified:
    """One run's draw (sample.json) and its drawn instances' files (id -> file data)."""
    run: Run
    sample: dict
    cases: dict[str, dict] = field(default_factory=dict)

    def step(self, instance_id: str) -> dict | None:
        """The drawn instance's error-type record, or None when it has not been asked."""
        evaluation = ((self.cases.get(instance_id) or {}).get("evaluations") or {}).get(self.sample["classifier"])
        record = ((evaluation or {}).get("steps") or {}).get(steps.ERROR_TYPE.name)
        return record if isinstance(record, dict) and record.get("status") in ("done", "failed") else None


def directory_of(run: Run) -> Path:
    """Where a run's classifications live: the first of its directories that has them."""
    return next((d / DIRECTORY for d in run.directories if (d / DIRECTORY / SAMPLE).is_file()),
                run.directories[0] / DIRECTORY)


def load(run: Run) -> Classified | None:
    """A run's draw and records, or None when it has none (or they cannot be read: a warning
    on the run)."""
    directory = directory_of(run)
    if not (directory / SAMPLE).is_file():
        return None
    try:
        sample = read_json(directory / SAMPLE)
        classified = Classified(run, {key: sample[key] for key in SAMPLE_KEYS})
        for instance_id in sample["drawn"]:
            path = directory / instance_file_name(instance_id)
            if path.is_file():
                classified.cases[instance_id] = read_json(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        run.warnings.append(f"{directory}: error types not read ({exc})")
        return None
    return classified


def inferred_preference(data: dict) -> str | None:
    output = ((data.get("steps") or {}).get(steps.INFER.name) or {}).get("output") or {}
    return output.get("preference")


def draw(an: Analysis, run: Run, scorer: str, *, f1_below: float, per_model: int,
         seed: int) -> tuple[list[str], list[str], dict[str, float]]:
    """The eligible ids (F1 below ``f1_below``), the drawn ids and every eligible id's F1."""
    values = an.outcome(run, scorer, "inference").values
    f1 = {i: S.instance_prf(c)[2] for i, c in values.items()}
    eligible = sorted(i for i, value in f1.items() if value < f1_below)
    drawn = sorted(random.Random(seed).sample(eligible, min(per_model, len(eligible))))
    return eligible, drawn, {i: f1[i] for i in eligible}


def classify(results_dir: str | Path, *, evaluator: str, f1_below: float = F1_BELOW,
             per_model: int = PER_MODEL, seed: int = 0, n_workers: int = 4, batch: bool = False,
             data_paths=None) -> list[str]:
    """Draw and classify every model's low-F1 default-setting inferences; returns one line
    per model saying what was done. Raises BadInput when there is nothing to classify or
    the instances' data are missing, ModelConfigurationError for a model that cannot be
    reached."""
    # The model layer and the pipeline's asker are imported here: the report alone needs neither.
    from ..pipeline import InstanceSteps
    from .instance_data import load_instance_data
    from ..strategies import PAPER_STRATEGIES
    from ..steps import error_type
    from ...utils.executor import iter_with_progress
    from ...utils.models.batch import BatchDeferred, run_in_rounds, runner_for
    from ...utils.models.cache import CACHE_DIR, ResponseCache
    from ...utils.models.registry import check_models, resolve_model
    from ...utils.models.retry import cancel_all

    results_dir = Path(results_dir)
    an = Analysis(results_dir, n_bootstrap=1)
    scorer = an.primary_scorer("inference")
    runs = [r for r in (an.run(m, "default") for m in an.models())
            if r is not None and scorer in r.scorers and r.has_task("inference", scorer)]
    if not runs:
        raise BadInput(f"{results_dir}: no default-setting inference results to classify")
    instances, notes = load_instance_data(runs, results_dir, data_paths)
    draws = []
    for run in runs:  # every input checked before any model is asked
        eligible, drawn, f1 = draw(an, run, scorer, f1_below=f1_below, per_model=per_model, seed=seed)
        lacking = [i for i in drawn if i not in instances]
        if lacking:
            raise BadInput(f"{an.label(run.model)}: the data of {len(lacking)} drawn instance(s) (e.g. "
                           f"{lacking[0]}) were not found; give the data the run evaluated with --data_dir"
                           + (f" ({'; '.join(notes)})" if notes else ""))
        draws.append((run, eligible, drawn, f1))
    model = resolve_model(evaluator, role="evaluator")
    check_models([model])
    label = model.label
    # What InstanceSteps reads of its pipeline to ask a step and record it.
    asking = SimpleNamespace(models={"evaluator": model}, scorer=label, setting=PAPER_STRATEGIES["default"])

    def one(job) -> str:
        run, instance_id, directory, f1 = job
        instance, inferred = instances[instance_id], inferred_preference(run.instances[instance_id])
        record = _record(directory / instance_file_name(instance_id), run, instance_id, scorer, f1, inferred)
        record.ensure_scorer(label, label, label)
        try:
            InstanceSteps(asking, record)(steps.ERROR_TYPE, error_type.ask(
                instance.prior_interactions, instance.current_context_factor, instance.current_request,
                instance.current_contextual_preference, inferred))
        except BatchDeferred:
            return "deferred"
        return record.step(steps.ERROR_TYPE.name, label)["status"]

    def run_pass() -> dict[str, int]:
        counts = {"done": 0, "failed": 0, "deferred": 0}
        for _, status in iter_with_progress(one, jobs, n_workers=n_workers, desc="error types"):
            counts[status] += 1
        return counts

    jobs, lines, locks = [], [], []
    model.cache = ResponseCache(results_dir.resolve() / CACHE_DIR)
    try:
        for run, eligible, drawn, f1 in draws:
            directory = directory_of(run)
            lock = FileLock(directory / ".lock")
            if not lock.acquire(blocking=False):
                lines.append(f"{an.label(run.model)}: skipped, another process is classifying it ({directory})")
                continue
            locks.append(lock)
            atomic_write_json(directory / SAMPLE, {
                "model": run.model, "scorer": scorer, "classifier": label, "f1_below": f1_below,
                "per_model": per_model, "seed": seed, "written": now(), "eligible": eligible, "drawn": drawn})
            jobs += [(run, i, directory, f1[i]) for i in drawn]
            lines.append(f"{an.label(run.model)}: {len(drawn)} of {len(eligible)} inferences with F1 below "
                         f"{100 * f1_below:g}% drawn")
        if batch and jobs:
            runner = runner_for(model, results_dir / BATCHES)
            if runner is not None:
                run_in_rounds(run_pass, runner, [model])
        counts = run_pass()  # online: what the batch rounds answered (from the cache) and the rest
    except KeyboardInterrupt:
        cancel_all()
        raise
    finally:
        model.cache.close()
        for lock in locks:
            lock.release()
    lines.append(f"classified by {label}: {counts['done']} done, {counts['failed']} failed"
                 + (" (rerun the same command to ask the failed ones again)" if counts["failed"] else ""))
    return lines


def _record(path: Path, run: Run, instance_id: str, scorer: str, f1: float, inferred: str) -> InstanceRecord:
    """A drawn instance's file, read back or begun; a classification of another inferred
    preference (the instance was evaluated again), or made with another version of the
    prompt, is dropped."""
    data = {}
    if path.is_file():
        try:
            data = read_json(path)
        except ValueError as exc:
            events.warning(f"{path}: unreadable ({exc}); moved to {move_aside(path).name}, classified afresh")
    if data.get("inferred_preference") != inferred:
        data = {}
    version = load_prompt(steps.ERROR_TYPE.module.PROMPT).version
    for evaluation in (data.get("evaluations") or {}).values():  # classified with another prompt: asked afresh
        found = (evaluation.get("steps") or {}) if isinstance(evaluation, dict) else {}
        if (found.get(steps.ERROR_TYPE.name) or {}).get("prompt_version") not in (None, version):
            del found[steps.ERROR_TYPE.name]
    data.update({"instance_id": instance_id, "persona_id": run.instances[instance_id].get("persona_id"),
                 "instance_type": run.instance_type(instance_id), "model": run.model, "setting": run.setting,
                 "scorer": scorer, "f1": f1, "inferred_preference": inferred})
    data.setdefault("evaluations", {})
    return InstanceRecord(path, data)
