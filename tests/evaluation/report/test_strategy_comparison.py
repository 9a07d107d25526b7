"""The report compares context strategies (evaluation/report/strategy_comparison.py): data/sample run
with the default setting, the oracle, recent:k=2 and bm25:k=3 (scripted answers), and the
report's tables, figure and instance pages checked against numbers computed here."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cupid.evaluation import report as R
from cupid.evaluation.data import InstanceSource
from cupid.evaluation.report.analysis import Analysis
from cupid.evaluation.report.format import fmt_pct
from fake_llm_server import FakeLLMServer
from sample_results import SAMPLE, SampleEvaluator
from tests.evaluation.report.test_report_html import browser, needs_chromium, open_report, shot  # noqa: F401  (fixtures)

STRATEGIES = ("default", "oracle", "recent:k=2", "bm25:k=3")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    from cupid.evaluation import run as run_module

    out = tmp_path_factory.mktemp("strategies") / "results"
    with FakeLLMServer(responder=SampleEvaluator()) as server:
        for setting in STRATEGIES:
            assert run_module.main(["--model", f"vllm:model-a@{server.openai_base_url}",
                                    "--evaluator", f"vllm:evaluator@{server.openai_base_url}",
                                    "--data_dir", str(SAMPLE), "--results_dir", str(out), "--task", "both",
                                    "--n_workers", "2", "--max_retries", "1", "--setting", setting]) == 0
    assert R.main([str(out), "--n_bootstrap", "50"]) == 0
    return out


def recent_two_recall() -> float:
    """recent:k=2's session recall on data/sample, from the data: the last two of eight."""
    recalls = [len({7, 8} & set(i.relevant_positions())) / len(i.relevant_positions())
               for i in InstanceSource(data_path=SAMPLE) if i.relevant_positions()]
    return sum(recalls) / len(recalls)


def test_results_json_and_the_report_say_what_each_strategy_kept(results):
    selection = json.loads((results / "model-a" / "recent_k=2" / "results.json").read_text())["session_selection"]
    assert selection["recall"] == pytest.approx(recent_two_recall())
    assert selection["sessions_shown"] == 2
    report = (results / "report.md").read_text()
    kept = report.split("### What each strategy kept", 1)[1].split("###", 1)[0]
    row = next(line for line in kept.splitlines() if "`recent:k=2`" in line)
    assert row.split(" | ")[3].startswith(fmt_pct(recent_two_recall()) + " [")
    oracle = next(line for line in kept.splitlines() if "`oracle`" in line)
    assert oracle.split(" | ")[3].startswith("100.0") and oracle.split(" | ")[7].startswith("100.0")  # recall, precision


def test_the_comparison_table_holds_each_strategys_paired_difference_with_default_and_oracle(results):
    an = Analysis(results, n_bootstrap=50)
    compared = (results / "report.md").read_text().split("### Strategies compared", 1)[1].split("## ", 1)[0]
    rows = {line.split(" | ")[1].removesuffix(" (uses labels)").strip("` "): line.split(" | ")
            for line in compared.splitlines() if line.startswith("| model-a")}
    assert list(rows) == ["default", "bm25:k=3", "recent:k=2", "oracle"]  # floor first, ceiling last
    # The oracle reads the labels: marked so in both tables, the blind strategies not.
    assert "`oracle` (uses labels)" in rows["oracle"][1] and "labels" not in rows["bm25:k=3"][1]
    kept = (results / "report.md").read_text().split("### What each strategy kept", 1)[1].split("###", 1)[0]
    assert "`oracle` (uses labels)" in kept and "`recent:k=2` (uses labels)" not in kept
    assert json.loads((results / "model-a" / "oracle" / "run.json").read_text())["setting_uses_labels"] is True
    assert json.loads((results / "model-a" / "oracle" / "results.json").read_text())["settings"]["uses_labels"] is True
    assert json.loads((results / "model-a" / "recent_k=2" / "results.json").read_text())["settings"]["uses_labels"] is False
    bm25, floor, ceiling = an.run("model-a", "bm25:k=3"), an.run("model-a", "default"), an.run("model-a", "oracle")
    for column, other in ((4, floor), (5, ceiling)):
        d = an.paired(bm25, "evaluator", other, "evaluator", "inference")
        assert rows["bm25:k=3"][column].startswith(("+" if d.difference > 0 else "") + fmt_pct(d.difference) + " [")
        assert rows["bm25:k=3"][column].endswith(f"(n={d.n})")
    assert rows["default"][4] == "—" and rows["oracle"][5] == "—"
    tokens = {name: int(row[-1].strip(" |").replace(",", "")) for name, row in rows.items()}
    assert tokens["recent:k=2"] < tokens["bm25:k=3"] < tokens["default"]  # fewer sessions, fewer tokens
    assert (results / "fig_strategies.png").stat().st_size > 10_000
    assert "![Context strategies" in (results / "report.md").read_text()


@needs_chromium
def test_an_instance_page_marks_the_sessions_the_run_showed(results, browser):
    open_report(browser, results / "report.html")
    row = browser.evaluate("(() => { const idx = window.cupidReport.index(); "
                           "return idx.rows.run.findIndex(r => idx.runs[r].setting === 'recent:k=2'); })()")
    browser.evaluate(f"location.hash = 'i={row}&s=0'")
    browser.wait_for("!!document.querySelector('#sessions details.session')")
    shown = browser.evaluate("[...document.querySelectorAll('#sessions details.session')].map(d => d.dataset.shown)")
    assert shown == ["0"] * 6 + ["1", "1"]
    badges = browser.evaluate("[...document.querySelectorAll('#sessions .badge.shown')].map(b => b.textContent)")
    assert badges == ["shown as session 1", "shown as session 2"]
    assert re.search(r"recent:k=2 showed 2 of 8 \(session recall \d/\d\)", browser.evaluate(
        "document.querySelector('#sessions h2').textContent"))
    shot(browser, "strategies_instance")
    assert browser.errors == []
