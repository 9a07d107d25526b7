"""The whole evaluation against the loopback server, with scripted answers whose metrics
are computed by hand (see cupid_responder.two_instance_plans)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cupid import config
from cupid_responder import CupidResponder, make_row, two_instance_plans, write_two_instance_data
from cupid.evaluation import run as run_module
from fake_llm_server import FakeLLMServer, FakeResponse
from repo_paths import ROOT


A_F1 = 2 * 0.75 * (1 / 3) / (0.75 + 1 / 3)
EXPECTED_MICRO = {"precision": 0.5, "recall": 0.6, "f1": 2 * 0.5 * 0.6 / 1.1,
                  "n_predicted_matched": 1.5, "n_predicted": 3, "n_true_matched": 3.0, "n_true": 5}
EXPECTED_MACRO = {"precision": 0.375, "recall": (1 / 3 + 1) / 2, "f1": A_F1 / 2}


pytestmark = pytest.mark.usefixtures("fast_retries")  # tests/evaluation/conftest.py


@pytest.fixture
def data_file(tmp_path, plans):
    return write_two_instance_data(tmp_path / "data.jsonl", plans)


@pytest.fixture
def server(plans):
    responder = CupidResponder(plans)
    with FakeLLMServer(responder=responder) as srv:
        srv.cupid = responder
        yield srv


def cli(server, data_file, results_dir, *extra, model="test-model"):
    return ["--model", f"vllm:{model}@{server.openai_base_url}",
            "--evaluator", f"vllm:test-evaluator@{server.openai_base_url}",
            "--data", str(data_file), "--results_dir", str(results_dir),
            "--n_workers", "2", "--max_retries", "3", "--timeout", "5", *extra]


def read_results(results_dir, model="test-model", setting=None):
    run_dir = Path(results_dir) / model / (setting or "")
    return json.loads((run_dir / "results.json").read_text())


def assert_expected(results):
    for key, value in EXPECTED_MICRO.items():
        assert results["inference"][key] == pytest.approx(value), key
    for key, value in EXPECTED_MACRO.items():
        assert results["inference_macro"][key] == pytest.approx(value), key
    assert results["generation"] == {"average_score": 6.5, "n_instances": 2}
    by_type = results["by_instance_type"]
    assert by_type["consistent"]["inference"]["precision"] == pytest.approx(0.75)
    assert by_type["consistent"]["inference"]["recall"] == pytest.approx(1 / 3)
    assert by_type["contrastive"]["inference"]["precision"] == pytest.approx(0.0)
    assert by_type["contrastive"]["generation"]["average_score"] == 5
    assert results["counts"]["evaluated"] == 2 and results["counts"]["failed"] == 0


def test_full_run_gives_hand_computed_metrics(server, data_file, tmp_path, capsys):
    code = run_module.main(cli(server, data_file, tmp_path / "res", "--task", "both"))
    assert code == 0
    results = read_results(tmp_path / "res")
    assert_expected(results)
    run_dir = tmp_path / "res" / "test-model"
    record = json.loads((run_dir / "persona-a__consistent.json").read_text())
    scorer = record["evaluations"]["test-evaluator"]
    assert [r["label"] for r in scorer["steps"]["match_recall"]["output"]["results"]] == \
        ["Fully Covered", "Not Covered", "Not Covered"]
    assert record["steps"]["infer"]["output"]["preference"] == two_instance_plans()[0].inferred
    assert scorer["generation"] == {"score": 8}
    # 6 calls per instance: infer, decompose, 2 matches, generate, judge.
    assert len(server.requests) == 12
    usage = results["usage"]["this_invocation"]
    assert usage["model"]["calls"] == 4 and usage["evaluator"]["calls"] == 8
    assert usage["model"]["prompt_tokens"] > 0
    out = capsys.readouterr().out
    assert "FAILED 0" in out and "0.500" in out


def test_release_outcomes_and_what_was_sent_are_recorded(server, data_file, tmp_path, plans):
    from cupid.evaluation.data import load_instances
    from cupid.evaluation.steps.layouts import format_session_log
    from cupid.evaluation.steps.ask import rebuild_request

    answer = server.cupid.__call__

    def responder(req):
        text = answer(req)
        kind = server.cupid.kind(req)
        user = req["messages"][-1]["content"]
        if kind == "infer" and plans[0].request in user:
            # The release would read "s" here (the header it splits on is a prefix).
            return text.replace("### Most Likely Preference", "### Most Likely Preferences")
        if kind == "judge" and plans[1].request in user:
            return text.replace("### Evaluation Score", "### Evaluation Score:")  # release: 0
        return text

    server.responder = responder
    assert run_module.main(cli(server, data_file, tmp_path / "res", "--task", "both")) == 0
    results = read_results(tmp_path / "res")
    assert_expected(results)  # our parsers read both answers
    assert results["release_would_score_zero"] == {"inference": 0, "generation": 1}
    assert results["release_would_differ"] == {"inference": 1, "generation": 0}
    assert results["release_would_drop"] == {"inference": 0, "generation": 0}

    run_dir = tmp_path / "res" / "test-model"
    a = json.loads((run_dir / "persona-a__consistent.json").read_text())
    b = json.loads((run_dir / "persona-b__contrastive.json").read_text())
    assert a["steps"]["infer"]["release"] == {"outcome": "differs", "value": "s"}
    assert a["evaluations"]["test-evaluator"]["release"] == {"inference": "differs", "generation": "same"}
    assert b["evaluations"]["test-evaluator"]["steps"]["judge"]["release"]["outcome"] == "zero"
    assert b["evaluations"]["test-evaluator"]["release"] == {"inference": "same", "generation": "zero"}

    # Every step keeps what it sent, compactly (the session log and the matcher's examples
    # by reference), and its latency; the exact requests are rebuilt from it.
    sent_texts = {(r["system"], r["messages"][-1]["content"]) for r in server.requests}
    instances = {i.instance_id: i for i in load_instances(data_path=data_file)}
    rebuilt = 0
    for record in (a, b):
        log = format_session_log(instances[record["instance_id"]].prior_interactions)
        steps = dict(record["steps"], **record["evaluations"]["test-evaluator"]["steps"])
        assert set(steps) == {"infer", "generate", "decompose", "match_precision", "match_recall", "judge"}
        for name, step in steps.items():
            assert step["latency_s"] >= 0
            assert log not in json.dumps(step["sent"])
            request = rebuild_request(step["sent"], session_log=log)
            assert (request["system_prompt"], request["messages"][0]["content"]) in sent_texts, name
            assert request["temperature"] == 0
            assert request["max_tokens"] == (4096 if name == "decompose" else 8192)
            rebuilt += 1
    assert rebuilt == 12
    with pytest.raises(ValueError, match="not the text this step was sent"):
        rebuild_request(a["steps"]["infer"]["sent"], session_log=log)  # b's log, not a's


def test_faults_on_the_wire_give_the_same_metrics(server, data_file, tmp_path):
    server.cupid.malformed_first = {"match", "judge", "infer"}  # unparseable once: re-asked
    server.script(FakeResponse(status=429, headers={"Retry-After": "0"}),
                  FakeResponse(status=500),
                  FakeResponse(text=None),                      # null content
                  FakeResponse(raw_body=b"{not json"))
    code = run_module.main(cli(server, data_file, tmp_path / "res", "--task", "both"))
    assert code == 0
    assert_expected(read_results(tmp_path / "res"))
    assert len(server.requests) == 12 + 4 + 3


def test_rerun_with_nothing_left_makes_no_call(server, data_file, tmp_path):
    args = cli(server, data_file, tmp_path / "res", "--task", "both", "--no_cache")
    assert run_module.main(args) == 0
    first = len(server.requests)
    assert run_module.main(args) == 0
    assert len(server.requests) == first
    assert_expected(read_results(tmp_path / "res"))


def test_failed_step_is_recorded_counted_and_exit_is_nonzero(server, data_file, tmp_path, plans):
    original = server.cupid.__call__

    def responder(req):
        if server.cupid.kind(req) == "judge" and plans[1].request in req["messages"][-1]["content"]:
            return "I would rather not score this."
        return original(req)

    server.responder = responder
    code = run_module.main(cli(server, data_file, tmp_path / "res", "--task", "both"))
    assert code == 1
    results = read_results(tmp_path / "res")
    assert results["counts"]["failed"] == 1
    assert list(results["counts"]["failures_by_step"]) == ["judge"]
    # Inference of both instances still counts; the failed judge is not scored 0.
    assert results["inference"]["precision"] == pytest.approx(0.5)
    assert results["generation"] == {"average_score": 8, "n_instances": 1}
    record = json.loads((tmp_path / "res" / "test-model" / "persona-b__contrastive.json").read_text())
    judge = record["evaluations"]["test-evaluator"]["steps"]["judge"]
    assert judge["status"] == "failed" and "Evaluation Score" in judge["error"]
    assert len(judge["raw"]) == config.MAX_PARSE_RETRIES + 1


def test_prefmatcher_results_sit_beside_the_evaluator_ones(server, data_file, tmp_path):
    assert run_module.main(cli(server, data_file, tmp_path / "res")) == 0
    before = server.cupid.calls.copy()
    code = run_module.main(cli(server, data_file, tmp_path / "res", "--use_matcher",
                               "--matcher_url", server.openai_base_url))
    assert code == 0
    # The inferred preferences are reused; only the PrefMatcher matches (and the decomposer,
    # from the cache) are new.
    assert server.cupid.calls["infer"] == before["infer"]
    assert server.cupid.calls["match_prefmatcher"] == 4
    record = json.loads((tmp_path / "res" / "test-model" / "persona-a__consistent.json").read_text())
    assert set(record["evaluations"]) == {"test-evaluator",
                                          f"test-evaluator+{config.PREFMATCHER_MODEL}"}
    run_dir = tmp_path / "res" / "test-model"
    assert (run_dir / "results.test-evaluator.json").exists()
    assert read_results(tmp_path / "res")["settings"]["matcher"] == config.PREFMATCHER_MODEL


def test_settings_have_their_own_directories(server, data_file, tmp_path):
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base, "--setting", "oracle")) == 0
    assert run_module.main(cli(server, data_file, base, "--setting", "oracle_preference",
                               "--task", "generation")) == 0
    oracle = json.loads((base / "test-model" / "oracle" / "run.json").read_text())
    assert oracle["setting"] == "oracle"
    oracle_prompt = [r for r in server.requests if "## Current Interaction" in r["messages"][-1]["content"]]
    # Instance B's relevant sessions are 2 and 3: the oracle log shows those two only.
    b_prompt = next(r["messages"][-1]["content"] for r in oracle_prompt
                    if two_instance_plans()[1].request in r["messages"][-1]["content"])
    assert "Session 2 request of persona-b" in b_prompt and "Session 1 request" not in b_prompt
    assert read_results(base, setting="oracle_preference")["generation"]["n_instances"] == 2
    assert server.cupid.calls["generate_oracle_preference"] == 2


def test_changed_prompt_is_refused_not_mixed(server, data_file, tmp_path, capsys):
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base)) == 0
    manifest_path = base / "test-model" / "run.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["prompt_versions"]["evaluation/preference_inferrer"] = "0123456789ab"
    manifest_path.write_text(json.dumps(manifest))
    calls = len(server.requests)
    assert run_module.main(cli(server, data_file, base)) == 2
    assert "other settings" in capsys.readouterr().err
    assert len(server.requests) == calls


def test_summary_setting_summarizes_each_distinct_session_once(server, tmp_path, plans):
    # Three instances of one persona sharing the same three sessions.
    rows = [make_row("p", t, plans[0]) for t in ("consistent", "contrastive", "changing")]
    for row in rows:
        for s in row["prior_interactions"]:
            s["dialogue"][0]["content"] = s["dialogue"][0]["content"].split(" (")[0]
    path = tmp_path / "shared.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    code = run_module.main(cli(server, path, tmp_path / "res", "--setting", "summary",
                               "--task", "both", "--no_cache"))
    assert code == 0
    assert server.cupid.calls["summarize"] == 3
    infer_prompt = next(r["messages"][-1]["content"] for r in server.requests
                        if "## Current Interaction" in r["messages"][-1]["content"])
    assert "## Summaries of Previous Interaction Sessions" in infer_prompt
    assert "The user wants it short." in infer_prompt


def test_failed_session_summary_fails_the_instance_and_is_asked_afresh(tmp_path, plans, capsys):
    # Every summary answer is unparseable: the instance fails at "summarize", is counted,
    # the run exits 1, and a rerun asks again with new variants instead of the cached ones.
    responder = CupidResponder(plans)

    def broken_summaries(req):
        if responder.kind(req) == "summarize":
            responder.calls["summarize"] += 1
            return "I cannot summarize this."
        return responder(req)

    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(make_row("p", "consistent", plans[0])) + "\n")
    with FakeLLMServer(responder=broken_summaries) as srv:
        args = cli(srv, path, tmp_path / "res", "--setting", "summary")
        assert run_module.main(args) == 1
        results = read_results(tmp_path / "res", setting="summary")
        assert results["counts"]["failed"] == 1 and results["counts"]["evaluated"] == 0
        assert list(results["counts"]["failures_by_step"]) == ["summarize"]
        assert "unparseable" in next(iter(results["counts"]["failures_by_step"]["summarize"]))
        assert "failed at summarize" in capsys.readouterr().out
        first = responder.calls["summarize"]
        assert first == 3 * (config.MAX_PARSE_RETRIES + 1)  # 3 sessions, each asked 3 times
        assert run_module.main(args) == 1
        assert responder.calls["summarize"] == 2 * first  # asked afresh, not replayed


def test_bad_data_stops_before_any_call(server, tmp_path, plans, capsys):
    row = make_row("p", "consistent", plans[0])
    row["prior_interactions"][1]["dialogue"][0].pop("content")
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(make_row("q", "consistent", plans[1])) + "\n" + json.dumps(row) + "\n")
    assert run_module.main(cli(server, path, tmp_path / "res")) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "row 2" in err and "prior_interactions[1].dialogue[0].content" in err
    assert server.requests == []


def test_hostile_instance_ids_stay_inside_the_results_directory(server, tmp_path, plans):
    hostile = ["../../escape", "a/b", "..", "results", "run"]
    rows = []
    for i, persona in enumerate(hostile):
        plan = plans[i % 2]
        rows.append(make_row(persona, "consistent", plan))
    # Same request text twice is fine for the responder; ids must stay distinct.
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    base = tmp_path / "res"
    assert run_module.main(cli(server, path, base)) == 0
    run_dir = (base / "test-model").resolve()
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert all(run_dir in p.resolve().parents for p in files)
    instance_files = [p for p in run_dir.glob("*.json")
                      if p.name != "run.json" and not p.name.startswith("results.")]
    assert len(instance_files) == len(hostile)
    assert not (tmp_path / "escape").exists()
    assert read_results(base)["counts"]["evaluated"] == len(hostile)


def test_missing_key_is_reported_before_any_work(tmp_path, data_file, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = run_module.main(["--model", "gpt-4.1-nano-2025-04-14", "--data", str(data_file),
                            "--results_dir", str(tmp_path / "res")])
    assert code == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err
    assert not (tmp_path / "res" / "gpt-4.1-nano-2025-04-14").exists()


@pytest.mark.slow
def test_kill_minus_9_then_resume_repeats_no_finished_step(plans, data_file, tmp_path):
    responder = CupidResponder(plans)
    with FakeLLMServer(responder=responder, latency=0.25) as server:
        base = tmp_path / "res"
        args = cli(server, data_file, base, "--task", "both", "--no_cache")
        args[args.index("--n_workers") + 1] = "1"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-m", "cupid.evaluation.run", *args], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run_dir = base / "test-model"

        def done_steps():
            done = set()
            for path in run_dir.glob("persona-*.json"):
                try:
                    record = json.loads(path.read_text())
                except json.JSONDecodeError:  # atomic writes: must never happen
                    raise AssertionError(f"{path} is corrupt")
                for name, step in record["steps"].items():
                    if step["status"] == "done":
                        done.add((record["instance_id"], name))
                for ev in record["evaluations"].values():
                    for name, step in ev["steps"].items():
                        if step["status"] == "done":
                            done.add((record["instance_id"], name))
            return done

        deadline = time.time() + 60
        while len(done_steps()) < 4 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        finished_before = done_steps()
        assert 4 <= len(finished_before) < 12
        calls_before = len(server.requests)

        assert run_module.main(args) == 0
        assert_expected(read_results(base))
        assert done_steps() == {(i, s) for i in ("persona-a__consistent", "persona-b__contrastive")
                                for s in ("infer", "decompose", "match_precision", "match_recall",
                                          "generate", "judge")}
        # Only unfinished steps were asked after the kill (those in flight at the kill were not finished).
        asked_after = len(server.requests) - calls_before
        assert asked_after == 12 - len(finished_before)
        # In flight at the kill: at most the inference chain and the generation chain beside it.
        assert calls_before - len(finished_before) <= 3


def test_rerun_asks_a_failed_step_afresh_instead_of_replaying_the_cache(server, data_file, tmp_path, plans):
    original = server.cupid.__call__
    refuse = {"on": True}

    def responder(req):
        if refuse["on"] and server.cupid.kind(req) == "judge":
            return "No score today."
        return original(req)

    server.responder = responder
    args = cli(server, data_file, tmp_path / "res", "--task", "both")  # cache on
    assert run_module.main(args) == 1
    judge_calls = sum(server.cupid.kind(r) == "judge" for r in server.requests)
    assert judge_calls == 2 * (config.MAX_PARSE_RETRIES + 1)
    refuse["on"] = False
    assert run_module.main(args) == 0
    # Two fresh judge calls (not the cached refusals), nothing else asked again.
    assert sum(server.cupid.kind(r) == "judge" for r in server.requests) == judge_calls + 2
    assert_expected(read_results(tmp_path / "res"))
    record = json.loads((tmp_path / "res" / "test-model" / "persona-a__consistent.json").read_text())
    assert record["evaluations"]["test-evaluator"]["steps"]["judge"]["status"] == "done"
