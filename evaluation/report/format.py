"""How the report writes numbers: percents, scores, intervals, p-values, correlations,
markdown tables and CSV cells, and the report's fixed names (groups, column titles)."""
from __future__ import annotations

from typing import Any, Callable

from ...utils.csv_file import csv_text
from ...utils.dataset import INSTANCE_TYPES
from .statistics import Correlation, Estimate
from ..steps.error_type import TYPES as ERROR_TYPES

ERROR_SLUGS = {t: t.lower().replace(" ", "_") for t in ERROR_TYPES}

# The evaluator (matcher, decomposer, judge) behind every published number (§2.3): a fact of
# the paper, not a setting, so it does not follow config.DEFAULT_EVALUATOR.
PAPER_EVALUATOR = "gpt-4o-2024-11-20"

CSV_COLUMNS = [
    "model", "paper_model", "setting", "scorer", "evaluator", "matcher", "instance_type",
    "instance_files",
    "inference_evaluated", "inference_failed", "inference_missing", "inference_skipped",
    "inference_flagged",
    "precision", "precision_low", "precision_high",
    "recall", "recall_low", "recall_high",
    "f1", "f1_low", "f1_high",
    "n_predicted_matched", "n_predicted", "n_true_matched", "n_true",
    "macro_precision", "macro_precision_low", "macro_precision_high",
    "macro_recall", "macro_recall_low", "macro_recall_high",
    "macro_f1", "macro_f1_low", "macro_f1_high",
    "generation_evaluated", "generation_failed", "generation_missing", "generation_skipped",
    "generation_flagged",
    "score", "score_low", "score_high",
    "paper_table_inference", "paper_precision", "paper_recall", "paper_f1",
    "paper_table_generation", "paper_score",
    "sessions_shown", "session_recall", "session_recall_low", "session_recall_high",
    "session_precision", "session_precision_low", "session_precision_high", "history_tokens", "model_input_tokens",
    "n_bootstrap", "seed", "run_dirs", "exclude_filtered", "build_id",
    # Table 2 (report/error_table.py): on each model's default-setting, all-instances row of
    # the scorer whose F1 drew its sample.
    "error_types_classifier", "error_types_f1_below", "error_types_eligible", "error_types_drawn",
    "error_types_classified", "error_types_failed", "error_types_missing",
] + [f"{prefix}error_{ERROR_SLUGS[t]}{suffix}" for t in ERROR_TYPES for prefix, suffix in
     (("", ""), ("", "_share"), ("", "_share_low"), ("", "_share_high"), ("paper_", "_share"))]

GROUPS = ("all",) + INSTANCE_TYPES
# Marks, in an ``n`` cell, the results read from a filtered or refused answer.
FLAG = "⚑"
# A figure's point or bin resting on fewer instances is drawn hollow (Figure 3) or merged
# into fewer bins (Figure 9): one instance must not look like a trend.
DEFAULT_MIN_BIN_SIZE = 5


def fmt_pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def fmt_score(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def fmt_ci(est: Estimate | None, fmt: Callable[[float | None], str]) -> str:
    if est is None or est.value is None:
        return "—"
    if est.low is None:
        return fmt(est.value)
    return f"{fmt(est.value)} [{fmt(est.low)}, {fmt(est.high)}]"


def fmt_p(value: float | None, n_bootstrap: int) -> str:
    if value is None:
        return "—"
    return f"< {1 / n_bootstrap:.3g}" if value == 0 else f"{value:.3f}"


def fmt_r(corr: Correlation) -> str:
    """Pearson's r with its p-value (statistics.pearson gives both or, with a note, neither)."""
    if corr.r is None:
        return f"r = n/a ({corr.note}; n = {corr.n})"
    p = "p < 0.001" if corr.p_value < 0.001 else f"p = {corr.p_value:.3f}"
    return f"r = {corr.r:.3f}, {p} (n = {corr.n})"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return round(value, 6)
    return value


def render_csv(rows: list[dict], build_id: str = "") -> str:
    """report.csv (utils/csv_file.py's rule); every row names the build that wrote it (report.md and
    report.html too)."""
    return csv_text(CSV_COLUMNS, ({k: csv_value(row.get(k)) for k in CSV_COLUMNS} | {"build_id": build_id}
                                  for row in rows))
