"""The synthesis requests for fixed inputs, pinned to tests/golden/synthesis_requests.json.

The requests go through the real Together SDK to the loopback server, so what is pinned is
what reaches the wire: each stage's system prompt, messages, temperature and max_tokens as
the server received them. They are the release's (kixlab/CUPID@a8560ca) for the same inputs:
benchmarks/release_side_by_side_synthesis.py checks that against the release itself, and
tests/test_release_golden.py against the release's own requests in tests/golden/release/.
This test keeps any change to a prompt file, a renderer or a parameter from slipping in
unnoticed. It never rewrites its file; after a deliberate change, rerun that benchmark, then:

    python tests/synthesis/test_golden_requests.py --update
"""
from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: this checkout's code, not an installed copy
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[1] / "support")]

from cupid.synthesis import personas as P  # noqa: E402
from cupid.synthesis.factors import generate_factors
from cupid.synthesis.journey import make_journey
from cupid.synthesis.personas import SEED
from cupid.evaluation.steps.decompose import PARAMS as DECOMPOSER_PARAMS
from synthesis_responder import ScriptedSynthesis, simulate_dialogue, stage_of
from cupid.synthesis.sessions import generate_sessions
from cupid.synthesis.taxonomy import BUNDLED_SEEDS_FILE, load_occupations, load_taxonomy
from repo_paths import GOLDEN_DIR

GOLDEN = GOLDEN_DIR / "synthesis_requests.json"
TAX = load_taxonomy()
MODEL = "together:meta-llama/Meta-Llama-3.1-405B-Instruct-Turbo"
ASSISTANT = "together:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"


def as_dict(req: dict) -> dict:
    """What the server received: the system prompt (Together's API carries it as the first
    message), the other messages, and the sampling parameters of the body."""
    body = req["body"]
    return {"system": req["system"], "messages": req["messages"],
            "temperature": body.get("temperature"), "max_tokens": body.get("max_tokens")}


def rendered_requests(server) -> dict:
    from cupid.utils.models.registry import resolve_model

    server.responder = ScriptedSynthesis(max_rounds=3)
    model = resolve_model(MODEL, max_retries=0)
    assistant = resolve_model(ASSISTANT, max_retries=0)
    seeds = P.read_seed_file(BUNDLED_SEEDS_FILE)
    templates = P.make_templates(seeds, 4, load_occupations(), TAX, SEED)
    described = P.describe_personas(model, templates, TAX, max_attempts=1).value
    description = described[0]["description"]
    factors = generate_factors(model, description, 8, TAX, max_attempts=1).value["factors"]
    journey = make_journey(random.Random(f"{SEED}:journey:golden"), 13,
                           (factors[-2]["context_factor"], factors[-1]["context_factor"]))
    sessions = generate_sessions(model, description, factors, journey, TAX, max_attempts=1).value
    session = sessions["sessions"][0]
    checklist = ["Does the response open with a one-line summary?",
                 "Does the response list at most five numbered steps?"]
    simulate_dialogue(model, assistant, description, session, checklist, max_turns=4, max_attempts=1)

    by_stage: dict[str, list[dict]] = {}
    for req in server.requests:
        by_stage.setdefault(stage_of(req), []).append(req)
    user_turns = by_stage["user_simulator"]
    assistant_turns = by_stage["assistant"]
    assert {r["model"] for r in assistant_turns} == {ASSISTANT.split(":", 1)[1]}
    return {
        "persona_generator": as_dict(by_stage["descriptions"][0]),
        "context_factors_generator": as_dict(by_stage["factors"][0]),
        "sessions_generator": as_dict(by_stage["sessions"][0]),
        "user_simulator_first": as_dict(user_turns[0]),
        "user_simulator_multi_turn": as_dict(user_turns[-1]),
        "assistant_simulator_first": as_dict(assistant_turns[0]),
        "assistant_simulator_multi_turn": as_dict(assistant_turns[-1]),
        "preference_decomposer_params": DECOMPOSER_PARAMS,
    }


def test_synthesis_requests_match_the_golden_file(fake_llm_env):
    current = rendered_requests(fake_llm_env)
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert set(current) == set(golden)
    for stage in golden:
        assert current[stage] == golden[stage], f"the {stage} request changed"


def test_golden_requests_have_the_release_shape():
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    multi = golden["user_simulator_multi_turn"]["messages"]
    # Roles flipped: the simulator's own turns are the assistant's, opening with the request.
    assert len(multi) >= 4
    assert [m["role"] for m in multi] == ["assistant", "user"] * (len(multi) // 2)
    assert multi[0]["content"].startswith("#### Evaluation of AI Assistant's Response\n\nN/A")
    assistant = golden["assistant_simulator_multi_turn"]
    assert [m["role"] for m in assistant["messages"]][:3] == ["user", "assistant", "user"]
    assert (assistant["temperature"], assistant["max_tokens"]) == (0.7, 2048)
    persona_user = golden["persona_generator"]["messages"][0]["content"]
    assert persona_user.startswith("## List of Basic Personas\n\n1. {'id': 0, 'seed': ")
    assert persona_user.count("\n") == 2 + 3  # four templates, one a line


if __name__ == "__main__" and "--update" in sys.argv:
    from fake_llm_server import FakeLLMServer

    with FakeLLMServer() as srv:
        os.environ.update(TOGETHER_API_KEY="golden", TOGETHER_BASE_URL=srv.base_url)
        recorded = rendered_requests(srv)
    GOLDEN.write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}")
elif __name__ == "__main__":
    print(__doc__)
