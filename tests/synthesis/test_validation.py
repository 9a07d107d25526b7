"""The validation (cupid-validate) against the loopback server with a scripted validator, on a
data set with planted faults (tests/support/validation_data.py): unexpressed entries,
self-stating requests, a validator that invents fragments and copies the assistant's words."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import validation_data as vd
from cupid import config
from cupid.evaluation import run as eval_run
from cupid.synthesis.validation import fragments
from cupid.synthesis.validation.cli import main
from cupid.synthesis.validation.engine import validate
from cupid.utils.dataset import Session, Turn
from cupid.utils.errors import BadInput
from cupid_responder import CupidResponder
from fake_llm_server import FakeLLMServer

ALL = {f"{p}__{k}" for p in vd.PERSONAS for k in ("consistent", "contrastive", "changing")}


@pytest.fixture
def server():
    validator = vd.Validator()
    with FakeLLMServer(responder=validator) as srv:
        srv.validator = validator
        yield srv


def args(server, data, out, *extra):
    return ["--data_dir", str(data), "--output_dir", str(out), "--model", f"vllm:validator@{server.openai_base_url}",
            "--n_workers", "3", "--max_retries", "1", "--timeout", "5", *extra]


def rows(out: Path) -> dict:
    return {r["instance_id"]: r for r in map(json.loads, (out / "validation.jsonl").read_text().splitlines())}


def verified(out: Path) -> set:
    return {p.stem for p in (out / "verified").glob("*.json")}


class Generic(CupidResponder):
    """Any instance's evaluation steps: one inferred preference, its checklist, all covered."""

    def __init__(self):
        super().__init__([])

    def __call__(self, req):
        kind, user = self.kind(req), req["messages"][-1]["content"]
        if kind == "infer":
            return "### Most Likely Preference\n\nThe user wants three aspects satisfied."
        if kind == "decompose":
            return '```json\n{"checklist": ["Are the three aspects satisfied?"]}\n```'
        if kind == "match":
            checklist = user.split("#### Checklist")[1]
            n = len([line for line in checklist.splitlines() if line[:1].isdigit()])
            return "```json\n" + json.dumps({"results": [{"index": i, "entry": "e", "label": "Fully Covered"}
                                                        for i in range(1, n + 1)]}) + "\n```"
        raise AssertionError(kind)


def test_planted_instances_are_flagged_and_the_rest_verified_and_evaluated(server, tmp_path, capsys):
    data, out = vd.build(tmp_path / "data"), tmp_path / "out"
    assert main(args(server, data, out)) == 0
    got = rows(out)
    assert set(got) == ALL
    flagged = {i for i, r in got.items() if not r["verified"]}
    assert flagged == vd.PLANTED
    assert verified(out) == ALL - vd.PLANTED
    assert {i for i, r in got.items() if r["challenging"] is False} == {"says__consistent", "says__contrastive"}
    # The invented fragment is dropped and its entry not expressed; the assistant's words are
    # dropped beside the user's, which keep the entry expressed.
    entry = next(e for e in got["invents__contrastive"]["entries"]
                 if e["preference_role"] == "contrasting" and e["index"] == 3)
    assert entry["verdict"] == "not expressed" and entry["fragments"] == []
    assert [d["text"] for d in entry["dropped_fragments"]] == ["I really want invents-b-hint-3 in everything"] * 2
    a3 = next(e for e in got["invents__consistent"]["entries"] if e["preference_role"] == "current" and e["index"] == 3)
    assert a3["verdict"] == "expressed" and a3["rating"] == 4
    assert {f["text"] for f in a3["fragments"]} == {"could you mind invents-a-hint-3"}
    assert {d["text"] for d in a3["dropped_fragments"]} == {"i kept invents-a-hint-3 in mind"}
    gap = next(e for e in got["gap__changing"]["entries"] if e["preference_role"] == "earlier" and e["index"] == 2)
    assert gap["verdict"] == "not expressed"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["solvable_pct"] == pytest.approx(100 * 8 / 12, abs=0.01)
    assert summary["challenging_pct"] == pytest.approx(100 * 10 / 12, abs=0.01)
    assert summary["counts"]["verified"] == 6 and summary["counts"]["extractions_failed"] == 0
    assert sum(summary["rating_distribution"].values()) == summary["counts"]["entries_expressed"]
    # Sessions shared by a persona's instances are asked once: per persona A, A', B (two
    # sessions each) and the request against A's and A''s checklists.
    assert server.validator.calls["extract"] == 4 * 8
    assert "solvable 66.7%" in capsys.readouterr().err

    # verified/ is data the evaluation reads.
    server.responder = Generic()
    results = tmp_path / "results"
    assert eval_run.main(["--model", f"vllm:m@{server.openai_base_url}", "--evaluator",
                          f"vllm:e@{server.openai_base_url}", "--data_dir", str(out / "verified"),
                          "--results_dir", str(results), "--n_workers", "2"]) == 0
    evaluated = json.loads((results / "m" / "results.json").read_text())
    assert evaluated["this_invocation"]["ran"] == len(ALL - vd.PLANTED)
    assert evaluated["this_invocation"]["ran_failed"] == 0 and evaluated["inference"]["n_true"] > 0


