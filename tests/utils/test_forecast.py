"""--dry_run's forecast of reasoning (thinking) tokens: billed as output, so forecast per
model family from the effort or budget a request sets, or from what an earlier run recorded
for the model, and shown apart in the table and the JSON."""
from __future__ import annotations

import io
import json

import pytest

from cupid.utils.forecast import print_forecast, recorded_reasoning, role_forecast, summary
from cupid.utils.models.registry import resolve_model
from cupid.utils.models.request import Request
from cupid.utils.models.usage import estimate_cost

ANSWER = 300  # the answer's own tokens, the same for every model


def forecast_one_call(name: str, recorded: dict | None = None, **overrides):
    model = resolve_model(name, overrides=overrides or None)
    forecast = role_forecast("model", model, recorded=recorded)
    request = Request(system_prompt="You infer preferences.", temperature=0, max_tokens=8192,
                      messages=({"role": "user", "content": "history " * 400},),
                      reasoning_effort=overrides.get("reasoning_effort"),
                      thinking_budget=overrides.get("thinking_budget"))
    forecast.add_request("infer", request, ANSWER)
    return forecast


@pytest.mark.parametrize("name, overrides, reasoning, basis", [
    ("gpt-4o", {}, 0, "does not reason"),
    ("gpt-5-mini", {}, 1500, "reasoning_effort medium (the gpt-5 family's default)"),
    ("gpt-5-mini", {"reasoning_effort": "low"}, 600, "reasoning_effort low (set)"),
    ("gpt-5.1", {}, 0, "reasoning_effort none (the gpt-5.1 family's default)"),
    ("o3", {}, 1500, "reasoning_effort medium"),
    ("gemini-2.5-pro", {}, 3000, "dynamic thinking"),
    ("gemini-2.5-pro", {"thinking_budget": 128}, 128, "thinking_budget 128 (set)"),
    ("gemini-2.5-flash-lite", {}, 0, "no thinking unless thinking_budget is set"),
    ("gemini-2.0-flash", {}, 0, "no thinking"),
    ("claude-3-7-sonnet-20250219", {}, 1024, "thinking_budget 1,024 (the paper's)"),
    ("claude-sonnet-4-5", {}, 0, "no extended thinking"),
    ("claude-sonnet-4-5", {"thinking_budget": 2048}, 2048, "thinking_budget 2,048 (set)"),
    ("claude-opus-4-7", {}, 1500, "adaptive thinking"),
])
def test_each_family_forecasts_its_reasoning(name, overrides, reasoning, basis):
    forecast = forecast_one_call(name, **overrides)
    assert forecast.reasoning_tokens == reasoning
    assert forecast.output_tokens == ANSWER + reasoning
    assert basis in forecast.reasoning_basis
    assert forecast.by_step["infer"][3] == reasoning


def test_gpt4o_gpt5mini_and_gemini_pro_forecast_different_output_priced_as_output():
    forecasts = {name: forecast_one_call(name) for name in ("gpt-4o", "gpt-5-mini", "gemini-2.5-pro")}
    outputs = {name: f.output_tokens for name, f in forecasts.items()}
    assert len(set(outputs.values())) == 3, outputs
    for name, forecast in forecasts.items():
        assert forecast.cost(False) == estimate_cost(name, forecast.input_tokens, ANSWER + forecast.reasoning_tokens)
    result = summary(list(forecasts.values())[1:2], {})
    role = result["roles"]["model"]
    assert (role["output_tokens"], role["reasoning_tokens"]) == (ANSWER + 1500, 1500)
    assert result["total"]["reasoning_tokens"] == 1500
    assert role["by_step"]["infer"]["reasoning_tokens"] == 1500
    out = io.StringIO()
    print_forecast({"dry_run": True, **result}, [], "rendered", [], as_json=True, out=out)
    table = out.getvalue().splitlines()
    assert "reasoning" in table[0].split() and "1,500" in table[1].split()
    assert any(line.startswith("reasoning: ") and "gpt-5-mini" in line and "our assumption" in line
               for line in table)
    assert json.loads(table[-1])["roles"]["model"]["reasoning_tokens"] == 1500


def write(path, value) -> None:
    path.write_text(json.dumps(value))


def test_a_run_directorys_recorded_reasoning_is_the_mean_per_call(tmp_path):
    def step(model, attempts, reasoning=None):
        usage = {"prompt_tokens": 10, "completion_tokens": 5}
        if reasoning is not None:
            usage["reasoning_tokens"] = reasoning
        return {"status": "done", "model": model, "attempts": attempts, "usage": usage}

    write(tmp_path / "persona-a__consistent.json", {
        "steps": {"infer": step("gpt-5-mini", 1, 900), "generate": step("gpt-5-mini", 2, 2700)},
        "evaluations": {"gpt-4o": {"steps": {"judge": step("claude-3-7-sonnet-20250219", 1)}}}})
    write(tmp_path / "persona-b__consistent.json", {"steps": {"infer": step("gpt-5-mini", 1)}})
    (tmp_path / "persona-c__consistent.json").write_text("{cut short")  # unreadable: passed over
    write(tmp_path / "results.json", {"usage": {"this_invocation": {
        "evaluator": {"model": "gemini-2.5-pro", "calls": 4, "reasoning_tokens": 2000},
        "model": {"model": "gpt-5-mini", "calls": 99, "reasoning_tokens": 1}}}})

    recorded = recorded_reasoning(tmp_path)
    # gpt-5-mini from its steps (3600 over 4 calls), not from results.json; Claude recorded none.
    assert recorded == {"gpt-5-mini": 900.0, "gemini-2.5-pro": 500.0}
    forecast = forecast_one_call("gpt-5-mini", recorded=recorded)
    assert forecast.reasoning_tokens == 900 and forecast.output_tokens == ANSWER + 900
    assert "the mean the earlier run in the output directory recorded" in forecast.reasoning_basis
    assert forecast_one_call("gpt-4o", recorded=recorded).reasoning_tokens == 0
    assert recorded_reasoning(tmp_path / "no-such-run") == {}
