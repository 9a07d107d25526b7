"""PrefMatcher and any vLLM / OpenAI-compatible server as served: the pre-flight that reads
each server's models list (served ids, max_model_len), the context-length refusal that is not
retried, matcher replicas, and evaluation/serve_prefmatcher.sh.

The loopback server validates as vLLM does once ``serve_as_vllm`` is called (its tokenizer
counts words): 404 for an id it does not serve, 400 in vLLM's words for a request whose
prompt + max_tokens exceeds max_model_len.
"""
from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cupid.evaluation.strategies import PAPER_STRATEGIES
from cupid import config
from cupid.evaluation import run as run_module
from cupid.evaluation.context_check import check_context
from cupid.evaluation.data import InstanceSource
from fake_llm_server import FakeLLMServer, FakeResponse
from sample_results import SampleEvaluator
from cupid.utils.models.call_errors import ModelCallFailed, ModelConfigurationError
from cupid.utils.models.registry import check_models, resolve_model
from repo_paths import ROOT

SAMPLE = ROOT / "data" / "sample"
PM = config.PREFMATCHER_MODEL
QWEN_CONTEXT = 32768      # Qwen2.5-7B-Instruct's, the serve script's default
OLD_SCRIPT_CONTEXT = 8192  # what serve_prefmatcher.sh used to serve


@pytest.fixture
def vllm_server():
    with FakeLLMServer(responder=SampleEvaluator()) as server:
        yield server


def chat_requests(server: FakeLLMServer) -> list[dict]:
    return [r for r in server.requests if r["path"].endswith("/chat/completions")]


# ---------------------------------------------------------------------------------------
# The models list: served ids and their context
# ---------------------------------------------------------------------------------------
def test_the_models_list_gives_the_served_context(vllm_server):
    vllm_server.serve_as_vllm({"served-a": 4096})
    model = resolve_model(f"vllm:served-a@{vllm_server.openai_base_url}")
    check_models([model])
    assert model.max_model_len == 4096


def test_an_id_the_server_does_not_serve_stops_with_what_it_serves(vllm_server):
    url = vllm_server.openai_base_url
    vllm_server.serve_as_vllm({"Qwen/Qwen2.5-7B-Instruct": QWEN_CONTEXT, "other": 2048})
    matcher = resolve_model(f"vllm:{PM}@{url}", role="matcher")
    with pytest.raises(ModelConfigurationError) as caught:
        check_models([matcher])
    message = str(caught.value)
    assert f"serves Qwen/Qwen2.5-7B-Instruct, other, not {PM}" in message
    assert "CUPID_PREFMATCHER_MODEL=Qwen/Qwen2.5-7B-Instruct" in message
    assert f"--served-model-name {PM}" in message
    model = resolve_model(f"vllm:llama@{url}")
    with pytest.raises(ModelConfigurationError, match=f"ask for vllm:Qwen/Qwen2.5-7B-Instruct@{url}"):
        check_models([model])
    assert chat_requests(vllm_server) == []


def test_every_replica_is_read_and_the_smallest_context_counts():
    with FakeLLMServer() as first, FakeLLMServer() as second:
        first.serve_as_vllm({"m": QWEN_CONTEXT})
        second.serve_as_vllm({"m": 16384})
        farm = f"{first.openai_base_url},{second.openai_base_url}"
        model = resolve_model(f"vllm:m@{farm}")
        check_models([model])
        assert model.max_model_len == 16384
        second.serve_as_vllm({"another": 16384})
        with pytest.raises(ModelConfigurationError, match=f"the server at {second.openai_base_url} "
                                                          f"serves another, not m"):
            check_models([resolve_model(f"vllm:m@{farm}")])


def test_a_server_that_states_no_length_is_not_length_checked(caplog):
    # llama-cpp-python's server lists its model alias with no context length; a proxy may
    # list nothing at all. Neither is an error: the length check is skipped, with a log line.
    with FakeLLMServer() as server:
        server.models = ["smollm2"]
        model = resolve_model(f"vllm:smollm2@{server.openai_base_url}", role="matcher")
        with caplog.at_level(logging.INFO, logger="cupid.models"):
            check_models([model])
        assert model.max_model_len is None
        assert [r.getMessage() for r in caplog.records if "does not state its context length" in r.getMessage()]
        check_context({"evaluated": None, "evaluator": None, "matcher": model},
                      InstanceSource(data_path=str(SAMPLE)), task="inference", setting=PAPER_STRATEGIES["default"])
        server.models = []
        listless = resolve_model(f"vllm:anything@{server.openai_base_url}")
        check_models([listless])
        assert listless.max_model_len is None


