"""A results tree from the README's offline command, answered by a scripted evaluator.

``python -m evaluation.run --data_dir data/sample --task both`` for two evaluated models
(``model-a`` and ``model-b``), with the evaluator's own scorer and, for ``model-a``, a
PrefMatcher scorer too, against the loopback server. Answers are derived from hashes of the
prompts, so the instances get a spread of labels, F1 and judge scores, deterministically.
One step fails for good: the judge cannot score ``model-b``'s response to one instance.

    python tests/support/sample_results.py OUT_DIR      # writes OUT_DIR/results
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests" / "support"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from cupid_responder import CupidResponder, _section  # noqa: E402
from fake_llm_server import FakeLLMServer  # noqa: E402

SAMPLE = ROOT / "data" / "sample"
LABELS = ("Fully Covered", "Partially Covered", "Not Covered")
BROKEN = "model-b"
UNSCORABLE = "I would rather not give a score."


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16)


class SampleEvaluator:
    """Answers every evaluation step; the first response of ``model-b`` the judge sees is
    never scored (every attempt answers without a score)."""

    def __init__(self) -> None:
        self.kinds = CupidResponder(plans=[])
        self.doomed: str | None = None
        self.lock = threading.Lock()

    def __call__(self, req: dict) -> str:
        kind = self.kinds.kind(req)
        user = req["messages"][-1]["content"]
        h = _digest(req["model"] + user)
        if kind == "infer":
            return (f"### Analysis\nThe sessions suggest habit {h % 97}.\n\n"
                    f"### Most Likely Preferences\nThe user wants answers shaped by habit {h % 97}.")
        if kind in ("generate", "generate_oracle_preference"):
            return f"Response {h:08x} from {req['model']}: here is a plan with three steps. [{req['model']}]"
        if kind == "decompose":
            n = 2 + h % 3
            return "```json\n" + json.dumps({"checklist": [f"Does the response reflect aspect {j + 1} of habit {h % 97}?"
                                                           for j in range(n)]}) + "\n```"
        if kind in ("match", "match_prefmatcher"):
            entries = [re.sub(r"^\d+\.\s*", "", line) for line in
                       _section(user, "#### Checklist").splitlines() if line.strip()]
            salt = 1 if kind == "match_prefmatcher" else 0
            results = [{"index": i, "entry": e, "label": LABELS[(_digest(user + e) + salt) % 3]}
                       for i, e in enumerate(entries, start=1)]
            return "```json\n" + json.dumps({"results": results}) + "\n```"
        if kind == "judge":
            response = user.split("### AI Assistant's Response", 1)[1]
            with self.lock:
                if self.doomed is None and f"[{BROKEN}]" in response:
                    self.doomed = response
                if response == self.doomed:
                    return UNSCORABLE
            return ("### Evaluation of AI Assistant's Response\n1. **Checklist item 1:** partly met\n\n"
                    f"### Evaluation Score\n**{1 + h % 10}/10**")
        raise AssertionError(kind)


def build(out: Path, data_dir: Path = SAMPLE) -> Path:
    """Run the evaluations; returns the results directory."""
    from cupid.evaluation import run as run_module

    results = Path(out) / "results"
    with FakeLLMServer(responder=SampleEvaluator()) as server:
        url = server.openai_base_url
        common = ["--evaluator", f"vllm:evaluator@{url}", "--data_dir", str(data_dir),
                  "--results_dir", str(results), "--task", "both", "--n_workers", "2",
                  "--max_retries", "1", "--timeout", "10"]
        run_module.main(["--model", f"vllm:model-a@{url}", *common])
        run_module.main(["--model", f"vllm:model-a@{url}", *common, "--use_matcher", "--matcher_url", url])
        run_module.main(["--model", f"vllm:{BROKEN}@{url}", *common])
        if server.responder_errors:
            raise RuntimeError(f"the scripted evaluator failed: {server.responder_errors[0]}")
    return results


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
