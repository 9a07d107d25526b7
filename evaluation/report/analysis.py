"""Everything the report computes from a results directory: the runs, their outcomes per
scorer and task, and one cell (estimates with intervals) per run, scorer and instance type,
cached so that the tables, the CSV and the figures share one computation."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...utils.dataset import INSTANCE_TYPES
from ..metrics import micro_inference
from . import statistics as S
from .format import DEFAULT_MIN_BIN_SIZE
from .published import PAPER_MODELS, lookup, paper_model_name, scorer_kind
from .results import Outcome, Run, load_runs, outcome
from .selection import selection_estimates


@dataclass
class Cell:
    """One (run, scorer, instance type): everything the tables and the CSV show."""
    run: Run
    scorer: str
    group: str
    instance_files: int
    inference: Outcome | None = None
    micro: dict[str, S.Estimate] = field(default_factory=dict)
    macro: dict[str, S.Estimate] = field(default_factory=dict)
    pooled: dict | None = None
    generation: Outcome | None = None
    score: S.Estimate | None = None
    selection: dict[str, S.Estimate] = field(default_factory=dict)  # what the context strategy kept


class Analysis:
    """Everything computed from a results directory, with outcome caches."""

    def __init__(self, results_dir: str | Path, n_bootstrap: int = S.DEFAULT_N_BOOTSTRAP,
                 seed: int = 0, n_length_bins: int = 5, min_bin_size: int = DEFAULT_MIN_BIN_SIZE,
                 keep_raw: bool = True, exclude_filtered: bool = False):
        self.results_dir = Path(results_dir)
        # Results read from a filtered or refused answer: flagged, and left out when True.
        self.exclude_filtered = exclude_filtered
        self.n_bootstrap = n_bootstrap
        self.seed = seed
        self.n_length_bins = n_length_bins
        self.min_bin_size = min_bin_size
        self.ignored: list[str] = []   # directories with a run.json that are not evaluation runs
        self.runs = load_runs(self.results_dir, self.ignored, keep_raw=keep_raw)
        self._outcomes: dict[tuple, Outcome] = {}
        self._cells: dict[tuple, Cell] = {}
        self._paired: dict[tuple, S.PairedDifference | None] = {}
        # The paper's name of each model, unless two models share it.
        names = {m: paper_model_name(m) or m for m in sorted({run.model for run in self.runs})}
        counts = Counter(names.values())
        self.labels = {m: (name if counts[name] == 1 else m) for m, name in names.items()}

    # --- basics ------------------------------------------------------------------------
    def label(self, model: str) -> str:
        return self.labels.get(model, model)

    def models(self) -> list[str]:
        """Models in the paper's row order (known ones first), then by name."""
        def order(model: str):
            paper = paper_model_name(model)
            return (0, PAPER_MODELS.index(paper), model) if paper else (1, 0, model)
        return sorted({run.model for run in self.runs}, key=order)

    def run(self, model: str, setting: str) -> Run | None:
        return next((run for run in self.runs if run.key == (model, setting)), None)

    def outcome(self, run: Run, scorer: str, task: str) -> Outcome:
        key = (run.key, scorer, task)
        if key not in self._outcomes:
            self._outcomes[key] = outcome(run, scorer, task, self.exclude_filtered)
        return self._outcomes[key]

    def groups(self, run: Run) -> list[str]:
        present = {run.instance_type(i) for i in run.ids()}
        extra = sorted(present - set(INSTANCE_TYPES))
        return ["all"] + [t for t in INSTANCE_TYPES if t in present] + extra

    def cell(self, run: Run, scorer: str, group: str) -> Cell:
        key = (run.key, scorer, group)
        if key in self._cells:
            return self._cells[key]
        ids = run.ids(group)
        cell = Cell(run, scorer, group, len(ids))
        cell.selection = selection_estimates(run, ids, self.n_bootstrap, self.seed)
        if run.has_task("inference", scorer):
            out = self.outcome(run, scorer, "inference").restrict(ids)
            done = sorted(out.values)
            counts = [out.values[i] for i in done]
            personas = [run.persona(i) for i in done]
            cell.inference = out
            cell.micro = S.bootstrap_inference(counts, "micro", clusters=personas, n_bootstrap=self.n_bootstrap,
                                               seed=self.seed)
            cell.macro = S.bootstrap_inference(counts, "macro", clusters=personas, n_bootstrap=self.n_bootstrap,
                                               seed=self.seed)
            cell.pooled = micro_inference(counts)
        if run.has_task("generation", scorer):
            out = self.outcome(run, scorer, "generation").restrict(ids)
            done = sorted(out.values)
            cell.generation = out
            cell.score = S.bootstrap([out.values[i] for i in done], "mean", clusters=[run.persona(i) for i in done],
                                     n_bootstrap=self.n_bootstrap, seed=self.seed)
        self._cells[key] = cell
        return cell

    def paired(self, run_a: Run, scorer_a: str, run_b: Run, scorer_b: str, task: str) -> S.PairedDifference | None:
        """A − B on the instances both have (micro F1 for inference, mean judge score for
        generation), resampling personas (A's), computed once: the summary's table and
        report.html's compare view read the same numbers. None when a side lacks the task
        under its scorer."""
        key = (run_a.key, scorer_a, run_b.key, scorer_b, task)
        if key not in self._paired:
            sides = []
            for run, scorer in ((run_a, scorer_a), (run_b, scorer_b)):
                ok = scorer in run.scorers and run.has_task(task, scorer)
                sides.append(self.outcome(run, scorer, task).values if ok else None)
            result = None
            if sides[0] and sides[1]:
                metric = "micro_f1" if task == "inference" else "mean"
                personas = {i: run_a.persona(i) for i in sides[0]}
                result = S.paired_bootstrap(sides[0], sides[1], metric, clusters=personas,
                                            n_bootstrap=self.n_bootstrap, seed=self.seed)
            self._paired[key] = result
        return self._paired[key]

    # --- scorers -----------------------------------------------------------------------
    def scorer_parts(self, scorer: str) -> tuple[str, str]:
        for run in self.runs:
            for data in run.instances.values():
                entry = (data.get("evaluations") or {}).get(scorer)
                if isinstance(entry, dict) and entry.get("evaluator"):
                    return str(entry["evaluator"]), str(entry.get("matcher") or entry["evaluator"])
        evaluator, _, matcher = scorer.partition("+")
        return evaluator, matcher or evaluator

    def scorers(self, task: str) -> list[str]:
        found = {s for run in self.runs for s in run.scorers if run.has_task(task, s)}
        return sorted(found, key=lambda s: ("+" in s, s))

    def primary_scorer(self, task: str) -> str | None:
        """The plain (evaluator-matched) scorer most runs have; model-level figures use it."""
        counts = Counter(s for run in self.runs for s in run.scorers if run.has_task(task, s))
        plain = Counter({s: n for s, n in counts.items() if "+" not in s}) or counts
        return min(plain, key=lambda s: (-plain[s], s), default=None)

    def matcher_pairs(self) -> list[tuple[str, str]]:
        """(evaluator scorer, evaluator+matcher scorer) pairs found in the same runs."""
        return sorted({(s.partition("+")[0], s) for run in self.runs for s in run.scorers
                       if "+" in s and s.partition("+")[0] in run.scorers})

    # --- CSV rows ----------------------------------------------------------------------
    def csv_rows(self) -> list[dict]:
        rows = []
        for model in self.models():
            for run in [r for r in self.runs if r.model == model]:
                for scorer in (run.scorers or ["(none)"]):
                    evaluator, matcher = self.scorer_parts(scorer)
                    for group in self.groups(run):
                        rows.append(self._csv_row(run, scorer, evaluator, matcher, group))
        return rows

    def _csv_row(self, run: Run, scorer: str, evaluator: str, matcher: str, group: str) -> dict:
        cell = self.cell(run, scorer, group)
        paper = paper_model_name(run.model)
        row: dict[str, Any] = {
            "model": run.model, "paper_model": paper, "setting": run.setting, "scorer": scorer,
            "evaluator": evaluator, "matcher": matcher, "instance_type": group,
            "instance_files": cell.instance_files, "n_bootstrap": self.n_bootstrap, "seed": self.seed,
            "run_dirs": ";".join(str(d) for d in run.directories), "exclude_filtered": self.exclude_filtered,
        }
        if cell.inference is not None:
            row.update(_outcome_columns("inference", cell.inference))
            row.update({k: cell.pooled[k] for k in ("n_predicted_matched", "n_predicted", "n_true_matched", "n_true")})
            for name in S.INFERENCE_METRICS:
                row.update(_estimate_columns(name, cell.micro[name]),
                           **_estimate_columns(f"macro_{name}", cell.macro[name]))
            published = lookup(paper, "inference", run.setting, group, scorer_kind(scorer, matcher))
            if published:
                row["paper_table_inference"] = published["table"]
                for name in S.INFERENCE_METRICS:
                    row[f"paper_{name}"] = published["values"][name] / 100
        shown = cell.selection
        row.update(sessions_shown=shown["sessions_shown"].value, history_tokens=shown["history_tokens"].value,
                   model_input_tokens=shown["model_input_tokens"].value,
                   **_estimate_columns("session_recall", shown["recall"]),
                   **_estimate_columns("session_precision", shown["precision"]))
        if cell.generation is not None:
            row.update(_outcome_columns("generation", cell.generation), **_estimate_columns("score", cell.score))
            published = lookup(paper, "generation", run.setting, group, "gpt-4o")
            if published:
                row["paper_table_generation"] = published["table"]
                row["paper_score"] = published["values"]["score"]
        return row


def _outcome_columns(task: str, out: Outcome) -> dict:
    return {f"{task}_evaluated": out.n, f"{task}_failed": len(out.failed), f"{task}_missing": len(out.missing),
            f"{task}_skipped": len(out.skipped), f"{task}_flagged": len(out.flagged)}


def _estimate_columns(name: str, est: S.Estimate) -> dict:
    return {name: est.value, f"{name}_low": est.low, f"{name}_high": est.high}
