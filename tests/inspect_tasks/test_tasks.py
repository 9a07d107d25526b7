"""``inspect eval cupid/inference`` and ``cupid/generation`` against cupid-eval on the same
answers: the command itself (from this environment's install, or the installed copy CI names
with CUPID_INSTALLED_BIN) against the loopback OpenAI server, whose received bodies are
compared with cupid-eval's; and inspect's own scripted model (mockllm) answering as the
server does, whose metrics are compared with cupid-eval's results.json, setting by setting."""
from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from browser import Browser, find_chromium
from inspect_runs import (canonical, clustered_plans, inspect_command, require_inspect, run_inspect,
                          scripted_model, write_clustered_data)

require_inspect()

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import list_eval_logs, read_eval_log  # noqa: E402

from cupid import config  # noqa: E402
from cupid.evaluation import run as run_module  # noqa: E402
from cupid.utils.errors import BadInput  # noqa: E402
from cupid_responder import CupidResponder  # noqa: E402

MODEL, GRADER = "gpt-4.1-nano-2025-04-14", "gpt-4o-2024-11-20"
TOLERANCE = 1e-9


@pytest.fixture
def plans():
    return clustered_plans()


@pytest.fixture
def data(tmp_path, plans):
    return write_clustered_data(tmp_path / "data.jsonl", plans)


def cupid_eval(server, data: Path, results: Path, setting: str = "default", task: str = "both", *extra) -> dict:
    """cupid-eval's results.json for the run, against the loopback server."""
    code = run_module.main(["--model", MODEL, "--evaluator", GRADER, "--data", str(data), "--task", task,
                            "--setting", setting, "--results_dir", str(results), "--n_workers", "2", *extra])
    assert code == 0
    (path,) = results.rglob("results.json")  # the run directory is the setting's
    return json.loads(path.read_text())


def metrics_of(log) -> dict:
    (score,) = log.results.scores
    return {name: metric.value for name, metric in score.metrics.items()}


def assert_same_numbers(results: dict, inference: dict | None, generation: dict | None) -> None:
    """inspect's metrics are results.json's, to 1e-9."""
    if inference is not None:
        for name in ("precision", "recall", "f1"):
            assert abs(inference[name] - results["inference"][name]) < TOLERANCE, name
            assert abs(inference[f"{name}_macro"] - results["inference_macro"][name]) < TOLERANCE, name
    if generation is not None:
        assert abs(generation["mean"] - results["generation"]["average_score"]) < TOLERANCE


@pytest.mark.slow
def test_the_inspect_command_sends_cupid_evals_requests_and_gives_its_numbers(fake_llm_env, plans, data, tmp_path):
    server = fake_llm_env
    server.responder = CupidResponder(plans)
    results = cupid_eval(server, data, tmp_path / "results")
    ours = [r["body"] for r in server.requests]

    env = {**os.environ, "OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": "sk-test"}
    run_inspect(["eval", "cupid/inference", "cupid/generation", "--model", f"openai/{MODEL}",
                 "--model-role", f"grader=openai/{GRADER}", "-T", f"data_dir={data}",
                 "--log-dir", str(tmp_path / "logs"), "--display", "none"], tmp_path, env)
    theirs = [r["body"] for r in server.requests[len(ours):]]

    # The same 36 requests (6 instances x infer, decompose, 2 matches, generate, judge), body for
    # body; inspect writes the temperature as 0.0 where the release writes 0.
    assert len(ours) == len(theirs) == 36
    assert sorted(map(canonical, ours)) == sorted(map(canonical, theirs))
    assert {json.dumps(b["temperature"]) for b in theirs} == {"0.0"}
    graders = [b for b in theirs if b["model"] == GRADER]
    assert {m["role"] for b in graders for m in b["messages"]} == {"developer", "user"}
    assert Counter("max_completion_tokens" in b for b in graders) == Counter({True: 24})

    logs = {log.eval.task: log for log in map(read_eval_log, list_eval_logs(str(tmp_path / "logs")))}
    assert set(logs) == {"cupid/inference", "cupid/generation"}
    # The solver's and scorer's arguments are logged as the data's source, not its sessions.
    header = read_eval_log(logs["cupid/inference"].location, header_only=True)
    assert "Session 1 request" not in header.model_dump_json()
    assert header.plan.steps[0].params["data"]["fingerprint"] == header.eval.metadata["data"]["fingerprint"]
    assert_same_numbers(results, metrics_of(logs["cupid/inference"]), metrics_of(logs["cupid/generation"]))

    # What inspect view shows of a sample: the inferred preference, each checklist match, the score.
    sample = next(s for s in read_eval_log(logs["cupid/inference"].location).samples if s.id.endswith("__consistent")
                  and s.metadata["persona_id"] == "p1")
    plan = plans[0]
    score = sample.scores["checklist_match"]
    assert score.answer == plan.inferred
    assert score.metadata["inferred_checklist"] == plan.inferred_checklist
    assert [m["label"] for m in score.metadata["precision_matches"]] == plan.precision_labels
    assert [m["label"] for m in score.metadata["recall_matches"]] == plan.recall_labels
    for entry, label in zip(plan.inferred_checklist, plan.precision_labels):
        assert f"{entry} — {label}" in score.explanation
    assert score.value["precision"] == pytest.approx(
        sum({"Fully Covered": 1, "Partially Covered": 0.5, "Not Covered": 0}[label]
            for label in plan.precision_labels) / len(plan.precision_labels))
    judged = next(s for s in read_eval_log(logs["cupid/generation"].location).samples if s.id == sample.id)
    assert judged.scores["judge_score"].value == plan.judge_score


