"""Every evaluation step's request for one sample instance, pinned to tests/golden/.

The requests go through the real OpenAI SDK to the loopback server, so what is pinned is
the JSON body on the wire: model, messages (system prompt role and text, user message),
temperature and token limit. benchmarks/release_side_by_side.py showed these bodies to be
the released harness's byte for byte; a change to a prompt file, a layout or a parameter
fails here. After a deliberate change, rerun that benchmark, then rewrite the file:

    python tests/evaluation/test_golden_requests.py --update
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

# Computed here, not taken from tests/support/repo_paths.py: the file also runs as a script.
ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "requests_sample-02-noor-haddad__consistent.json"
INSTANCE = ROOT / "data" / "sample" / "sample-02-noor-haddad__consistent.json"

INFERRED = "Tasting menu cards should tell a short story of the dish in one evocative paragraph."
INFERRED_CHECKLIST = ["Does the card tell the dish's story?", "Is the card one evocative paragraph?"]
RESPONSE = "Slow-cooked lamb shoulder, pomegranate and sumac: a dish from my grandmother's table."


def answer(req: dict) -> str:
    """A parseable answer for whichever step asks."""
    system, user = req["system"], req["messages"][-1]["content"]
    if "### Most Likely Preference" in user:
        return f"### Analysis\n\nSeen before.\n\n### Most Likely Preference\n\n{INFERRED}"
    if user.startswith("**Preferences**"):
        return "```json\n" + json.dumps({"checklist": INFERRED_CHECKLIST}) + "\n```"
    if "#### Checklist" in user:
        n = len([line for line in user.split("#### Checklist", 1)[1].splitlines() if line.strip()])
        return "```json\n" + json.dumps({"results": [{"index": i, "label": "Fully Covered"}
                                                     for i in range(1, n + 1)]}) + "\n```"
    if "critical and meticulous evaluator" in system:
        return "### Evaluation Label\n\nGood\n\n### Evaluation Score\n\n7"
    return RESPONSE


def record_requests(server, base_url: str) -> dict:
    from cupid.evaluation.steps import decompose, generate, infer, judge, match
    from cupid.evaluation.data import load_instances
    from cupid.evaluation.steps.layouts import format_session_log
    from cupid.utils.models.registry import resolve_model

    instance = load_instances(data_path=INSTANCE)[0]
    log = format_session_log(instance.prior_interactions)
    truth = instance.current_contextual_preference
    model = resolve_model("gpt-4.1-nano-2025-04-14", role="evaluated")
    evaluator = resolve_model("gpt-4o-2024-11-20", role="evaluator")
    prefmatcher = resolve_model(f"vllm:kixlab/prefmatcher-7b@{base_url}", role="matcher")
    server.responder = answer
    calls = [
        ("infer", lambda: infer.ask(log, instance.current_request).answer(model)),
        ("generate", lambda: generate.ask(log, instance.current_request).answer(model)),
        ("decompose", lambda: decompose.ask(INFERRED).answer(evaluator)),
        ("match_precision", lambda: match.ask(truth, INFERRED_CHECKLIST).answer(evaluator)),
        ("match_recall", lambda: match.ask(INFERRED, instance.current_checklist).answer(evaluator)),
        ("prefmatcher_precision", lambda: match.ask(truth, INFERRED_CHECKLIST, prefmatcher=True).answer(prefmatcher)),
        ("prefmatcher_recall", lambda: match.ask(INFERRED, instance.current_checklist,
                                                 prefmatcher=True).answer(prefmatcher)),
        ("judge", lambda: judge.ask(truth, instance.current_checklist, instance.current_request,
                                    RESPONSE).answer(evaluator)),
    ]
    bodies = {}
    for name, call in calls:
        before = len(server.requests)
        call()
        (req,) = server.requests[before:]
        bodies[name] = req["body"]
    return bodies


def test_requests_match_the_golden_file(fake_llm_env):
    bodies = record_requests(fake_llm_env, fake_llm_env.openai_base_url)
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert list(bodies) == list(golden)
    for name, body in bodies.items():
        # sort_keys: the SDK's field order is its own; the values (and 0 versus 0.0) are ours.
        assert json.dumps(body, sort_keys=True) == json.dumps(golden[name], sort_keys=True), name
    # What the file pins, in words.
    assert golden["infer"]["messages"][0]["role"] == "system" and golden["infer"]["max_tokens"] == 8192
    assert golden["decompose"]["messages"][0]["role"] == "developer"
    assert golden["decompose"]["max_completion_tokens"] == 4096
    assert golden["judge"]["max_completion_tokens"] == 8192
    assert golden["prefmatcher_recall"]["max_tokens"] == 8192
    assert "response_format" not in golden["prefmatcher_recall"]
    assert all(body["temperature"] == 0 for body in golden.values())
    assert golden["infer"]["messages"][1]["content"].startswith(
        "## Log of Previous Interaction Sessions\n\n### Session 1\n\n#### User\n\n")
    assert "\n- " + json.loads(INSTANCE.read_text())["current_checklist"][0] in \
        golden["judge"]["messages"][0]["content"]


if __name__ == "__main__" and "--update" in sys.argv:
    sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]
    import os

    from fake_llm_server import FakeLLMServer

    with FakeLLMServer() as srv:
        os.environ.update(OPENAI_API_KEY="sk-golden", OPENAI_BASE_URL=srv.openai_base_url)
        recorded = record_requests(srv, srv.openai_base_url)
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN} ({len(recorded)} requests)")
elif __name__ == "__main__":
    print(__doc__)