def test_a_failed_extraction_is_counted_never_not_expressed_and_a_rerun_asks_it(server, tmp_path, capsys):
    data, out = vd.build(tmp_path / "data"), tmp_path / "out"
    server.validator.fail_sessions |= {"task 5 of good", "task 6 of good"}  # the B sessions of persona good
    assert main(args(server, data, out)) == 1
    got = rows(out)
    contrastive = got["good__contrastive"]
    assert contrastive["solvable"] is None and not contrastive["verified"]
    assert {e["verdict"] for e in contrastive["entries"] if e["preference_role"] == "contrasting"} == {"failed"}
    assert any("session 3" in note and "unparseable" in note for note in contrastive["notes"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["extractions_failed"] == 2 and summary["counts"]["instances_unknown"] == 1
    assert summary["counts"]["entries_failed"] == 3 and summary["solvable_pct"] == pytest.approx(100 * 7 / 11, abs=0.01)
    assert "good__contrastive" not in verified(out)
    asked = server.validator.calls["extract"]
    assert asked == 4 * 8 + 2 * config.MAX_PARSE_RETRIES  # each failing one asked 1 + MAX_PARSE_RETRIES times

    server.validator.fail_sessions.clear()
    assert main(args(server, data, out)) == 0
    assert server.validator.calls["extract"] == asked + 2  # only the failed extractions, afresh
    assert verified(out) == ALL - vd.PLANTED
    assert main(args(server, data, out)) == 0
    assert server.validator.calls["extract"] == asked + 2  # nothing left to ask


def test_verified_holds_exactly_this_runs_verified_instances(server, tmp_path):
    """verified/ is what users evaluate next: a run over other data, or with --limit, into
    the directory of an earlier run left that run's files in it (summary: verified 3;
    verified/: 9 files). It is written anew and swapped in whole, with nothing left beside."""
    data, out = vd.build(tmp_path / "data"), tmp_path / "out"
    assert main(args(server, data, out)) == 0
    assert verified(out) == ALL - vd.PLANTED
    other = tmp_path / "other"
    shutil.copytree(data / "personas", other / "personas")
    (other / "instances").mkdir()
    for path in sorted((data / "instances").glob("good__*.json")):
        row = json.loads(path.read_text())
        (other / "instances" / f"x{path.name}").write_text(json.dumps({**row, "instance_id": f"x{row['instance_id']}"}))
    assert main(args(server, other, out)) == 0
    assert verified(out) == {"xgood__consistent", "xgood__contrastive", "xgood__changing"}
    assert json.loads((out / "summary.json").read_text())["counts"]["verified"] == 3
    assert main(args(server, data, out, "--limit", "2")) == 0  # gap__changing, gap__consistent: neither passes
    assert json.loads((out / "summary.json").read_text())["counts"]["verified"] == 0 and verified(out) == set()
    (out / ".verified.otherhost~4242.new").mkdir()  # a run killed mid-swap left its copy
    (out / ".verified.otherhost~4242.new" / "gap__changing.json").write_text("{}")
    assert main(args(server, data, out, "--limit", "5")) == 0
    assert verified(out) == {r for r, row in rows(out).items() if row["verified"]} == {"good__changing", "good__consistent"}
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".verified")) == []


