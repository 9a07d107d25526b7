"""Batch mode against the loopback server's batch endpoints (real openai/anthropic SDKs).

    python benchmarks/batch_run.py --n 30

Evaluates N instances (eval_throughput.py's rows, task both) with claude-3-5-sonnet as the
evaluated model and gpt-4o-2024-11-20 as the evaluator, three times, each in a fresh
results directory:
  1. online: the estimated cost of every recorded step (results.json usage.recorded);
  2. --batch: the same, priced at the batch price; prints the cost ratio (expect 0.5x) and
     whether the metrics equal the online run's;
  3. --batch killed (SIGKILL) while its first batch is in progress, then run again: prints
     the requests submitted in all over the number a clean batch run submits (the
     resubmitted ones are the difference; expect 0) and whether the metrics are the same.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
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

MODEL, EVALUATOR = "claude-3-5-sonnet-20241022", "gpt-4o-2024-11-20"
METRIC_KEYS = ("inference", "inference_macro", "generation", "by_instance_type", "counts")


def command(data: Path, results: Path, workers: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "cupid.evaluation.run", "--model", MODEL, "--evaluator", EVALUATOR,
            "--data", str(data), "--results_dir", str(results), "--task", "both",
            "--n_workers", str(workers), *extra]


def environment(server: FakeLLMServer) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "CUPID_BATCH_POLL_INTERVAL": "0.2",
            "OPENAI_API_KEY": "sk-bench", "OPENAI_BASE_URL": server.openai_base_url,
            "ANTHROPIC_API_KEY": "sk-bench", "ANTHROPIC_BASE_URL": server.base_url}


def results_of(results: Path) -> dict:
    return json.loads((results / MODEL / "results.json").read_text())


def cost(results: dict) -> float:
    return sum(entry["estimated_cost_usd"] for entry in results["usage"]["recorded"].values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="batch_run_") as tmp, \
            FakeLLMServer(responder=responder) as server:
        tmp = Path(tmp)
        data = tmp / "data.jsonl"
        data.write_text("\n".join(json.dumps(r) for r in make_rows(args.n)))
        env = environment(server)
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "cwd": ROOT, "env": env}

        subprocess.run(command(data, tmp / "online", args.workers), check=False, **quiet)
        online = results_of(tmp / "online")
        online_calls = len(server.requests)

        started = time.perf_counter()
        subprocess.run(command(data, tmp / "batch", args.workers, "--batch"), check=True, **quiet)
        batch_wall = time.perf_counter() - started
        batch = results_of(tmp / "batch")
        clean_items = server.batch_items
        clean_batches = len(server.batches)

        server.batch_delay = 2.0
        proc = subprocess.Popen(command(data, tmp / "killed", args.workers, "--batch"), **quiet)
        state = tmp / "killed" / MODEL / "batches.json"
        deadline = time.monotonic() + 60
        while not state.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        submitted_before_kill = server.batch_items - clean_items
        server.batch_delay = 0.0
        subprocess.run(command(data, tmp / "killed", args.workers, "--batch"), check=True, **quiet)
        resumed = results_of(tmp / "killed")
        resumed_items = server.batch_items - clean_items
        resumed_batches = len(server.batches) - clean_batches

    same = all(online.get(k) == batch.get(k) for k in METRIC_KEYS)
    print(f"{args.n} instances, task both, model {MODEL}, evaluator {EVALUATOR}")
    print(f"online run: {online_calls} calls, estimated cost ${cost(online):.4f}, "
          f"{online['counts']['evaluated']} evaluated, {online['counts']['failed']} failed")
    print(f"batch run:  {clean_items} requests in {clean_batches} batches, {batch_wall:.1f}s, "
          f"estimated cost ${cost(batch):.4f}")
    print(f"batch / online cost: {cost(batch) / cost(online):.3f}x (expect 0.5x)")
    print(f"batch metrics identical to online: {same}")
    print(f"killed run: {submitted_before_kill} requests submitted before SIGKILL; after the rerun "
          f"{resumed_items} submitted in {resumed_batches} batches in all, against {clean_items} "
          f"for a clean run: {resumed_items - clean_items} resubmitted")
    print(f"resumed metrics identical to online: "
          f"{all(online.get(k) == resumed.get(k) for k in METRIC_KEYS)}")


if __name__ == "__main__":
    main()
