"""How close ``--dry_run``'s forecast is to what the run then sends.

    python benchmarks/dry_run_accuracy.py                      # data/sample, 4 configurations
    python benchmarks/dry_run_accuracy.py --synthetic 60       # 60 generated instances instead

For each configuration (default setting, task both; summary setting, task both; oracle
setting; PrefMatcher matching) it runs ``python -m evaluation.run ... --dry_run --json``,
then the same run against the loopback server (tests/support/fake_llm_server.py), whose scripted
answers have lengths chosen as realistic, drawn at random per request (an
analysis of 80-250 words, an inferred preference of 15-40 words, checklists of 2-4 entries,
responses of 150-450 words, a judge's evaluation of 30-60 words per entry, session summaries
of 2-4 context and 2-4 preference bullets of 12-25 words). Per role it prints the estimated
input tokens, the same estimator (utils/models/tokens.py) applied to the texts the run
actually sent, their ratio (the target is 0.85-1.15), the server's own count
(whitespace-separated words, what its usage reports), and the estimated output tokens
against the same estimator on the scripted answers: those rest on the stated answer-length
assumptions and are shown for information.

Measured on a shared 2-core machine: ``python benchmarks/dry_run_accuracy.py`` (data/sample,
6 instances) gave input est/sent between 0.947 and 1.000 per role (0.971 over all
configurations); ``--synthetic 60`` between 0.982 and 1.000 (0.995). The data-only steps
(infer, generate, summarize) are rendered exactly: ratio 1.000. Output estimates were
0.6-1.1 of the scripted answers. Both sides' lengths are assumptions: before the dry run
assumed a response of at least 400 tokens and summaries of 3+3 bullets, data/sample gave
0.82 (summary setting, model) and 0.90 (evaluator); real answers decide the real ratio.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import re
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "tests" / "support"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from cupid_responder import CupidResponder, _section  # noqa: E402
from fake_llm_server import FakeLLMServer, count_tokens  # noqa: E402
from cupid.utils.models.tokens import estimate_tokens  # noqa: E402

SAMPLE = ROOT / "data" / "sample"
CONFIGURATIONS = {
    "default, both": ["--task", "both"],
    "summary, both": ["--task", "both", "--setting", "summary"],
    "oracle, inference": ["--setting", "oracle"],
    "prefmatcher, inference": ["--use_matcher"],
}
WORDS = ("the user prefers concise structured answers with clear headings and examples that "
         "reflect their workflow deadlines budget team context research project report draft "
         "meeting schedule priorities constraints stakeholders quality detail evidence sources "
         "format tone brief thorough practical steps owner timeline review feedback").split()
LABELS = ("Fully Covered", "Partially Covered", "Not Covered")


class RealisticResponder:
    """Answers every evaluation step with lengths drawn from ranges a capable model writes."""

    def __init__(self, seed: int = 0) -> None:
        self.kinds = CupidResponder(plans=[])
        self.seed = seed
        self.answer_tokens: Counter = Counter()  # model -> estimate_tokens of its answers
        self._lock = threading.Lock()

    def words(self, rng: random.Random, low: int, high: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))).capitalize() + "."

    def __call__(self, req: dict) -> str:
        answer = self.answer(req)
        with self._lock:
            self.answer_tokens[req["model"]] += estimate_tokens(answer)
        return answer

    def answer(self, req: dict) -> str:
        kind = self.kinds.kind(req)
        user = req["messages"][-1]["content"]
        rng = random.Random(f"{self.seed}:{req['model']}:{user}")
        if kind == "infer":
            return (f"### Analysis\n\n{self.words(rng, 80, 250)}\n\n### Most Likely Preference\n\n"
                    f"{self.words(rng, 15, 40)}")
        if kind in ("generate", "generate_oracle_preference"):
            return self.words(rng, 150, 450)
        if kind == "decompose":
            entries = [f"Does the response {self.words(rng, 6, 14)[:-1].lower()}?"
                       for _ in range(rng.randint(2, 4))]
            return "```json\n" + json.dumps({"checklist": entries}, indent=2) + "\n```"
        if kind in ("match", "match_prefmatcher"):
            entries = [re.sub(r"^\d+\.\s*", "", line) for line in
                       _section(user, "#### Checklist").splitlines() if line.strip()]
            results = [{"index": i, "entry": e, "label": rng.choice(LABELS)}
                       for i, e in enumerate(entries, start=1)]
            return "```json\n" + json.dumps({"results": results}, indent=2) + "\n```"
        if kind == "judge":
            n = max(1, user.split("### AI Assistant's Response")[0].count("\n- "))
            lines = "\n".join(f"{i}. **Item {i}:** {self.words(rng, 30, 60)}" for i in range(1, n + 1))
            return (f"### Evaluation of AI Assistant's Response\n{lines}\n\n"
                    f"### Evaluation Score\n**{rng.randint(1, 10)}/10**")
        if kind == "summarize":
            return "```json\n" + json.dumps({"summaries": [{
                "session_id": 1, "analysis": self.words(rng, 30, 80),
                "context": [self.words(rng, 12, 25) for _ in range(rng.randint(2, 4))],
                "preferences": [self.words(rng, 12, 25) for _ in range(rng.randint(2, 4))]}]},
                indent=2) + "\n```"
        raise AssertionError(kind)


def synthetic_rows(n: int, seed: int = 0) -> list[dict]:
    """``n`` instances in the dataset's shape (8 sessions of 3-7 turns) with varied lengths."""
    rng = random.Random(seed)

    def text(low: int, high: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))).capitalize() + "."

    rows = []
    for i in range(n):
        preferences = [text(15, 40) for _ in range(4)]
        sessions = []
        for s in range(8):
            turns = rng.choice((3, 5, 7))
            sessions.append({
                "context_factor": f"Factor {s % 4}: {text(3, 8)}",
                "contextual_preference": preferences[s % 4],
                "dialogue": [{"role": "user" if t % 2 == 0 else "assistant",
                              "content": text(20, 120) if t % 2 == 0 else text(100, 400)}
                             for t in range(turns)]})
        rows.append({"instance_id": f"syn-{i:04d}", "persona_id": f"p{i // 3}",
                     "instance_type": ("consistent", "contrastive", "changing")[i % 3],
                     "current_request": f"{text(10, 40)} [case {i}]",
                     "current_context_factor": sessions[0]["context_factor"],
                     "current_contextual_preference": preferences[0],
                     "current_checklist": [f"Does the response {text(6, 14)[:-1].lower()}?"
                                           for _ in range(rng.randint(2, 4))],
                     "prior_interactions": sessions})
    return rows