def test_benchmark_files_without_metadata(server, tmp_path):
    """The benchmark's rows record no contrasting or earlier preference, nor any checklist but
    the current one: the earlier preference is read from the sessions, its checklist from the
    instance it is current in; the contrasting one from the series as B.5 builds it (the
    contrastive instance's sessions absent from the consistent one), its checklist decomposed
    by the validator. It was left unchecked, and the invented-fragment instance passed."""
    data = vd.build(tmp_path / "synth")
    plain = tmp_path / "plain"
    plain.mkdir()
    for path in (data / "instances").glob("*.json"):
        row = json.loads(path.read_text())
        row.pop("metadata")
        (plain / path.name).write_text(json.dumps(row))
    out = tmp_path / "out"
    result = validate(plain, output_dir=out, model=f"vllm:validator@{server.openai_base_url}", n_workers=2)
    got = {r["instance_id"]: r for r in result.rows}
    contrasting = [e for e in got["good__contrastive"]["entries"] if e["preference_role"] == "contrasting"]
    assert {e["preference"] for e in contrasting} == {vd.preference("good", "B")}
    assert [e["verdict"] for e in contrasting] == ["expressed"] * 3
    notes = got["good__contrastive"]["notes"]
    assert [n for n in notes if "read from the series as B.5 builds it" in n]
    assert [n for n in notes if "its checklist decomposed by the validator" in n]
    assert server.validator.calls["decompose"] == len(vd.PERSONAS)  # B's checklist, once per persona
    earlier = [e for e in got["gap__changing"]["entries"] if e["preference_role"] == "earlier"]
    assert [e["verdict"] for e in earlier] == ["expressed", "not expressed", "expressed"]
    assert {r["instance_id"] for r in result.verified} == ALL - vd.PLANTED

    # Without its series' consistent instance, the contrasting preference cannot be told apart.
    (plain / "invents__consistent.json").unlink()
    lone = validate(plain, output_dir=tmp_path / "lone", model=f"vllm:validator@{server.openai_base_url}")
    row = next(r for r in lone.rows if r["instance_id"] == "invents__contrastive")
    assert not [e for e in row["entries"] if e["preference_role"] == "contrasting"]
    assert [n for n in row["notes"] if "no consistent instance" in n and "left unchecked" in n]


def test_limit_still_reads_the_series_of_the_whole_data(server, tmp_path):
    data = vd.build(tmp_path / "synth")
    plain = tmp_path / "plain"
    plain.mkdir()
    for path in (data / "instances").glob("*.json"):
        row = json.loads(path.read_text())
        row.pop("metadata")
        (plain / path.name).write_text(json.dumps(row))
    # The files in name order: gap__changing, gap__consistent, gap__contrastive, good__changing.
    (plain / "gap__consistent.json").rename(plain / "zz__consistent.json")
    result = validate(plain, output_dir=tmp_path / "out", model=f"vllm:validator@{server.openai_base_url}", limit=2)
    row = next(r for r in result.rows if r["instance_id"] == "gap__contrastive")
    assert {e["preference"] for e in row["entries"] if e["preference_role"] == "contrasting"} == {
        vd.preference("gap", "B")}


def test_dry_run_counts_the_calls_and_sends_nothing(server, tmp_path, capsys):
    data, out = vd.build(tmp_path / "data"), tmp_path / "out"
    assert main(args(server, data, out, "--dry_run", "--json")) == 0
    forecast = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert forecast["roles"]["validator"]["calls"] == 4 * 8
    assert server.requests == [] and not out.exists()


def test_batch_mode_sends_the_extractions_through_the_batch_api(fake_llm_env, tmp_path, monkeypatch):
    monkeypatch.setattr(config, "BATCH_POLL_INTERVAL", 0.05)
    fake_llm_env.responder = vd.Validator()
    data, out = vd.build(tmp_path / "data"), tmp_path / "out"
    result = validate(data, output_dir=out, model="gpt-4o-2024-11-20", batch=True, n_workers=2)
    assert {r["instance_id"] for r in result.verified} == ALL - vd.PLANTED
    assert result.summary["usage"]["batch_calls"] == 4 * 8
    assert json.loads((out / "batches.json").read_text())["batches"]


def test_extraction_parse_and_kept_fragments():
    text = ('Here:\n```json\n[{"item_index": 2, "fragments": ["b"], "rating": "3 (moderate)"},'
            ' {"item_index": 1, "fragments": [], "rating": "N/A"}]\n```')
    assert fragments.parse(text, 2)["items"] == [
        {"index": 1, "fragments": [], "rating": None, "analysis": ""},
        {"index": 2, "fragments": ["b"], "rating": 3, "analysis": ""}]
    with pytest.raises(Exception, match="entry 2"):
        fragments.parse('[{"item_index": 1, "fragments": []}]', 2)
    with pytest.raises(Exception, match="rating"):
        fragments.parse('[{"item_index": 1, "fragments": ["x"], "rating": "high"}]', 1)
    session = Session("f", "p", (Turn("user", "Please\n keep it   SHORT, thanks."), Turn("assistant", "I keep it short.")))
    assert fragments.kept_fragments(["keep it short", "I keep it short", "be brief", " "], session) == (
        ["keep it short"], ["I keep it short", "be brief", " "])


