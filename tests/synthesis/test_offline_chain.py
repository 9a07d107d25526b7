"""The offline chain on the embedded model, with no key: synthesis makes instances, which
the evaluation evaluates (issue 31, item 4). Its numbers say nothing about the benchmark:
the 135M model only exercises the stages (docs/synthesis.md).

Kept small for CI: one persona, 3 factors, 9 sessions, and dialogues of one assistant reply
(--max_turns 1: the user simulator, whose prompt is some 2,000 tokens a session, has its own
test below); the command's own figures are in docs/synthesis.md.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from cupid.utils.dataset import INSTANCE_TYPES

EMBEDDED = "smollm2-135m"


def validate_synthesized(data_dir: Path, output_dir: Path) -> None:
    """The chain's validation step (paper §3.2): ``synthesis.validate`` on the embedded model,
    one validation row per synthesized instance. It runs once that command exists (it is
    being written on another branch, to the interface issue 31 gives it); until then the
    chain goes from synthesis straight to the evaluation."""
    if importlib.util.find_spec("cupid.synthesis.validate") is None:
        return
    from cupid.synthesis.validate import validate

    validate(data_dir=data_dir, output_dir=output_dir, model=EMBEDDED)
    rows = [json.loads(line) for line in (output_dir / "validation.jsonl").read_text().splitlines()]
    instances = [json.loads(p.read_text()) for p in (data_dir / "instances").glob("*.json")]
    assert sorted((r["persona_id"], r["instance_type"]) for r in rows) == \
        sorted((i["persona_id"], i["instance_type"]) for i in instances)


@pytest.mark.slow
def test_synthesized_instances_are_evaluated_offline(tmp_path):
    pytest.importorskip("llama_cpp", reason="the embedded model runs on llama-cpp-python")
    from cupid.evaluation import evaluate
    from cupid.synthesis import synthesize

    out = synthesize(embedded=True, n_personas=1, n_factors=3, n_sessions=9, max_turns=1,
                     output_dir=tmp_path / "synthetic", no_progress=True)
    assert out.failures == []
    assert sorted(i["instance_type"] for i in out.instances) == sorted(INSTANCE_TYPES)

    validate_synthesized(out.output_dir, tmp_path / "validation")

    run = evaluate(EMBEDDED, evaluator=EMBEDDED, data=str(out.output_dir), results_dir=str(tmp_path / "results"),
                   limit=1, n_workers=2)
    assert run.failed == 0
    counts = run.results["counts"]
    assert (counts["instances"], counts["evaluated"]) == (1, 1)
    assert 0.0 <= run.results["inference"]["f1"] <= 1.0


@pytest.mark.slow
def test_the_embedded_user_simulator_answers_in_the_layout_its_parser_reads():
    pytest.importorskip("llama_cpp", reason="the embedded model runs on llama-cpp-python")
    from cupid.synthesis.dialogues import simulate_dialogue
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
