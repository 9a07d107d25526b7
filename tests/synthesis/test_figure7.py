"""Figure 7 (types of context factors, preferences and tasks) for a synthesis output, its
validated subset, and rows that record no types; in cupid-synth-report and as PNG."""
from __future__ import annotations

import json
import re
import shutil
from collections import Counter

import pytest

from cupid.synthesis.figure7 import NOT_RECORDED, synthesis_dir_of, type_counts
from cupid.synthesis.pipeline import SynthesisConfig, run_synthesis
from cupid.synthesis.report import main as synthesis_report
from cupid.synthesis.validation.engine import validate
from cupid.evaluation.data import load_instances
from cupid.utils.io import read_json
from repo_paths import ARTIFACTS
from synthesis_responder import ScriptedSynthesis


def expressing_validator(req: dict) -> str:
    """Every entry expressed by the dialogue's first user message; the request states nothing."""
    user = req["messages"][-1]["content"]
    n = len(re.findall(r"^\d+\. ", req["system"].split("**Evaluation Checklist**")[1].split("## **Instructions**")[0], re.M))
    messages = re.findall(r"#### User\n\n(.*?)\n\n(?:####|---)", user, re.S)
    fragments = [] if "#### AI Assistant" not in user else [messages[0]]
    return json.dumps([{"item_index": i, "fragments": fragments, "rating": 3} for i in range(1, n + 1)])


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    from fake_llm_server import FakeLLMServer

    root = tmp_path_factory.mktemp("figure7")
    with FakeLLMServer(responder=ScriptedSynthesis()) as server:
        url = server.openai_base_url
        run_synthesis(SynthesisConfig(output_dir=root / "synth", n_personas=2, persona_seeds="bundled", n_workers=4,
                                      show_progress=False, model=f"vllm:s@{url}", user_model=f"vllm:u@{url}",
                                      assistant_model=f"vllm:a@{url}", decomposer_model=f"vllm:d@{url}"))
        server.responder = expressing_validator
        result = validate(root / "synth", output_dir=root / "validated", model=f"vllm:v@{url}", n_workers=2)
    return {"root": root, "synth": root / "synth", "validated": root / "validated", "result": result}


def test_counts_follow_the_synthesis_records(synthetic):
    synth = synthetic["synth"]
    instances = load_instances(data_path=synth)
    counts = type_counts(instances, synth)
    expected = {"factor_types": Counter(), "preference_types": Counter(), "task_types": Counter()}
    for pid in {i.persona_id for i in instances}:
        factors = {f["context_factor"]: f for f in read_json(synth / "personas" / pid / "factors.json")["factors"]}
        sessions = read_json(synth / "personas" / pid / "sessions.json")
        kept = {k for i in instances if i.persona_id == pid
                for k in i.extra["metadata"]["session_indices"] + [i.extra["metadata"]["final_session_index"]]}
        used = [s for s in sessions["sessions"] if s["index"] in kept]
        expected["task_types"].update(s["task_type"] for s in used)
        names = {s["context_factor"] for s in used}
        expected["factor_types"].update(factors[n]["factor_type"] for n in names)
        # A' (the changed preference) was written with no type of its own.
        preferences = {s["contextual_preference"] for s in used}
        expected["preference_types"].update(
            next((f["preference_type"] for f in factors.values() if f["contextual_preference"] == p), NOT_RECORDED)
            for p in preferences)
    assert counts == expected
    assert counts["preference_types"][NOT_RECORDED] == 2  # one A' per persona


def test_rows_without_records_count_as_not_recorded(synthetic, tmp_path):
    plain = tmp_path / "plain"
    shutil.copytree(synthetic["synth"] / "instances", plain)
    assert synthesis_dir_of(plain) is None
    counts = type_counts(load_instances(data_path=plain), None)
    with_records = type_counts(load_instances(data_path=synthetic["synth"]), synthetic["synth"])
    for key in counts:
        assert set(counts[key]) == {NOT_RECORDED}
        assert counts[key][NOT_RECORDED] == sum(with_records[key].values())


def test_synth_report_draws_figure7_for_a_synthesis_a_validation_and_plain_rows(synthetic, tmp_path):
    assert len(synthetic["result"].verified) == 6
    assert synthesis_report([str(synthetic["synth"])]) == 0
    html = (synthetic["synth"] / "report.html").read_text(encoding="utf-8")
    assert 'id="figure7"' in html and "data:image/png;base64," in html
    assert (synthetic["synth"] / "figure7.png").stat().st_size > 10_000
    shutil.copy(synthetic["synth"] / "figure7.png", ARTIFACTS / "figure7_synthesis.png")
    # A validation output: all its instances beside the verified ones, typed from the synthesis.
    assert synthesis_report([str(synthetic["validated"]), "--output", str(tmp_path / "v" / "report.html")]) == 0
    page = (tmp_path / "v" / "report.html").read_text(encoding="utf-8")
    assert "Types from the synthesis records" in page and "not recorded." in page  # the A' preferences
    shutil.copy(tmp_path / "v" / "figure7.png", ARTIFACTS / "figure7_validated.png")
    # The verified/ subset alone, and rows with no records.
    assert synthesis_report([str(synthetic["validated"] / "verified"), "--output", str(tmp_path / "s.html")]) == 0
    assert "Types from the synthesis records" in (tmp_path / "s.html").read_text(encoding="utf-8")
    plain = tmp_path / "plain"
    shutil.copytree(synthetic["synth"] / "instances", plain)
    assert synthesis_report([str(plain)]) == 0
    assert "carry no types" in (plain / "report.html").read_text(encoding="utf-8")
