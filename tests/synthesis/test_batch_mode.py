"""Synthesis in batch mode (--batch): the synthesizer's calls (descriptions, factors,
sessions) through the real SDKs against the loopback server's batch endpoints, with the
scripted synthesis answers; the simulators and the decomposer online. The same files as an
online run, at half the synthesizer's price; batch ids saved at once and a killed run
resumed without resubmitting; a request that failed in its batch asked online."""
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
from fake_llm_server import FakeResponse
from cupid.synthesis import run as cli
from cupid.synthesis.pipeline import SynthesisConfig, run_synthesis
from synthesis_responder import ScriptedSynthesis, stage_of
from cupid.utils.models.batch import BatchRunner
from cupid.utils.io import read_json
from repo_paths import ROOT

OPENAI_SYNTHESIZER = "gpt-4o-mini"
SYNTHESIZER_STAGES = {"descriptions", "factors", "sessions"}


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setattr(config, "BATCH_POLL_INTERVAL", 0.05)


@pytest.fixture
def env(fake_llm_env):
    fake_llm_env.responder = ScriptedSynthesis()
    return fake_llm_env


def role_specs(server, synthesizer: str) -> dict:
    url = server.openai_base_url
    return {"model": synthesizer, "user_model": f"vllm:user-model@{url}",
            "assistant_model": f"vllm:assistant-model@{url}",
            "decomposer_model": f"vllm:decomposer-model@{url}"}


def make_config(server, out, synthesizer=OPENAI_SYNTHESIZER, **overrides) -> SynthesisConfig:
    values = dict(output_dir=out, n_personas=2, persona_seeds="bundled", n_workers=4,
                  show_progress=False, **role_specs(server, synthesizer))
    values.update(overrides)
    return SynthesisConfig(**values)


def cli_args(server, out, *extra) -> list[str]:
    s = role_specs(server, OPENAI_SYNTHESIZER)
    return ["--output_dir", str(out), "--model", s["model"], "--user_model", s["user_model"],
            "--assistant_model", s["assistant_model"], "--decomposer_model", s["decomposer_model"],
            "--n_personas", "2", "--persona_seeds", "bundled", "--n_workers", "4", "--no_progress",
            *extra]


