"""cupid-report --export's writer (evaluation/report/export.py) and the project's CSV rule
(utils/csv_file.py) in process: each format read back as datasets and pyarrow read it, one
type per column, formulas made inert in CSV only, an unknown format named."""
from __future__ import annotations

import csv
import io
import json
import re

import pytest

from cupid.evaluation.report import export
from cupid.utils.csv_file import INERT_STARTS, csv_text, inert_cell, read_cell

ROWS = [{"instance_id": "a", "f1": None, "n": 2, "ok": True, "labels": ["Fully Covered", "Not Covered"],
         "answer": "=HYPERLINK(\"x\")", "score": 0.5, "note": None},
        {"instance_id": "b", "f1": 0.25, "n": 3, "ok": False, "labels": [], "answer": "plain, \"quoted\"\nline",
         "score": 1, "note": None}]


@pytest.mark.parametrize("name, kind", [("s.jsonl", "jsonl"), ("S.CSV", "csv"), ("d/s.Parquet", "parquet")])
def test_the_format_is_the_files_extension(name, kind):
    assert export.export_format(name) == kind


@pytest.mark.parametrize("name, shown", [("s.json", "'.json'"), ("samples", "'(no extension)'"), ("s.csv.gz", "'.gz'")])
def test_an_unknown_format_is_named_with_the_path(name, shown):
    with pytest.raises(ValueError, match=re.escape(f"--export {name}: unknown format {shown}; use .jsonl, .parquet, .csv")):
        export.export_format(name)


def test_jsonl_keeps_lists_and_text_as_they_are(tmp_path):
    path = export.write_samples(ROWS, tmp_path / "deep" / "s.jsonl")
    assert path == tmp_path / "deep" / "s.jsonl"
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and [json.loads(line) for line in lines[:-1]] == ROWS
    export.write_samples([{"text": "café"}], tmp_path / "u.jsonl")
    assert (tmp_path / "u.jsonl").read_text(encoding="utf-8") == '{"text": "café"}\n'


def test_csv_holds_lists_as_json_and_formulas_inert(tmp_path):
    path = export.write_samples(ROWS, tmp_path / "s.csv")
    raw = path.read_bytes().decode("utf-8")
    assert raw.startswith("instance_id,f1,n,ok,labels,answer,score,note\r\n")
    rows = list(csv.DictReader(io.StringIO(raw, newline="")))
    assert rows[0]["labels"] == '["Fully Covered", "Not Covered"]' and rows[1]["labels"] == "[]"
    assert rows[0]["answer"] == "'=HYPERLINK(\"x\")" and read_cell(rows[0]["answer"]) == ROWS[0]["answer"]
    assert rows[1]["answer"] == ROWS[1]["answer"]
    assert rows[0]["f1"] == "" and rows[1]["f1"] == "0.25" and rows[0]["ok"] == "True" and rows[0]["n"] == "2"


def test_parquet_gives_each_column_one_type(tmp_path):
    import pyarrow.parquet as pq

    path = export.write_samples(ROWS, tmp_path / "s.parquet")
    table = pq.read_table(path)
    types = {f.name: str(f.type) for f in table.schema}
    assert types == {"instance_id": "string", "f1": "double", "n": "int64", "ok": "bool",
                     "labels": "list<element: string>", "answer": "string", "score": "double", "note": "string"}
    assert table.to_pylist() == [{**row, "score": float(row["score"])} for row in ROWS]
    assert not list(tmp_path.glob(".*"))   # no temporary file left
    mixed = [{"v": 1}, {"v": "two"}, {"v": [1]}]
    schema = export._arrow_schema(mixed, ["v"])
    assert str(schema.field("v").type) == "string"
    assert str(export._arrow_schema([{"v": True}, {"v": 1}], ["v"]).field("v").type) == "string"   # bool is no number
    assert str(export._arrow_schema([{"v": 2}, {"v": 1.5}], ["v"]).field("v").type) == "double"
    assert str(export._arrow_schema([{"v": None}, {"v": 2}], ["v"]).field("v").type) == "int64"


def test_no_rows_make_empty_files(tmp_path):
    assert export.columns([]) == []
    assert export.write_samples([], tmp_path / "e.jsonl").read_text(encoding="utf-8") == ""
    assert export.write_samples([], tmp_path / "e.csv").read_bytes() == b"\r\n"
    import pyarrow.parquet as pq

    assert pq.read_table(export.write_samples([], tmp_path / "e.parquet")).num_rows == 0


@pytest.mark.parametrize("text", ["=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1", "'quoted", "'=x"])
def test_a_cell_a_spreadsheet_would_run_gets_the_mark_and_reads_back(text):
    assert inert_cell(text) == "'" + text
    assert read_cell(inert_cell(text)) == text


@pytest.mark.parametrize("value", ["plain", "a=b", "", " =x", "1-2", 3, -1, 0.5, None, True])
def test_any_other_cell_is_as_it_is(value):
    assert inert_cell(value) == value
    if isinstance(value, str):
        assert read_cell(value) == value


def test_read_cell_leaves_a_lone_mark_of_other_text():
    assert read_cell("'plain") == "'plain" and read_cell("'") == "'"
    assert INERT_STARTS == ("=", "+", "-", "@", "\t", "\r", "'")


def test_csv_text_quotes_line_breaks_and_writes_missing_values_empty():
    text = csv_text(["a", "b", "c"], [{"a": "x\ry", "b": {"k": "é"}, "c": None}, {"a": 1}])
    assert text == 'a,b,c\r\n"x\ry","{""k"": ""é""}",\r\n1,,\r\n'
