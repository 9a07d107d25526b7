"""`python -m evaluation.report` on the fixture results directory of tests/support/fixtures_results.py,
and the paper's published numbers (evaluation/report/published.py, data/published/*.json).

Expected numbers, by hand from the fixture (counts = matched-inferred, |inferred|,
matched-truth, |truth|):

GPT-4o, default, scorer S — 7 instances evaluated (p3 consistent: infer failed;
p3 changing: not evaluated yet):
  Σ = (1+2+0+1.5+1+2+1, 2+2+2+3+1+2+2, 1+1+0+1+2+2+1.5, 2+2+3+2+2+2+3) = (8.5, 14, 8.5, 16)
  P = 8.5/14 = 17/28, R = 8.5/16 = 17/32, F1 = 2·8.5/(14+16) = 17/30
  consistent (p1, p2): (3, 4, 2, 4) -> P .75, R .5, F1 .6
  contrastive: (2.5, 6, 3, 7) -> P 5/12, R 3/7, F1 30/71
  changing (p1, p2): (3, 4, 3.5, 5) -> P .75, R .7, F1 21/29
  macro: per-instance P .5 1 0 .5 1 1 .5 -> 4.5/7; R .5 .5 0 .5 1 1 .5 -> 4/7;
         F1 .5 2/3 0 .5 1 1 .5 -> (25/6)/7
  judge scores (8; p3 changing's generate failed): 6 8 5 2 4 7 10 6 -> 48/8 = 6.0
  by type: consistent 19/3, contrastive 13/3, changing 8.0
GPT-4o, default, scorer M: as S but p2 consistent (1.5,...) and p2 contrastive (1,...):
  Σ = (7.5, 14, 8.5, 16) -> F1 = 2·(15/28)(17/32)/((15/28)+(17/32)) = 510/956
DeepSeek-R1: every instance (1,2,1,2), score 7 -> 50/50/50, CI of zero width; M: R .75, F1 .6
Claude 3.7 Sonnet: every instance (2,2,1,2), score 9 -> P 1, R .5, F1 2/3; M: 1/1/1
GPT-4o oracle: (2,2,1.5,2) -> F1 6/7, score 9 (8 instances; p3 contrastive skipped); summary: (1,2,2,2) -> F1 2/3, score 7;
oracle_preference: score 10.
"""
from __future__ import annotations

import csv
from pathlib import Path
import struct

import pytest

from cupid.evaluation.report import published as P
from cupid.evaluation import report as R
from cupid.evaluation.report import build as report_build
from fixtures_results import CLAUDE, GPT4O, M, R1, S, build_results_dir

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    results = build_results_dir(root / "results")
    out = root / "out"
    code = R.main([str(results), "--output", str(out), "--n_bootstrap", "300", "--seed", "7",
                   "--n_length_bins", "3", "--min_bin_size", "3"])
    assert code == 0
    rows = list(csv.DictReader(open(out / "report.csv", encoding="utf-8")))
    return {"results": results, "out": out, "rows": rows,
            "md": (out / "report.md").read_text(encoding="utf-8")}


def row(rows, model, setting, scorer, itype="all"):
    found = [r for r in rows if (r["model"], r["setting"], r["scorer"], r["instance_type"])
             == (model, setting, scorer, itype)]
    assert len(found) == 1, (model, setting, scorer, itype)
    return found[0]


def num(value: str) -> float:
    return float(value)


# ---------------------------------------------------------------------------------------
# report.csv
# ---------------------------------------------------------------------------------------
def test_csv_has_a_row_per_model_setting_scorer_and_type(built):
    rows = built["rows"]
    keys = {(r["model"], r["setting"], r["scorer"], r["instance_type"]) for r in rows}
    assert len(keys) == len(rows)
    # GPT-4o: default x 2 scorers + 3 other settings x 1 scorer; R1 and Claude: 2 scorers.
    assert len(rows) == 4 * (2 + 3 + 2 + 2)
    assert list(rows[0].keys()) == R.CSV_COLUMNS


