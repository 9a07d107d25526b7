"""The matcher's meta-evaluation (Appendix A.1): human labels of preference-checklist pairs
against every scorer's match labels in a results directory.

A pair is a preference and a checklist; each entry is labelled Fully, Partially or Not
Covered. The humans' file has one row per pair and annotator (docs/match_agreement.md).
Per entry, the majority vote (a label chosen by more than half of the entry's annotators;
entries without one are dropped, as A.1 drops them); Krippendorff's alpha among the
annotators; and for each scorer, on the entries both it and the majority labelled: accuracy,
accuracy per majority label, Cohen's kappa, the confusion matrix (scikit-learn) and
Krippendorff's alpha with the majority (the paper's 0.769 for GPT-4o, 0.748 for
PrefMatcher-7B). Every alpha is ordinal, our choice (the paper states no level), with the
nominal one beside. A scorer's labels are found by the pair's content (the preference and the
checklist's entries), in the match_precision and match_recall steps of its instance files.
"""
from __future__ import annotations

import csv
import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .format import md_table
from .results import load_runs
from ...utils.csv_file import read_cell
from ...utils.errors import BadInput

LABELS = ("Not Covered", "Partially Covered", "Fully Covered")  # ordered: the ordinal alpha's scale
MATCH_STEPS = ("match_precision", "match_recall")
COLUMNS = ("pair_id", "annotator", "preference", "checklist", "labels")
PAPER = "Appendix A.1: annotators' alpha 0.467; with their majority, GPT-4o 0.769 and PrefMatcher-7B 0.748"
LEVELS_NOTE = ("Alpha's level of measurement is our choice, the paper states none: ordinal (Not < Partially < Fully "
               "Covered), with nominal (the labels as unordered categories) beside.")


@dataclass(frozen=True)
class Pair:
    pair_id: str
    preference: str
    checklist: tuple[str, ...]
    labels: tuple[str, ...] = ()