def test_prefmatcher_matches_as_in_cupid_eval(fake_llm_env, plans, data, tmp_path, monkeypatch):
    """-T prefmatcher=true: the matches go to the matcher role (inspect's vLLM provider here)
    with PrefMatcher's prompt, as cupid-eval --use_matcher sends them."""
    server = fake_llm_env
    server.responder = CupidResponder(plans)
    results = cupid_eval(server, data, tmp_path / "results", "default", "inference",
                         "--use_matcher", "--matcher_url", server.openai_base_url)
    ours = [r["body"] for r in server.requests]
    monkeypatch.setenv("VLLM_BASE_URL", server.openai_base_url)
    monkeypatch.setenv("VLLM_API_KEY", "EMPTY")
    (log,) = inspect_eval("cupid/inference", model=f"openai/{MODEL}",
                          model_roles={"grader": f"openai/{GRADER}", "matcher": f"vllm/{config.PREFMATCHER_MODEL}"},
                          task_args={"data_dir": str(data), "prefmatcher": True}, log_dir=str(tmp_path / "logs"),
                          display="none")
    theirs = [r["body"] for r in server.requests[len(ours):]]
    assert len(ours) == len(theirs) == 24
    assert sorted(map(canonical, ours)) == sorted(map(canonical, theirs))
    assert server.responder.calls["match_prefmatcher"] == 24 and server.responder.calls["match"] == 0
    assert_same_numbers(results, metrics_of(log), None)
    assert log.eval.metadata["matcher"] == f"vllm/{config.PREFMATCHER_MODEL}"


def scripted_eval(tasks: list[str], responder: CupidResponder, tmp_path: Path, **task_args) -> dict:
    """inspect's eval() of the tasks named as a user names them, on mockllm answering as the
    loopback server does (evaluated model and grader alike); the logs by task."""
    logs = inspect_eval(tasks, model=scripted_model(responder), model_roles={"grader": scripted_model(responder)},
                        task_args=task_args, log_dir=str(tmp_path / "logs"), display="none")
    assert all(log.status == "success" for log in logs), [log.error for log in logs]
    return {log.eval.task: log for log in logs}


@pytest.mark.parametrize("setting", ["default", "oracle", "summary", "recent:k=2", "none"])
def test_on_inspects_scripted_model_the_metrics_are_results_jsons(fake_llm_env, plans, data, tmp_path, setting):
    fake_llm_env.responder = CupidResponder(plans)
    results = cupid_eval(fake_llm_env, data, tmp_path / "results", setting)
    responder = CupidResponder(plans)
    logs = scripted_eval(["cupid/inference", "cupid/generation"], responder, tmp_path, data_dir=str(data),
                         setting=setting)
    assert_same_numbers(results, metrics_of(logs["cupid/inference"]), metrics_of(logs["cupid/generation"]))
    counted = {name: score.scored_samples for log in logs.values() for score in log.results.scores
               for name in [score.name]}
    skipped = results["counts"]["skipped"]
    assert counted == {"checklist_match": 6 - skipped, "judge_score": 6 - skipped}
    assert skipped == (1 if setting == "oracle" else 0)


