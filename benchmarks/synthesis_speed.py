"""How fast does synthesis run when every call takes a set latency?

Runs the whole pipeline for N personas against the loopback server (tests/support/fake_llm_server.py)
with scripted answers (tests/support/synthesis_responder.py) and compares the wall time with two lower
bounds:

* the critical path: the longest chain of dependent calls (one description batch, the
  factors, the sessions, one decomposer call, then the longest dialogue, whose messages
  are one call each) times the latency;
* the throughput bound: all calls times the latency, divided by the number of workers.

It also reports the mean measured call latency (the set latency plus the loopback HTTP
stack) and the worker utilization (time spent in calls / (wall time x workers)).

    python benchmarks/synthesis_speed.py --n_personas 8 --latency 0.3 --n_workers 16
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "tests" / "support"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from fake_llm_server import FakeLLMServer  # noqa: E402
from cupid.synthesis.pipeline import SynthesisConfig, run_synthesis  # noqa: E402
from synthesis_responder import ScriptedSynthesis  # noqa: E402
from cupid.utils.io import read_json  # noqa: E402


def serve(latency: float, max_rounds: int) -> None:
    """The child process: run the loopback server until stdin closes, then print how many
    requests it answered. In its own process, the server's CPU work (HTTP, JSON, the
    scripted answers) does not compete with the pipeline for the GIL."""
    with FakeLLMServer(responder=ScriptedSynthesis(max_rounds=max_rounds), latency=latency) as server:
        print(server.openai_base_url, flush=True)
        sys.stdin.read()
        print(len(server.requests), flush=True)


def measure(n_personas: int, latency: float, n_workers: int, max_rounds: int, out: Path) -> dict:
    child = subprocess.Popen([sys.executable, __file__, "--serve", "--latency", str(latency),
                              "--max_rounds", str(max_rounds)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url = child.stdout.readline().strip()
        # One unmeasured call first, so that importing the SDK is not counted.
        from cupid.utils.models.registry import resolve_model
        warm = FakeLLMServer(responder=lambda req: "ok").start()
        try:
            resolve_model(f"vllm:warm@{warm.openai_base_url}").chat("", [{"role": "user", "content": "hi"}])
        finally:
            warm.stop()
        cfg = SynthesisConfig(output_dir=out, model=f"vllm:synth@{url}", user_model=f"vllm:user@{url}",
                              assistant_model=f"vllm:assistant@{url}",
                              decomposer_model=f"vllm:decomposer@{url}", n_personas=n_personas,
                              n_workers=n_workers, persona_seeds="bundled", show_progress=False)
        started = time.perf_counter()
        summary = run_synthesis(cfg)
        wall = time.perf_counter() - started
    finally:
        remaining, _ = child.communicate("", timeout=30)
    n_calls = int(remaining.strip().splitlines()[-1])
    # Time spent waiting on calls, summed over threads (the server's latency plus HTTP).
    busy = sum(u["latency_total_s"] for u in summary["usage"].values())
    longest_dialogue = max(read_json(p)["n_turns"] - 1 for p in out.glob("personas/*/dialogues/*.json"))
    critical_calls = 4 + longest_dialogue  # description, factors, sessions, checklist, dialogue
    critical = critical_calls * latency
    throughput = n_calls * latency / n_workers
    return {
        "n_personas": n_personas, "latency_s": latency, "n_workers": n_workers,
        "instances": summary["counts"]["instances"], "failures": len(summary["failures"]),
        "calls": n_calls, "wall_s": round(wall, 2),
        "critical_path_calls": critical_calls, "critical_path_s": round(critical, 2),
        "throughput_bound_s": round(throughput, 2),
        "wall_over_best_bound": round(wall / max(critical, throughput), 2),
        "mean_call_latency_s": round(busy / n_calls, 3),
        "worker_utilization": round(busy / (wall * n_workers), 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n_personas", type=int, default=8)
    p.add_argument("--latency", type=float, default=0.3)
    p.add_argument("--n_workers", type=int, default=16)
    p.add_argument("--max_rounds", type=int, default=3,
                   help="the scripted user is satisfied after 1..max_rounds replies")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args.latency, args.max_rounds)
        return
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(args.n_personas, args.latency, args.n_workers, args.max_rounds, Path(tmp))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
