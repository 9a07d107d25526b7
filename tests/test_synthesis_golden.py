"""The synthesis requests for fixed inputs, pinned to tests/golden/synthesis_requests.json.

Each stage's request (system prompt, messages, temperature, max_tokens) is the release's
(kixlab/CUPID@a8560ca) for the same inputs; benchmarks/release_side_by_side_synthesis.py
checks that against the release itself. This test keeps any change to a prompt file, a
renderer or a parameter from slipping in unnoticed. After a deliberate change, rewrite the
file with ``CUPID_UPDATE_GOLDEN=1 python -m pytest tests/test_synthesis_golden.py`` and
rerun the benchmark.
"""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

from utils.models.model import Model
from utils.models.request import Completion, Request
from synthesis import personas as P
from synthesis.dialogues import simulate_dialogue
from synthesis.factors import generate_factors
from synthesis.journey import make_journey
from synthesis.personas import PARAMS as PERSONA_PARAMS, SEED
from utils.benchmark.decomposer import PARAMS as DECOMPOSER_PARAMS
from synthesis_responder import ScriptedSynthesis, stage_of
from synthesis.sessions import generate_sessions
from synthesis.taxonomy import BUNDLED_SEEDS_FILE, load_occupations, load_taxonomy

GOLDEN = Path(__file__).parent / "golden" / "synthesis_requests.json"
TAX = load_taxonomy()


class Recorder(Model):
    """Answers with the scripted responder and keeps every request."""

    def __init__(self, responder: ScriptedSynthesis) -> None:
        super().__init__("recorder", max_retries=0)
        self.responder = responder
        self.requests: list[Request] = []

    def complete(self, request: Request) -> Completion:
        self.requests.append(request)
        req = {"system": request.system_prompt, "messages": list(request.messages)}
        return Completion(text=self.responder(req))


def as_dict(request: Request) -> dict:
    return {"system": request.system_prompt, "messages": [dict(m) for m in request.messages],
            "temperature": request.temperature, "max_tokens": request.max_tokens}


def rendered_requests() -> dict:
    responder = ScriptedSynthesis(max_rounds=3)
    model = Recorder(responder)
    seeds = P.read_seed_file(BUNDLED_SEEDS_FILE)
    templates = P.make_templates(seeds, 4, load_occupations(), TAX, SEED)
    described = P.describe_personas(model, templates, TAX, max_attempts=1,
                                    params=PERSONA_PARAMS).value
    description = described[0]["description"]
    factors = generate_factors(model, description, 8, TAX, max_attempts=1).value["factors"]
    journey = make_journey(random.Random(f"{SEED}:journey:golden"), 13,
                           (factors[-2]["context_factor"], factors[-1]["context_factor"]))
    sessions = generate_sessions(model, description, factors, journey, TAX, max_attempts=1).value
    session = sessions["sessions"][0]
    checklist = ["Does the response open with a one-line summary?",
                 "Does the response list at most five numbered steps?"]
    simulate_dialogue(model, model, description, session, checklist, max_turns=4, max_attempts=1)

    by_stage: dict[str, list[Request]] = {}
    for request in model.requests:
        stage = stage_of({"system": request.system_prompt})
        by_stage.setdefault(stage, []).append(request)
    user_turns = by_stage["user_simulator"]
    assistant_turns = by_stage["assistant"]
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


def test_synthesis_requests_match_the_golden_file():
    current = rendered_requests()
    if os.environ.get("CUPID_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(current, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
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
