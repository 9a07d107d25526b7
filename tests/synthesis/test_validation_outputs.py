"""What a validation writes from its rows (synthesis/validation_outputs.py), in process: the
summary's counts and percentages worked by hand (an unknown verdict out of every share, a
failed entry out of "expressed"), and verified/ swapped in whole with exactly this run's
instances (tests/synthesis/test_validation.py runs the same through cupid-validate)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cupid.synthesis.validation import files as V
from cupid.synthesis.validation.plan import CONTRASTING, CURRENT, EARLIER, EXPRESSED, FAILED, NOT_EXPRESSED, REQUEST
from cupid.utils.dataset import Instance, Session, Turn


def entry(role, verdict, rating=None, kept=0, dropped=0):
    return {"preference_role": role, "verdict": verdict, "rating": rating,
            "fragments": [{"session": 1, "text": f"f{k}"} for k in range(kept)],
            "dropped_fragments": [{"session": 1, "text": f"d{k}"} for k in range(dropped)]}


def row(solvable, challenging, entries):
    return {"solvable": solvable, "challenging": challenging, "verified": bool(solvable and challenging),
            "entries": entries}


ROWS = [
    row(True, True, [entry(CURRENT, EXPRESSED, 2, kept=2), entry(CURRENT, EXPRESSED, 7, kept=1, dropped=1),
                     entry(REQUEST, NOT_EXPRESSED)]),
    row(False, True, [entry(CURRENT, NOT_EXPRESSED, dropped=2), entry(CONTRASTING, EXPRESSED, 2, kept=1),
                      entry(REQUEST, NOT_EXPRESSED)]),
    row(None, False, [entry(CURRENT, FAILED), entry(EARLIER, EXPRESSED, None, kept=1), entry(REQUEST, EXPRESSED)]),
    row(True, None, [entry(CURRENT, EXPRESSED, 1, kept=1), entry(REQUEST, FAILED)]),
    row(False, True, [entry(CURRENT, NOT_EXPRESSED, 4), entry(REQUEST, NOT_EXPRESSED)]),   # a rating, not expressed
]


def test_the_summary_worked_by_hand():
    s = V.summarize(ROWS)
    c = s["counts"]
    assert c == {"instances": 5, "verified": 1, "solvable": 2, "solvable_unknown": 1, "challenging": 3,
                 "challenging_unknown": 1, "instances_unknown": 2, "entries": 8, "entries_expressed": 5,
                 "entries_failed": 1, "request_entries": 5, "request_entries_stated": 1, "fragments_kept": 6,
                 "fragments_dropped": 3}
    assert s["solvable_pct"] == 50.0 and s["challenging_pct"] == 75.0
    assert s["entries_expressed_pct"] == round(100 * 5 / 7, 2)
    assert s["entries_by_preference"] == {"contrasting": {"entries": 1, "expressed_pct": 100.0},
                                          "current": {"entries": 5, "expressed_pct": 60.0},
                                          "earlier": {"entries": 1, "expressed_pct": 100.0}}
    # ratings of the expressed entries with one: 2, 7, 2, 1
    assert s["rating_distribution"] == {"1": 1, "2": 2, "3": 0, "4": 0, "5": 0, "6": 0, "7": 1}


def test_no_rows_or_no_known_verdict_leave_the_shares_undefined():
    empty = V.summarize([])
    assert (empty["solvable_pct"], empty["challenging_pct"], empty["entries_expressed_pct"]) == (None, None, None)
    unknown = V.summarize([row(None, None, [entry(CURRENT, FAILED)])])
    assert unknown["solvable_pct"] is None and unknown["counts"]["instances_unknown"] == 1
    assert unknown["entries_by_preference"] == {"current": {"entries": 0, "expressed_pct": None}}
    assert V._pct(1, 3) == 33.33 and V._pct(0, 0) is None and V._pct(0, 5) == 0.0


def instance(k: int) -> Instance:
    return Instance(f"i{k}", "p", "consistent", "r", "f", "p.", ("q?",),
                    (Session("f", "p.", (Turn("user", "u"), Turn("assistant", "a"))),))


def test_verified_holds_exactly_this_runs_passed_instances(tmp_path):
    directory = tmp_path / "verified"
    directory.mkdir()
    (directory / "stale.json").write_text("{}", encoding="utf-8")          # of an earlier run
    (tmp_path / ".verified.old").mkdir()                                     # of a run killed mid-swap
    instances = [instance(k) for k in range(3)]
    rows = [{"instance_id": "i0", "verified": True}, {"instance_id": "i1", "verified": False},
            {"instance_id": "i2", "verified": True}]
    written = V.write_verified(directory, instances, rows)
    assert written == [instances[0].to_row(), instances[2].to_row()]
    assert sorted(p.name for p in directory.iterdir()) == ["i0.json", "i2.json"]
    assert json.loads((directory / "i2.json").read_text(encoding="utf-8")) == instances[2].to_row()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["verified"]
    assert V.write_verified(directory, instances, [{"instance_id": "i1", "verified": False}]) == []
    assert list(directory.iterdir()) == []


@pytest.mark.parametrize("exchange", [True, False])
def test_swap_in_replaces_the_directory_whole(tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(V, "_exchange", lambda a, b: False)
    old, new = tmp_path / "verified", tmp_path / ".verified.new"
    old.mkdir()
    (old / "old.json").write_text("1", encoding="utf-8")
    new.mkdir()
    (new / "new.json").write_text("2", encoding="utf-8")
    V.swap_in(new, old)
    assert [p.name for p in old.iterdir()] == ["new.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["verified"]
    fresh = tmp_path / ".other.new"
    fresh.mkdir()
    V.swap_in(fresh, tmp_path / "other")          # no directory yet: renamed into place
    assert (tmp_path / "other").is_dir() and not fresh.exists()


def test_exchange_swaps_two_directories_where_the_system_can(tmp_path, monkeypatch):
    import ctypes

    if not hasattr(ctypes.CDLL(None), "renameat2"):
        pytest.skip("renameat2 (glibc 2.28+, Linux) is not available here: swap_in renames aside instead")
    monkeypatch.chdir(tmp_path)   # relative paths: renameat2 resolves them from the working directory
    a, b = Path("a"), Path("b")
    a.mkdir()
    b.mkdir()
    (a / "from_a").write_text("", encoding="utf-8")
    (b / "from_b").write_text("", encoding="utf-8")
    assert V._exchange(a, b) is True
    assert [p.name for p in b.iterdir()] == ["from_a"] and [p.name for p in a.iterdir()] == ["from_b"]
    assert V._exchange(a, Path("absent")) is False


def test_write_outputs_writes_every_file_and_the_summary_of_this_run(tmp_path):
    from types import SimpleNamespace

    validator = SimpleNamespace(label="judge-label", name="judge",
                                usage=SimpleNamespace(snapshot=lambda name: {"calls": 3, "asked_for": name}))
    source = SimpleNamespace(describe=lambda: {"path": "data"})
    instances = [instance(0), instance(1)]
    rows = [{"instance_id": "i0", "persona_id": "p", "instance_type": "consistent", "solvable": True,
             "challenging": True, "verified": True,
             "entries": [{**entry(CURRENT, EXPRESSED, 3, kept=1), "preference": "p.", "index": 1, "entry": "q?"}]},
            {"instance_id": "i1", "persona_id": "p2", "instance_type": "consistent", "solvable": False,
             "challenging": True, "verified": False,
             "entries": [{**entry(CURRENT, NOT_EXPRESSED), "preference": "p.", "index": 1, "entry": "q?"}]}]
    (tmp_path / "answers" / "extractions").mkdir(parents=True)
    for name, status in (("a", "failed"), ("b", "done"), ("c", "failed")):
        (tmp_path / "answers" / "extractions" / f"{name}.json").write_text(json.dumps({"status": status}))
    summary, verified = V.write_outputs(tmp_path, source, instances, rows, validator, annotations=(),
                                        tasks_per_page=1, wall_time_s=1.234, failed_now=1)
    assert verified == [instances[0].to_row()]
    assert summary["counts"]["extractions_failed"] == 2 and summary["counts"]["failed_in_this_call"] == 1
    assert summary["data"] == {"path": "data"} and summary["validator"] == "judge-label"
    assert summary["usage"] == {"model": "judge", "calls": 3, "asked_for": "judge"}
    assert summary["annotation_pages"] == ["annotation/batch-01.html", "annotation/batch-02.html"]
    assert summary["annotation_tasks"] == 2 and summary["wall_time_s"] == 1.23 and "human" not in summary
    assert summary["solvable_pct"] == 50.0
    assert json.loads((tmp_path / "summary.json").read_text(encoding="utf-8")) == summary
    lines = (tmp_path / "validation.jsonl").read_text(encoding="utf-8").split("\n")
    assert [json.loads(line)["instance_id"] for line in lines[:-1]] == ["i0", "i1"] and lines[-1] == ""
    assert [p.name for p in (tmp_path / "verified").iterdir()] == ["i0.json"]


def test_write_outputs_folds_the_annotations_in_and_keeps_the_validators_figures_beside(tmp_path):
    from types import SimpleNamespace

    validator = SimpleNamespace(label="v", name="v", usage=SimpleNamespace(snapshot=lambda name: {}))
    source = SimpleNamespace(describe=lambda: {})
    instances = [instance(0)]
    rows = [{"instance_id": "i0", "persona_id": "p", "instance_type": "consistent", "solvable": False,
             "challenging": True, "verified": False,
             "entries": [{**entry(CURRENT, NOT_EXPRESSED), "preference": "p.", "index": 1, "entry": "Is it é?"},
                         {**entry(REQUEST, NOT_EXPRESSED), "preference": "p.", "index": 1, "entry": "Is it é?"}]}]
    tasks = __import__("cupid.synthesis.validation.annotation", fromlist=["x"]).annotation_tasks(rows, {"i0": "r"})
    messages = next(t["id"] for t in tasks if t["kind"] == "messages")
    answers = tmp_path / "ann.json"
    answers.write_text(json.dumps({"format": "cupid-annotation/1", "annotator": "a",
                                   "tasks": {messages: {"entries": {"1": EXPRESSED}}}}), encoding="utf-8")
    summary, verified = V.write_outputs(tmp_path, source, instances, rows, validator, annotations=[answers],
                                        tasks_per_page=16, wall_time_s=0, failed_now=0)
    assert summary["human"]["validator_alone"] == {"solvable_pct": 0.0, "challenging_pct": 100.0,
                                                   "entries_expressed_pct": 0.0}
    assert summary["solvable_pct"] == 100.0 and summary["entries_expressed_pct"] == 100.0   # the humans' verdict
    assert [p.name for p in (tmp_path / "verified").iterdir()] == ["i0.json"] and verified
    assert summary["human"]["annotators"] == 1 and summary["human"]["files"] == [str(answers)]
    from cupid.utils.prompts import load_prompt

    assert summary["prompt_version"] == load_prompt("validation/extract_fragments").version
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", summary["finished"])
    assert "Is it é?" in (tmp_path / "validation.jsonl").read_text(encoding="utf-8")
    tasks_written = json.loads((tmp_path / "annotation" / "tasks.json").read_text(encoding="utf-8"))
    assert [t["request"] for t in tasks_written if t["kind"] == "request"] == ["r"]
