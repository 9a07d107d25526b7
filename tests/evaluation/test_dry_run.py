"""``--dry_run`` of evaluation.run: a forecast per role, no request sent, nothing written,
numbers that follow the data and the real requests. synthesis.run's: tests/synthesis/test_dry_run.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cupid import config
from cupid_responder import CupidResponder, make_row, two_instance_plans
from cupid.evaluation import run as eval_run
from fake_llm_server import FakeLLMServer
from cupid.synthesis import run as synth_run
from cupid.utils.models.catalog import price_of
from cupid.utils.models.tokens import estimate_tokens
from repo_paths import ROOT

SAMPLE = ROOT / "data" / "sample"


pytestmark = pytest.mark.usefixtures("fast_retries")  # tests/evaluation/conftest.py


@pytest.fixture
def server():
    with FakeLLMServer(responder=CupidResponder(two_instance_plans())) as srv:
        yield srv


def dry_run(capsys, *argv) -> tuple[dict, str]:
    assert eval_run.main([*argv, "--dry_run", "--json"]) == 0
    out = capsys.readouterr().out
    return json.loads(out.strip().splitlines()[-1]), out


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*")) if path.exists() else []


def test_prints_a_table_and_one_json_line_and_sends_and_writes_nothing(server, tmp_path, capsys):
    results = tmp_path / "results"
    url = server.openai_base_url
    forecast, out = dry_run(capsys, "--model", f"vllm:m@{url}", "--evaluator", f"vllm:e@{url}",
                            "--data_dir", str(SAMPLE), "--results_dir", str(results), "--task", "both")
    assert server.requests == []  # no probe, no call
    assert not results.exists()
    assert "model" in out and "evaluator" in out and "estimate_tokens" in out
    for role in ("model", "evaluator"):
        for key in ("input_tokens", "output_tokens", "calls", "cost_usd", "batch_cost_usd"):
            assert key in forecast["roles"][role]
    n = len(list(SAMPLE.glob("*.json")))
    assert forecast["roles"]["model"]["calls"] == 2 * n             # infer + generate
    assert forecast["roles"]["evaluator"]["calls"] == 4 * n         # decompose, 2 matches, judge
    assert forecast["total"]["calls"] == 6 * n
    assert forecast["total"]["input_tokens"] == sum(r["input_tokens"] for r in forecast["roles"].values())
    # A self-hosted model has no price: said, never shown as free.
    assert forecast["roles"]["model"]["cost_usd"] is None and forecast["total"]["cost_usd"] is None
    assert "unpriced" in out


def test_no_key_needed_and_priced_roles_are_costed(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    forecast, out = dry_run(capsys, "--model", "gpt-4o-mini", "--evaluator", "gpt-4o-2024-11-20",
                            "--data_dir", str(SAMPLE), "--results_dir", str(tmp_path / "r"),
                            "--rate_limit", "rpm=6")
    evaluator = forecast["roles"]["evaluator"]
    price_in, price_out = price_of("gpt-4o-2024-11-20")[:2]
    expected = (evaluator["input_tokens"] * price_in + evaluator["output_tokens"] * price_out) / 1e6
    assert evaluator["cost_usd"] == pytest.approx(expected, rel=1e-4)
    assert evaluator["batch_cost_usd"] == pytest.approx(expected * config.BATCH_DISCOUNT, rel=1e-4)
    assert evaluator["time_s"] == pytest.approx(evaluator["calls"] / 6 * 60, abs=0.1)
    assert not (tmp_path / "r").exists()


def test_numbers_scale_with_limit(tmp_path, capsys):
    common = ["--model", "gpt-4o-mini", "--data_dir", str(SAMPLE), "--results_dir", str(tmp_path)]
    two, _ = dry_run(capsys, *common, "--limit", "2")
    four, _ = dry_run(capsys, *common, "--limit", "4")
    assert two["roles"]["model"]["calls"] == 2 and four["roles"]["model"]["calls"] == 4
    assert four["roles"]["evaluator"]["calls"] == 2 * two["roles"]["evaluator"]["calls"]
    assert four["total"]["input_tokens"] > two["total"]["input_tokens"] > 0


def test_settings_and_matcher_change_the_forecast(tmp_path, capsys):
    common = ["--model", "gpt-4o-mini", "--data_dir", str(SAMPLE), "--results_dir", str(tmp_path)]
    default, _ = dry_run(capsys, *common)
    summary, _ = dry_run(capsys, *common, "--setting", "summary")
    assert summary["roles"]["model"]["by_step"]["summarize"]["calls"] > 0  # the summaries are added
    assert summary["roles"]["model"]["calls"] > default["roles"]["model"]["calls"]
    matcher, out = dry_run(capsys, *common, "--use_matcher")
    assert matcher["roles"]["matcher"]["calls"] == 2 * matcher["roles"]["model"]["calls"]
    assert matcher["roles"]["evaluator"]["calls"] == matcher["roles"]["model"]["calls"]  # decompose only
    assert matcher["roles"]["matcher"]["cost_usd"] is None and "unpriced: matcher" in out
    sweep, _ = dry_run(capsys, "--model", "gpt-4o-mini", "gpt-4.1-nano-2025-04-14",
                       *common[2:])
    assert len(sweep["runs"]) == 2
    assert sweep["total"]["calls"] == 2 * default["total"]["calls"]


def test_data_only_steps_are_the_requests_the_run_sends(server, tmp_path, capsys):
    """infer's requests depend on the data only: the dry run's token count of them equals
    the same count over what the real run sent. A rerun afterwards forecasts nothing."""
    plans = two_instance_plans()
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(make_row(f"p{i}", "consistent", plan)) + "\n"
                            for i, plan in enumerate(plans)))
    url = server.openai_base_url
    argv = ["--model", f"vllm:m@{url}", "--evaluator", f"vllm:e@{url}", "--data", str(data),
            "--results_dir", str(tmp_path / "results")]
    forecast, _ = dry_run(capsys, *argv)
    assert server.requests == []
    assert eval_run.main([*argv, "--n_workers", "1"]) == 0
    capsys.readouterr()
    kinds = CupidResponder(plans)
    sent = [r for r in server.requests if r["messages"] and kinds.kind(r) == "infer"]
    assert len(sent) == len(plans)
    sent_tokens = sum(estimate_tokens(r["system"]) + sum(estimate_tokens(m["content"]) for m in r["messages"])
                      for r in sent)
    assert forecast["roles"]["model"]["by_step"]["infer"]["input_tokens"] == sent_tokens

    before = len(server.requests)
    again, out = dry_run(capsys, *argv)
    assert again["total"]["calls"] == 0
    assert again["runs"][0]["steps_already_done"] == 4 * len(plans)
    assert len(server.requests) == before


def test_bad_data_stops_with_exit_2(tmp_path, capsys):
    assert eval_run.main(["--model", "gpt-4o-mini", "--data_dir", str(tmp_path / "missing"),
                          "--dry_run"]) == 2
    assert "error:" in capsys.readouterr().err


def test_json_without_dry_run_is_refused(tmp_path, capsys):
    for main in (eval_run.main, synth_run.main):
        with pytest.raises(SystemExit) as exc:
            main(["--model", "gpt-4o-mini", "--json", "--output_dir" if main is synth_run.main
                  else "--results_dir", str(tmp_path / "out")])
        assert exc.value.code == 2
        assert "--json goes with --dry_run" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_reasoning_models_forecast_their_thinking_as_output(tmp_path, capsys):
    """Reasoning and thinking tokens are billed as output: gpt-4o thinks none, gpt-5-mini and
    gemini-2.5-pro their family's default, and a run directory's recorded figure wins."""
    common = ["--data_dir", str(SAMPLE), "--results_dir", str(tmp_path), "--task", "inference"]
    output = {}
    for name in ("gpt-4o-2024-08-06", "gpt-5-mini", "gemini-2.5-pro"):
        forecast, _ = dry_run(capsys, "--model", name, *common)
        model = forecast["roles"]["model"]
        output[name] = (model["output_tokens"], model["reasoning_tokens"])
    assert output["gpt-4o-2024-08-06"][1] == 0
    assert 0 < output["gpt-5-mini"][1] < output["gemini-2.5-pro"][1]
    assert len({o for o, _ in output.values()}) == 3
    # An earlier run that recorded 100 reasoning tokens a call: its mean is the forecast.
    run_dir = tmp_path / "gpt-5-mini"
    run_dir.mkdir()
    (run_dir / "x__consistent.json").write_text(json.dumps(
        {"instance_id": "x__consistent", "steps": {"infer": {
            "status": "done", "model": "gpt-5-mini", "attempts": 1,
            "usage": {"prompt_tokens": 10, "completion_tokens": 120, "reasoning_tokens": 100}}}}))
    forecast, _ = dry_run(capsys, "--model", "gpt-5-mini", *common)
    assert forecast["roles"]["model"]["reasoning_tokens"] == 100 * forecast["roles"]["model"]["calls"]


def test_list_models_names_every_provider_and_the_registered_models(capsys):
    assert eval_run.main(["--list-models"]) == 0
    out = capsys.readouterr().out
    for prefix in ("openai:", "anthropic:", "google:", "together:", "vllm:"):
        assert prefix in out
    assert "smollm2-135m" in out and "gpt-4o-2024-11-20" in out


def test_offline_the_dry_run_prices_the_paper_scale_study_on_the_benchmarks_shape(tmp_path):
    """No network and no stored copy of kixlab/CUPID: the forecast is of 756 instances built to
    the paper's statistics (§3.3), and says so; local data is never replaced by it."""
    import statistics

    from cupid.evaluation.paper_shape import NAME, shape_instances
    from cupid.utils.models.tokens import estimate_tokens

    import os
    import subprocess
    import sys

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}  # no stored copy
    done = subprocess.run([sys.executable, "-m", "cupid.evaluation.run", "--model", "gpt-4o-2024-11-20", "--task",
                           "both", "--dry_run", "--json", "--results_dir", str(tmp_path / "res")],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    forecast = json.loads(out.strip().splitlines()[-1])
    (run,) = forecast["runs"]
    assert run["instances"] == 756 and run["data"] == NAME and "the hub could not be read" in run["data_note"]
    assert f"forecast on {NAME}" in out and forecast["total"]["calls"] == 756 * 6
    assert not (tmp_path / "res").exists()

    instances = shape_instances()
    assert {i.instance_type for i in instances} == {"consistent", "contrastive", "changing"}
    assert statistics.mean(len(i.current_checklist) for i in instances) == pytest.approx(2.90, abs=0.01)
    assert statistics.mean(sum(len(s.dialogue) for s in i.prior_interactions) / 8 for i in instances) == \
        pytest.approx(6.38, abs=0.01)
    assert statistics.mean(sum(estimate_tokens(t.content) for s in i.prior_interactions for t in s.dialogue)
                           for i in instances) == pytest.approx(8186.7, rel=0.01)

    # Local data that fails is an error, not a forecast on the shape.
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    assert eval_run.main(["--model", "gpt-4o-2024-11-20", "--dry_run", "--data", str(bad)]) == 2


def test_an_in_process_model_is_said_to_run_at_this_machines_speed_not_at_rate_limits(capsys):
    assert eval_run.main(["--model", "smollm2-135m", "--evaluator", "scripted", "--data_dir", "data/sample",
                          "--dry_run"]) == 0
    out = capsys.readouterr().out
    assert "time: scripted, smollm2-135m answer in this process" in out
    assert "unknown without --rate_limit" not in out
    assert eval_run.main(["--model", "smollm2-135m", "--evaluator", "gpt-4o-2024-11-20", "--data_dir",
                          "data/sample", "--dry_run"]) == 0
    out = capsys.readouterr().out
    assert "unknown without --rate_limit" in out and "time: smollm2-135m answers in this process" in out
