"""The interactive task's measures, from its dialogue files (evaluation/interaction.py), each
with a 95% bootstrap interval that resamples personas (a persona's three instances share its
sessions: evaluation/report/statistics.py).

Only finished dialogues (satisfied or unsatisfied) are measured; failed ones are counted and
listed, never scored.

* ``rounds_to_satisfaction``: the round whose reply the simulator ended the dialogue on; an
  unsatisfied dialogue counts at the cap (``max_rounds``), so the mean is a lower bound of
  what an uncapped dialogue would take (said in the results: ``censored``).
* ``feedback_rounds``: the simulator's feedback messages before it was satisfied, that is
  rounds to satisfaction - 1 (at the cap: max_rounds - 1, though the last reply got feedback).
* ``satisfied_by_round``: for r = 1..max_rounds, the share of dialogues satisfied at round r
  or earlier (a curve).
* ``score_by_round``: the simulator's mean 1-10 score at round r; a dialogue that ended earlier
  keeps its last score (a satisfied user stays satisfied), so every round averages over the
  same dialogues; a round whose answer held no number (the release reads none) is left out.
* ``final_judge`` (``--judge_final``): the judge's 1-10 score (Figure 16, the generation task's
  judge) of each finished dialogue's last reply.
* ``rounds_saved_vs_none``: rounds to satisfaction under the ``none`` strategy (no prior
  session, the same model, simulator and cap) minus this strategy's, paired by instance, with
  a paired bootstrap over personas; present when the ``none`` run's dialogues exist.
"""
from __future__ import annotations

from pathlib import Path

from .statistics import (DEFAULT_N_BOOTSTRAP, Estimate, bootstrap, one_blas_thread,
                         paired_bootstrap)
from ...utils.io import read_json

MANIFEST = "interaction_run.json"  # a run's record (not run.json: cupid-report reads those)
CENSORING_NOTE = "unsatisfied dialogues are counted at max_rounds (a lower bound of the uncapped rounds)"


def _estimate(values: list[float], clusters: list[str], boot: dict | None = None) -> dict:
    """The mean with its interval; ``boot``: bootstrap()'s n_bootstrap and seed (its defaults
    without)."""
    if not values:
        return {"value": None, "low": None, "high": None, "n": 0}
    with one_blas_thread():
        est: Estimate = bootstrap(values, "mean", clusters=clusters, **(boot or {}))
    return {"value": est.value, "low": est.low, "high": est.high, "n": est.n}


def dialogue_summary(record: dict, max_rounds: int) -> dict | None:
    """A finished dialogue's numbers (None when it is not finished)."""
    if record.get("status") not in ("satisfied", "unsatisfied"):
        return None
    rounds = record["rounds"]
    scores = [(turn.get("simulator") or {}).get("score") for turn in rounds]
    return {"instance_id": record["instance_id"], "persona_id": record["persona_id"],
            "instance_type": record["instance_type"], "satisfied": record["status"] == "satisfied",
            "rounds": len(rounds) if record["status"] == "satisfied" else max_rounds, "scores": scores}


def block(summaries: list[dict], max_rounds: int, boot: dict | None = None) -> dict:
    """The measures over some finished dialogues."""
    personas = [s["persona_id"] for s in summaries]
    rounds = [float(s["rounds"]) for s in summaries]
    curve, scores = [], []
    for r in range(1, max_rounds + 1):
        curve.append({"round": r, **_estimate([float(s["satisfied"] and s["rounds"] <= r) for s in summaries],
                                               personas, boot)})
        kept, who = [], []
        for s in summaries:
            upto = s["scores"][:r]
            score = upto[-1] if upto else None
            if score is not None:
                kept.append(float(score))
                who.append(s["persona_id"])
        scores.append({"round": r, **_estimate(kept, who, boot)})
    return {"n_dialogues": len(summaries),
            "rounds_to_satisfaction": {**_estimate(rounds, personas, boot), "censored": sum(not s["satisfied"] for s in summaries)},
            "feedback_rounds": _estimate([r - 1 for r in rounds], personas, boot),
            "satisfied_by_round": curve, "score_by_round": scores}


def final_judge(records: list[dict], scorer: str, boot: dict | None = None) -> dict:
    """The judge's score (1-10, Figure 16) of the finished dialogues' last replies, under
    ``scorer`` (the judge's label); the failed judge calls are counted, not scored."""
    scores, personas, failed = [], [], 0
    for record in records:
        entry = (record.get("final_judge") or {}).get(scorer) or {}
        if entry.get("status") == "done":
            scores.append(float(entry["score"]))
            personas.append(record["persona_id"])
        elif entry.get("status") == "failed":
            failed += 1
    return {"scorer": scorer, **_estimate(scores, personas, boot), "failed": failed}


