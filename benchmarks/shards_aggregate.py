"""Shards written to one results directory aggregate to the single run's metrics exactly.

    python benchmarks/shards_aggregate.py --n 60 --shards 4

Evaluates N instances (eval_throughput.py's rows, task both) once in one run, then as
``--shard 1/S`` ... ``--shard S/S`` into one shared directory (as machines sharing a file
system would); results.json aggregates every instance file in the directory, so after the
last shard it should hold the single run's metrics. Then runs without ``--shard`` over that
directory, which reads every finished instance back. Prints each shard's size, the calls
made by the shards against the single run's, whether the last shard's metrics equal the
single run's, the calls of the pass without --shard (expect 0), and its metrics.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from eval_throughput import make_rows, responder  # noqa: E402
from fake_llm_server import FakeLLMServer  # noqa: E402

METRIC_KEYS = ("inference", "inference_macro", "generation", "by_instance_type", "counts")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=60)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shards_") as tmp, \
            FakeLLMServer(responder=responder) as server:
        tmp = Path(tmp)
        data = tmp / "data.jsonl"
        data.write_text("\n".join(json.dumps(r) for r in make_rows(args.n)))
        url = server.openai_base_url

        def run(results: Path, *extra: str) -> int:
            before = len(server.requests)
            subprocess.run([sys.executable, "-m", "cupid.evaluation.run", "--model", f"vllm:bench-model@{url}",
                            "--evaluator", f"vllm:bench-evaluator@{url}", "--data", str(data),
                            "--results_dir", str(results), "--task", "both", "--n_workers",
                            str(args.workers), "--no_cache", *extra],
                           cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            return len(server.requests) - before

        single_calls = run(tmp / "single")
        single = json.loads((tmp / "single" / "bench-model" / "results.json").read_text())
        shard_calls, sizes = 0, []
        for i in range(1, args.shards + 1):
            shard_calls += run(tmp / "shared", "--shard", f"{i}/{args.shards}")
            shard = json.loads((tmp / "shared" / "bench-model" / "results.json").read_text())
            sizes.append(shard["this_invocation"]["instances"])
        last_shard = json.loads((tmp / "shared" / "bench-model" / "results.json").read_text())
        aggregate_calls = run(tmp / "shared")
        combined = json.loads((tmp / "shared" / "bench-model" / "results.json").read_text())
    same = all(single.get(k) == combined.get(k) for k in METRIC_KEYS)
    keys = ("inference", "inference_macro", "generation", "by_instance_type")
    same_last = all(single.get(k) == last_shard.get(k) for k in keys)
    print(f"{args.n} instances, task both, {args.shards} shards of sizes {sizes} (sum {sum(sizes)})")
    print(f"calls: single run {single_calls}, shards together {shard_calls}, "
          f"aggregating pass {aggregate_calls}")
    print(f"the last shard's results.json (every instance file in the directory) has the single "
          f"run's metrics: {same_last}")
    print(f"a run without --shard over the directory: metrics identical to the single run: {same} "
          f"(F1 {combined['inference']['f1']:.6f} vs {single['inference']['f1']:.6f}, judge "
          f"{combined['generation']['average_score']} vs {single['generation']['average_score']})")


if __name__ == "__main__":
    main()
