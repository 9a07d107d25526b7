"""summary.json of a synthesis run: counts, each stage's artifacts (``done`` in this
invocation, ``skipped`` as they already existed), regenerations, failures, usage (calls
answered in batches priced at the batch price), wall time."""
from __future__ import annotations

from dataclasses import asdict

from . import stages as stage_table
from .instances import INSTANCE_TYPES
from .options import shaping_options
from ..utils.io import atomic_write_json, read_json


def write_summary(run, wall_time: float, stopped: str | None = None) -> dict:
    """summary.json of ``run`` (a synthesis/pipeline.py ``Synthesis``, which calls this); ``stopped``: why a run was stopped before its end."""
    counts = {"personas_requested": len(run.personas), "personas_complete": 0,
              "personas_failed": len(run.failure_log.failures), "sessions": 0, "dialogues": 0,
              "dialogues_satisfied": 0, "instances": 0}
    persona_stages = [row.name for row in stage_table.persona_stages()]
    regenerations = {"descriptions": 0, **dict.fromkeys(persona_stages, 0), "dialogues": 0}
    turns: list[int] = []
    batches_seen = set()
    for persona in run.personas:
        pid = persona["persona_id"]
        batch = persona.get("description_batch")
        if persona.get("description_attempts") and batch not in batches_seen:
            batches_seen.add(batch)
            regenerations["descriptions"] += persona["description_attempts"] - 1
        for stage in persona_stages:
            path = run.artifact(pid, f"{stage}.json")
            if path.exists():
                document = read_json(path)
                regenerations[stage] += document.get("attempts", 1) - 1
                counts["sessions"] += len(document.get("sessions", ()))
        for path in sorted((run.persona_dir(pid) / "dialogues").glob("*.json")):
            dialogue = read_json(path)
            counts["dialogues"] += 1
            counts["dialogues_satisfied"] += int(dialogue["satisfied"])
            regenerations["dialogues"] += dialogue.get("regenerations", 0)
            turns.append(dialogue["n_turns"])
        n_instances = sum(run.instance_path(pid, t).exists() for t in INSTANCE_TYPES)
        counts["instances"] += n_instances
        counts["personas_complete"] += int(n_instances == len(INSTANCE_TYPES)
                                           and pid not in run.failure_log.failures)
    failed_attempts = sum(max(f.attempts - 1, 0) for f in run.failure_log.failures.values())
    usage = {role: {"model": model.name, **model.usage.snapshot(model.name)} for role, model in run.models.items()}
    summary = {
        "output_dir": str(run.out),
        "seed_source": run.seed_source,
        "settings": {**shaping_options(run.cfg), "n_personas": run.cfg.n_personas,
                     "n_workers": run.cfg.n_workers},
        "counts": counts,
        "mean_dialogue_turns": round(sum(turns) / len(turns), 2) if turns else None,
        "regenerations": {**regenerations, "in_failed_generations": failed_attempts,
                          "total": sum(regenerations.values()) + failed_attempts},
        "stages": {name: dict(s) for name, s in run.stats.items()},
        "failures": [asdict(f) for f in run.failure_log.failures.values()],
        "usage": usage,
        "wall_time_s": round(wall_time, 3),
    }
    runner = run.batch_runner
    if runner is not None:  # --batch: this invocation's rounds; the calls are in "usage"
        summary["batch"] = {**runner.counts(), "submitted_requests": runner.submitted_items,
                            "batches_file": str(runner.state_path)}
    if stopped is not None:
        summary["stopped"] = stopped
    atomic_write_json(run.out / "summary.json", summary)
    return summary
