"""The paper's cheap path (``--task inference --use_matcher``) on the shipped sample, against
a loopback PrefMatcher server that validates as vLLM does, at two served contexts.

    python benchmarks/prefmatcher_preflight.py
    python benchmarks/prefmatcher_preflight.py --contexts 8192 16384 32768

For each ``max_model_len``: runs ``python -m evaluation.run`` in a child process (GPT models
on a second loopback server) and prints its exit status, wall time (interpreter start
included), the chat requests each server received, and the last line of its stderr. At a
context too small for the release's requests (prompt + max_tokens 8192) the run should stop
in the pre-flight, before any request to either server.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT))
from fake_llm_server import FakeLLMServer  # noqa: E402
from sample_results import SampleEvaluator  # noqa: E402

from cupid import config  # noqa: E402


def chats(server: FakeLLMServer) -> int:
    return sum(r["path"].endswith("/chat/completions") for r in server.requests)


def run_once(max_model_len: int, results: Path) -> None:
    with FakeLLMServer(responder=SampleEvaluator()) as hosted, \
            FakeLLMServer(responder=SampleEvaluator()) as matcher:
        matcher.serve_as_vllm({config.PREFMATCHER_MODEL: max_model_len})
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CUPID_"))}
        env.update(PYTHONPATH=str(ROOT), OPENAI_API_KEY="sk-bench",
                   OPENAI_BASE_URL=hosted.openai_base_url)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "cupid.evaluation.run", "--model", "gpt-4.1-nano-2025-04-14",
             "--evaluator", "gpt-4o-2024-11-20", "--data_dir", str(ROOT / "data" / "sample"),
             "--task", "inference", "--use_matcher", "--matcher_url", matcher.openai_base_url,
             "--results_dir", str(results), "--n_workers", "2"],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
        wall = time.perf_counter() - started
        last = (done.stderr.strip().splitlines() or [""])[-1]
        print(f"max_model_len {max_model_len}: exit {done.returncode} in {wall:.2f} s; chat "
              f"requests: hosted {chats(hosted)}, matcher {chats(matcher)}")
        print(f"    {last[:400]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contexts", type=int, nargs="+", default=[8192, 32768])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for i, length in enumerate(args.contexts):
            run_once(length, Path(tmp) / f"run{i}")


if __name__ == "__main__":
    main()