def data_files(out: Path) -> dict[str, bytes]:
    """Every artifact but the run's bookkeeping (summary, batch ids)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.json"))
            if p.name not in ("summary.json", "batches.json")}


def submitted_ids(server) -> list[str]:
    return [c for batch in server.batches.values() for c in batch["custom_ids"]]


@pytest.mark.parametrize("synthesizer", [OPENAI_SYNTHESIZER, "claude-3-5-sonnet-20241022"])
def test_batch_run_makes_the_online_files_at_half_the_price(env, tmp_path, synthesizer):
    online = run_synthesis(make_config(env, tmp_path / "online", synthesizer))
    n_online = len(env.requests)
    batch = run_synthesis(make_config(env, tmp_path / "batch", synthesizer, batch=True))
    in_batch_run = env.requests[n_online:]
    assert not env.responder_errors

    assert batch["counts"] == online["counts"] and batch["counts"]["instances"] == 6
    assert len(list((tmp_path / "batch" / "instances").glob("*.json"))) == 6
    assert data_files(tmp_path / "batch") == data_files(tmp_path / "online")
    # Done and skipped as online, although later passes skip what earlier ones wrote.
    assert batch["stages"] == online["stages"]

    # Every synthesizer call went through a batch, none online; the other roles online.
    synth_requests = [r for r in in_batch_run if r["model"] == synthesizer]
    assert {stage_of(r) for r in synth_requests} == SYNTHESIZER_STAGES
    assert all(r["path"] == "batch" for r in synth_requests)
    assert all(r["path"] != "batch" for r in in_batch_run if r["model"] != synthesizer)
    # One round a stage: 1 description request (both personas), 2 factors, 2 sessions.
    state = read_json(tmp_path / "batch" / "batches.json")
    assert [(b["round"], len(b["items"])) for b in state["batches"]] == [(1, 1), (2, 2), (3, 2)]
    assert all(b["fetched"] and b["failed_items"] == 0 for b in state["batches"])
    assert env.batch_items == len(synth_requests) == 5
    assert batch["batch"]["rounds"] == 3 and batch["batch"]["submitted_requests"] == 5

    o, b = online["usage"]["synthesizer"], batch["usage"]["synthesizer"]
    assert b["calls"] == b["batch_calls"] == o["calls"] == 5 and o["batch_calls"] == 0
    assert (b["prompt_tokens"], b["completion_tokens"]) == (o["prompt_tokens"], o["completion_tokens"])
    assert b["estimated_cost_usd"] == pytest.approx(o["estimated_cost_usd"] * 0.5, abs=2e-6)
    assert b["estimated_cost_usd"] > 0
    for role in ("user_simulator", "assistant_simulator", "decomposer"):
        assert batch["usage"][role]["calls"] == online["usage"][role]["calls"] > 0
        assert batch["usage"][role]["batch_calls"] == 0


def test_killed_between_submission_and_results_resumes_the_same_batch(env, tmp_path, monkeypatch,
                                                                       capsys):
    """The CLI dies (as a kill would stop it) while its second round's batch is in progress;
    the rerun polls that batch id, and no request is ever submitted twice."""
    online = run_synthesis(make_config(env, tmp_path / "online"))
    out = tmp_path / "batch"
    fetch = BatchRunner._wait_and_fetch

    def die_in_round_two(self, opened):
        if self.rounds == 2:
            raise KeyboardInterrupt
        return fetch(self, opened)

    monkeypatch.setattr(BatchRunner, "_wait_and_fetch", die_in_round_two)
    assert cli.main(cli_args(env, out, "--batch")) == 130
    first_err = capsys.readouterr().err
    assert "batches are listed in" in first_err and "rerun the same command to resume" in first_err
    saved = read_json(out / "batches.json")["batches"]
    assert [(b["round"], b["fetched"]) for b in saved] == [(1, True), (2, False)]
    open_id = saved[1]["batch_id"]
    assert env.batch_items == 3 and not (out / "instances").exists()

    monkeypatch.setattr(BatchRunner, "_wait_and_fetch", fetch)
    assert cli.main(cli_args(env, out, "--batch")) == 0
    err = capsys.readouterr().err
    assert "resuming 1 submitted batch" in err and f"batch {open_id} " in err
    ids = submitted_ids(env)
    assert len(ids) == len(set(ids)) == env.batch_items == 5  # as a clean run: none twice
    final = read_json(out / "batches.json")["batches"]
    assert [b["batch_id"] for b in final][:2] == [b["batch_id"] for b in saved]
    assert all(b["fetched"] for b in final)
    assert data_files(out) == data_files(tmp_path / "online")
    # The console counts the rerun's batch calls: 2 fetched from the resumed batch, then one
    # round of 2 sessions requests.
    assert "synthesizer: gpt-4o-mini · 4 calls (4 in batches" in err
    assert "batch mode: 1 round(s), 2 request(s) submitted by this invocation" in err
    summary = read_json(out / "summary.json")
    assert summary["usage"]["synthesizer"]["batch_calls"] == 4
    assert summary["stages"]["instances"] == {"done": 6, "skipped": 0}
    assert summary["stages"]["descriptions"] == {"done": 0, "skipped": 2}


def failing_factors(responder, *, online_too: bool):
    """Fails the first persona's factors request in its batch (and online, if asked)."""
    target: dict = {}

    def respond(req):
        if stage_of(req) == "factors":
            content = req["messages"][0]["content"]
            target.setdefault("content", content)
            if content == target["content"] and (req["path"] == "batch" or online_too):
                return FakeResponse(status=500, text="item failed")
        return responder(req)
    return respond


def test_a_request_that_failed_in_its_batch_is_asked_online(env, tmp_path):
    online = run_synthesis(make_config(env, tmp_path / "online"))
    n_online = len(env.requests)
    env.responder = failing_factors(env.responder, online_too=False)
    summary = run_synthesis(make_config(env, tmp_path / "batch", batch=True))
    assert summary["failures"] == [] and summary["counts"] == online["counts"]
    assert data_files(tmp_path / "batch") == data_files(tmp_path / "online")
    asked_online = [r for r in env.requests[n_online:]
                    if r["model"] == OPENAI_SYNTHESIZER and r["path"] != "batch"]
    assert [stage_of(r) for r in asked_online] == ["factors"]
    state = read_json(tmp_path / "batch" / "batches.json")
    assert sum(b["failed_items"] for b in state["batches"]) == 1
    usage = summary["usage"]["synthesizer"]
    assert (usage["calls"], usage["batch_calls"]) == (5, 4)


def test_a_request_failing_in_its_batch_and_online_fails_its_persona(env, tmp_path):
    env.responder = failing_factors(env.responder, online_too=True)
    summary = run_synthesis(make_config(env, tmp_path / "batch", batch=True, max_attempts=2))
    (failure,) = summary["failures"]
    assert failure["stage"] == "factors" and failure["reason"].startswith("model call failed")
    assert summary["counts"]["personas_complete"] == 1 and summary["counts"]["instances"] == 3
    assert read_json(tmp_path / "batch" / "personas" / failure["persona_id"] / "failure.json") == failure
    # The failed persona asked nothing more; the other one went on through batches.
    state = read_json(tmp_path / "batch" / "batches.json")
    assert [(b["round"], len(b["items"]), b["failed_items"]) for b in state["batches"]] == \
        [(1, 1, 0), (2, 2, 1), (3, 1, 0)]
    online = [r for r in env.requests if r["model"] == OPENAI_SYNTHESIZER and r["path"] != "batch"]
    assert online and {stage_of(r) for r in online} == {"factors"}
    assert len(online) == config.MAX_RETRIES + 1  # the seam's retries, once