def test_oracle_preference_generates_given_the_truth(fake_llm_env, plans, data, tmp_path):
    fake_llm_env.responder = CupidResponder(plans)
    results = cupid_eval(fake_llm_env, data, tmp_path / "results", "oracle_preference", task="generation")
    responder = CupidResponder(plans)
    logs = scripted_eval(["cupid/generation"], responder, tmp_path, data_dir=str(data), setting="oracle_preference")
    assert_same_numbers(results, None, metrics_of(logs["cupid/generation"]))
    assert responder.calls["generate_oracle_preference"] == 6 and responder.calls["generate"] == 0
    with pytest.raises(BadInput, match="oracle_preference has no inference task"):
        inspect_eval("cupid/inference", model="mockllm/model", task_args={"data_dir": str(data),
                     "setting": "oracle_preference"}, log_dir=str(tmp_path / "refused"), display="none")


def test_an_unparseable_answer_is_asked_again_then_left_unscored_with_its_step(plans, data, tmp_path):
    # The first infer and decompose answers are unusable: each is asked again, once.
    responder = CupidResponder(plans, malformed_first={"infer", "decompose"})
    log = scripted_eval(["cupid/inference"], responder, tmp_path, data_dir=str(data))["cupid/inference"]
    assert log.results.scores[0].scored_samples == 6
    assert responder.calls["infer"] == 7 and responder.calls["decompose"] == 7

    # A grader whose match answers never parse: every sample unscored, naming the step.
    class NoMatch(CupidResponder):
        def __call__(self, req):
            if self.kind(req) != "match":
                return super().__call__(req)
            with self._lock:
                self.calls["match"] += 1
            return "No idea."

    grader = NoMatch(plans)
    logs = inspect_eval("cupid/inference", model=scripted_model(CupidResponder(plans)),
                        model_roles={"grader": scripted_model(grader)}, task_args={"data_dir": str(data)},
                        log_dir=str(tmp_path / "nomatch"), display="none")
    (score,) = logs[0].results.scores
    assert score.scored_samples == 0 and score.unscored_samples == 6
    assert grader.calls["match"] == 6 * 2 * (config.MAX_PARSE_RETRIES + 1)  # both directions, every try
    sample_score = read_eval_log(logs[0].location).samples[0].scores["checklist_match"]
    assert math.isnan(sample_score.value)
    assert sample_score.explanation.startswith("match_precision failed: unparseable answer: ")


@pytest.mark.slow
def test_inspect_view_shows_the_inferred_preference_its_matches_and_score(plans, data, tmp_path):
    if find_chromium() is None and os.environ.get("CUPID_REQUIRE_BROWSER") != "1":
        pytest.skip("chromium is not installed (.ci/run installs it)")
    responder = CupidResponder(plans)
    log = scripted_eval(["cupid/inference"], responder, tmp_path, data_dir=str(data))["cupid/inference"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    view = subprocess.Popen([inspect_command(), "view", "--log-dir", str(tmp_path / "logs"), "--host", "127.0.0.1",
                             "--port", str(port)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).close()
                break
            except OSError:
                assert time.monotonic() < deadline and view.poll() is None, "inspect view did not start"
                time.sleep(0.5)
        plan = plans[0]
        page = (f"http://127.0.0.1:{port}/#/logs/{Path(log.location).name}/samples/sample/p1__consistent/1/scoring")
        with Browser(timeout=120) as browser:
            browser.send("Page.navigate", {"url": page}, session=True)
            last_match = f"{plan.truth_checklist[-1]} — {plan.recall_labels[-1]}"
            browser.wait_for(f"document.body && document.body.innerText.includes({json.dumps(last_match)})")
            text = browser.evaluate("document.body.innerText")
    finally:
        view.terminate()
        view.wait(timeout=30)
    assert plan.inferred in text
    for entry, label in [*zip(plan.inferred_checklist, plan.precision_labels),
                         *zip(plan.truth_checklist, plan.recall_labels)]:
        assert f"{entry} — {label}" in text
    assert plan.precision_labels == ["Fully Covered", "Partially Covered"]  # precision 0.75
    assert "precision" in text and "0.75" in text and "recall" in text and "f1" in text
