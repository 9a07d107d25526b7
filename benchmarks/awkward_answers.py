"""The providers' awkward answers, one step each, through the real SDKs against the loopback
server: per shape, how it ended, how many requests it took, how long, and the tokens and cost
the harness counted against what the server billed.

    python benchmarks/awkward_answers.py                  # every shape, default retries
    python benchmarks/awkward_answers.py --max_retries 2  # faster where a shape is retried

The shapes are tests/support/awkward_shapes.py's (OpenAI refusal and content_filter
with and without content, Together's filter, Anthropic refusal with and without text and a
thinking-only message, Gemini SAFETY with and without parts and a blocked prompt). A step is
asked as the evaluation asks it (up to config.MAX_PARSE_RETRIES + 1 answers). Only 127.0.0.1
is used; no key is needed.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "support"), str(ROOT)]

from fake_llm_server import FakeLLMServer  # noqa: E402
from awkward_shapes import SHAPES  # noqa: E402

from cupid import config  # noqa: E402
from cupid.utils.models.reask import ask_until_usable  # noqa: E402
from cupid.utils.models.call_errors import ModelError  # noqa: E402
from model_state import reset_clients  # noqa: E402
from cupid.utils.models.registry import resolve_model  # noqa: E402
from cupid.utils.models.usage import estimate_cost  # noqa: E402


def one(shape: tuple, max_retries: int | None) -> dict:
    name, model_name, answer = shape[0], shape[1], shape[2]
    with FakeLLMServer(responder=lambda req: answer) as server:
        for var, url in (("OPENAI_BASE_URL", server.openai_base_url), ("ANTHROPIC_BASE_URL", server.base_url),
                         ("TOGETHER_BASE_URL", server.base_url), ("GOOGLE_GEMINI_BASE_URL", server.base_url)):
            os.environ[var] = url
        reset_clients()
        model = resolve_model(model_name, role="evaluated")
        if max_retries is not None:
            model.max_retries = max_retries
        started = time.perf_counter()
        try:
            value = ask_until_usable(model, "Be brief.", [{"role": "user", "content": "What does the user prefer?"}],
                                     lambda text: text, tries=config.MAX_PARSE_RETRIES + 1).value
            outcome = f"read: {value[:24]!r}"
        except (ModelError, ValueError) as exc:
            outcome = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"[:60]
        seconds = time.perf_counter() - started
        counted = model.usage.snapshot(model.name)
        billed = server.billed_totals()
    return {"shape": name, "requests": len(server.requests), "seconds": seconds, "outcome": outcome,
            "ending": next((e for e, n in (counted.get("endings") or {}).items() if n and e != "stop"), "stop"),
            "counted": (counted["prompt_tokens"], counted["completion_tokens"]),
            "billed": (billed["prompt_tokens"], billed["completion_tokens"]),
            "cost_counted": estimate_cost(model.name, *[counted[k] for k in ("prompt_tokens", "completion_tokens")]),
            "cost_billed": estimate_cost(model.name, billed["prompt_tokens"], billed["completion_tokens"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max_retries", type=int, default=None, help="the seam's retries (default: config's)")
    args = parser.parse_args(argv)
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TOGETHER_API_KEY", "GOOGLE_API_KEY"):
        os.environ[var] = "loopback-test-key"
    print(f"{'shape':38}{'ending':>9}{'asks':>6}{'s':>7}{'counted':>13}{'billed':>13}{'$ counted':>11}"
          f"{'$ billed':>10}  outcome")
    under = 0
    for shape in SHAPES:
        row = one(shape, args.max_retries)
        under += row["counted"] != row["billed"]
        cost = lambda v: "-" if v is None else f"{v:.6f}"  # noqa: E731
        print(f"{row['shape']:38}{row['ending']:>9}{row['requests']:>6}{row['seconds']:>7.2f}"
              f"{'%d+%d' % row['counted']:>13}{'%d+%d' % row['billed']:>13}{cost(row['cost_counted']):>11}"
              f"{cost(row['cost_billed']):>10}  {row['outcome']}")
    print(f"shapes whose counted tokens differ from the billed ones: {under} of {len(SHAPES)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