# ---------------------------------------------------------------------------------------
# The context check, from the data
# ---------------------------------------------------------------------------------------
def sample_instances():
    source = InstanceSource(data_path=str(SAMPLE))
    source.validate()
    return source


def test_the_evaluated_models_longest_prompt_is_counted_by_the_server(vllm_server):
    vllm_server.serve_as_vllm({"m": 8192 + 50})
    model = resolve_model(f"vllm:m@{vllm_server.openai_base_url}", role="evaluated")
    check_models([model])
    with pytest.raises(ModelConfigurationError) as caught:
        check_context({"evaluated": model, "evaluator": None, "matcher": None}, sample_instances(),
                      task="inference", setting=PAPER_STRATEGIES["default"])
    message = str(caught.value)
    assert "max_model_len 8242" in message and "longest infer request" in message
    assert "counted by the server's /tokenize" in message and "max_tokens 8192" in message
    tokens = int(re.search(r"(\d+) prompt tokens", message).group(1))
    assert tokens > 1000  # the longest sample prompt, in the fake tokenizer's words
    assert f"= {tokens + 8192};" in message
    assert f"or lower --model_args max_tokens to {8242 - tokens} or less" in message
    assert vllm_server.tokenize_calls >= 1 and chat_requests(vllm_server) == []
    # A context that holds the longest prompt + 8192 passes.
    vllm_server.serve_as_vllm({"m": QWEN_CONTEXT})
    check_models([model])
    check_context({"evaluated": model, "evaluator": None, "matcher": None}, sample_instances(),
                  task="both", setting=PAPER_STRATEGIES["default"])


def test_without_tokenize_the_prompt_is_estimated_and_said_so(vllm_server):
    vllm_server.serve_as_vllm({PM: OLD_SCRIPT_CONTEXT})
    vllm_server.tokenize_route = False
    matcher = resolve_model(f"vllm:{PM}@{vllm_server.openai_base_url}", role="matcher")
    check_models([matcher])
    with pytest.raises(ModelConfigurationError) as caught:
        check_context({"evaluated": None, "evaluator": None, "matcher": matcher}, sample_instances(),
                      task="inference", setting=PAPER_STRATEGIES["default"])
    message = str(caught.value)
    assert "estimated from its length" in message and f"max_model_len {OLD_SCRIPT_CONTEXT}" in message
    assert "--matcher_args max_tokens to" in message and vllm_server.tokenize_calls == 0


# ---------------------------------------------------------------------------------------
# A context-length 400 fails the step at once, with the server's numbers
# ---------------------------------------------------------------------------------------
def test_vllms_context_400_is_not_retried(vllm_server):
    vllm_server.serve_as_vllm({"m": 100})
    model = resolve_model(f"vllm:m@{vllm_server.openai_base_url}", max_retries=4)
    with pytest.raises(ModelCallFailed) as caught:
        model.generate("Be brief.", [{"role": "user", "content": "hello there"}], max_tokens=200)
    assert caught.value.attempts == 1 and len(chat_requests(vllm_server)) == 1
    reason = caught.value.reason
    assert reason.startswith("the request does not fit the model's context (HTTP 400)")
    assert "This model's maximum context length is 100 tokens and your request has 4 input " \
           "tokens (200 > 100 - 4)" in reason


def _error_body(message: str, **fields) -> bytes:
    return json.dumps({"error": {"message": message, **fields}}).encode()