def test_a_fragment_trimmed_or_quoted_by_the_validator_is_found_before_it_is_dropped():
    """GPT-4o quotes what it copies, curls its quotes and elides with '...': such a fragment
    stands in the user's message and is kept; a paraphrase, pieces out of order or the
    assistant's words are still dropped (and shown to the annotators, annotation.py)."""
    session = Session("f", "p", (Turn("user", "I really don\u2019t want   \"jargon\" in the summary; keep it under "
                                               "200 words, please."), Turn("assistant", "Sure, no jargon at all.")))
    kept, dropped = fragments.kept_fragments(
        ["\u201cI really don't want jargon\u201d", "'keep it under 200 words'", "keep it ... 200 words",
         "the summary\u2026please", "I really [...] want", "I want no jargon", "200 words ... keep it",
         "no jargon at all", "...", "\" \""], session)
    assert kept == ["\u201cI really don't want jargon\u201d", "'keep it under 200 words'", "keep it ... 200 words",
                    "the summary\u2026please", "I really [...] want"]
    assert dropped == ["I want no jargon", "200 words ... keep it", "no jargon at all", "...", "\" \""]


def test_bad_arguments_and_data_are_refused_before_any_call(server, tmp_path):
    with pytest.raises(BadInput, match="n_workers"):
        validate(tmp_path, n_workers=0)
    data = vd.build(tmp_path / "data")
    bad = json.loads((data / "instances" / "good__consistent.json").read_text())
    bad["current_checklist"] = []
    (data / "instances" / "good__consistent.json").write_text(json.dumps(bad))
    with pytest.raises(BadInput, match="good__consistent.json.*current_checklist"):
        validate(data, output_dir=tmp_path / "out", model=f"vllm:validator@{server.openai_base_url}")
    assert server.requests == []
    shutil.rmtree(data)


def test_a_stopped_run_keeps_every_answer_and_the_rerun_asks_only_the_rest(tmp_path):
    """SIGTERM mid-run: exit 143, the answers received are on disk, the rerun completes
    without asking them again."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from repo_paths import ROOT

    data, out = vd.build(tmp_path / "data"), tmp_path / "out"
    validator = vd.Validator()
    with FakeLLMServer(responder=validator, latency=0.15) as srv:
        proc = subprocess.Popen([sys.executable, "-m", "cupid.synthesis.validation.cli", *args(srv, data, out)[:-6],
                                 "--n_workers", "1"], cwd=ROOT, env={**os.environ},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while len(list((out / "answers").glob("*/*.json"))) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
        kept = len(list((out / "answers").glob("*/*.json")))
        assert 5 <= kept < 32 and not (out / "validation.jsonl").exists()
        srv.responder = counting = vd.Validator()
        assert main(args(srv, data, out)) == 0
    assert counting.calls["extract"] == 32 - kept
    assert verified(out) == ALL - vd.PLANTED


def test_a_missing_key_and_a_refused_directory_stop_before_any_call(server, tmp_path, capsys):
    data = vd.build(tmp_path / "data")
    assert main(["--data_dir", str(data), "--output_dir", str(tmp_path / "out"), "--model", "gpt-4o-2024-11-20"]) == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(args(server, data, blocker)) == 3
    assert "a-file" in capsys.readouterr().err
    assert server.requests == []


def test_the_documented_import_is_the_engine_even_after_the_command_module_is_imported(tmp_path):
    # This file imported cupid.synthesis.validation.cli (the command) above, which the import system
    # binds as the package's attribute of the same name.
    from cupid.synthesis import validate as documented

    with pytest.raises(BadInput, match="n_workers"):
        documented(tmp_path, n_workers=0)


def test_off_a_terminal_the_validation_prints_progress_lines(server, tmp_path, capsys, monkeypatch):
    """cupid-validate under nohup or SLURM: a line per few instances and at least every
    HEARTBEAT_S, with count, rate and ETA, as cupid-eval prints them."""
    from cupid.synthesis.validation import engine

    monkeypatch.setattr(engine, "HEARTBEAT_S", 0.2)
    data, out = vd.build(tmp_path / "data"), tmp_path / "out"
    assert main(args(server, data, out)) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("progress validation [")]
    total = len(ALL)
    assert lines and f"{total}/{total} instances (100%)" in lines[-1] and "/min" in lines[-1]