def test_csv_partial_run_numbers_by_hand(built):
    r = row(built["rows"], GPT4O, "default", S)
    assert r["paper_model"] == "GPT-4o"
    assert (r["instance_files"], r["inference_evaluated"], r["inference_failed"], r["inference_missing"]) \
        == ("9", "7", "1", "1")
    assert num(r["precision"]) == pytest.approx(17 / 28, abs=1e-6)
    assert num(r["recall"]) == pytest.approx(17 / 32, abs=1e-6)
    assert num(r["f1"]) == pytest.approx(17 / 30, abs=1e-6)
    assert (num(r["n_predicted_matched"]), num(r["n_predicted"]), num(r["n_true_matched"]),
            num(r["n_true"])) == (8.5, 14, 8.5, 16)
    assert num(r["macro_precision"]) == pytest.approx(4.5 / 7, abs=1e-6)
    assert num(r["macro_recall"]) == pytest.approx(4 / 7, abs=1e-6)
    assert num(r["macro_f1"]) == pytest.approx(25 / 6 / 7, abs=1e-6)
    assert (r["generation_evaluated"], r["generation_failed"], r["generation_missing"]) == ("8", "1", "0")
    assert num(r["score"]) == pytest.approx(6.0)
    assert num(r["f1_low"]) < num(r["f1"]) < num(r["f1_high"])
    # Every persona's judge scores average 6 (p1: 6, 2, 10; p2: 8, 4, 6; p3: 5, 7), so resampling
    # personas, as the intervals do, cannot move the mean; resampling instances would.
    assert num(r["score_low"]) == num(r["score_high"]) == 6.0
    # Published numbers next to ours, as fractions like ours.
    assert (r["paper_table_inference"], num(r["paper_f1"])) == ("Table 1", pytest.approx(0.43))
    assert (r["paper_table_generation"], num(r["paper_score"])) == ("Table 3", pytest.approx(6.46))
    # results.json holds wrong aggregates (0.99): the report recomputed from instance files.
    assert "0.99" not in {r["precision"], r["recall"], r["f1"]}


@pytest.mark.parametrize("itype, p, rec, f1, score, n_inf, n_gen", [
    ("consistent", 0.75, 0.5, 0.6, 19 / 3, "2", "3"),
    ("contrastive", 5 / 12, 3 / 7, 30 / 71, 13 / 3, "3", "3"),
    ("changing", 0.75, 0.7, 21 / 29, 8.0, "2", "2"),
])
def test_csv_by_instance_type(built, itype, p, rec, f1, score, n_inf, n_gen):
    r = row(built["rows"], GPT4O, "default", S, itype)
    assert r["instance_files"] == "3"
    assert (num(r["precision"]), num(r["recall"]), num(r["f1"])) == \
        (pytest.approx(p, abs=1e-6), pytest.approx(rec, abs=1e-6), pytest.approx(f1, abs=1e-6))
    assert num(r["score"]) == pytest.approx(score, abs=1e-6)
    assert (r["inference_evaluated"], r["generation_evaluated"]) == (n_inf, n_gen)
    published = {"consistent": 42.2, "contrastive": 38.3, "changing": 48.4}[itype]
    assert num(r["paper_f1"]) == pytest.approx(published / 100)


def test_csv_matcher_scorer_and_other_settings(built):
    rows = built["rows"]
    m = row(rows, GPT4O, "default", M)
    assert num(m["f1"]) == pytest.approx(510 / 956, abs=1e-6)
    assert m["matcher"] == "kixlab/prefmatcher-7b" and m["evaluator"] == S
    assert m["paper_table_inference"] == "Table 11" and num(m["paper_f1"]) == pytest.approx(0.42)
    assert m["score"] == "" and m["generation_evaluated"] == ""  # no judge under the matcher scorer
    oracle = row(rows, GPT4O, "oracle", S)
    assert num(oracle["f1"]) == pytest.approx(6 / 7, abs=1e-6) and num(oracle["score"]) == 9
    assert (oracle["inference_evaluated"], oracle["inference_skipped"], oracle["inference_missing"]) \
        == ("8", "1", "0")
    assert num(oracle["paper_f1"]) == pytest.approx(0.658) and num(oracle["paper_score"]) == 7.79
    summary = row(rows, GPT4O, "summary", S, "changing")
    assert num(summary["f1"]) == pytest.approx(2 / 3, abs=1e-6)
    assert summary["paper_table_inference"] == "Table 9" and num(summary["paper_f1"]) == pytest.approx(0.486)
    assert summary["paper_table_generation"] == "Table 10" and num(summary["paper_score"]) == 7.54
    op = row(rows, GPT4O, "oracle_preference", S)
    assert op["f1"] == "" and op["inference_evaluated"] == ""
    assert num(op["score"]) == 10 and num(op["paper_score"]) == 9.20