def test_a_reask_after_an_invalid_answer_adds_a_round(env, tmp_path):
    env.responder = ScriptedSynthesis(malformed={"sessions": 1})
    summary = run_synthesis(make_config(env, tmp_path / "batch", batch=True))
    assert summary["failures"] == [] and summary["counts"]["instances"] == 6
    assert summary["regenerations"]["sessions"] == 1
    state = read_json(tmp_path / "batch" / "batches.json")
    assert [(b["round"], len(b["items"])) for b in state["batches"]] == \
        [(1, 1), (2, 2), (3, 2), (4, 1)]
    assert summary["usage"]["synthesizer"]["batch_calls"] == 6
    assert all(r["path"] == "batch" for r in env.requests if r["model"] == OPENAI_SYNTHESIZER)


def test_batch_with_a_synthesizer_without_batch_api_answers_online(fake_server, tmp_path, caplog):
    fake_server.responder = ScriptedSynthesis()
    url = fake_server.openai_base_url
    with caplog.at_level("WARNING", logger="synthesis"):
        summary = run_synthesis(make_config(fake_server, tmp_path / "out", f"vllm:synth@{url}",
                                            batch=True))
    assert "has no batch API" in caplog.text and "asked online" in caplog.text
    assert summary["counts"]["instances"] == 6 and "batch" not in summary
    assert not fake_server.batches and not (tmp_path / "out" / "batches.json").exists()


@pytest.mark.slow
def test_sigkilled_batch_run_resumes_without_resubmitting(env, tmp_path):
    """SIGKILL the CLI while its second round's batch is in progress; the rerun polls that
    batch and the server sees each request submitted exactly once."""
    reference = run_synthesis(make_config(env, tmp_path / "online"))
    env.batch_delay = 1.0
    out = tmp_path / "batch"
    child_env = {**os.environ, "PYTHONPATH": str(ROOT), "CUPID_BATCH_POLL_INTERVAL": "0.1",
                 "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": env.openai_base_url}
    args = [sys.executable, "-m", "cupid.synthesis.run", *cli_args(env, out, "--batch")]
    proc = subprocess.Popen(args, cwd=ROOT, env=child_env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    state_path = out / "batches.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if state_path.exists() and len(json.loads(state_path.read_text())["batches"]) == 2:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert len(env.batches) == 2 and env.batch_items == 3
    env.batch_delay = 0.0
    rerun = subprocess.run(args, cwd=ROOT, env=child_env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "resuming 1 submitted batch" in rerun.stderr
    ids = submitted_ids(env)
    assert len(ids) == len(set(ids)) == 5
    assert data_files(out) == data_files(tmp_path / "online")
    assert read_json(out / "summary.json")["counts"] == reference["counts"]


def test_a_persona_planned_again_is_described_in_the_same_batch():
    """A later pass asks each description request as the first pass did, even when the
    personas to describe came from two plannings (existing ones, then new templates)."""
    from cupid.synthesis.personas import description_batches

    personas = [{"persona_id": f"p{i}"} for i in range(6)]
    planned: dict = {}
    ids = lambda batches: [[p["persona_id"] for p in b] for b in batches]  # noqa: E731
    assert ids(description_batches(personas[:3], 4, planned)) == [["p0", "p1", "p2"]]
    assert ids(description_batches(personas[3:], 4, planned)) == [["p3", "p4", "p5"]]
    assert ids(description_batches(personas, 4, planned)) == [["p0", "p1", "p2"], ["p3", "p4", "p5"]]
    assert ids(description_batches(personas[3:], 4, planned)) == [["p3", "p4", "p5"]]
    fresh: dict = {}
    assert ids(description_batches(personas, 4, fresh)) == [["p0", "p1", "p2", "p3"], ["p4", "p5"]]


@pytest.mark.parametrize("ending", ["expired", "cancelled"])
def test_a_batch_that_ended_unanswered_is_submitted_again(env, tmp_path, capsys, monkeypatch, ending):
    """The factors' batch ends unanswered: its requests go into the next round once, and
    the data is the online run's; summary.json counts it."""
    online = run_synthesis(make_config(env, tmp_path / "online"))
    original_round = BatchRunner.run_round

    def run_round(self):
        if self.rounds == 1:  # the factors' round is the second
            env.batch_endings = [ending]
        return original_round(self)

    monkeypatch.setattr(BatchRunner, "run_round", run_round)
    assert cli.main(cli_args(env, tmp_path / "batch", "--batch")) == 0
    err = capsys.readouterr().err
    assert f"it ended {ending}; of its 2 unanswered request(s), 2 submitted again in the next round" in err
    assert data_files(tmp_path / "batch") == data_files(tmp_path / "online")
    summary = read_json(tmp_path / "batch" / "summary.json")
    assert summary["counts"] == online["counts"]
    assert (summary["batch"]["batches_lost"], summary["batch"]["items_resubmitted"],
            summary["batch"]["items_answered"], summary["batch"]["submitted_requests"]) == (1, 2, 5, 7)