def measures(directory: Path, ids: set[str], max_rounds: int, baseline: Path | None = None,
             judge: str | None = None, n_bootstrap: int = DEFAULT_N_BOOTSTRAP, seed: int = 0) -> dict:
    """results.json's content for the dialogues of ``ids`` in ``directory`` (``judge``: the
    label whose scores of the last replies are read, with --judge_final; ``n_bootstrap``,
    ``seed``: the intervals' resampling, as the report's)."""
    boot = {"n_bootstrap": n_bootstrap, "seed": seed}
    records = list(dialogue_records(directory, ids))
    counts = {"selected": len(ids), "satisfied": 0, "unsatisfied": 0, "failed": 0, "skipped": 0}
    failures = []
    for record in records:
        status = record.get("status")
        if status in counts:
            counts[status] += 1
        if status == "failed":
            failure = record.get("failure") or {}
            failures.append({"instance_id": record["instance_id"], "at": failure.get("at"),
                             "round": failure.get("round"), "reason": failure.get("reason")})
    counts["unfinished"] = counts["selected"] - sum(counts[k] for k in ("satisfied", "unsatisfied", "failed", "skipped"))
    summaries = [s for s in (dialogue_summary(r, max_rounds) for r in records) if s is not None]
    results = {"task": "interaction", "counts": counts, "failures": failures,
               "note": CENSORING_NOTE, **block(summaries, max_rounds, boot)}
    results["by_instance_type"] = {kind: block([s for s in summaries if s["instance_type"] == kind], max_rounds, boot)
                                   for kind in sorted({s["instance_type"] for s in summaries})}
    results["rounds_saved_vs_none"] = rounds_saved(summaries, baseline, ids, max_rounds, boot)
    for kind, part in results["by_instance_type"].items():
        part["rounds_saved_vs_none"] = rounds_saved([s for s in summaries if s["instance_type"] == kind], baseline,
                                                    {s["instance_id"] for s in summaries if s["instance_type"] == kind},
                                                    max_rounds, boot)
    if judge is not None:
        finished = [r for r in records if r.get("status") in ("satisfied", "unsatisfied")]
        results["final_judge"] = final_judge(finished, judge, boot)
        for kind, part in results["by_instance_type"].items():
            part["final_judge"] = final_judge([r for r in finished if r.get("instance_type") == kind], judge, boot)
    results["dialogues"] = [{k: s[k] for k in ("instance_id", "instance_type", "satisfied", "rounds", "scores")}
                            for s in summaries]
    return results


def rounds_saved(summaries: list[dict], baseline: Path | None, ids: set[str], max_rounds: int,
                 boot: dict | None = None) -> dict | None:
    """Rounds under `none` minus rounds here, paired by instance (None without a baseline run)."""
    if baseline is None:
        return None
    if not baseline.is_dir():
        return {"difference": None, "n": 0, "baseline": str(baseline),
                "note": "no dialogues of the none strategy with this model, simulator and max_rounds yet"}
    none = {s["instance_id"]: s for s in (dialogue_summary(r, max_rounds) for r in dialogue_records(baseline, ids))
            if s is not None}
    here = {s["instance_id"]: s for s in summaries}
    personas = {k: s["persona_id"] for k, s in {**none, **here}.items()}
    with one_blas_thread():
        paired = paired_bootstrap({k: float(s["rounds"]) for k, s in none.items()},
                                  {k: float(s["rounds"]) for k, s in here.items()}, clusters=personas,
                                  **(boot or {}))
    return {"difference": paired.difference, "low": paired.low, "high": paired.high, "p_value": paired.p_value,
            "n": paired.n, "rounds_none": paired.value_a, "rounds_here": paired.value_b, "baseline": str(baseline),
            "note": "rounds to satisfaction under none minus here, on the instances finished in both; " + CENSORING_NOTE}


def dialogue_records(directory: Path, ids: set[str] | None = None):
    """The dialogue files of a directory (those of ``ids`` only, when given); a file that is
    not JSON is left out."""
    for path in sorted(directory.glob("*.json")):
        if path.name in (MANIFEST, "results.json", "batches.json"):
            continue
        try:
            record = read_json(path)
        except ValueError:  # unreadable: the next run of its dialogue moves it aside and begins afresh
            continue
        if isinstance(record, dict) and isinstance(record.get("rounds"), list) and \
                (ids is None or record.get("instance_id") in ids):
            yield record
