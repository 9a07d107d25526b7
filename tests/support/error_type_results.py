"""A results tree for Table 2 and Figure 6, evaluated through the loopback server.

Two evaluated models, DeepSeek-R1 (``together:deepseek-ai/DeepSeek-R1``, a model of the
paper's Table 2) and ``model-b`` (a vLLM-served model the paper never saw), each in the
default and the summary setting, 3 personas x 3 instance types, GPT-4o
(``gpt-4o-2024-11-20``, the paper's evaluator) as evaluator. Every per-instance F1 is set by
the plan: seven instances per model score below 20% (F1 0, one 1/6), two above (1/2, 1).
With summaries, model-b infers the true preference every time (F1 1) and its judge scores
rise by 2; DeepSeek-R1 answers as in the default setting.

``classify_answer(user)`` is the scripted classifier, keyed by the inferred preference:

    p1 consistent  "Incorrect Context"           p1 contrastive  "**Shallow Inference**"
    p2 consistent  "2. Incorrect Context."       p2 contrastive  never a type (fails, 3 answers)
    p3 consistent  HTTP 500 every time (fails)   p3 contrastive  unusable once, then "Vagueness"
    p3 changing    "Hallucination"

so each model's Table 2 is Incorrect Context 2, Shallow Inference 1, Vagueness 1,
Hallucination 1, failed 2, of 7 drawn.

    python tests/support/error_type_results.py OUT_DIR      # writes OUT_DIR/results and data.jsonl
"""
from __future__ import annotations

import json
import re
import sys
import threading
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests" / "support"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from cupid_responder import CupidResponder, InstancePlan, _section, make_row  # noqa: E402
from fake_llm_server import FakeLLMServer, FakeResponse  # noqa: E402

DEEPSEEK = "together:deepseek-ai/DeepSeek-R1"
MODEL_B = "model-b"
EVALUATOR = "gpt-4o-2024-11-20"
FULL, PARTIAL, NOT = "Fully Covered", "Partially Covered", "Not Covered"
SUMMARIES = "## Summaries of Previous Interaction Sessions"

# (persona, type) -> (precision labels of 3 inferred entries, recall labels of 3 true entries)
LABELS = {
    ("p1", "consistent"): ([NOT] * 3, [NOT] * 3),
    ("p1", "contrastive"): ([NOT] * 3, [NOT] * 3),
    ("p1", "changing"): ([FULL] * 3, [FULL] * 3),                          # F1 1
    ("p2", "consistent"): ([PARTIAL, NOT, NOT], [PARTIAL, NOT, NOT]),     # F1 1/6
    ("p2", "contrastive"): ([NOT] * 3, [NOT] * 3),
    ("p2", "changing"): ([FULL, PARTIAL, NOT], [FULL, PARTIAL, NOT]),     # F1 1/2
    ("p3", "consistent"): ([NOT] * 3, [NOT] * 3),
    ("p3", "contrastive"): ([NOT] * 3, [NOT] * 3),
    ("p3", "changing"): ([NOT] * 3, [NOT] * 3),
}
CLASSIFIER = {
    ("p1", "consistent"): "### Analysis\n\nIt uses session 2's context.\n\n### Error Type\n\nIncorrect Context",
    ("p1", "contrastive"): "### Analysis\n\nIt restates the request.\n\n### Error Type\n\n**Shallow Inference**",
    ("p2", "consistent"): "### Analysis\n\nSession 3 is another context.\n\n### Error Type\n\n2. Incorrect Context.",
    ("p2", "contrastive"): "I am not sure which type this is.",
    ("p3", "consistent"): FakeResponse(status=500, text="the classifier's server is down"),
    ("p3", "contrastive"): "### Analysis\n\nToo broad.\n\n### Error Type\n\nVagueness",
    ("p3", "changing"): "### Analysis\n\nNothing supports it.\n\n### Error Type\n\nHallucination",
}
UNUSABLE_ONCE = {("p3", "contrastive")}
EXPECTED_COUNTS = {"Incorrect Context": 2, "Shallow Inference": 1, "Vagueness": 1, "Hallucination": 1}
ELIGIBLE = sorted(f"{p}__{t}" for (p, t), (precision, _) in LABELS.items() if (p, t) not in
                  (("p1", "changing"), ("p2", "changing")))
FAILED = {"p2__contrastive", "p3__consistent"}


