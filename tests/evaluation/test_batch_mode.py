"""Batch mode (--batch) through the real openai and anthropic SDKs against the loopback
server's batch endpoints: the same metrics as online at half the price, batch ids saved
at once, a killed run resumed without resubmitting, failed items asked online."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from cupid import config
from cupid_responder import CupidResponder, two_instance_plans, write_two_instance_data
from cupid.evaluation import run as run_module
from cupid.utils.models.batch import BatchDeferred, BatchRunner
from cupid.utils.models.cache import ResponseCache
from cupid.utils.models.registry import resolve_model
from fake_llm_server import FakeResponse
from tests.evaluation.test_run import assert_expected
from repo_paths import ROOT

MODEL, EVALUATOR = "gpt-4o-mini", "claude-3-5-sonnet-20241022"


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setattr(config, "BATCH_POLL_INTERVAL", 0.05)


@pytest.fixture
def data_file(tmp_path):
    return write_two_instance_data(tmp_path / "data.jsonl")


@pytest.fixture
def env(fake_llm_env):
    fake_llm_env.responder = CupidResponder(two_instance_plans())
    return fake_llm_env


def cli(data_file, results_dir, *extra):
    return ["--model", MODEL, "--evaluator", EVALUATOR, "--data", str(data_file),
            "--results_dir", str(results_dir), "--task", "both", "--n_workers", "2",
            "--max_retries", "2", "--timeout", "5", *extra]


def test_batch_run_matches_online_at_half_price(env, data_file, tmp_path):
    assert run_module.main(cli(data_file, tmp_path / "online")) == 0
    online_requests = len(env.requests)
    assert run_module.main(cli(data_file, tmp_path / "batch", "--batch")) == 0
    batch_requests = env.requests[online_requests:]
    assert batch_requests and all(r["path"] == "batch" for r in batch_requests)
    online = json.loads((tmp_path / "online" / MODEL / "results.json").read_text())
    batch = json.loads((tmp_path / "batch" / MODEL / "results.json").read_text())
    assert_expected(batch)
    for key in ("inference", "inference_macro", "generation", "by_instance_type", "counts"):
        assert batch[key] == online[key], key
    # Round 1 infer + generate (OpenAI), 2 decompose + judge (Anthropic), 3 the matches.
    state = json.loads((tmp_path / "batch" / MODEL / "batches.json").read_text())
    assert sorted((b["round"], b["provider"], len(b["items"])) for b in state["batches"]) == \
        [(1, "openai", 4), (2, "anthropic", 4), (3, "anthropic", 4)]
    assert all(b["fetched"] for b in state["batches"])
    for role in ("model", "evaluator"):
        o = online["usage"]["this_invocation"][role]
        b = batch["usage"]["this_invocation"][role]
        assert b["batch_calls"] == b["calls"] == o["calls"]
        assert (b["prompt_tokens"], b["completion_tokens"]) == (o["prompt_tokens"], o["completion_tokens"])
        assert b["estimated_cost_usd"] == pytest.approx(o["estimated_cost_usd"] * 0.5, abs=2e-6)
    for name, entry in batch["usage"]["recorded"].items():
        assert entry["estimated_cost_usd"] == pytest.approx(
            online["usage"]["recorded"][name]["estimated_cost_usd"] * 0.5, abs=2e-6)


def test_failed_batch_items_are_asked_online(env, data_file, tmp_path):
    responder = env.responder
    failed_once: set = set()

    def flaky(req):
        if req["path"] == "batch" and req["api"] == "openai" and not failed_once:
            failed_once.add(1)
            return FakeResponse(status=500, text="item failed")
        return responder(req)

    env.responder = flaky
    assert run_module.main(cli(data_file, tmp_path / "res", "--batch")) == 0
    assert_expected(json.loads((tmp_path / "res" / MODEL / "results.json").read_text()))
    online = [r for r in env.requests if r["path"] != "batch"]
    assert len(online) == 1 and online[0]["api"] == "openai"
    state = json.loads((tmp_path / "res" / MODEL / "batches.json").read_text())
    assert sum(b["failed_items"] for b in state["batches"]) == 1


def test_a_request_that_failed_in_its_batch_is_asked_online_after_a_restart(fake_llm_env, tmp_path):
    """The failed item's key is kept in batches.json: a runner started again (after a kill
    between the fetch and the online answer) asks it online instead of batching it again."""
    cache = ResponseCache(tmp_path / ".llm_cache")
    fake_llm_env.responder = lambda req: (FakeResponse(status=500, text="item failed")
                                          if req["path"] == "batch" else "online answer")
    model = resolve_model("gpt-4o-mini", cache=cache)
    runner = BatchRunner(tmp_path / "batches.json", poll_interval=0.05, out=io.StringIO())
    model.batch_runner = runner
    with pytest.raises(BatchDeferred):
        model.chat("", [{"role": "user", "content": "hello"}])
    runner.run_round()
    (entry,) = json.loads((tmp_path / "batches.json").read_text())["batches"]
    assert entry["failed_items"] == 1 and entry["failed_keys"] == list(entry["items"].values())

    fresh = resolve_model("gpt-4o-mini", cache=cache)
    fresh.batch_runner = BatchRunner(tmp_path / "batches.json", poll_interval=0.05, out=io.StringIO())
    assert fresh.chat("", [{"role": "user", "content": "hello"}]) == "online answer"
    assert fresh.batch_runner.pending == 0 and fake_llm_env.batch_items == 1


def test_runner_defers_saves_ids_and_resumes(fake_llm_env, tmp_path):
    """A runner killed after submitting leaves the id on disk; a new runner fetches that
    batch and submits nothing."""
    cache = ResponseCache(tmp_path / ".llm_cache")
    fake_llm_env.batch_delay = 0.3
    model = resolve_model("gpt-4o-mini", cache=cache)
    runner = BatchRunner(tmp_path / "batches.json", poll_interval=0.05, out=io.StringIO())
    model.batch_runner = runner
    with pytest.raises(BatchDeferred):
        model.chat("", [{"role": "user", "content": "hello"}])
    assert runner.pending == 1 and fake_llm_env.batch_items == 0
    # Submit, then "die" before the results: poll raises as a kill would stop it.
    runner._wait_and_fetch = lambda opened: (_ for _ in ()).throw(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        runner.run_round()
    saved = json.loads((tmp_path / "batches.json").read_text())["batches"]
    assert len(saved) == 1 and not saved[0]["fetched"] and fake_llm_env.batch_items == 1

    fresh = resolve_model("gpt-4o-mini", cache=cache)
    second = BatchRunner(tmp_path / "batches.json", poll_interval=0.05, out=io.StringIO())
    fresh.batch_runner = second
    assert second.resume([fresh]) == 1
    assert fresh.chat("", [{"role": "user", "content": "hello"}]) == "OK"  # from the cache
    assert fake_llm_env.batch_items == 1 and len(fake_llm_env.batches) == 1
    assert fresh.usage.snapshot()["batch_calls"] == 1


@pytest.mark.slow
def test_killed_batch_run_resumes_without_resubmitting(env, data_file, tmp_path):
    """SIGKILL the CLI while its first batch is in progress; the rerun polls that batch and
    every later round's, and the server sees each request submitted exactly once."""
    env.batch_delay = 1.5
    results = tmp_path / "res"
    child_env = {**os.environ, "PYTHONPATH": str(ROOT), "CUPID_BATCH_POLL_INTERVAL": "0.1",
                 "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": env.openai_base_url,
                 "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": env.base_url}
    proc = subprocess.Popen([sys.executable, "-m", "cupid.evaluation.run", *cli(data_file, results, "--batch")],
                            cwd=ROOT, env=child_env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    state_path = results / MODEL / "batches.json"
    deadline = time.monotonic() + 120  # the CLI starts slowly on a loaded machine
    while not state_path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert state_path.exists() and len(env.batches) == 1
    env.batch_delay = 0.0
    code = subprocess.run([sys.executable, "-m", "cupid.evaluation.run", *cli(data_file, results, "--batch")],
                          cwd=ROOT, env=child_env, capture_output=True, text=True, timeout=60)
    assert code.returncode == 0, code.stderr
    assert_expected(json.loads((results / MODEL / "results.json").read_text()))
    custom_ids = [c for b in env.batches.values() for c in b["custom_ids"]]
    assert len(custom_ids) == len(set(custom_ids)) == 12  # 4 + 4 + 4, none twice
    assert "resuming 1 submitted batch" in code.stderr


def test_together_batch_through_its_sdk(fake_llm_env, tmp_path):
    """Together's upload (302 to a PUT, then preprocess), job objects and output file."""
    cache = ResponseCache(tmp_path / ".llm_cache")
    model = resolve_model("meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo", cache=cache)
    runner = BatchRunner(tmp_path / "batches.json", poll_interval=0.05, out=io.StringIO())
    model.batch_runner = runner
    fake_llm_env.responder = lambda req: f"echo {req['messages'][-1]['content']}"
    for text in ("one", "two"):
        with pytest.raises(BatchDeferred):
            model.chat("", [{"role": "user", "content": text}])
    runner.run_round()
    assert [model.chat("", [{"role": "user", "content": t}]) for t in ("one", "two")] == \
        ["echo one", "echo two"]
    (batch,) = fake_llm_env.batches.values()
    assert batch["together"] and len(batch["custom_ids"]) == 2
    assert model.usage.snapshot()["batch_calls"] == 2
    assert all(r["path"] == "batch" for r in fake_llm_env.requests)


def test_gemini_batch_through_its_sdk(fake_llm_env, tmp_path):
    """Gemini's batch mode: inline requests keyed by metadata; a failed item is asked online."""
    cache = ResponseCache(tmp_path / ".llm_cache")
    model = resolve_model("gemini-2.0-flash", cache=cache)
    runner = BatchRunner(tmp_path / "batches.json", poll_interval=0.05, out=io.StringIO())
    model.batch_runner = runner

    def responder(req):
        text = req["messages"][-1]["content"]
        if text == "bad" and req["path"] == "batch":
            return FakeResponse(status=500, text="item failed")
        return f"gemini says {text} to {req['system']}"

    fake_llm_env.responder = responder
    for text in ("one", "bad"):
        with pytest.raises(BatchDeferred):
            model.chat("be brief", [{"role": "user", "content": text}])
    runner.run_round()
    assert model.chat("be brief", [{"role": "user", "content": "one"}]) == "gemini says one to be brief"
    assert model.chat("be brief", [{"role": "user", "content": "bad"}]) == "gemini says bad to be brief"
    (batch,) = fake_llm_env.batches.values()
    assert len(batch["custom_ids"]) == 2
    online = [r for r in fake_llm_env.requests if r["path"] != "batch"]
    assert len(online) == 1 and online[0]["messages"][-1]["content"] == "bad"
    snap = model.usage.snapshot()
    assert snap["batch_calls"] == 1 and snap["calls"] == 2


def test_batches_split_by_count_and_size(tmp_path, monkeypatch):
    runner = BatchRunner(tmp_path / "b.json", max_items=3, out=io.StringIO())
    lines = [(f"k{i}", {"custom_id": f"k{i}", "body": "x" * 100}) for i in range(7)]
    assert [len(c) for c in runner._chunks(lines)] == [3, 3, 1]
    runner.max_items, runner.max_bytes = 100, 300
    assert [len(c) for c in runner._chunks(lines)] == [2, 2, 2, 1]


def test_a_model_without_a_batch_api_is_named_and_answers_online(fake_llm_env, tmp_path, caplog):
    from cupid.utils.models.batch import run_in_rounds

    served = resolve_model(f"vllm:served@{fake_llm_env.openai_base_url}",
                           cache=ResponseCache(tmp_path / ".llm_cache"))
    runner = BatchRunner(tmp_path / "batches.json", poll_interval=0.05, out=io.StringIO())
    answers: list[str] = []
    fake_llm_env.responder = lambda req: "served answer"
    with caplog.at_level("WARNING", logger="cupid.batch"):
        rounds = run_in_rounds(lambda: answers.append(served.chat("", [{"role": "user", "content": "q"}])),
                               runner, [served])
    assert rounds == 0 and answers == ["served answer"] and fake_llm_env.batch_items == 0
    assert any("served has no batch API" in r.getMessage() for r in caplog.records)


# -- batches that do not complete, and an unreadable batches.json -------------------------
PROVIDER_MODELS = ["gpt-4o-mini", "claude-3-5-sonnet-20241022",
                   "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo", "gemini-2.0-flash"]


def ask(model, text):
    return model.chat("", [{"role": "user", "content": text}])


def defer_one(model, text="hello"):
    with pytest.raises(BatchDeferred):
        ask(model, text)


@pytest.mark.parametrize("name", PROVIDER_MODELS)
def test_a_batch_the_provider_forgot_is_submitted_again(fake_llm_env, tmp_path, name):
    """A run killed after submitting; the provider no longer knows the batch (404 through
    each SDK): the rerun says so in one line and submits its requests again, once."""
    cache = ResponseCache(tmp_path / "cache.sqlite")
    fake_llm_env.responder = lambda req: f"answer to {req['messages'][-1]['content']}"
    model = resolve_model(name, cache=cache)
    model.batch_runner = runner = BatchRunner(tmp_path / "batches.json", poll_interval=0.05,
                                              out=io.StringIO())
    defer_one(model)
    runner._wait_and_fetch = lambda opened: (_ for _ in ()).throw(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        runner.run_round()
    (forgotten,) = list(fake_llm_env.batches)
    del fake_llm_env.batches[forgotten]

    out = io.StringIO()
    fresh = resolve_model(name, cache=cache)
    fresh.batch_runner = second = BatchRunner(tmp_path / "batches.json", poll_interval=0.05, out=out)
    assert second.resume([fresh]) == 1
    lines = [line for line in out.getvalue().splitlines() if "404" in line]
    assert lines == [f"batch {forgotten} ({fresh.name}): the provider no longer knows it (404); of its "
                     f"1 unanswered request(s), 1 submitted again in the next round"]
    defer_one(fresh)  # not answered, not asked online: deferred to the next round
    second.run_round()
    assert ask(fresh, "hello") == "answer to hello"
    assert fake_llm_env.batch_items == 2 and not [r for r in fake_llm_env.requests if r["path"] != "batch"]
    counts = second.counts()
    assert (counts["batches_lost"], counts["items_resubmitted"], counts["items_answered"]) == (1, 1, 1)
    (lost, answered) = json.loads((tmp_path / "batches.json").read_text())["batches"]
    assert lost["lost"] == "the provider no longer knows it (404)" and lost["fetched"]
    assert answered["fetched"] and not answered.get("unanswered_keys")


@pytest.mark.parametrize("ending", ["expired", "cancelled", "failed"])
@pytest.mark.parametrize("name", PROVIDER_MODELS)
def test_a_batch_that_ended_unanswered_is_submitted_again_then_asked_online(fake_llm_env, tmp_path,
                                                                              name, ending):
    if name.startswith("claude") and ending == "failed":
        pytest.skip("an Anthropic message batch has no failed status (its items expire or are canceled)")
    cache = ResponseCache(tmp_path / "cache.sqlite")
    fake_llm_env.responder = lambda req: f"answer to {req['messages'][-1]['content']}"
    fake_llm_env.batch_endings = [ending, ending]
    out = io.StringIO()
    model = resolve_model(name, cache=cache)
    model.batch_runner = runner = BatchRunner(tmp_path / "batches.json", poll_interval=0.05, out=out)
    defer_one(model, "one")
    defer_one(model, "two")
    runner.run_round()
    first, = [line for line in out.getvalue().splitlines() if "submitted again" in line]
    assert "2 submitted again in the next round" in first and ending[:6] in first.lower()
    defer_one(model, "one")  # submitted again once ...
    defer_one(model, "two")
    runner.run_round()
    assert "2 asked online (unanswered by a batch before)" in out.getvalue().splitlines()[-1]
    # ... and, left unanswered a second time, asked online.
    assert ask(model, "one") == "answer to one" and ask(model, "two") == "answer to two"
    assert fake_llm_env.batch_items == 4 and len([r for r in fake_llm_env.requests if r["path"] != "batch"]) == 2
    counts = runner.counts()
    assert (counts["batches_lost"], counts["items_submitted"], counts["items_resubmitted"],
            counts["items_answered"]) == (2, 4, 2, 0)


def test_a_restarted_run_keeps_the_once_rule(fake_llm_env, tmp_path):
    """batches.json remembers a request left unanswered once: after a restart, a second
    loss sends it online instead of submitting it a third time."""
    cache = ResponseCache(tmp_path / "cache.sqlite")
    fake_llm_env.responder = lambda req: "fine"
    fake_llm_env.batch_endings = ["expired", "expired"]
    model = resolve_model("gpt-4o-mini", cache=cache)
    model.batch_runner = runner = BatchRunner(tmp_path / "batches.json", poll_interval=0.05, out=io.StringIO())
    defer_one(model)
    runner.run_round()
    fresh = resolve_model("gpt-4o-mini", cache=cache)
    fresh.batch_runner = again = BatchRunner(tmp_path / "batches.json", poll_interval=0.05, out=io.StringIO())
    defer_one(fresh)
    again.run_round()
    assert ask(fresh, "hello") == "fine" and fake_llm_env.batch_items == 2


@pytest.mark.parametrize("content, problem", [
    ('{"batches": [{"batch_id": "batch_abc", "provider": "openai", "model": "gpt-4o-mini", "items": {"k',
     "not valid JSON"),
    ("[]", "expected an object with a 'batches' list, found list"),
    ('{"batches": [{"batch_id": "batch_abc", "provider": "openai", "items": {"k": "k"}}]}',
     "entry 1 (batch_abc): 'model' missing"),
    ('{"batches": [{"batch_id": "batch_abc", "model": "gpt-4o-mini", "items": ["k"]}]}',
     "entry 1 (batch_abc): 'items' not a mapping"),
    ("\xff\xfe", "not UTF-8 text"),
])
def test_an_unreadable_batches_file_is_named_and_moved_aside(tmp_path, content, problem):
    path = tmp_path / "batches.json"
    path.write_bytes(content.encode("latin-1") if content.startswith("\xff") else content.encode())
    out = io.StringIO()
    runner = BatchRunner(path, out=out)
    assert runner.state == {"batches": []}
    (line,) = out.getvalue().splitlines()
    assert line.startswith(f"warning: {path}: {problem}") and "moved to batches.json.unreadable-" in line
    if "batch_abc" in content:
        assert "batches not resumed: batch_abc" in line
    (aside,) = tmp_path.glob("batches.json.unreadable-*")
    assert aside.read_bytes() == path.with_name(aside.name).read_bytes() and not path.exists()


def test_usable_entries_of_a_damaged_batches_file_are_kept(tmp_path):
    path = tmp_path / "batches.json"
    good = {"batch_id": "batch_good", "provider": "openai", "model": "gpt-4o-mini",
            "items": {"k": "k"}, "fetched": False}
    path.write_text(json.dumps({"batches": [good, {"batch_id": "batch_bad", "items": {}}]}))
    out = io.StringIO()
    runner = BatchRunner(path, out=out)
    assert runner.state == {"batches": [good]} and json.loads(path.read_text()) == {"batches": [good]}
    assert "batches not resumed: batch_bad" in out.getvalue() and "1 readable batch(es) kept" in out.getvalue()


def test_cli_batch_run_counts_what_it_did(env, data_file, tmp_path, capsys):
    """A fresh --batch run: found done 0, ran 2, its time counted, the batches' counts in
    results.json, run.json and the summary; a batch the provider forgot and an unreadable
    batches.json heal by themselves."""
    results = tmp_path / "res"
    (results / MODEL).mkdir(parents=True)
    (results / MODEL / "batches.json").write_text(json.dumps({"batches": [
        {"batch_id": "batch_forgotten", "provider": "openai", "model": MODEL, "round": 1,
         "items": {"x": "not-a-real-key"}, "fetched": False}]}))
    assert run_module.main(cli(data_file, results, "--batch")) == 0
    captured = capsys.readouterr()
    assert "batch batch_forgotten (gpt-4o-mini): the provider no longer knows it (404)" in captured.err
    run_results = json.loads((results / MODEL / "results.json").read_text())
    assert_expected(run_results)
    this = run_results["this_invocation"]
    assert (this["found_done"], this["ran"], this["ran_failed"], this["remaining"]) == (0, 2, 0, 0)
    assert this["batch"] == {"rounds": 3, "items_submitted": 12, "batches_submitted": 3,
                             "items_resubmitted": 0, "items_answered": 12, "items_failed": 0,
                             "items_adapted": 0, "batches_resumed": 1, "batches_lost": 1}
    manifest = json.loads((results / MODEL / "run.json").read_text())
    assert manifest["invocations"][-1]["batch"] == this["batch"]
    assert manifest["invocations"][-1]["wall_time_s"] > 0
    assert "this invocation: found done 0 · ran 2 (0 failed)" in captured.out
    assert "batch mode: 3 round(s) · 3 batch(es) submitted with 12 request(s) · 12 answered" in captured.out

    (results / MODEL / "batches.json").write_text("[]")
    assert run_module.main(cli(data_file, results, "--batch")) == 0
    captured = capsys.readouterr()
    assert f"warning: {results / MODEL / 'batches.json'}: expected an object" in captured.err
    this = json.loads((results / MODEL / "results.json").read_text())["this_invocation"]
    assert (this["found_done"], this["ran"]) == (2, 0) and this["batch"]["items_submitted"] == 0


def test_a_failed_step_is_asked_again_by_the_rerun_counted_as_run_and_batched(env, data_file, tmp_path):
    """A step that failed (its answers stayed unusable) is not taken as done on resume: the
    rerun asks it again, counts its instance as ran (not found done), and with --batch sends
    it through the batch API, at the batch price, not online."""
    responder = env.responder

    def broken_judge(req):
        user = req["messages"][-1]["content"] if "messages" in req else ""
        if "### AI Assistant's Response" in user and "Hollis" in user:
            return "I would rather not score this."
        return responder(req)

    env.responder = broken_judge
    assert run_module.main(cli(data_file, tmp_path / "res")) == 1
    run_dir = tmp_path / "res" / MODEL
    first = json.loads((run_dir / "results.json").read_text())
    assert first["counts"]["failed"] == 1 and list(first["counts"]["failures_by_step"]) == ["judge"]

    env.responder = responder
    before = len(env.requests)
    assert run_module.main(cli(data_file, tmp_path / "res", "--batch")) == 0
    results = json.loads((run_dir / "results.json").read_text())
    assert_expected(results)
    this = results["this_invocation"]
    assert (this["found_done"], this["ran"], this["ran_failed"]) == (1, 1, 0)
    rerun = env.requests[before:]
    assert rerun and all(r["path"] == "batch" for r in rerun)  # nothing asked online
    judged = [r for r in rerun if "### AI Assistant's Response" in r["messages"][-1]["content"]]
    assert len(judged) == 1 and "Hollis" in judged[0]["messages"][-1]["content"]
    assert results["usage"]["this_invocation"]["evaluator"]["batch_calls"] == 1
