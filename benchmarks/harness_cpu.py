"""CPU the harness spends per model call: ``evaluate()`` on N synthetic instances of realistic
size (8 sessions, ~8k tokens of history; benchmarks/eval_throughput.py's), task both, with
a model and an evaluator that answer at once in process, so every CPU second is the harness's
(rendering, the re-ask loop, parsing, the instance files' atomic writes, aggregation).

    python benchmarks/harness_cpu.py [--n 60] [--workers 4]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_throughput import make_rows  # noqa: E402

from cupid.evaluation import evaluate  # noqa: E402
from cupid.utils.models import Model  # noqa: E402


class Instant(Model):
    """Answers each step well enough, at once; counts its calls."""

    calls = 0

    def __call__(self, system_prompt: str, user_prompt: str) -> str:
        type(self).calls += 1
        text = system_prompt + user_prompt
        if "Most Likely Preference" in text:
            return "### Analysis\n\nThe user wants structure.\n\n### Most Likely Preference\n\nPhases with owners."
        if "Evaluation Score" in text:
            return "### Evaluation Label\n\nGood\n\n### Evaluation Score\n\n7"
        if "#### Checklist" in user_prompt:
            entries = re.findall(r"^\d+\. ", user_prompt.rsplit("#### Checklist", 1)[1], re.M)
            return json.dumps({"results": [{"index": i, "entry": "x", "label": "Fully Covered"}
                                           for i in range(1, len(entries) + 1)]})
        if "preference" in user_prompt.lower() and "checklist" in text.lower():
            return '```json\n{"checklist": ["Does it list owners?", "Does it give deadlines?"]}\n```'
        return "Here is the plan, phase by phase."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=60)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        data = Path(work) / "data.jsonl"
        data.write_text("".join(json.dumps(row) + "\n" for row in make_rows(args.n)))
        cpu, wall = time.process_time(), time.perf_counter()
        run = evaluate(Instant("instant"), evaluator=Instant("instant-judge"), data=str(data), task="both",
                       results_dir=Path(work) / "results", n_workers=args.workers, no_cache=True)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(f"{args.n} instances, {Instant.calls} calls, {run.results['counts']['evaluated']} evaluated: "
          f"{1000 * cpu / Instant.calls:.2f} ms CPU a call ({cpu:.2f} s CPU, {wall:.2f} s wall)")


if __name__ == "__main__":
    main()