def test_csv_constant_model_has_zero_width_intervals(built):
    r = row(built["rows"], R1, "default", S)
    assert (num(r["f1"]), num(r["f1_low"]), num(r["f1_high"])) == (0.5, 0.5, 0.5)
    assert (num(r["score"]), num(r["score_low"]), num(r["score_high"])) == (7, 7, 7)
    assert r["paper_model"] == "DeepSeek-R1" and num(r["paper_f1"]) == pytest.approx(0.493)
    c = row(built["rows"], CLAUDE, "default", M)
    assert (num(c["precision"]), num(c["recall"]), num(c["f1"])) == (1, 1, 1)


# ---------------------------------------------------------------------------------------
# report.md
# ---------------------------------------------------------------------------------------
def test_markdown_tables_in_the_paper_layout(built):
    md = built["md"]
    assert "### Table 1 layout — scorer `gpt-4o-2024-11-20`, micro" in md
    assert "### Table 11 layout — scorer `gpt-4o-2024-11-20+kixlab/prefmatcher-7b`, micro" in md
    assert "### Table 9 layout (summary setting)" in md
    assert "### Table 3 layout — judge `gpt-4o-2024-11-20`" in md
    assert "### Table 10 layout (summary setting)" in md
    line = next(l for l in md.splitlines() if l.startswith("| GPT-4o | 60.7 ["))
    cells = [c.strip() for c in line.strip("|").split("|")]
    # All: P 60.7 R 53.1 F1 56.7 n 7/9; Consistent 75.0 50.0 60.0 2/3; ...; Oracle F1 85.7 9/9
    assert cells[1].startswith("60.7 [") and cells[2].startswith("53.1 [") and cells[3].startswith("56.7 [")
    assert cells[4] == "7/9"
    assert cells[5].startswith("75.0") and cells[7].startswith("60.0") and cells[8] == "2/3"
    assert cells[11].startswith("42.3") and cells[15].startswith("72.4") and cells[16] == "2/3"
    assert cells[19] == "85.7 [85.7, 85.7]" and cells[20] == "8/8"
    assert "| ↳ paper (Table 1) | 36.6 | 52.1 | 43.0 |  | 36.5 | 50.1 | 42.2 |" in md
    assert "| ↳ paper (Table 11) | 34.9 | 52.9 | 42.0 |" in md
    assert "| DeepSeek-R1 | 50.0 [50.0, 50.0] | 50.0 [50.0, 50.0] | 50.0 [50.0, 50.0] | 9/9 |" in md
    gen = next(l for l in md.splitlines() if l.startswith("| GPT-4o | 6.00 ["))
    assert "| 9.00 [9.00, 9.00] | 8/8 | 10.00 [10.00, 10.00] | 9/9 |" in gen
    assert "| ↳ paper (Table 3) | 6.46 |  | 5.88 |  | 5.75 |  | 7.74 |  | 7.79 |  | 9.20 |  |" in md


def test_markdown_counts_failures_and_missing(built):
    md = built["md"]
    assert "| GPT-4o | default | gpt-4o-2024-11-20 | inference | 9 | 9 | 7 | 1 | 1 | 0 | infer: 1 |" in md
    assert "| GPT-4o | default | gpt-4o-2024-11-20 | generation | 9 | 9 | 8 | 1 | 0 | 0 | generate: 1 |" in md
    # The oracle instance without a relevant session is skipped, not failed or missing; the
    # oracle reads the labels, and says so (a run.json from before the mark: by its name).
    assert "| GPT-4o | oracle (uses labels) | gpt-4o-2024-11-20 | inference | 9 | — | 8 | 0 | 0 | 1 | — |" in md
    assert "`infer` failed on 1 instance(s): ModelCallFailed: 500" in md
    assert "left out" in md


