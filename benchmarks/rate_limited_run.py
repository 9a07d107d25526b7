"""A run under a tokens-per-minute limit: time against the limit's ideal, share of 429s,
and metrics against an unlimited run.

    python benchmarks/rate_limited_run.py --n 60 --workers 32 --seconds 30

Runs ``python -m evaluation.run --task both`` twice in a child process against the
loopback server (instances of realistic size from eval_throughput.py; the evaluated model
and the evaluator are both served by the same server with the same key, so they share one
limiter): first unlimited, which measures the run's tokens T; then against a server whose
token bucket refills at T / SECONDS tokens per second (a bucket of WINDOW seconds' worth,
stated in OpenAI's ``x-ratelimit-*`` headers; 429 with ``retry-after`` when empty). Prints
the limited run's wall time over the ideal T ÷ rate, the share of its requests answered 429,
and whether its results.json metrics equal the unlimited run's.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from eval_throughput import make_rows, responder  # noqa: E402
from fake_llm_server import FakeLLMServer  # noqa: E402

METRIC_KEYS = ("inference", "inference_macro", "generation", "by_instance_type", "counts")


def run(data: Path, out: Path, workers: int, latency: float, token_limit: float,
        token_window: float) -> dict:
    with FakeLLMServer(responder=responder, latency=latency, token_limit=int(token_limit),
                       token_window=token_window) as server:
        url = server.openai_base_url
        cmd = [sys.executable, "-m", "cupid.evaluation.run", "--model", f"vllm:bench-model@{url}",
               "--evaluator", f"vllm:bench-evaluator@{url}", "--data", str(data),
               "--results_dir", str(out), "--task", "both", "--n_workers", str(workers),
               "--no_cache"]
        started = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        wall = time.perf_counter() - started
        results = json.loads((out / "bench-model" / "results.json").read_text())
        return {"wall_s": wall, "requests": len(server.requests), "rate_limited": server.rate_limited,
                "tokens": server.charged_tokens, "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=60, help="instances")
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per answer")
    parser.add_argument("--seconds", type=float, default=30.0,
                        help="the limited run's ideal time: the rate is the run's tokens / this")
    parser.add_argument("--window", type=float, default=2.0,
                        help="the bucket holds this many seconds of the rate (its burst)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rate_limited_") as tmp:
        data = Path(tmp) / "data.jsonl"
        data.write_text("\n".join(json.dumps(r) for r in make_rows(args.n)))
        free = run(data, Path(tmp) / "unlimited", args.workers, args.latency, 1e12, 60.0)
        rate = free["tokens"] / args.seconds
        limited = run(data, Path(tmp) / "limited", args.workers, args.latency,
                      rate * args.window, args.window)
    ideal = limited["tokens"] / rate
    same = all(free["results"].get(k) == limited["results"].get(k) for k in METRIC_KEYS)
    share = limited["rate_limited"] / max(1, limited["requests"])
    print(f"{args.n} instances, task both, {args.workers} workers, latency {args.latency}s")
    print(f"unlimited run: {free['wall_s']:.1f}s, {free['requests']} requests, {free['tokens']} tokens")
    print(f"limit: {rate * 60:,.0f} tokens/min ({rate:,.0f}/s), bucket {rate * args.window:,.0f} tokens")
    print(f"limited run:   {limited['wall_s']:.1f}s, {limited['requests']} requests, "
          f"{limited['tokens']} tokens, {limited['rate_limited']} answered 429")
    print(f"time ratio vs ideal (tokens / rate = {ideal:.1f}s): {limited['wall_s'] / ideal:.3f}x "
          f"(target <= 1.1x)")
    print(f"429 share: {100 * share:.1f}% (target <= 5%)")
    print(f"metrics identical to the unlimited run: {same}")
    evaluated = limited["results"]["counts"]
    print(f"limited run counts: evaluated {evaluated['evaluated']}, failed {evaluated['failed']}")


if __name__ == "__main__":
    main()
