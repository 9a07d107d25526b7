"""Today's OpenAI models beside the paper's, against a loopback server that refuses what
OpenAI documents for reasoning models (max_tokens, a temperature other than 1).

    python benchmarks/today_models.py --n 60

Evaluates N scripted instances (task both, real openai SDK) three times, each in a fresh
results directory: gpt-4.1-nano + gpt-4o (the paper's), gpt-5-mini + gpt-5, and two names
no rule knows (gpt-7-preview + gpt-7-judge) that the server treats as reasoning models.
Prints per run the exit status, requests sent, requests refused with a 400, the metrics
and the reasoning tokens counted. Expect the same metrics on every line, 0 refusals for the
gpt-5 pair and 3 for the unknown pair (max_tokens and temperature of the evaluated model,
temperature of the evaluator: once each, however many calls).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]
from cupid_responder import CupidResponder, InstancePlan, make_row  # noqa: E402
from fake_llm_server import FakeLLMServer  # noqa: E402

PAIRS = (("gpt-4.1-nano-2025-04-14", "gpt-4o-2024-11-20"),
         ("gpt-5-mini-2025-08-07", "gpt-5-2025-08-07"),
         ("gpt-7-preview", "gpt-7-judge"))


def make_plans(n: int) -> list[InstancePlan]:
    return [InstancePlan(request=f"Request number {i} for the project Alpha{i}.",
                         truth=f"Truth {i} preference text.",
                         truth_checklist=[f"Check {i} a?", f"Check {i} b?"],
                         inferred=f"Inferred {i} preference text.",
                         inferred_checklist=[f"Inferred check {i}?"] * (1 + i % 2),
                         precision_labels=["Fully Covered", "Partially Covered"][: 1 + i % 2],
                         recall_labels=["Fully Covered", "Not Covered"], judge_score=i % 10 + 1)
            for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=60)
    args = parser.parse_args()
    plans = make_plans(args.n)
    tmp = Path(tempfile.mkdtemp())
    data = tmp / "data.jsonl"
    data.write_text("".join(json.dumps(make_row(f"persona-{i}", "consistent" if i % 2 else "contrastive",
                                                 p)) + "\n" for i, p in enumerate(plans)))
    server = FakeLLMServer(responder=CupidResponder(plans)).start()
    server.reasoning_tokens = 40
    server.reasoning_models = {"gpt-7-preview", "gpt-7-judge"}
    os.environ.update(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.openai_base_url)
    from cupid.evaluation import run as run_module

    try:
        for i, (model, evaluator) in enumerate(PAIRS):
            sent, refused = len(server.requests), len(server.refused)
            started = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                code = run_module.main(["--model", model, "--evaluator", evaluator, "--data", str(data),
                                        "--results_dir", str(tmp / f"res{i}"), "--task", "both",
                                        "--n_workers", "4", "--max_retries", "1", "--timeout", "10"])
            line = {"model": model, "evaluator": evaluator, "exit": code,
                    "requests": len(server.requests) - sent, "refused_400": len(server.refused) - refused,
                    "wall_s": round(time.perf_counter() - started, 1)}
            results = tmp / f"res{i}" / model / "results.json"
            if results.exists():
                r = json.loads(results.read_text())
                line.update(P=r["inference"]["precision"], R=r["inference"]["recall"],
                            F1=r["inference"]["f1"], judge=r["generation"]["average_score"],
                            failed=r["counts"]["failed"],
                            reasoning_tokens=r["usage"]["this_invocation"]["model"].get("reasoning_tokens"))
            print(json.dumps(line), flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
