"""``--dry_run`` of synthesis.run: a forecast per role that scales with the personas, no
request sent, nothing written."""
from __future__ import annotations

import json

import pytest

from cupid import config
from fake_llm_server import FakeLLMServer
from cupid.synthesis import run as synth_run


def synth_dry_run(capsys, tmp_path, *argv) -> dict:
    out_dir = tmp_path / "synthetic"
    assert synth_run.main(["--output_dir", str(out_dir), "--persona_seeds", "bundled",
                           *argv, "--dry_run", "--json"]) == 0
    assert not out_dir.exists()
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_synthesis_dry_run_forecasts_every_role_and_scales(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    one = synth_dry_run(capsys, tmp_path, "--n_personas", "1", "--n_sessions", "9")
    four = synth_dry_run(capsys, tmp_path, "--n_personas", "4", "--n_sessions", "9")
    for role in ("synthesizer", "user_simulator", "assistant_simulator", "decomposer"):
        assert one["roles"][role]["calls"] > 0
        assert four["roles"][role]["input_tokens"] > one["roles"][role]["input_tokens"]
    # One description request per batch of 4 personas, then factors and sessions per persona.
    assert one["roles"]["synthesizer"]["by_step"]["descriptions"]["calls"] == 1
    assert four["roles"]["synthesizer"]["calls"] == 1 + 2 * 4
    assert four["roles"]["assistant_simulator"]["calls"] == 4 * one["roles"]["assistant_simulator"]["calls"]
    # --batch sends the synthesizer's calls only.
    synth = four["roles"]["synthesizer"]
    assert synth["batch_cost_usd"] == pytest.approx(synth["cost_usd"] * config.BATCH_DISCOUNT, rel=1e-3)
    user = four["roles"]["user_simulator"]
    assert user["batch_cost_usd"] == user["cost_usd"]


def test_synthesis_dry_run_sends_nothing_to_a_server(tmp_path, capsys):
    with FakeLLMServer(responder=lambda req: "unused") as srv:
        forecast = synth_dry_run(capsys, tmp_path, "--all_models", f"vllm:s@{srv.openai_base_url}",
                                 "--n_personas", "2")
        assert srv.requests == []
    assert forecast["total"]["cost_usd"] is None  # a self-hosted model is unpriced


def test_synthesis_bad_rate_limit_stops_with_exit_2(tmp_path, capsys):
    assert synth_run.main(["--output_dir", str(tmp_path / "out"), "--persona_seeds", "bundled",
                           "--rate_limit", "rpm=-1", "--dry_run"]) == 2
    assert not (tmp_path / "out").exists()


def test_reasoning_models_forecast_their_thinking_as_output(tmp_path, capsys):
    """Reasoning tokens are billed as output: gpt-5-mini (effort medium by default) and
    gemini-2.5-pro (dynamic thinking) forecast more output than gpt-4o for the same calls."""
    forecasts = {name: synth_dry_run(capsys, tmp_path, "--all_models", name, "--n_personas", "1")
                 for name in ("gpt-4o", "gpt-5-mini", "gemini-2.5-pro")}
    calls = {f["total"]["calls"] for f in forecasts.values()}
    outputs = {name: f["total"]["output_tokens"] for name, f in forecasts.items()}
    assert len(calls) == 1 and len(set(outputs.values())) == 3, outputs
    assert forecasts["gpt-4o"]["total"]["reasoning_tokens"] == 0
    for name in ("gpt-5-mini", "gemini-2.5-pro"):
        total = forecasts[name]["total"]
        assert total["output_tokens"] - total["reasoning_tokens"] == outputs["gpt-4o"]
        assert total["reasoning_tokens"] > 0
    assert forecasts["gpt-5-mini"]["roles"]["synthesizer"]["reasoning_tokens"] == \
        1500 * forecasts["gpt-5-mini"]["roles"]["synthesizer"]["calls"]


def test_an_earlier_runs_recorded_reasoning_is_used(tmp_path, capsys):
    out_dir = tmp_path / "synthetic"
    out_dir.mkdir()
    (out_dir / "summary.json").write_text(json.dumps({"usage": {
        "synthesizer": {"model": "gpt-5-mini", "calls": 10, "reasoning_tokens": 7000}}}))
    assert synth_run.main(["--output_dir", str(out_dir), "--persona_seeds", "bundled",
                           "--all_models", "gpt-5-mini", "--n_personas", "1", "--dry_run", "--json"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    role = json.loads(printed[-1])["roles"]["user_simulator"]
    assert role["reasoning_tokens"] == 700 * role["calls"]
    assert any(line.startswith("reasoning: ") and "700 tokens a call, the mean the earlier run" in line
               for line in printed)
    assert [p.name for p in out_dir.iterdir()] == ["summary.json"]  # nothing written