@pytest.mark.parametrize("body, numbers", [
    # llama.cpp's llama-server
    (_error_body("request (9412 tokens) exceeds the available context size (8192 tokens), try "
                 "increasing it", type="exceed_context_size_error", code=400,
                 n_prompt_tokens=9412, n_ctx=8192), ("9412", "8192")),
    # llama-cpp-python's server (OpenAI's former wording)
    (_error_body("This model's maximum context length is 2048 tokens. However, you requested "
                 "3000 tokens (2000 in the messages, 1000 in the completion). Please reduce the "
                 "length of the messages or completion.", type="invalid_request_error",
                 param="messages", code="context_length_exceeded"), ("2048", "3000")),
    # OpenAI: the code says it, whatever the message
    (_error_body("Input of 130000 tokens is too long for this model (128000).",
                 type="invalid_request_error", param="messages", code="context_length_exceeded"),
     ("130000", "128000")),
])
def test_other_servers_context_400s_are_not_retried(body, numbers):
    with FakeLLMServer() as server:
        server.script(FakeResponse(status=400, raw_body=body))
        model = resolve_model(f"vllm:m@{server.openai_base_url}", max_retries=4)
        with pytest.raises(ModelCallFailed) as caught:
            model.generate("", [{"role": "user", "content": "hi"}])
        assert caught.value.attempts == 1
        assert caught.value.reason.startswith("the request does not fit the model's context")
        assert all(n in caught.value.reason for n in numbers)


def test_other_failures_keep_their_classification():
    with FakeLLMServer(responder=lambda req: "fine") as server:
        # Another 400 fails at once too, but is not called a context overflow.
        server.script(FakeResponse(status=400, raw_body=_error_body("Unknown parameter: foo")))
        model = resolve_model(f"vllm:m@{server.openai_base_url}", max_retries=2)
        with pytest.raises(ModelCallFailed) as caught:
            model.generate("", [{"role": "user", "content": "hi"}])
        assert caught.value.attempts == 1 and "does not fit" not in caught.value.reason
        # A 503 is retried even when its text mentions the context: the server was not asked.
        server.script(FakeResponse(status=503, raw_body=_error_body(
            "overloaded; maximum context length is 4096 tokens")))
        assert model.generate("", [{"role": "user", "content": "hello"}]).text == "fine"


