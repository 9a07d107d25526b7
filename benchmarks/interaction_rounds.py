"""--task interaction against the loopback server on data/sample: rounds for `none` against
`default`, and the dry run's forecast against what was sent.

    python benchmarks/interaction_rounds.py [--max_rounds 4] [--data data/sample]

The evaluated model replies "<mark> reply N" (the mark says whether its first request showed
prior sessions) padded to 300 words; the scripted simulator ends an instance's dialogue at
round 1 + (the instance's position in the data) % 2 when the sessions were shown, and two
rounds later without them (an unsatisfied dialogue past the cap counts at the cap). So the
rounds and the rounds saved are known before the run; the script prints them beside the
measured ones with their persona-clustered intervals, and the dry run's input tokens against
the same estimator (utils/models/tokens.py) applied to the requests sent.

Measured on a shared 2-core machine (data/sample: 6 instances, 2 personas; --max_rounds 4):
none 3.50 rounds [3.00, 4.00], default 1.50 [1.00, 2.00], rounds saved +2.00 (paired n=6), each
as expected; with the dialogues ending where forecast, the dry run's input tokens 0.995-1.050
of those sent (docs/interaction.md, "Measured").
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT))
from fake_llm_server import FakeLLMServer  # noqa: E402

from cupid.evaluation import run as run_module  # noqa: E402
from cupid.evaluation.data import InstanceSource  # noqa: E402
from cupid.evaluation.dry_run import expected_rounds, typical_feedback, typical_response  # noqa: E402
from cupid.utils.models.tokens import estimate_tokens  # noqa: E402

MARK = {True: "WITH-HISTORY", False: "NO-HISTORY"}


def simulator_answer(ended: bool, score: int, message: str) -> str:
    return (f"#### Evaluation of AI Assistant's Response\n\n1. **Item**: assessed.\n\n#### Evaluation Score"
            f"\n\n{10 if ended else score}\n\n#### Continue or End?\n\n{'END' if ended else 'CONTINUE'}\n\n"
            f"#### Selected Checklist Items\n\n- 1. Item\n\n#### Thinking\n\nThinking.\n\n#### Your Message\n\n"
            f"{message}")


def run(common: list[str], setting: str, server, tmp: str) -> tuple[dict, dict, list[dict], int]:
    """The dry run's roles, the run's results.json, the requests it sent, its exit status."""
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        run_module.main([*common, "--setting", setting, "--dry_run", "--json"])
    forecast = json.loads(printed.getvalue().strip().splitlines()[-1])["runs"][0]["roles"]
    forecast = {r["role"]: r for r in forecast} if isinstance(forecast, list) else forecast
    before = len(server.requests)
    with contextlib.redirect_stdout(io.StringIO()):
        code = run_module.main([*common, "--setting", setting])
    sent = server.requests[before:]
    sub = "" if setting == "default" else setting
    results = json.loads(next((Path(tmp) / "bench-model" / sub).glob("interaction_*/results.json")).read_text())
    return forecast, results, sent, code


def print_tokens(forecast: dict, sent: list[dict]) -> None:
    for role, model in (("model", "bench-model"), ("simulator", "bench-sim")):
        calls = [q for q in sent if q["model"] == model]
        actual = sum(estimate_tokens(q["system"]) + sum(estimate_tokens(m["content"]) for m in q["messages"])
                     for q in calls)
        print(f"    {role:9} calls {len(calls):3} (forecast {forecast[role]['calls']:3}) · input tokens sent "
              f"{actual:7,} forecast {forecast[role]['input_tokens']:7,} (ratio {forecast[role]['input_tokens'] / actual:.3f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT / "data" / "sample"))
    parser.add_argument("--max_rounds", type=int, default=4)
    args = parser.parse_args()
    instances = list(InstanceSource(data_path=args.data))
    cap = args.max_rounds
    end = {i.current_contextual_preference: 1 + n % 2 for n, i in enumerate(instances)}
    feedback = {i.current_contextual_preference: typical_feedback(i) for i in instances}
    forecast_rounds = {i.current_contextual_preference: expected_rounds(i, cap) for i in instances}
    typical = {i.current_request: typical_response(i) for i in instances}
    as_forecast = False  # part 2: the dialogues end where the dry run forecasts them

    def responder(req: dict) -> str:
        messages = req["messages"]
        if "Your Persona Profile" in req["system"]:
            preference = next(p for p in end if f'"{p}"' in req["system"])
            replies = [m for m in messages if m["role"] == "user"]
            if as_forecast:
                ended = len(replies) == forecast_rounds[preference]
            else:
                shown = replies[-1]["content"].startswith(MARK[True])
                ended = len(replies) == end[preference] + (0 if shown else 2)
            return simulator_answer(ended, 3 + len(replies), feedback[preference])
        shown = "### Session 1" in messages[0]["content"]
        n = sum(m["role"] == "assistant" for m in messages) + 1
        request = next(r for r in typical if r in messages[0]["content"])
        return f"{MARK[shown]} reply {n}. {typical[request]}"

    expected = {s: sum(min(cap, e + (0 if s == "default" else 2)) for e in end.values()) / len(end)
                for s in ("default", "none")}
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(responder=responder) as server:
        url = server.openai_base_url
        common = ["--model", f"vllm:bench-model@{url}", "--simulator", f"vllm:bench-sim@{url}", "--task",
                  "interaction", "--data_dir", args.data, "--results_dir", tmp, "--max_rounds", str(cap), "--no_cache"]
        print(f"1. scripted rounds (cap {cap}): the simulator ends at 1 + position % 2 with the sessions shown, "
              f"two rounds later without")
        out = {}
        for setting in ("none", "default"):
            forecast, results, sent, code = run(common, setting, server, tmp)
            out[setting] = results
            r = results["rounds_to_satisfaction"]
            print(f"{setting:8} exit {code} · rounds to satisfaction {r['value']:.2f} [{r['low']:.2f}, {r['high']:.2f}] "
                  f"(expected {expected[setting]:.2f}; {r['censored']} at the cap) · satisfied by round "
                  + " ".join(f"{p['value']:.2f}" for p in results["satisfied_by_round"])
                  + f" · calls: model {sum(q['model'] == 'bench-model' for q in sent)}, "
                    f"simulator {sum(q['model'] == 'bench-sim' for q in sent)}")
        saved = out["default"]["rounds_saved_vs_none"]
        print(f"rounds saved vs none: {saved['difference']:+.2f} [{saved['low']:+.2f}, {saved['high']:+.2f}] "
              f"(paired n={saved['n']}; expected {expected['none'] - expected['default']:+.2f})")
    as_forecast = True
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(responder=responder) as server:
        url = server.openai_base_url
        common = ["--model", f"vllm:bench-model@{url}", "--simulator", f"vllm:bench-sim@{url}", "--task",
                  "interaction", "--data_dir", args.data, "--results_dir", tmp, "--max_rounds", str(cap), "--no_cache"]
        print("2. the dry run against the run, the dialogues ending where it forecasts them (replies and feedback "
              "as long as its stand-ins, the simulator's evaluation shorter)")
        for setting in ("none", "default"):
            forecast, results, sent, code = run(common, setting, server, tmp)
            print(f"{setting:8} exit {code} · rounds {results['rounds_to_satisfaction']['value']:.2f}")
            print_tokens(forecast, sent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
