"""Synthesis in batch mode against the loopback server's batch endpoints (real SDKs).

    python benchmarks/synthesis_batch_run.py --n_personas 8

Synthesizes N personas with the release's roles (--model claude-3-5-sonnet-20241022 writes
descriptions, factors and sessions, decomposes and simulates the user; the assistant
simulator is Together's Meta-Llama-3.1-8B-Instruct-Turbo), every answer scripted
(tests/support/synthesis_responder.py), three times, each in a fresh output directory:
  1. online: the estimated cost of each role (summary.json usage);
  2. --batch: the synthesizer's calls through Anthropic's Message Batches; prints its cost
     over the online one (expect 0.5x), the whole run's, and whether every data file is
     byte-identical to the online run's;
  3. --batch killed (SIGKILL) while its second round's batch is in progress, then run
     again: prints the requests submitted in all over the number a clean batch run submits
     (the resubmitted ones are the difference; expect 0) and whether the files are the same.
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
sys.path.insert(0, str(ROOT))
from fake_llm_server import FakeLLMServer  # noqa: E402
from synthesis_responder import ScriptedSynthesis  # noqa: E402

SYNTHESIZER = "claude-3-5-sonnet-20241022"
ASSISTANT = "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"


def command(out: Path, n_personas: int, workers: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "cupid.synthesis.run", "--output_dir", str(out), "--model", SYNTHESIZER,
            "--assistant_model", ASSISTANT, "--n_personas", str(n_personas),
            "--persona_seeds", "bundled", "--n_workers", str(workers), "--no_progress", *extra]


def environment(server: FakeLLMServer) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "CUPID_BATCH_POLL_INTERVAL": "0.2",
            "ANTHROPIC_API_KEY": "sk-bench", "ANTHROPIC_BASE_URL": server.base_url,
            "TOGETHER_API_KEY": "bench", "TOGETHER_BASE_URL": server.base_url}


def data_files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.json"))
            if p.name not in ("summary.json", "batches.json")}


def summary_of(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def cost(summary: dict, role: str | None = None) -> float:
    roles = [role] if role else list(summary["usage"])
    return sum(summary["usage"][r]["estimated_cost_usd"] or 0.0 for r in roles)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n_personas", type=int, default=8)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="synthesis_batch_") as tmp, \
            FakeLLMServer(responder=ScriptedSynthesis()) as server:
        tmp = Path(tmp)
        env = environment(server)
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "cwd": ROOT, "env": env}

        started = time.perf_counter()
        subprocess.run(command(tmp / "online", args.n_personas, args.workers), check=True, **quiet)
        online_wall = time.perf_counter() - started
        online = summary_of(tmp / "online")

        started = time.perf_counter()
        subprocess.run(command(tmp / "batch", args.n_personas, args.workers, "--batch"), check=True,
                       **quiet)
        batch_wall = time.perf_counter() - started
        batch = summary_of(tmp / "batch")
        clean_items, clean_batches = server.batch_items, len(server.batches)

        server.batch_delay = 2.0
        killed = tmp / "killed"
        proc = subprocess.Popen(command(killed, args.n_personas, args.workers, "--batch"), **quiet)
        state = killed / "batches.json"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if state.exists() and len(json.loads(state.read_text())["batches"]) >= 2:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before_kill = server.batch_items - clean_items
        server.batch_delay = 0.0
        subprocess.run(command(killed, args.n_personas, args.workers, "--batch"), check=True, **quiet)
        resumed_items = server.batch_items - clean_items
        resumed_batches = len(server.batches) - clean_batches
        online_files = data_files(tmp / "online")
        same_batch = data_files(tmp / "batch") == online_files
        same_resumed = data_files(killed) == online_files

    synth_o, synth_b = online["usage"]["synthesizer"], batch["usage"]["synthesizer"]
    print(f"{args.n_personas} personas, synthesizer {SYNTHESIZER}, assistant simulator {ASSISTANT}, "
          f"{online['counts']['instances']} instances")
    print(f"online run: synthesizer {synth_o['calls']} calls, ${cost(online, 'synthesizer'):.4f}; "
          f"whole run ${cost(online):.4f}; {online_wall:.1f}s")
    print(f"batch run:  synthesizer {synth_b['calls']} calls ({synth_b['batch_calls']} in batches) "
          f"= {clean_items} requests in {clean_batches} batches over {batch['batch']['rounds']} rounds, "
          f"${cost(batch, 'synthesizer'):.4f}; whole run ${cost(batch):.4f}; {batch_wall:.1f}s")
    print(f"synthesizer batch / online cost: "
          f"{cost(batch, 'synthesizer') / cost(online, 'synthesizer'):.3f}x (expect 0.5x); "
          f"whole run: {cost(batch) / cost(online):.3f}x")
    print(f"batch data files byte-identical to online: {same_batch}")
    print(f"killed run: {before_kill} requests submitted before SIGKILL; after the rerun "
          f"{resumed_items} submitted in {resumed_batches} batches in all, against {clean_items} "
          f"for a clean run: {resumed_items - clean_items} resubmitted")
    print(f"resumed data files byte-identical to online: {same_resumed}")


if __name__ == "__main__":
    main()