# ---------------------------------------------------------------------------------------
# --use_matcher --task inference on the sample, against a server that validates as vLLM
# ---------------------------------------------------------------------------------------
def run_cli(hosted: FakeLLMServer, results: Path, *extra: str, env: dict | None = None):
    """evaluation.run in a subprocess: GPT models on the hosted loopback server, PrefMatcher
    on the vLLM one(s) named by ``extra`` or ``env``."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CUPID_"))}
    full_env.update({"PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-test",
                     "OPENAI_BASE_URL": hosted.openai_base_url, **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "cupid.evaluation.run", "--model", "gpt-4.1-nano-2025-04-14",
         "--evaluator", "gpt-4o-2024-11-20", "--data_dir", str(SAMPLE), "--task", "inference",
         "--use_matcher", "--results_dir", str(results), "--n_workers", "2",
         "--max_retries", "1", "--timeout", "20", *extra],
        env=full_env, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_cheap_path_runs_at_the_scripts_context_on_two_replicas(tmp_path):
    with FakeLLMServer(responder=SampleEvaluator()) as hosted, \
            FakeLLMServer(responder=SampleEvaluator()) as first, \
            FakeLLMServer(responder=SampleEvaluator()) as second:
        for replica in (first, second):
            replica.serve_as_vllm({PM: QWEN_CONTEXT})
        done = run_cli(hosted, tmp_path / "res", env={
            "CUPID_PREFMATCHER_URL": f"{first.openai_base_url},{second.openai_base_url}"})
        assert done.returncode == 0, done.stderr
        matched = chat_requests(first) + chat_requests(second)
        # 6 instances x 2 directions, round-robin over the replicas, with the release's 8192.
        assert len(matched) == 12 and len(chat_requests(first)) == len(chat_requests(second)) == 6
        assert {r["body"]["max_tokens"] for r in matched} == {8192}
        assert {r["model"] for r in matched} == {PM}
        assert first.tokenize_calls + second.tokenize_calls >= 1
    results = json.loads((tmp_path / "res" / "gpt-4.1-nano-2025-04-14" / "results.json").read_text())
    assert results["counts"]["evaluated"] == 6 and results["counts"]["failed"] == 0
    assert results["settings"]["matcher"] == PM


def test_a_context_too_small_stops_before_any_paid_call(tmp_path):
    with FakeLLMServer(responder=SampleEvaluator()) as hosted, \
            FakeLLMServer(responder=SampleEvaluator()) as matcher:
        matcher.serve_as_vllm({PM: OLD_SCRIPT_CONTEXT})
        done = run_cli(hosted, tmp_path / "res", "--matcher_url", matcher.openai_base_url)
        assert done.returncode == 2
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, done.stderr
        line = lines[0]
        assert line.startswith("error: ") and f"max_model_len {OLD_SCRIPT_CONTEXT}" in line
        assert "longest match_" in line and "max_tokens 8192" in line
        assert "restart vLLM with --max-model-len" in line and "--matcher_args max_tokens" in line
        # Nothing paid for, nothing asked of the matcher, nothing written.
        assert chat_requests(hosted) == [] and chat_requests(matcher) == []
        assert not (tmp_path / "res").exists()


def test_a_lower_matcher_max_tokens_runs_and_is_recorded(tmp_path):
    with FakeLLMServer(responder=SampleEvaluator()) as hosted, \
            FakeLLMServer(responder=SampleEvaluator()) as matcher:
        matcher.serve_as_vllm({PM: OLD_SCRIPT_CONTEXT})
        done = run_cli(hosted, tmp_path / "res", "--matcher_url", matcher.openai_base_url,
                       "--matcher_args", "max_tokens=4096")
        assert done.returncode == 0, done.stderr
        assert {r["body"]["max_tokens"] for r in chat_requests(matcher)} == {4096}
    results = json.loads((tmp_path / "res" / "gpt-4.1-nano-2025-04-14" / "results.json").read_text())
    assert results["settings"]["generation_overrides"] == {"matcher": {"max_tokens": 4096}}
    assert results["settings"]["matcher"] == f"{PM}[max_tokens=4096]"


def test_a_replica_serving_another_model_stops_the_run(tmp_path, capsys):
    with FakeLLMServer(responder=SampleEvaluator()) as hosted, \
            FakeLLMServer() as good, FakeLLMServer() as wrong:
        good.serve_as_vllm({PM: QWEN_CONTEXT})
        wrong.serve_as_vllm({"Qwen/Qwen2.5-7B-Instruct": QWEN_CONTEXT})
        code = run_module.main([
            "--model", f"vllm:model-a@{hosted.openai_base_url}", "--evaluator",
            f"vllm:evaluator@{hosted.openai_base_url}", "--data_dir", str(SAMPLE),
            "--use_matcher", "--matcher_url", f"{good.openai_base_url}, {wrong.openai_base_url}",
            "--results_dir", str(tmp_path / "res")])
        assert code == 2
        err = capsys.readouterr().err
        assert f"the server at {wrong.openai_base_url} serves Qwen/Qwen2.5-7B-Instruct, not {PM}" in err
        assert chat_requests(hosted) == []


# ---------------------------------------------------------------------------------------
# evaluation/serve_prefmatcher.sh
# ---------------------------------------------------------------------------------------
def serve_script_args(tmp_path: Path, *args: str, **env: str) -> list[str]:
    """The arguments the script gives `vllm` (a stand-in on PATH that prints them)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stand_in = bin_dir / "vllm"
    stand_in.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    stand_in.chmod(0o755)
    run_env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", **env}
    done = subprocess.run(["bash", str(ROOT / "evaluation" / "serve_prefmatcher.sh"), *args],
                          env=run_env, capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.splitlines()


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_serve_script_serves_qwens_context_and_passes_flags_through(tmp_path):
    argv = serve_script_args(tmp_path, "--enable-prefix-caching")
    assert argv[:2] == ["serve", PM]
    assert flag(argv, "--max-model-len") == str(QWEN_CONTEXT)
    assert flag(argv, "--port") == "8000" and flag(argv, "--gpu-memory-utilization") == "0.9"
    assert flag(argv, "--tensor-parallel-size") == "1" and "--data-parallel-size" not in argv
    assert argv[-1] == "--enable-prefix-caching"
    argv = serve_script_args(tmp_path, MAX_MODEL_LEN="16384", TENSOR_PARALLEL="2",
                             DATA_PARALLEL="4", GPU_MEMORY_UTILIZATION="0.5", PORT="9000")
    assert flag(argv, "--max-model-len") == "16384" and flag(argv, "--tensor-parallel-size") == "2"
    assert flag(argv, "--data-parallel-size") == "4" and flag(argv, "--port") == "9000"
    assert flag(argv, "--gpu-memory-utilization") == "0.5"
