"""Writing the per-sample rows (evaluation/sample_rows.py) to a file or a Hugging Face dataset.

    python -m evaluation.report RESULTS_DIR --export samples.jsonl   # or .parquet, .csv
    python -m evaluation.report RESULTS_DIR --push_to_hub user/cupid-samples

JSON Lines and Parquet keep the list columns (checklists, labels) as lists; CSV, which has
no lists, holds them as JSON text. Every format loads with ``datasets.load_dataset``
("json", "parquet", "csv").

A CSV is written by utils/csv_file.py's rule, as every CSV of the project: a text cell a
spreadsheet would run as a formula (a model's answer reading ``=HYPERLINK(...)``) gets a
leading ``'``; JSON Lines and Parquet keep the text as it is.
"""
from __future__ import annotations

import json
from pathlib import Path

from ...utils.csv_file import csv_text
from ...utils.io import atomic_write_text, temporary_prefix

FORMATS = {".jsonl": "jsonl", ".parquet": "parquet", ".csv": "csv"}


def export_format(path: str | Path) -> str:
    """The format a file name asks for; ValueError naming the path for any other."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"--export {path}: unknown format {suffix or '(no extension)'!r}; "
                         f"use {', '.join(FORMATS)}")
    return FORMATS[suffix]


def columns(rows: list[dict]) -> list[str]:
    """The columns, in the order of the first row (every row has the same keys)."""
    return list(rows[0]) if rows else []


def write_samples(rows: list[dict], path: str | Path) -> Path:
    path = Path(path)
    kind = export_format(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "jsonl":
        atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    elif kind == "csv":
        atomic_write_text(path, csv_text(columns(rows), rows))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        names = columns(rows)
        table = pa.Table.from_pylist([{k: row.get(k) for k in names} for row in rows],
                                     schema=_arrow_schema(rows, names)) if rows else pa.table({})
        tmp = path.with_name(f"{temporary_prefix(path)}parquet.tmp")
        pq.write_table(table, tmp)
        tmp.replace(path)
    return path


def _arrow_schema(rows: list[dict], names: list[str]):
    """One type per column from every row's values (a column whose first rows are null
    still gets its type; a column null everywhere is a string column)."""
    import pyarrow as pa

    fields = []
    for name in names:
        values = [row.get(name) for row in rows if row.get(name) is not None]
        if not values:
            kind = pa.string()
        elif all(isinstance(v, list) for v in values):
            kind = pa.list_(pa.string())
        elif all(isinstance(v, bool) for v in values):
            kind = pa.bool_()
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            kind = pa.int64()
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            kind = pa.float64()
        else:
            kind = pa.string()
        fields.append(pa.field(name, kind))
    return pa.schema(fields)


def push_to_hub(rows: list[dict], repo_id: str, *, private: bool = False) -> None:
    """Upload the rows as a dataset through ``datasets.Dataset.push_to_hub`` (needs a token
    from ``huggingface-cli login`` or HF_TOKEN). Not exercised by the tests, which never
    reach the network."""
    from datasets import Dataset

    names = columns(rows)
    Dataset.from_list([{k: row.get(k) for k in names} for row in rows]).push_to_hub(repo_id, private=private)
