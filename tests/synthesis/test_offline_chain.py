"""The offline chain on the embedded model, with no key: synthesis makes instances, the
validation gives each its row, the evaluation evaluates them (issue 31, item 4). Its numbers
say nothing about the benchmark: the 135M model only exercises the stages
(docs/synthesis.md).

Kept small for CI: one persona, 3 factors, 9 sessions, and dialogues of one assistant reply
(--max_turns 1: the user simulator, whose prompt is some 2,000 tokens a session, has its own
test below); one instance validated and evaluated. The commands' own figures are in
docs/synthesis.md.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cupid.utils.dataset import INSTANCE_TYPES

EMBEDDED = "smollm2-135m"


def validate_synthesized(data_dir: Path, output_dir: Path, limit: int) -> None:
    """The chain's validation step (paper §3.2): ``cupid-validate`` on the embedded model over
    the first ``limit`` instances, each with its validation row."""
    from cupid.synthesis import validate

    result = validate(data_dir, output_dir=output_dir, model=EMBEDDED, limit=limit, n_workers=1)
    rows = [json.loads(line) for line in (output_dir / "validation.jsonl").read_text().splitlines()]
    assert len(rows) == len(result.rows) == limit and result.failed == 0
    assert all({"persona_id", "instance_type", "solvable", "challenging"} <= set(row) for row in rows)


@pytest.mark.slow(minutes=6)
def test_synthesized_instances_are_evaluated_offline(tmp_path):
    pytest.importorskip("llama_cpp", reason="the embedded model runs on llama-cpp-python")
    from cupid.evaluation import evaluate
    from cupid.synthesis import synthesize

    out = synthesize(embedded=True, n_personas=1, n_factors=3, n_sessions=9, max_turns=1,
                     output_dir=tmp_path / "synthetic", no_progress=True)
    assert out.failures == []
    assert sorted(i["instance_type"] for i in out.instances) == sorted(INSTANCE_TYPES)

    validate_synthesized(out.output_dir, tmp_path / "validation", limit=1)

    run = evaluate(EMBEDDED, evaluator=EMBEDDED, data=str(out.output_dir), results_dir=str(tmp_path / "results"),
                   limit=1, n_workers=2)
    assert run.failed == 0
    counts = run.results["counts"]
    assert (counts["instances"], counts["evaluated"]) == (1, 1)
    assert 0.0 <= run.results["inference"]["f1"] <= 1.0


@pytest.mark.slow(minutes=1)
def test_the_embedded_user_simulator_answers_in_the_layout_its_parser_reads():
    pytest.importorskip("llama_cpp", reason="the embedded model runs on llama-cpp-python")
    from synthesis_responder import simulate_dialogue
    from cupid.utils.models.registry import resolve_model

    model = resolve_model(EMBEDDED)
    session = {"index": 1, "request": "Help me plan the agenda of tomorrow's advisor meeting.",
               "context_factor": "Advisor Meeting",
               "contextual_preference": "Answers must be brief: three bullet points at most."}
    dialogue = simulate_dialogue(model, model, "A doctoral student in marine biology.", session,
                                 ["Does the response use three bullet points at most?"],
                                 max_turns=3, max_attempts=1)
    # Its second message ends the dialogue; every message is read from the layout.
    assert dialogue["satisfied"] and dialogue["n_turns"] in (3, 5)
    assert all(turn["content"].strip() for turn in dialogue["dialogue"])
    assert all(score is None or 1 <= score <= 10 for score in dialogue["scores"])