def pair_id(preference: str, checklist) -> str:
    """A pair's id from its content: the same pair has the same id in every run and file."""
    text = json.dumps([preference.strip(), [entry.strip() for entry in checklist]], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def scorer_pairs(results_dir: str | Path) -> dict[str, dict[str, Pair]]:
    """{scorer: {pair_id: its labels of that pair}} over every run under ``results_dir``;
    the first of a scorer's labellings of one pair is kept."""
    found: dict[str, dict[str, Pair]] = {}
    for run in load_runs(results_dir, keep_raw=False):
        for _, data in sorted(run.instances.items()):
            for scorer, evaluation in sorted((data.get("evaluations") or {}).items()):
                for step in MATCH_STEPS:
                    record = ((evaluation or {}).get("steps") or {}).get(step) or {}
                    preference = ((record.get("sent") or {}).get("values") or {}).get("preference")
                    results = (record.get("output") or {}).get("results")
                    if record.get("status") != "done" or not isinstance(preference, str) or not results:
                        continue
                    checklist = tuple(r["entry"] for r in results)
                    key = pair_id(preference, checklist)
                    found.setdefault(scorer, {}).setdefault(key, Pair(key, preference, checklist,
                                                                      tuple(r["label"] for r in results)))
    return found


# ---------------------------------------------------------------------------------------
# The humans' file
# ---------------------------------------------------------------------------------------
def read_labels(paths) -> list[dict]:
    """The rows of one or several labels files (.csv, .json or .jsonl; docs/match_agreement.md),
    checked together: an error names the file, the row and the field."""
    checked: list[dict] = []
    seen: dict[str, tuple[str, tuple, set]] = {}  # pair_id -> (where first, content, annotators)
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        checked += _read_file(Path(path), seen)
    return checked


def _read_file(path: Path, seen: dict) -> list[dict]:
    try:
        # As files are read: a BOM (a spreadsheet's "CSV UTF-8") is no part of the first
        # column's name; only a record's end ends a CSV row and only "\n" a JSON line (a
        # newline, U+2028 or U+0085 inside a text is the text's).
        with path.open(encoding="utf-8-sig", newline="") as file:
            if path.suffix.lower() == ".csv":  # its cells written by utils/csv_file.py's rule
                rows = [{k: read_cell(v) if isinstance(v, str) else v for k, v in row.items()}
                        for row in csv.DictReader(file)]
            elif path.suffix.lower() == ".jsonl":
                rows = [json.loads(line) for line in file.read().split("\n") if line.strip()]
            else:
                rows = json.loads(file.read())
    except (OSError, ValueError, csv.Error) as exc:
        raise BadInput(f"{path}: cannot read the labels ({exc})") from None
    if not isinstance(rows, list) or not rows:
        raise BadInput(f"{path}: no rows (expected one per pair and annotator, columns {', '.join(COLUMNS)})")
    checked = []
    for number, row in enumerate(rows, start=1):
        where = f"{path}: row {number}"
        if not isinstance(row, dict):
            raise BadInput(f"{where}: not an object")
        for field in COLUMNS:
            value = row.get(field)
            if field in ("checklist", "labels") and isinstance(value, str):
                try:
                    value = json.loads(value)
                except ValueError:
                    raise BadInput(f"{where}: field {field!r} is not a JSON list") from None
            if field in ("checklist", "labels") and not (isinstance(value, list) and value
                                                         and all(isinstance(v, str) for v in value)):
                raise BadInput(f"{where}: field {field!r} must be a non-empty list of strings")
            if field not in ("checklist", "labels") and not (isinstance(value, str) and value.strip()):
                raise BadInput(f"{where}: field {field!r} must be a non-empty string")
            row = {**row, field: value}
        if len(row["labels"]) != len(row["checklist"]):
            raise BadInput(f"{where}: {len(row['labels'])} labels for {len(row['checklist'])} checklist entries")
        for label in row["labels"]:
            if label not in LABELS:
                raise BadInput(f"{where}: field 'labels': {label!r} is not one of {', '.join(LABELS)}")
        content = (row["preference"], tuple(row["checklist"]))
        first = seen.setdefault(row["pair_id"], (where, content, set()))
        if first[1] != content:
            raise BadInput(f"{where}: pair {row['pair_id']} has another preference or checklist than in {first[0]}")
        if row["annotator"] in first[2]:
            raise BadInput(f"{where}: annotator {row['annotator']!r} labelled pair {row['pair_id']} twice")
        first[2].add(row["annotator"])
        checked.append(row)
    return checked


def majority(rows: list[dict]) -> dict[str, dict]:
    """{pair_id: {"pair": Pair, "votes": per entry Counter, "majority": per entry label or None}}."""
    pairs: dict[str, dict] = {}
    for row in rows:
        entry = pairs.setdefault(row["pair_id"], {
            "pair": Pair(row["pair_id"], row["preference"], tuple(row["checklist"])),
            "votes": [Counter() for _ in row["checklist"]]})
        for votes, label in zip(entry["votes"], row["labels"]):
            votes[label] += 1
    for entry in pairs.values():
        entry["majority"] = [next((label for label, n in votes.items() if n > sum(votes.values()) / 2), None)
                             for votes in entry["votes"]]
    return pairs


def annotator_alpha(rows: list[dict], level: str = "ordinal") -> float | None:
    """Krippendorff's alpha among the annotators over every entry, at ``level`` ("ordinal" or "nominal"); None
    where it is undefined (``alpha_undefined`` says why)."""
    return _alpha(annotator_matrix(rows), level)


def annotator_matrix(rows: list[dict]):
    """Annotators x entries, each label's rank in LABELS, NaN where an annotator did not label
    the pair."""
    import numpy as np

    units = sorted({(r["pair_id"], i) for r in rows for i in range(len(r["labels"]))})
    annotators = sorted({r["annotator"] for r in rows})
    column = {unit: k for k, unit in enumerate(units)}
    data = np.full((len(annotators), len(units)), np.nan)
    for row in rows:
        for i, label in enumerate(row["labels"]):
            data[annotators.index(row["annotator"]), column[(row["pair_id"], i)]] = LABELS.index(label)
    return data


def alpha_undefined(data) -> str | None:
    """Why alpha has no value on ``data`` (coders x units), or None when it has one."""
    import numpy as np

    if len(data) < 2:
        return "one annotator: there is no agreement among annotators to measure"
    if not (np.sum(~np.isnan(data), axis=0) >= 2).any():
        return "no entry was labelled by two annotators (their files share no pair)"
    if len(set(data[~np.isnan(data)].tolist())) < 2:
        return "every label is the same: there is no disagreement to expect"
    return None


def _alpha(data, level: str) -> float | None:
    import krippendorff

    if alpha_undefined(data) is not None:
        return None
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


def scorer_agreement(pairs: dict[str, dict], labelled: dict[str, Pair]) -> dict:
    """One scorer against the majority, on the entries both labelled."""
    import numpy as np
    from sklearn.metrics import cohen_kappa_score, confusion_matrix

    truth, predicted, pairs_found = [], [], 0
    for entry in pairs.values():
        pair = entry["pair"]
        found = labelled.get(pair_id(pair.preference, pair.checklist))
        if found is None:
            continue
        pairs_found += 1
        for human, machine in zip(entry["majority"], found.labels):
            if human is not None:
                truth.append(human)
                predicted.append(machine)
    result = {"pairs": pairs_found, "entries": len(truth)}
    if not truth:
        return result
    matrix = confusion_matrix(truth, predicted, labels=list(LABELS))
    per_label = {label: (None if matrix[i].sum() == 0 else float(matrix[i, i] / matrix[i].sum()))
                 for i, label in enumerate(LABELS)}
    kappa = cohen_kappa_score(truth, predicted, labels=list(LABELS)) if len(set(truth + predicted)) > 1 else None
    codes = np.array([[LABELS.index(x) for x in truth], [LABELS.index(x) for x in predicted]], dtype=float)
    return {**result, "accuracy": float(np.trace(matrix) / matrix.sum()), "accuracy_per_label": per_label,
            "label_counts": {label: int(matrix[i].sum()) for i, label in enumerate(LABELS)},
            "cohen_kappa": None if kappa is None or np.isnan(kappa) else float(kappa),
            "alpha_with_majority": _alpha(codes, "ordinal"), "alpha_with_majority_nominal": _alpha(codes, "nominal"),
            "confusion": {"labels": list(LABELS), "rows_majority_columns_scorer": matrix.tolist()}}


def agreement(labels_paths, results_dir: str | Path) -> dict:
    """The whole meta-evaluation: ``labels_paths`` (one file or several) against every scorer
    of the runs under ``results_dir``."""
    rows = read_labels(labels_paths)
    pairs = majority(rows)
    entries = sum(len(e["majority"]) for e in pairs.values())
    kept = sum(label is not None for e in pairs.values() for label in e["majority"])
    files = [labels_paths] if isinstance(labels_paths, (str, Path)) else labels_paths
    return {"labels_files": [str(p) for p in files], "results_dir": str(results_dir),
            "annotators": len({r["annotator"] for r in rows}), "pairs": len(pairs), "entries": entries,
            "entries_with_majority": kept,
            "pairs_without_majority": sum(all(label is None for label in e["majority"]) for e in pairs.values()),
            "alpha_levels": LEVELS_NOTE, "annotator_alpha": annotator_alpha(rows),
            "annotator_alpha_nominal": annotator_alpha(rows, "nominal"),
            "annotator_alpha_undefined": alpha_undefined(annotator_matrix(rows)),
            "scorers": {scorer: scorer_agreement(pairs, labelled)
                        for scorer, labelled in sorted(scorer_pairs(results_dir).items())}}


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def markdown(result: dict) -> str:
    lines = ["# Matcher meta-evaluation (Appendix A.1)", "",
             f"Human labels: {', '.join(f'`{p}`' for p in result['labels_files'])}: {result['annotators']} annotators, {result['pairs']} "
             f"preference-checklist pairs, {result['entries']} entries, {result['entries_with_majority']} with a "
             f"majority label (chosen by more than half of the entry's annotators; the others are dropped, "
             f"and {result['pairs_without_majority']} pair(s) left with none); Krippendorff's alpha among the annotators: "
             f"ordinal {_fmt(result['annotator_alpha'])}, nominal {_fmt(result['annotator_alpha_nominal'])}"
             f"{f' ({why})' if (why := result.get('annotator_alpha_undefined')) else ''}. {LEVELS_NOTE} "
             f"Scorers: the runs under `{result['results_dir']}`, on the entries they labelled too. Paper, {PAPER}.", "",
             md_table(["Scorer", "Pairs", "Entries", "Accuracy", *(f"Acc. {label}" for label in reversed(LABELS)),
                       "Cohen's κ", "α with majority (ordinal)", "α (nominal)"],
                      [[f"`{scorer}`", str(s["pairs"]), str(s["entries"]), _fmt(s.get("accuracy")),
                        *(f"{_fmt((s.get('accuracy_per_label') or {}).get(label))} "
                          f"(n={(s.get('label_counts') or {}).get(label, 0)})" for label in reversed(LABELS)),
                        _fmt(s.get("cohen_kappa")), _fmt(s.get("alpha_with_majority")),
                        _fmt(s.get("alpha_with_majority_nominal"))]
                       for scorer, s in result["scorers"].items()]), ""]
    for scorer, s in result["scorers"].items():
        if "confusion" not in s:
            continue
        matrix = s["confusion"]["rows_majority_columns_scorer"]
        lines += [f"## Confusion matrix of `{scorer}`", "", "Rows: the majority's label; columns: the scorer's.", "",
                  md_table(["majority ↓, scorer →", *LABELS], [[label, *map(str, row)] for label, row in zip(LABELS, matrix)]),
                  ""]
    return "\n".join(lines).rstrip() + "\n"
