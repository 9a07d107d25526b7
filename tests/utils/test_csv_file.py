"""One rule for every CSV the project writes (utils/csv_file.py): report.csv, the per-sample
export, error_types.csv and the matcher page's labels CSV (annotate.js, in Chromium) escape a
text a spreadsheet would run as a formula the same way, and the labels read back to the
texts written."""
from __future__ import annotations

import csv
import io
import json
import os

import pytest

from cupid.evaluation import report as R
from cupid.evaluation.report.format import render_csv
from cupid.utils.csv_file import csv_text, inert_cell, read_cell
from fixtures_results import uniform_run, write_run

HOSTILE = ["=HYPERLINK(\"http://x.example\",\"click\")", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A2)",
           "\t=1+1", "\r=1+1", "'=already marked", "'tis plain", "plain = text", "", "a\r\nb", "lone\rcr"]


def read(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text, newline="")))


def test_a_formula_gets_the_mark_and_read_cell_gives_every_text_back():
    cells = [inert_cell(t) for t in HOSTILE]
    assert cells[:6] == ["'" + t for t in HOSTILE[:6]]
    assert cells[6] == "''=already marked" and cells[7] == "''tis plain"
    assert cells[8:] == HOSTILE[8:]
    assert [read_cell(c) for c in cells] == HOSTILE
    assert inert_cell(-0.5) == -0.5 and inert_cell(None) is None
    rows = read(csv_text(["text", "n"], [{"text": t, "n": -1} for t in HOSTILE]))
    assert [read_cell(r["text"]) for r in rows] == HOSTILE and {r["n"] for r in rows} == {"-1"}


def test_report_csv_escapes_a_model_named_as_a_formula(tmp_path):
    """A model (or any text column) of report.csv starting '=HYPERLINK(' was written as it is."""
    model = "=HYPERLINK(\"http://x.example\",\"model\")"
    write_run(tmp_path / "results", model, "default", uniform_run(model, "default", (1, 2, 1, 2), (1, 2, 1, 2), 7))
    assert R.main([str(tmp_path / "results"), "--output", str(tmp_path / "out"), "--no_figures",
                   "--n_bootstrap", "20"]) == 0
    text = (tmp_path / "out" / "report.csv").read_text(encoding="utf-8")
    rows = read(text)
    assert rows and {r["model"] for r in rows} == {"'" + model}
    assert "\n=HYPERLINK" not in text and ",=HYPERLINK" not in text
    assert render_csv([{"model": "@x", "f1": -0.25}]).splitlines()[1].startswith("'@x,")


REQUIRED = os.environ.get("CUPID_REQUIRE_BROWSER") == "1"


def test_the_labels_csv_of_the_matcher_page_follows_the_same_rule(tmp_path):
    """annotate.js's csvCell, run in Chromium on the page, writes the cells Python's rule
    writes (the page carries INERT_STARTS)."""
    from browser import Browser, find_chromium
    from cupid.evaluation.report.annotation_page import write_page
    from cupid.evaluation.report.agreement import Pair

    if find_chromium() is None and not REQUIRED:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    page = write_page([Pair("p1", "pref", ("a",))], tmp_path / "page.html")
    rows = [{"text": t, "n": k} for k, t in enumerate(HOSTILE)]
    with Browser() as b:
        b.open(page)
        b.wait_for("window.cupidAnnotation && window.cupidAnnotation.ready")
        made = b.evaluate(f"window.cupidAnnotation.csv({json.dumps(rows)}, ['text', 'n'])")
        assert b.errors == []
    assert made == csv_text(["text", "n"], rows)
