"""Throughput and memory of the evaluation pipeline against the loopback server.

    python benchmarks/eval_throughput.py --n 300 --latency 0.3 --workers 32
    python benchmarks/eval_throughput.py --n 100 300 600 --latency 0.3 --workers 32

For each N: generates N instances of realistic size (8 sessions, ~8k tokens of history),
runs ``python -m evaluation.run --task both`` in a child process against a loopback server
that answers every call after ``latency`` seconds, and prints the wall time, the number of
calls, the ideal time (calls × latency / workers) and their ratio, and the child's peak RSS.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))
from fake_llm_server import FakeLLMServer  # noqa: E402

ID = re.compile(r"\[\[case (\d+)\]\]")
FILLER = ("Could you restructure the plan so each phase lists its owner, the deadline and the "
          "risk it carries, and keep the language plain enough for the volunteers? ")


def make_rows(n: int) -> list[dict]:
    rows = []
    for i in range(n):
        sessions = [{
            "context_factor": f"Factor {s}",
            "contextual_preference": f"Preference {s} of case {i}.",
            "dialogue": [{"role": "user" if t % 2 == 0 else "assistant",
                          "content": (FILLER * 3)[: 520 + 40 * t]} for t in range(7)],
        } for s in range(8)]
        rows.append({"persona_id": f"bench-{i // 3}", "instance_type": ("consistent", "contrastive", "changing")[i % 3],
                     "current_request": f"Please draft the schedule. [[case {i}]]",
                     "current_context_factor": "Factor 0",
                     "current_contextual_preference": f"Preference 0 of case {i}.",
                     "current_checklist": ["Does the response name owners?", "Does it give deadlines?",
                                           "Is the language plain?"],
                     "prior_interactions": sessions})
    return rows


def responder(req: dict) -> str:
    user = req["messages"][-1]["content"]
    if user.startswith("**Preferences**") or "Decompose the preference" in user:
        return '```json\n{"checklist": ["Does the response name owners?", "Is it short?"]}\n```'
    if "#### Checklist" in user:
        block = re.search(r"#### Checklist\s*\n+```\n(.*?)\n```", user, re.S) or \
            re.search(r"#### Checklist\s*\n+(.*?)(?=\n+#### |\Z)", user, re.S)
        entries = [re.sub(r"^\d+\.\s*", "", e) for e in block.group(1).strip().splitlines() if e.strip()]
        results = [{"index": k, "entry": e, "label": "Fully Covered" if k % 2 else "Partially Covered"}
                   for k, e in enumerate(entries, start=1)]
        return "```json\n" + json.dumps({"results": results}) + "\n```"
    if "### AI Assistant's Response" in user:
        return "### Evaluation of AI Assistant's Response\n1. fine\n\n### Evaluation Score\n7"
    case = ID.search(user)
    if "## Current Interaction" in user:
        return f"### Analysis\nok\n\n### Most Likely Preferences\nThe user wants owners named (case {case.group(1)})."
    return f"Here is the schedule for case {case.group(1) if case else '?'}."


def _high_water_kb(pid: int) -> int:
    """The child's own peak RSS (VmHWM) so far. Not getrusage's ru_maxrss: on Linux that
    carries over the parent's RSS at fork, and this parent holds the N generated rows."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return 0  # the child has just exited; the caller keeps its last reading
    return 0


def run_once(n: int, latency: float, workers: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(responder=responder, latency=latency) as server:
        data = Path(tmp) / "data.jsonl"
        data.write_text("\n".join(json.dumps(r) for r in make_rows(n)))
        url = server.openai_base_url
        cmd = [sys.executable, "-m", "cupid.evaluation.run", "--model", f"vllm:bench-model@{url}",
               "--evaluator", f"vllm:bench-evaluator@{url}", "--data", str(data),
               "--results_dir", str(Path(tmp) / "results"), "--task", "both",
               "--n_workers", str(workers), "--no_cache"]
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        peak_kb = 0
        while proc.poll() is None:
            peak_kb = max(peak_kb, _high_water_kb(proc.pid))
            time.sleep(0.05)
        wall = time.perf_counter() - started
        results = json.loads((Path(tmp) / "results" / "bench-model" / "results.json").read_text())
        calls = len(server.requests)
        ideal = calls * latency / workers
        return {"n": n, "wall_s": wall, "calls": calls, "ideal_s": ideal, "ratio": wall / ideal,
                "peak_rss_mb": peak_kb / 1024, "failed": results["counts"]["failed"],
                "evaluated": results["counts"]["evaluated"]}


def python_heap(n: int, workers: int) -> tuple[float, float]:
    """Run in this process under tracemalloc (no latency) and return the Python heap's
    (current, peak) in MB after the run: what the pipeline itself keeps, without the
    allocator's retained pages that RSS also counts."""
    import tracemalloc

    sys.path.insert(0, str(ROOT))
    from cupid.evaluation import run

    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(responder=responder) as server:
        server._record = lambda req: None  # the server shares the process: keep its log out
        url = server.openai_base_url

        def write_data(size: int, name: str) -> None:
            (Path(tmp) / f"{name}.jsonl").write_text("\n".join(json.dumps(r) for r in make_rows(size)))

        def evaluate(name: str) -> None:
            data = Path(tmp) / f"{name}.jsonl"
            with open(os.devnull, "w") as sink:
                stdout, sys.stdout = sys.stdout, sink
                try:
                    run.main(["--model", f"vllm:bench-model@{url}", "--evaluator", f"vllm:bench-evaluator@{url}",
                              "--data", str(data), "--results_dir", str(Path(tmp) / name),
                              "--task", "both", "--n_workers", str(workers), "--no_cache"])
                finally:
                    sys.stdout = stdout

        write_data(2 * workers, "warmup")
        write_data(n, "measured")  # the benchmark's own data generation stays untraced
        evaluate("warmup")  # imports, clients and thread pools, untraced
        tracemalloc.start(1)
        evaluate("measured")
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return current / 1e6, peak / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs="+", default=[300])
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--python_heap", action="store_true",
                        help="instead: the Python heap's peak per N, in process, under tracemalloc")
    args = parser.parse_args()
    if args.python_heap:
        print(f"{'N':>6}{'heap now MB':>13}{'heap peak MB':>14}")
        for n in args.n:
            current, peak = python_heap(n, args.workers)
            print(f"{n:>6}{current:>13.1f}{peak:>14.1f}")
        return
    print(f"latency {args.latency}s, {args.workers} workers, task both (6 calls per instance)")
    print(f"{'N':>6}{'wall s':>9}{'calls':>7}{'ideal s':>9}{'ratio':>7}{'peak RSS MB':>13}{'evaluated':>11}")
    for n in args.n:
        r = run_once(n, args.latency, args.workers)
        print(f"{r['n']:>6}{r['wall_s']:>9.1f}{r['calls']:>7}{r['ideal_s']:>9.1f}{r['ratio']:>7.2f}"
              f"{r['peak_rss_mb']:>13.0f}{r['evaluated']:>11}")


if __name__ == "__main__":
    main()
