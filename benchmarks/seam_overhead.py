"""Overhead of one call through the model seam, against the loopback fake server.

Times, call by call and interleaved (so drift hits all alike), the median latency of:
  (a) a raw ``httpx`` POST to /v1/chat/completions on a kept-alive connection, JSON decoded;
  (b) the ``openai`` SDK's ``chat.completions.create`` alone (no seam);
  (c) ``OpenAIModel.generate`` (the seam: request validation, retry loop, accounting, plus
      the SDK call).
(c) - (a) is what a pipeline pays per call over bare HTTP; (c) - (b) is the seam's own share.
Loopback timings are noisy on a busy machine, so the seam's own cost is also timed without
any I/O: (d) ``generate`` on a model whose ``complete`` returns a fixed answer.

    python benchmarks/seam_overhead.py [--calls 500] [--warmup 50]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]

from cupid.utils.models.model import Model
from cupid.utils.models.request import Completion, Request, Usage
from cupid.utils.models.openai_models import OpenAIModel  # noqa: E402
from fake_llm_server import FakeLLMServer  # noqa: E402

SYSTEM = "You are an evaluator."
MESSAGES = [{"role": "user", "content": "Does the response satisfy the preference? Answer yes or no."}]


class _FixedAnswer(Model):
    """The seam around a call that costs nothing."""

    def complete(self, request: Request) -> Completion:
        return Completion(text="yes", usage=Usage(14, 1))


def seam_only_cost(n: int) -> float:
    """Median seconds of generate() around a free complete()."""
    model = _FixedAnswer("fixed", temperature=0.0, max_tokens=16)
    times = []
    for _ in range(n):
        started = time.perf_counter()
        model.generate(SYSTEM, MESSAGES)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()

    import httpx
    import openai

    with FakeLLMServer(responder=lambda req: "yes") as server:
        raw = httpx.Client(base_url=server.openai_base_url, timeout=30,
                           headers={"Authorization": "Bearer bench"})
        sdk = openai.OpenAI(api_key="bench", base_url=server.openai_base_url, max_retries=0)
        model = OpenAIModel("gpt-4o-2024-11-20", base_url=server.openai_base_url, api_key="bench",
                            temperature=0.0, max_tokens=16, timeout=30)
        body = {"model": "gpt-4o-2024-11-20",
                "messages": [{"role": "system", "content": SYSTEM}, *MESSAGES],
                "temperature": 0.0, "max_tokens": 16}

        def call_raw() -> str:
            response = raw.post("/chat/completions", json=body)
            response.raise_for_status()
            return response.json()["choices"][0]["message"]["content"]

        def call_sdk() -> str:
            return sdk.chat.completions.create(timeout=30, **body).choices[0].message.content

        def call_seam() -> str:
            return model.generate(SYSTEM, MESSAGES).text

        calls = {"raw httpx POST": call_raw, "openai SDK alone": call_sdk,
                 "OpenAIModel.generate (seam)": call_seam}
        for fn in calls.values():
            for _ in range(args.warmup):
                assert fn() == "yes"
        timings: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(args.calls):
            for name, fn in calls.items():
                started = time.perf_counter()
                fn()
                timings[name].append(time.perf_counter() - started)
        raw.close()
        sdk.close()

    medians = {name: statistics.median(values) * 1e3 for name, values in timings.items()}
    print(f"{args.calls} calls each (after {args.warmup} warm-up), loopback server, median latency:")
    for name, value in medians.items():
        p90 = statistics.quantiles(timings[name], n=10)[-1] * 1e3
        print(f"  {name:<30} {value:7.3f} ms   (p90 {p90:.3f} ms)")
    raw_ms, sdk_ms, seam_ms = medians.values()
    print(f"overhead of the seam + SDK over raw httpx: {seam_ms - raw_ms:+.3f} ms per call")
    print(f"overhead of the seam alone over the SDK:   {seam_ms - sdk_ms:+.3f} ms per call")
    print(f"the seam's own cost, no I/O (median of {10 * args.calls} calls): "
          f"{seam_only_cost(10 * args.calls) * 1e6:.1f} µs per call")
    snap = model.usage.snapshot(model.name)
    print(f"seam accounting: {snap['calls']} calls, {snap['prompt_tokens']} prompt + "
          f"{snap['completion_tokens']} completion tokens")


if __name__ == "__main__":
    main()