def run_cli(argv: list[str]) -> tuple[int, str]:
    from cupid.evaluation import run as run_module

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = run_module.main(argv)
    return code, out.getvalue()


def measure(name: str, extra: list[str], data_args: list[str], tmp: Path) -> list[dict]:
    responder = RealisticResponder()
    with FakeLLMServer(responder=responder) as server:
        url = server.openai_base_url
        argv = ["--model", f"vllm:bench-model@{url}", "--evaluator", f"vllm:bench-evaluator@{url}",
                "--matcher_url", url, *data_args, "--results_dir", str(tmp / re.sub(r"\W+", "_", name)),
                "--n_workers", "2", "--no_cache", *extra]
        code, out = run_cli([*argv, "--dry_run", "--json"])
        if code != 0 or server.requests:
            raise SystemExit(f"{name}: the dry run failed ({code}) or sent {len(server.requests)} requests")
        forecast = json.loads(out.strip().splitlines()[-1])
        code, _ = run_cli(argv)
        if code != 0 or server.responder_errors:
            raise SystemExit(f"{name}: the real run failed ({code}): {server.responder_errors[:1]}")
        sent: dict[str, dict[str, int]] = {}
        for req in server.requests:
            if not req["messages"]:
                continue  # the models route of the pre-flight probe
            role = {"bench-model": "model", "bench-evaluator": "evaluator"}.get(req["model"], "matcher")
            entry = sent.setdefault(role, {"calls": 0, "input": 0, "words": 0})
            entry["calls"] += 1
            entry["input"] += estimate_tokens(req["system"]) + sum(estimate_tokens(m["content"])
                                                                   for m in req["messages"])
            entry["words"] += count_tokens(req["system"]) + sum(count_tokens(m["content"])
                                                                for m in req["messages"])
        names = {"bench-model": "model", "bench-evaluator": "evaluator"}
        answered = {names.get(model, "matcher"): n for model, n in responder.answer_tokens.items()}
    rows = []
    for role, estimate in forecast["roles"].items():
        real = sent.get(role, {"calls": 0, "input": 0, "words": 0})
        rows.append({"configuration": name, "role": role, "calls_est": estimate["calls"],
                     "calls_sent": real["calls"], "input_est": estimate["input_tokens"],
                     "input_sent": real["input"], "server_words": real["words"],
                     "ratio": estimate["input_tokens"] / real["input"] if real["input"] else None,
                     "output_est": estimate["output_tokens"], "output_sent": answered.get(role, 0)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--synthetic", type=int, default=0, metavar="N",
                        help="use N generated instances instead of data/sample")
    parser.add_argument("--only", choices=list(CONFIGURATIONS), action="append",
                        help="run only these configurations")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dry_run_accuracy_") as tmp_name:
        tmp = Path(tmp_name)
        if args.synthetic:
            data = tmp / "data.jsonl"
            data.write_text("".join(json.dumps(r) + "\n" for r in synthetic_rows(args.synthetic)))
            data_args, source = ["--data", str(data)], f"{args.synthetic} synthetic instances"
        else:
            data_args, source = ["--data_dir", str(SAMPLE)], "data/sample"
        rows = []
        for name in args.only or CONFIGURATIONS:
            rows += measure(name, CONFIGURATIONS[name], data_args, tmp)
    print(f"data: {source}; tokens: utils/models/tokens.py estimate_tokens on both sides; "
          f"'server words' is the loopback server's own count (whitespace words)")
    header = ("configuration", "role", "calls est/sent", "input est", "input sent", "est/sent",
              "server words", "output est", "output answered", "est/answered")
    table = [header]
    worst = 0.0
    for r in rows:
        ratio = "n/a" if r["ratio"] is None else f"{r['ratio']:.3f}"
        if r["ratio"] is not None:
            worst = max(worst, abs(r["ratio"] - 1))
        table.append((r["configuration"], r["role"], f"{r['calls_est']}/{r['calls_sent']}",
                      f"{r['input_est']:,}", f"{r['input_sent']:,}", ratio, f"{r['server_words']:,}",
                      f"{r['output_est']:,}", f"{r['output_sent']:,}",
                      f"{r['output_est'] / r['output_sent']:.2f}" if r["output_sent"] else "n/a"))
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths))))
    total_est = sum(r["input_est"] for r in rows)
    total_sent = sum(r["input_sent"] for r in rows)
    print(f"all configurations: input est/sent = {total_est / total_sent:.3f}; "
          f"largest per-role deviation {worst:.1%} (target: within 15%)")


if __name__ == "__main__":
    main()