def test_markdown_paired_differences(built):
    md = built["md"]
    # oracle preference (10 everywhere) minus default (mean 6 over the 8 paired instances)
    assert ("| GPT-4o oracle_preference (uses labels) | GPT-4o default | judge score | 8 | 10.00 | 6.00 | 4.00 ["
            in md)
    # Claude minus DeepSeek-R1 is a constant per-instance shift: zero-width interval.
    assert "| DeepSeek-R1 | Claude 3.7 Sonnet | judge score | 9 | 7.00 | 9.00 | -2.00 [-2.00, -2.00] |" in md


def test_markdown_figure_data(built):
    md = built["md"]
    # Figure 3 by hand: position 1.5: GPT-4o .5, 2/3; R1 .5 x3; Claude 2/3 x3 -> 4.6667/8
    assert "| 1.5 | 8 | 58.3 | 50.0 (n=3) | 58.3 (n=2) | 66.7 (n=3) |" in md
    assert "| 3.5 | 6 | 47.2 | 50.0 (n=2) | 25.0 (n=2) | 66.7 (n=2) |" in md
    assert "| 7.5 | 8 | 62.5 | 50.0 (n=3) | 75.0 (n=2) | 66.7 (n=3) |" in md
    assert "Rests on 22 (model × instance) results from 3 model(s); 3 left out" in md
    # Figure 9, 3 equal bins of the 9 lengths 1000..9000.
    assert "| 1000–3000 | 3 | 50.0 (n=3) | 58.3 (n=2) | 66.7 (n=3) | 7.00 (n=3) | 6.33 (n=3) | 9.00 (n=3) |" in md
    assert "| 4000–6000 | 3 | 50.0 (n=3) | 50.0 (n=3) | 66.7 (n=3) | 7.00 (n=3) | 4.33 (n=3) | 9.00 (n=3) |" in md
    assert "| 7000–9000 | 3 | 50.0 (n=3) | 75.0 (n=2) | 66.7 (n=3) | 7.00 (n=3) | 8.00 (n=2) | 9.00 (n=3) |" in md
    # Figure 5: x = F1 (.5, 17/30, 2/3), y = score (7, 6, 9):
    # Σdxdy = .188889, Σdx² = .0140741, Σdy² = 4.66667 -> r = .737
    assert "r = 0.737" in md
    # Figure 4 model-wise: y = PrefMatcher F1 (.6, 510/956, 1): r = .0362947/.0423371 = .857
    assert "Model-wise (default setting, all instances): r = 0.857" in md


# ---------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------
def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, path
    assert data[12:16] == b"IHDR", path
    return struct.unpack(">II", data[16:24])


def test_figures_are_valid_pngs_of_sensible_size(built):
    out = built["out"]
    names = ["fig_prf1.png", "fig3_position.png", "fig9_length.png", "fig5_inference_vs_generation.png"]
    matcher = sorted(out.glob("fig4_matcher_*.png"))
    assert len(matcher) == 1
    for path in [out / n for n in names] + matcher:
        width, height = png_size(path)
        assert 400 <= width <= 3000 and 300 <= height <= 2000, (path, width, height)
        assert path.stat().st_size > 5000, path
        assert f"]({path.name})" in built["md"]


