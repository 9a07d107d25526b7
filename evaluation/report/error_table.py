"""Table 2 from the classified low-F1 inferences (report/error_types.py): per model the count
and share of each error type, with persona-clustered intervals, the classifications that
failed or were not reached, the paper's published shares beside; its report.csv columns; and
the rows of error_types.csv / .jsonl, one per drawn inference, for people to check the labels.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import steps
from . import statistics as S
from .analysis import Analysis
from .error_types import Classified, load
from .format import ERROR_SLUGS as SLUGS, fmt_ci, md_table
from .published import load_table, paper_model_name
from ..steps.error_type import TYPES

PUBLISHED = "table2"


@dataclass
class ErrorRow:
    """One model's Table 2 row."""
    label: str
    classified: Classified
    evaluated: int                   # the run's inferences under the sample's scorer
    types: dict[str, str]            # instance id -> type, the classified ones
    failed: dict[str, str]           # instance id -> why
    missing: list[str]               # drawn, not asked yet
    shares: dict[str, S.Estimate]    # per type, of the classified

    @property
    def sample(self) -> dict:
        return self.classified.sample

    def count(self, kind: str) -> int:
        return sum(t == kind for t in self.types.values())


def error_rows(an: Analysis) -> list[ErrorRow]:
    """Every default-setting run's row (computed once per Analysis, in the report's model order)."""
    if getattr(an, "error_rows", None) is None:
        an.error_rows = [row for row in (_row(an, an.run(m, "default")) for m in an.models()) if row]
    return an.error_rows


def _row(an: Analysis, run) -> ErrorRow | None:
    classified = load(run) if run is not None else None
    if classified is None:
        return None
    types, failed, missing = {}, {}, []
    for instance_id in classified.sample["drawn"]:
        record = classified.step(instance_id)
        if record is None:
            missing.append(instance_id)
        elif record["status"] == "failed":
            failed[instance_id] = record.get("error") or "failed"
        elif problem := steps.ERROR_TYPE.check(record.get("output")):
            failed[instance_id] = f"stored value unusable: {problem}"
        else:
            types[instance_id] = record["output"]["type"]
    personas = [run.persona(i) for i in types]
    shares = {t: S.bootstrap([float(v == t) for v in types.values()], "mean", clusters=personas,
                             n_bootstrap=an.n_bootstrap, seed=an.seed) for t in TYPES}
    scorer = classified.sample["scorer"]
    evaluated = an.outcome(run, scorer, "inference").n if scorer in run.scorers else 0
    return ErrorRow(an.label(run.model), classified, evaluated, types, failed, missing, shares)


def published(model: str) -> dict[str, float] | None:
    paper = paper_model_name(model)
    return next((r["values"] for r in load_table(PUBLISHED)["rows"] if r["model"] == paper), None)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def table2_section(an: Analysis) -> str | None:
    rows = error_rows(an)
    if not rows:
        return None
    table = load_table(PUBLISHED)
    paper = "; ".join(f"{r['model']} " + "/".join(f"{r['values'][t]:g}" for t in TYPES) + " %"
                      for r in table["rows"])
    samples = {(r.sample["classifier"], r.sample["scorer"], r.sample["f1_below"], r.sample["per_model"],
                r.sample["seed"]) for r in rows}
    how = "; ".join(f"classifier `{c}` over up to {n} inferences per model with F1 below {100 * f:g}% under "
                    f"scorer `{s}`, drawn with seed {seed}" for c, s, f, n, seed in sorted(samples, key=str))
    out = []
    for row in rows:
        out.append([row.label, f"{len(row.sample['eligible'])} / {row.evaluated}", str(len(row.sample["drawn"])),
                    str(len(row.types)),
                    str(len(row.failed)), str(len(row.missing))] +
                   [f"{row.count(t)} ({fmt_ci(row.shares[t], _pct)})" for t in TYPES])
        values = published(row.classified.run.model)
        if values:
            out.append([f"↳ paper ({table['table']}; labelled by hand)", "—", "50", "50", "", ""] +
                       [f"{values[t]:g}%" for t in TYPES])
    return "\n".join([
        "## Error types (Table 2)", "",
        f"Why the low-F1 inferences missed ({how}), each classified as one of Table 2's four types by the "
        f"evaluator at temperature 0 with our prompt built on the paper's definitions "
        f"(`prompts/evaluation/error_type.yaml`; `cupid-report RESULTS --error_types` makes them). A type's "
        f"cell is its count and its share of the classified inferences with a 95% persona-clustered bootstrap "
        f"interval; a classification that failed is counted under Failed and in no share. The paper's authors "
        f"sorted 50 inferences per model by hand ({paper}). report.html lists every classified case; "
        f"`error_types.csv` and `error_types.jsonl` hold them for checking by hand.", "",
        md_table(["Model", "Low F1 / evaluated", "Drawn", "Classified", "Failed", "Not yet"] + list(TYPES), out)])


def add_csv_columns(an: Analysis, csv_rows: list[dict]) -> None:
    """Table 2's numbers on each model's default-setting, all-instances row of its scorer."""
    for row in error_rows(an):
        sample = row.sample
        target = next((r for r in csv_rows if r["model"] == row.classified.run.model and r["setting"] == "default"
                       and r["scorer"] == sample["scorer"] and r["instance_type"] == "all"), None)
        if target is None:
            continue
        target.update(error_types_classifier=sample["classifier"], error_types_f1_below=sample["f1_below"],
                      error_types_eligible=len(sample["eligible"]), error_types_drawn=len(sample["drawn"]),
                      error_types_classified=len(row.types), error_types_failed=len(row.failed),
                      error_types_missing=len(row.missing))
        values = published(row.classified.run.model) or {}
        for t in TYPES:
            share, key = row.shares[t], f"error_{SLUGS[t]}"
            target.update({key: row.count(t), f"{key}_share": share.value, f"{key}_share_low": share.low,
                           f"{key}_share_high": share.high,
                           f"paper_{key}_share": values[t] / 100 if t in values else None})


def case_rows(an: Analysis) -> list[dict]:
    """One row per drawn inference: what the classifier was shown, its label and reasoning,
    or why it failed; ``human_type`` is left blank for a person's label."""
    rows = []
    for row in error_rows(an):
        classified, run = row.classified, row.classified.run
        for instance_id in classified.sample["drawn"]:
            case = classified.cases.get(instance_id) or {}
            record = classified.step(instance_id) or {}
            sent = (record.get("sent") or {}).get("values") or {}
            output = record.get("output") or {}
            rows.append({
                "model": run.model, "setting": run.setting, "scorer": classified.sample["scorer"],
                "classifier": classified.sample["classifier"], "instance_id": instance_id,
                "persona_id": run.instances.get(instance_id, {}).get("persona_id"),
                "instance_type": run.instance_type(instance_id) if instance_id in run.instances else None,
                "f1": case.get("f1"), "context_factor": sent.get("context"), "request": sent.get("request"),
                "true_preference": sent.get("true_preference"),
                "inferred_preference": case.get("inferred_preference"),
                "status": "not classified yet" if not record else
                          "done" if instance_id in row.types else "failed",
                "classified_type": row.types.get(instance_id), "classifier_analysis": output.get("analysis"),
                "error": row.failed.get(instance_id), "human_type": ""})
    return rows
