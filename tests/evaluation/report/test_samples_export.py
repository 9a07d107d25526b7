"""Per-sample rows (evaluation/sample_rows.py) and ``python -m evaluation.report --export``.

The results tree is tests/support/sample_results.py's: two evaluated models, the evaluator's scorer
and a PrefMatcher one, one judge step that failed for good. The exported files are read back
with ``datasets.load_dataset`` and must give results.json's micro P/R/F1 and mean judge score.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from cupid.evaluation.data import InstanceSource
from cupid.evaluation.metrics import f1_score
from cupid.evaluation.report.command import main as report_main
from cupid.evaluation.sample_rows import STEPS, sample_rows
from sample_results import BROKEN, build
from repo_paths import SAMPLE_DATA

datasets = pytest.importorskip("datasets", reason="the export is read back with datasets.load_dataset")


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    return build(tmp_path_factory.mktemp("samples"))


@pytest.fixture(scope="module")
def rows(results_dir):
    return sample_rows(results_dir)


def _results_files(results_dir: Path) -> dict[tuple[str, str, str], dict]:
    """(model, setting, scorer) -> its results.<scorer>.json."""
    found = {}
    for manifest in results_dir.rglob("run.json"):
        run = json.loads(manifest.read_text())
        for path in manifest.parent.glob("results.*.json"):
            results = json.loads(path.read_text())
            found[(run["model"], run["setting"], results["settings"]["scorer"])] = results
    return found


def test_one_row_per_model_setting_scorer_and_instance(rows, results_dir):
    keys = [(r["model"], r["setting"], r["scorer"], r["instance_id"]) for r in rows]
    assert len(keys) == len(set(keys))
    files = _results_files(results_dir)
    assert {k[:3] for k in keys} == set(files)
    for key, results in files.items():
        assert sum(k[:3] == key for k in keys) == results["counts"]["instances"]
    assert len({r["scorer"] for r in rows if r["model"] == "model-a"}) == 2  # evaluator + PrefMatcher


def test_rows_hold_ground_truth_answers_and_step_accounting(rows):
    data = {i.instance_id: i for i in InstanceSource(data_path=SAMPLE_DATA)}
    done = [r for r in rows if r["inference_status"] == "done"]
    assert done
    for row in done:
        truth = data[row["instance_id"]]
        assert row["request"] == truth.current_request
        assert row["preference"] == truth.current_contextual_preference
        assert row["checklist"] == list(truth.current_checklist)
        assert row["context_factor"] == truth.current_context_factor
        assert row["inferred_preference"] and row["inferred_checklist"]
        assert len(row["precision_labels"]) == len(row["inferred_checklist"]) == row["n_predicted"]
        assert len(row["recall_labels"]) == len(row["checklist"]) == row["n_true"]
        assert row["infer_status"] == "done" and row["infer_prompt_tokens"] > 0
        assert row["prompt_tokens"] >= row["infer_prompt_tokens"] + row["decompose_prompt_tokens"]
    assert all(set(f"{s}_status" for s in STEPS) <= set(r) for r in rows)


def test_a_failed_step_is_a_failed_row_never_a_zero(rows):
    failed = [r for r in rows if r["judge_status"] == "failed"]
    assert failed, "the sample tree has one judge step that failed for good"
    for row in failed:
        assert row["model"] == BROKEN
        assert row["generation_status"] == "failed"
        assert row["generation_error"].startswith("judge: ")
        assert row["judge_error"]
        assert row["judge_score"] is None
        assert row["response"]  # the response exists; only its judgement failed


@pytest.mark.parametrize("suffix,builder", [("jsonl", "json"), ("parquet", "parquet"), ("csv", "csv")])
def test_export_loads_with_datasets_and_gives_results_json(results_dir, tmp_path, capsys, suffix, builder):
    target = tmp_path / f"samples.{suffix}"
    assert report_main([str(results_dir), "--export", str(target)]) == 0
    assert f"wrote {target}" in capsys.readouterr().out
    assert not list(results_dir.rglob("report.md"))  # --export writes the rows, not a report
    loaded = datasets.load_dataset(builder, data_files=str(target), split="train",
                                   cache_dir=str(tmp_path / "hf-cache"))
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in loaded:
        groups[(row["model"], row["setting"], row["scorer"])].append(row)
    files = _results_files(results_dir)
    assert set(groups) == set(files)
    for key, group in groups.items():
        results = files[key]
        done = [r for r in group if r["inference_status"] == "done"]
        predicted_matched = sum(r["n_predicted_matched"] for r in done)
        true_matched = sum(r["n_true_matched"] for r in done)
        precision = predicted_matched / sum(r["n_predicted"] for r in done)
        recall = true_matched / sum(r["n_true"] for r in done)
        assert precision == pytest.approx(results["inference"]["precision"]), key
        assert recall == pytest.approx(results["inference"]["recall"]), key
        assert f1_score(precision, recall) == pytest.approx(results["inference"]["f1"]), key
        if "generation" in results and results["generation"].get("n_instances"):
            scores = [r["judge_score"] for r in group if r["generation_status"] == "done"]
            assert len(scores) == results["generation"]["n_instances"], key
            assert sum(scores) / len(scores) == pytest.approx(results["generation"]["average_score"]), key
        failed = sum(r["inference_status"] == "failed" or r["generation_status"] == "failed" for r in group)
        assert failed == results["counts"]["failed"], key


def test_export_refuses_an_unknown_format(results_dir, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        report_main([str(results_dir), "--export", str(tmp_path / "samples.xlsx")])
    assert exc.value.code == 2
    assert "--export" in capsys.readouterr().err
    assert not (tmp_path / "samples.xlsx").exists()


def test_push_to_hub_hands_the_rows_to_datasets(results_dir, monkeypatch, capsys):
    pushed = []
    monkeypatch.setattr(datasets.Dataset, "push_to_hub",
                        lambda self, repo_id, **kw: pushed.append((repo_id, self.num_rows, kw)))
    assert report_main([str(results_dir), "--push_to_hub", "someone/cupid-samples"]) == 0
    assert pushed and pushed[0][0] == "someone/cupid-samples"
    assert pushed[0][1] == len(sample_rows(results_dir))
    assert "pushed" in capsys.readouterr().out


FORMULAS = ["=HYPERLINK(\"http://x.example\",\"click\")", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A2)",
            "\t=1+1", "\r=1+1"]


@pytest.mark.parametrize("suffix", ["csv", "jsonl", "parquet"])
def test_csv_cells_a_spreadsheet_would_run_are_neutralised(tmp_path, suffix):
    """OWASP's rule for CSV: a text cell starting with =, +, -, @, tab or CR gets a leading
    quote; numbers stay numbers; JSON Lines and Parquet keep the text as it is."""
    import csv

    from cupid.evaluation.report.export import write_samples

    rows = [{"response": text, "judge_score": -0.5, "note": "plain = text"} for text in FORMULAS]
    path = write_samples(rows, tmp_path / f"samples.{suffix}")
    if suffix == "csv":
        with open(path, newline="", encoding="utf-8") as handle:
            read = list(csv.DictReader(handle))
        assert [r["response"] for r in read] == ["'" + text for text in FORMULAS]
        assert {r["judge_score"] for r in read} == {"-0.5"} and {r["note"] for r in read} == {"plain = text"}
    else:
        loaded = datasets.load_dataset("json" if suffix == "jsonl" else "parquet", data_files=str(path),
                                       split="train", cache_dir=str(tmp_path / "hf-cache"))
        assert loaded["response"] == FORMULAS


def test_without_the_data_the_ground_truth_is_what_the_steps_sent(results_dir, tmp_path):
    """The instances' data not found: the request and preference come from the steps' records,
    and an instance whose recall match was never recorded has no checklist, not a crash."""
    import shutil

    copy = shutil.copytree(results_dir, tmp_path / "results")
    for path in copy.rglob("*.json"):
        data = json.loads(path.read_text())
        for evaluation in (data.get("evaluations") or {}).values():
            (evaluation.get("steps") or {}).pop("match_recall", None)
        path.write_text(json.dumps(data))
    notes: list[str] = []
    rows = sample_rows(copy, data_paths=[tmp_path / "no-such-data.jsonl"], notes=notes)
    assert any("not read" in note for note in notes)
    done = [r for r in rows if r["infer_status"] == "done"]
    assert done and all(r["request"] and r["checklist"] is None and r["context_factor"] is None for r in done)