# ---------------------------------------------------------------------------------------
# Command line behaviour
# ---------------------------------------------------------------------------------------
def test_default_output_is_the_results_dir_and_seed_makes_it_reproducible(tmp_path):
    results = build_results_dir(tmp_path / "results")
    def numbers() -> tuple[set, list[dict]]:
        """The build ids and the rows without them (each build has its own id)."""
        with open(results / "report.csv", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        return {r.pop("build_id") for r in rows}, rows

    assert R.main([str(results), "--n_bootstrap", "50", "--seed", "3", "--no_figures"]) == 0
    first_build, first = numbers()
    assert (results / "report.md").is_file()
    assert not list(results.glob("*.png"))
    assert R.main([str(results), "--n_bootstrap", "50", "--seed", "3", "--no_figures"]) == 0
    build, again = numbers()
    assert again == first and len(build) == 1 and build != first_build
    assert R.main([str(results), "--n_bootstrap", "50", "--seed", "4", "--no_figures"]) == 0
    assert numbers()[1] != first


def test_no_runs_is_an_error(tmp_path, capsys):
    assert R.main([str(tmp_path)]) == 1
    assert "no run.json" in capsys.readouterr().err


def test_figures_skipped_without_matplotlib(tmp_path, monkeypatch):
    results = build_results_dir(tmp_path / "results")

    def no_matplotlib():
        raise ImportError("No module named 'matplotlib'")
    monkeypatch.setattr(report_build, "pyplot", no_matplotlib)
    files = R.build_report(results, tmp_path / "out", n_bootstrap=20)
    assert files.figures == []
    assert "figures not drawn: matplotlib is not installed" in files.markdown.read_text()


def test_cli_draws_figures_beside_report_html_and_says_when_it_cannot(tmp_path, monkeypatch, capsys):
    # The command line draws the figures (in a child process) while report.html is made:
    # the page holds them, and without matplotlib report.md and the page say so instead.
    results = build_results_dir(tmp_path / "results")
    assert R.main([str(results), "--output", str(tmp_path / "a"), "--n_bootstrap", "20"]) == 0
    pngs = sorted(p.name for p in (tmp_path / "a").glob("*.png"))
    out = capsys.readouterr().out
    assert pngs and all(f"wrote {tmp_path / 'a' / name}" in out for name in pngs)
    page = (tmp_path / "a" / "report.html").read_text(encoding="latin-1")
    assert page.count("data:image/png;base64,") == len(pngs)

    def no_matplotlib():
        raise ImportError("No module named 'matplotlib'")
    monkeypatch.setattr(report_build, "pyplot", no_matplotlib)
    assert R.main([str(results), "--output", str(tmp_path / "b"), "--n_bootstrap", "20"]) == 0
    assert not list((tmp_path / "b").glob("*.png"))
    note = "figures not drawn: matplotlib is not installed"
    assert note in (tmp_path / "b" / "report.md").read_text()
    assert note in (tmp_path / "b" / "report.html").read_text(encoding="latin-1")
    assert ".png" not in (tmp_path / "b" / "report.md").read_text()


def test_single_partial_run_without_other_settings(tmp_path):
    from fixtures_results import instance_file, write_run
    write_run(tmp_path, "some-new-model", "default", [
        instance_file("some-new-model", "default", "p1", "consistent", s_counts=(1, 2, 1, 2), score=4),
        instance_file("some-new-model", "default", "p2", "consistent", infer="failed", generate=None),
    ])
    files = R.build_report(tmp_path, n_bootstrap=20)
    md = files.markdown.read_text()
    assert "| some-new-model | 50.0 [50.0, 50.0] | 50.0 [50.0, 50.0] | 50.0 [50.0, 50.0] | 1/2 |" in md
    assert "| ↳ paper (" not in md  # not a model of the paper
    assert "needs at least 3 points" in md or "Not drawn" in md


# ---------------------------------------------------------------------------------------
# Published numbers
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("api, paper", [
    ("gpt-4o-2024-08-06", "GPT-4o"), ("claude-3-7-sonnet-20250219", "Claude 3.7 Sonnet"),
    ("deepseek-ai/DeepSeek-R1", "DeepSeek-R1"), ("openai:o3-mini-2025-01-31", "o3-mini"),
    ("meta-llama/Meta-Llama-3.1-405B-Instruct-Turbo", "Llama 3.1 405B"),
    ("mistralai/Mistral-7B-Instruct-v0.3", "Mistral 7B"), ("Qwen/Qwen2.5-72B-Instruct-Turbo", "Qwen2.5 72B"),
    ("claude-3-5-sonnet-20240620", "Claude 3.5 Sonnet"),
    ("anthropic.claude-3-7-sonnet-20250219-v1:0", "Claude 3.7 Sonnet"),
    ("gemini-2.0-flash-thinking-exp-01-21", "Gemini 2.0 Flash Thinking"),
    ("gemini-2.0-pro-exp-02-05", "Gemini 2.0 Pro"),
    ("gpt-4o-2024-11-20", None), ("claude-3-5-sonnet-20241022", None), ("gpt-4.1-nano-2025-04-14", None),
])
def test_paper_model_names(api, paper):
    assert P.paper_model_name(api) == paper


def test_every_table_has_every_model_once():
    for key in P.TABLE_FILES:
        table = P.load_table(key)
        models = [r["model"] for r in table["rows"]]
        assert sorted(models) == sorted(P.PAPER_MODELS), key
        assert table["source"].endswith(table["table"])
        for r in table["rows"]:
            assert set(r["values"]) == set(table["columns"]), (key, r["model"])


def test_published_f1_agrees_with_published_p_and_r():
    # A transcription error in P, R or F1 would break F1 = 2PR/(P+R) beyond rounding.
    for key in ("table1", "table9", "table11"):
        for r in P.load_table(key)["rows"]:
            for column, v in r["values"].items():
                f1 = 2 * v["precision"] * v["recall"] / (v["precision"] + v["recall"])
                assert abs(f1 - v["f1"]) <= 0.1, (key, r["model"], column)


def test_published_spot_values():
    assert P.lookup("GPT-4o", "inference", "default")["values"] == {"precision": 36.6, "recall": 52.1, "f1": 43.0}
    assert P.lookup("Claude 3.7 Sonnet", "inference", "oracle")["values"]["f1"] == 76.3
    assert P.lookup("Mistral 7B", "inference", "summary", "all")["values"]["f1"] == 41.8
    assert P.lookup("Gemini 2.0 Flash Thinking", "inference", "default", "changing",
                    "prefmatcher")["values"] == {"precision": 39.9, "recall": 57.2, "f1": 47.0}
    assert P.lookup("DeepSeek-R1", "generation", "oracle_preference")["values"]["score"] == 9.66
    assert P.lookup("o3-mini", "generation", "summary", "contrastive") == {"table": "Table 10",
                                                                            "values": {"score": 6.49}}
    assert P.lookup("GPT-4o", "generation", "summary", "all", "prefmatcher") is None
    assert P.lookup(None, "inference", "default") is None
    flash = next(r for r in P.load_table("table11")["rows"] if r["model"] == "Gemini 2.0 Flash Thinking")
    assert flash["printed_as"] == "Gemini 2.0 Flash Think"


def _section(md: str, heading: str) -> str:
    start = md.index(heading)
    end = md.find("\n### ", start + 1)
    return md[start:end if end != -1 else None]


def test_paper_row_stands_under_the_macro_table_too(built):
    # The paper says only "averaged across all instances"; both of our averages face it.
    macro = _section(built["md"], "### Table 1 layout — scorer `gpt-4o-2024-11-20`, macro")
    assert "| ↳ paper (Table 1) | 36.6 | 52.1 | 43.0 |  | 36.5 | 50.1 | 42.2 |" in macro


def test_paper_row_says_when_our_evaluator_is_not_the_papers(tmp_path):
    from fixtures_results import instance_file, write_run
    instances = []
    for persona in ("p1", "p2"):
        data = instance_file(GPT4O, "default", persona, "consistent", s_counts=(1, 2, 1, 2), score=5)
        entry = data["evaluations"].pop(S)
        entry["evaluator"] = entry["matcher"] = "smollm2-135m"
        data["evaluations"]["smollm2-135m"] = entry
        instances.append(data)
    write_run(tmp_path, GPT4O, "default", instances)
    md = R.build_report(tmp_path, n_bootstrap=20, figures=False).markdown.read_text()
    flagged = "↳ paper (Table 1; evaluator gpt-4o-2024-11-20, ours smollm2-135m) | 36.6 | 52.1 | 43.0 |"
    assert flagged in _section(md, "### Table 1 layout — scorer `smollm2-135m`, micro")
    assert flagged in _section(md, "### Table 1 layout — scorer `smollm2-135m`, macro")
    gen = _section(md, "### Table 3 layout — judge `smollm2-135m`")
    assert "↳ paper (Table 3; evaluator gpt-4o-2024-11-20, ours smollm2-135m) | 6.46 |" in gen
    assert "| ↳ paper (Table 1) |" not in md


def test_gap_commands_name_the_model_as_the_user_did(tmp_path):
    """A run of ``path/file.py:Class`` records that spec in run.json; the report's commands
    for its missing settings name it so, not by the class's model_name, so they run as printed."""
    from cupid.evaluation.report.gaps import command, run_command
    from cupid.evaluation.report.results import Run

    run = Run("my-model", "default")
    run.manifests.append({"model": "my-model", "model_spec": "models/mine.py:MyModel"})
    line = command(run_command(run, None), tmp_path, setting="oracle")
    assert "--model models/mine.py:MyModel" in line and "--setting oracle" in line


def test_a_killed_builds_temporaries_are_removed_by_the_next_build(tmp_path):
    """A build killed mid-write leaves .report.html.HOST~PID.*.tmp (up to 15 MB): the next
    build removes those whose writer is gone, and leaves a live writer's alone."""
    import subprocess
    import sys

    from cupid.utils.io import temporary_prefix

    results = build_results_dir(tmp_path / "results")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        prefix = temporary_prefix(results / "report.html")
        mine = prefix.rpartition("~")[0]
        left = results / f"{mine}~{dead.pid}.abc123.tmp"
        busy = results / f"{mine}~{alive.pid}.def456.tmp"
        for path in (left, busy):
            path.write_bytes(b"<html>half a page")
        assert R.main([str(results), "--n_bootstrap", "20", "--no_figures"]) == 0
        assert not left.exists() and busy.exists()
        assert not [p for p in results.glob(".report.*.tmp") if p != busy]  # the build left none
    finally:
        alive.kill()
        alive.wait()


@pytest.mark.slow
def test_the_reports_suggested_commands_run_as_printed_from_another_directory(tmp_path):
    """What "cannot show yet" suggests is a command line that runs from anywhere: the installed
    console scripts, the data as an absolute path (a served PrefMatcher's command as a dry run:
    none is served here; OTHER_MODEL is the one placeholder, for a model not run yet)."""
    import os
    import shlex
    import subprocess
    import sys

    from cupid.evaluation import evaluate
    from repo_paths import ROOT

    results = tmp_path / "results"
    evaluate("scripted", evaluator="scripted", data=str(ROOT / "data" / "sample"), limit=2, task="both",
             results_dir=results)
    md = R.build_report(results, n_bootstrap=20, figures=False).markdown.read_text()
    gaps = md.split("## What this report cannot show yet", 1)[1].split("\n## ", 1)[0]
    commands = [line.strip() for line in gaps.splitlines() if line.startswith("  cupid-")]
    assert len(commands) >= 5 and all("python -m" not in c for c in commands)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "evaluation").mkdir(parents=True)  # a research directory with its own evaluation/
    (elsewhere / "evaluation" / "__init__.py").write_text("")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    ran = 0
    for command in commands:
        if "OTHER_MODEL" in command:
            continue
        argv = shlex.split(command) + (["--dry_run"] if "--use_matcher" in command else [])
        result = subprocess.run(argv, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"{command}\n{result.stderr[-2000:]}"
        ran += 1
    assert ran >= 4


def test_a_model_object_is_suggested_as_a_python_call_not_a_command(tmp_path):
    """A Model object handed to evaluate() has no name the command line resolves: its missing
    settings are suggested as the evaluate() call, not as ``cupid-eval --model my-echo``."""
    from cupid.evaluation.report.gaps import command, run_command
    from cupid.evaluation.report.results import Run

    run = Run("my-echo", "default")
    run.manifests.append({"model": "my-echo", "data_source": "/data/sample",
                          "invocations": [{"endpoints": {"model": {"model": "my-echo", "provider": "custom"}}}]})
    line = command(run_command(run, "scripted"), tmp_path, setting="oracle", task="both")
    assert "cupid-eval" not in line and "evaluate(model, " in line
    assert "setting='oracle'" in line and "task='both'" in line and "evaluator='scripted'" in line
    assert "data='/data/sample'" in line
    # A registered or hosted model keeps its command line.
    run.manifests[0]["invocations"][0]["endpoints"]["model"]["provider"] = "openai"
    assert command(run_command(run, None), tmp_path).startswith("cupid-eval --model my-echo")