def plans() -> dict[tuple[str, str], InstancePlan]:
    out = {}
    for (persona, kind), (precision, recall) in LABELS.items():
        out[(persona, kind)] = InstancePlan(
            request=f"Request {persona}/{kind}: draft the note for the review board.",
            truth=f"Notes for {persona}'s {kind} board must follow rule {persona}-{kind}.",
            truth_checklist=[f"Does the response follow rule {persona}-{kind} part {j}?" for j in (1, 2, 3)],
            inferred=f"The user ({persona}, {kind}) wants a generic tidy note.",
            inferred_checklist=[f"Is the note tidy for {persona}-{kind}, aspect {j}?" for j in (1, 2, 3)],
            precision_labels=precision, recall_labels=recall, judge_score=3 + sum(l == FULL for l in recall))
    return out


class Responder:
    """The evaluation's steps (from the plans) and the classifier's answers."""

    def __init__(self) -> None:
        self.plans = plans()
        self.kinds = CupidResponder(plans=[])
        self.calls: Counter = Counter()
        self.lock = threading.Lock()
        self.classifier = dict(CLASSIFIER)

    def plan(self, text: str) -> tuple[tuple[str, str], InstancePlan]:
        return next((key, p) for key, p in self.plans.items() if p.request in text or p.inferred in text
                    or p.truth in text)

    def __call__(self, req: dict):
        user = req["messages"][-1]["content"]
        if "## Inferred Preference" in user:
            key, _ = self.plan(_section(user, "## Inferred Preference"))
            with self.lock:
                self.calls[key] += 1
                first = self.calls[key] == 1
            if key in UNUSABLE_ONCE and first:
                return "### Error Type\n\nIncorrect Context or Vagueness"
            return self.classifier[key]
        kind = self.kinds.kind(req)
        better = req["model"].endswith(MODEL_B) and SUMMARIES in user  # model-b with summaries
        if kind == "summarize":
            return self.kinds(req)
        key, plan = self.plan(user)
        if kind == "infer":
            return f"### Analysis\n\nThe sessions say so.\n\n### Most Likely Preference\n\n{plan.truth if better else plan.inferred}"
        if kind in ("generate", "generate_oracle_preference"):
            return f"Here is the note for {plan.request}" + (" [with summaries]" if better else "")
        if kind == "decompose":
            preference = user.split("**Preferences**", 1)[1]
            checklist = plan.truth_checklist if plan.truth in preference else plan.inferred_checklist
            return "```json\n" + json.dumps({"checklist": checklist}) + "\n```"
        if kind == "match":
            preference = _section(user, "#### Preference")
            entries = [re.sub(r"^\d+\.\s*", "", line) for line in _section(user, "#### Checklist").splitlines() if line]
            if preference == plan.truth and entries == plan.truth_checklist:
                labels = [FULL] * len(entries)
            else:
                labels = plan.precision_labels if preference == plan.truth else plan.recall_labels
            return "```json\n" + json.dumps({"results": [{"index": i, "entry": e, "label": l} for i, (e, l)
                                                         in enumerate(zip(entries, labels), start=1)]}) + "\n```"
        if kind == "judge":
            score = min(10, plan.judge_score + (2 if "[with summaries]" in user else 0))
            return f"### Evaluation of AI Assistant's Response\n\n1. Fine.\n\n### Evaluation Score\n\n{score}"
        raise AssertionError(kind)


def write_data(path: Path) -> Path:
    rows = [make_row(persona, kind, plan) for (persona, kind), plan in plans().items()]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@contextmanager
def provider_env(server: FakeLLMServer):
    """OpenAI (the evaluator) and Together (DeepSeek-R1) pointed at the loopback server."""
    import os

    names = {"OPENAI_API_KEY": "sk-test-openai", "OPENAI_BASE_URL": server.openai_base_url,
             "TOGETHER_API_KEY": "test-together", "TOGETHER_BASE_URL": server.base_url}
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(names)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def build(out: Path) -> tuple[Path, Path]:
    """Evaluate both models in both settings; returns (results directory, data file)."""
    from cupid.evaluation import run as run_module

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results, data = out / "results", write_data(out / "data.jsonl")
    with FakeLLMServer(responder=Responder()) as server, provider_env(server):
        for model in (DEEPSEEK, f"vllm:{MODEL_B}@{server.openai_base_url}"):
            for setting in ("default", "summary"):
                code = run_module.main(["--model", model, "--evaluator", EVALUATOR, "--data", str(data),
                                        "--results_dir", str(results), "--task", "both", "--setting", setting,
                                        "--n_workers", "2", "--max_retries", "1", "--timeout", "10"])
                if code != 0 or server.responder_errors:
                    raise RuntimeError(f"{model} {setting}: exit {code}; {server.responder_errors[:1]}")
    return results, data


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
