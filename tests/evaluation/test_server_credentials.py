"""A whole evaluation run (``python -m cupid.evaluation.run``) whose served models and
PrefMatcher sit behind a proxy that asks for HTTP basic auth: given in the model names and
``--matcher_url``, or in CUPID_LOCAL_SERVER_URL and CUPID_PREFMATCHER_URL. Every request
reaches the server with the credentials, and the password is in no output, log file,
run.json, results.json, instance file or cached answer."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cupid import config
from fake_llm_server import FakeLLMServer
from repo_paths import ROOT
from sample_results import SampleEvaluator

SAMPLE = ROOT / "data" / "sample"
PM = config.PREFMATCHER_MODEL
USER, PASSWORD = "alice", "hunter2:@proxy"
ESCAPED = "hunter2%3A%40proxy"


def run(results: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CUPID_"))}
    full_env.update({"PYTHONPATH": str(ROOT), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "cupid.evaluation.run", *args, "--data_dir", str(SAMPLE),
         "--task", "inference", "--use_matcher", "--results_dir", str(results),
         "--log_file", str(results.parent / f"{results.name}.log"), "--n_workers", "2",
         "--max_retries", "1", "--timeout", "20"],
        env=full_env, cwd=ROOT, capture_output=True, text=True, timeout=300)


def assert_password_nowhere(done: subprocess.CompletedProcess, results: Path) -> None:
    written = [results.parent / f"{results.name}.log",
               *(path for path in results.rglob("*") if path.is_file())]
    names = {path.name for path in written}
    assert {"run.json", "results.json", f"{results.name}.log"} <= names
    assert any(path.name.endswith("__consistent.json") for path in written)  # instance files
    for secret in (PASSWORD, ESCAPED, "hunter2"):
        assert secret not in done.stdout and secret not in done.stderr
        for path in written:
            assert secret.encode() not in path.read_bytes(), path


@pytest.mark.slow
@pytest.mark.parametrize("given_in", ["arguments", "environment"])
def test_a_run_behind_basic_auth_sends_it_and_writes_no_password(tmp_path, given_in):
    with FakeLLMServer(responder=SampleEvaluator()) as proxy:
        proxy.serve_as_vllm({"model-a": 32768, "evaluator": 32768, PM: 32768})
        proxy.basic_auth = (USER, PASSWORD)
        url = f"http://{USER}:{ESCAPED}@127.0.0.1:{proxy.port}/v1"
        results = tmp_path / "res"
        if given_in == "arguments":
            done = run(results, "--model", f"vllm:model-a@{url}", "--evaluator",
                       f"vllm:evaluator@{url}", "--matcher_url", url)
        else:
            done = run(results, "--model", "local-server:model-a", "--evaluator",
                       "local-server:evaluator",
                       env={"CUPID_LOCAL_SERVER_URL": url, "CUPID_PREFMATCHER_URL": url})
        assert done.returncode == 0, done.stderr
        assert proxy.unauthorized == 0
        matched = [r for r in proxy.requests if r["model"] == PM]
        assert len(matched) == 12 and proxy.tokenize_calls >= 1
        assert {r["model"] for r in proxy.requests} == {"model-a", "evaluator", PM}
        assert len(proxy.model_list_requests) >= 3  # each model's server checked first
    record = json.loads((results / "model-a" / "results.json").read_text())
    assert record["counts"]["evaluated"] == 6 and record["counts"]["failed"] == 0
    assert_password_nowhere(done, results)
