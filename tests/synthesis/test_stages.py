"""synthesis/stages.py: the table of stages that the scheduler, the dry run and the summary
read, checked; and a persona stage added as one module and one row runs, resumes, gates the
stage that reads it and is forecast, with no other file touched."""
from __future__ import annotations

import dataclasses

import pytest

from cupid.synthesis import stages as stage_table
from cupid.synthesis.dry_run import forecast
from cupid.synthesis.pipeline import SynthesisConfig, run_synthesis
from cupid.synthesis.stages import STAGES, Stage, check_table
from cupid.utils.io import read_json
from synthesis_responder import ScriptedSynthesis, stage_of


def test_the_table_is_well_formed():
    check_table()
    assert stage_table.names() == ("templates", "descriptions", "factors", "sessions", "checklists",
                                   "dialogues", "instances")
    assert [s.name for s in stage_table.persona_stages()] == ["factors", "sessions"]


@pytest.mark.parametrize("change, message", [
    (lambda rows: rows[:2] + rows[3:], "reads factors, which no stage before it writes"),
    (lambda rows: rows + rows[-1:], "appears twice"),
    (lambda rows: [dataclasses.replace(r, artifact="factors.json") if r.name == "factors" else r for r in rows],
     "must write personas/{persona_id}/factors.json"),
])
def test_a_malformed_table_is_refused_naming_the_stage(change, message):
    with pytest.raises(ValueError, match=message.replace("{", r"\{").replace("}", r"\}")):
        check_table(tuple(change(list(STAGES))))


def with_voice_stage() -> tuple[Stage, ...]:
    """The voice stage after the factors, and the sessions made to wait for it."""
    voice = Stage("voice", ("descriptions", "factors"), "personas/{persona_id}/voice.json", ("synthesizer",),
                  lambda cfg: 1, "voice_stage")
    rows = []
    for row in STAGES:
        if row.name == "sessions":
            rows.append(voice)
            row = dataclasses.replace(row, inputs=(*row.inputs, "voice"))
        rows.append(row)
    check_table(tuple(rows))
    return tuple(rows)


class VoiceResponder(ScriptedSynthesis):
    """Answers the voice stage; notes any sessions request sent before its persona's voice exists."""

    def __init__(self, out):
        super().__init__()
        self.out, self.voices, self.early_sessions = out, 0, []

    def __call__(self, req: dict) -> str:
        if (req.get("system") or "").startswith("VOICE-STAGE"):
            self.voices += 1
            return "Short sentences, no greetings, numbers first."
        if stage_of(req) == "sessions":
            user = req["messages"][0]["content"]
            for persona in read_json(self.out / "personas.json")["personas"]:
                if persona.get("description") and persona["description"] in user and not (
                        self.out / "personas" / persona["persona_id"] / "voice.json").exists():
                    self.early_sessions.append(persona["persona_id"])
        return super().__call__(req)


def config(server, out, **overrides) -> SynthesisConfig:
    url = server.openai_base_url
    return SynthesisConfig(output_dir=out, n_personas=2, persona_seeds="bundled", n_workers=4, show_progress=False,
                           model=f"vllm:synth-model@{url}", user_model=f"vllm:user-model@{url}",
                           assistant_model=f"vllm:assistant-model@{url}",
                           decomposer_model=f"vllm:decomposer-model@{url}", **overrides)


def test_a_persona_stage_is_one_module_and_one_row(fake_server, tmp_path, monkeypatch):
    monkeypatch.setattr(stage_table, "STAGES", with_voice_stage())
    out = tmp_path / "data"
    responder = fake_server.responder = VoiceResponder(out)

    # The dry run renders the new stage's request with its own code, one per persona.
    roles = forecast(config(fake_server, out))
    assert roles["synthesizer"].by_step["voice"][0] == 2

    summary = run_synthesis(config(fake_server, out))
    assert summary["counts"]["instances"] == 6 and summary["failures"] == []
    assert responder.voices == 2 and responder.early_sessions == []
    for persona in read_json(out / "personas.json")["personas"]:
        voice = read_json(out / "personas" / persona["persona_id"] / "voice.json")
        assert voice == {"voice": "Short sentences, no greetings, numbers first.", "attempts": 1}
    assert summary["stages"]["voice"] == {"done": 2, "skipped": 0}
    assert "voice" in summary["regenerations"]

    # A rerun skips it as every stage is skipped: no call.
    n_requests = len(fake_server.requests)
    again = run_synthesis(config(fake_server, out))
    assert len(fake_server.requests) == n_requests and again["stages"]["voice"] == {"done": 0, "skipped": 2}
