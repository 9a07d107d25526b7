"""Today's models against a loopback server that refuses what the providers document:
the families' parameter rules, the adaptation to an unknown model's refusals, reasoning
and thinking tokens, truncated answers, the reasoning flags and the context-window check.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cupid import config
from cupid_responder import CupidResponder, make_row, two_instance_plans, write_two_instance_data
from cupid.evaluation import run as run_module
from fake_llm_server import FakeLLMServer
from tests.evaluation.test_run import assert_expected
from cupid.utils.models.catalog import context_window_of, price_of, tables
from cupid.utils.models.call_errors import ContextWindowExceeded, ModelCallFailed, ModelConfigurationError
from cupid.utils.models.registry import resolve_model
from cupid.utils.models.usage import estimate_cost


@pytest.fixture
def cupid_env(fake_llm_env: FakeLLMServer, tmp_path):
    """The fake server answering the CUPID steps of two_instance_plans, and their data."""
    plans = two_instance_plans()
    fake_llm_env.responder = CupidResponder(plans)
    fake_llm_env.data_file = write_two_instance_data(tmp_path / "data.jsonl", plans)
    return fake_llm_env


def run_cli(server, results, *args):
    return run_module.main([*args, "--data", str(server.data_file), "--results_dir", str(results),
                            "--n_workers", "2", "--max_retries", "2", "--timeout", "5",
                            "--task", "both"])


def read_run(results: Path, label: str) -> tuple[dict, dict, dict]:
    from cupid.evaluation.store import run_dir_for

    run_dir = run_dir_for(results, label, "default")
    return (json.loads((run_dir / "results.json").read_text()),
            json.loads((run_dir / "run.json").read_text()),
            json.loads((run_dir / "persona-a__consistent.json").read_text()))


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


# -- OpenAI: the gpt-5 family beside the paper's models ---------------------------------------
def test_gpt5_family_gives_the_paper_models_metrics_on_the_same_answers(cupid_env, tmp_path, capsys):
    cupid_env.reasoning_tokens = 40
    paper = tmp_path / "paper"
    assert run_cli(cupid_env, paper, "--model", "gpt-4.1-nano-2025-04-14",
                   "--evaluator", "gpt-4o-2024-11-20") == 0
    n_paper = len(cupid_env.requests)
    today = tmp_path / "today"
    assert run_cli(cupid_env, today, "--model", "gpt-5-mini-2025-08-07",
                   "--evaluator", "gpt-5-2025-08-07") == 0
    assert cupid_env.refused == []  # no request the reasoning models refuse was sent
    assert len(cupid_env.requests) == 2 * n_paper == 24

    results_paper, _, record_paper = read_run(paper, "gpt-4.1-nano-2025-04-14")
    results, _, record = read_run(today, "gpt-5-mini-2025-08-07")
    assert_expected(results_paper)
    assert_expected(results)
    for key in ("inference", "inference_macro", "generation", "by_instance_type"):
        assert results[key] == results_paper[key], key

    gpt5_bodies = [r["body"] for r in cupid_env.requests[n_paper:]]
    assert all("temperature" not in b and "max_tokens" not in b for b in gpt5_bodies)
    assert {b["max_completion_tokens"] for b in gpt5_bodies} == {8192, config.DECOMPOSER_MAX_TOKENS}
    # What each step sent, as the adapter sent it.
    assert record["steps"]["infer"]["sent"]["parameters"] == {"max_completion_tokens": 8192}
    assert record_paper["steps"]["infer"]["sent"]["parameters"] == {"temperature": 0, "max_tokens": 8192}
    judge = record["evaluations"]["gpt-5-2025-08-07"]["steps"]["judge"]["sent"]["parameters"]
    assert judge == {"max_completion_tokens": 8192}
    # Reasoning tokens are counted as output, and priced so.
    usage = results["usage"]["this_invocation"]["model"]
    assert usage["reasoning_tokens"] == 40 * usage["calls"] == 160
    assert usage["estimated_cost_usd"] == estimate_cost(
        "gpt-5-mini-2025-08-07", usage["prompt_tokens"], usage["completion_tokens"]) > 0
    assert record["steps"]["infer"]["usage"]["reasoning_tokens"] == 40
    assert results["usage"]["recorded"]["gpt-5-mini-2025-08-07"]["reasoning_tokens"] == 160
    assert results_paper["usage"]["recorded"]["gpt-4.1-nano-2025-04-14"]["reasoning_tokens"] == 0
    assert results["answer_endings"] == {"answers": 12, "length": 0, "filtered": 0, "refused": 0,
                                         "blocked": 0, "empty": 0, "by_step": {}}


def test_reasoning_effort_is_sent_to_reasoning_models_only(fake_llm_env):
    model = resolve_model("gpt-5-mini-2025-08-07", role="evaluated",
                          overrides={"reasoning_effort": "low"})
    completion = model.generate("", user("q"))
    body = fake_llm_env.requests[0]["body"]
    assert body["reasoning_effort"] == "low" and "temperature" not in body
    assert completion.parameters == {"max_completion_tokens": 8192, "reasoning_effort": "low"}
    assert model.label == "gpt-5-mini-2025-08-07[reasoning_effort=low]"
    with pytest.raises(ModelConfigurationError, match="not a reasoning model"):
        resolve_model("gpt-4o-2024-11-20", overrides={"reasoning_effort": "low"})
    with pytest.raises(ModelConfigurationError, match="minimal, low, medium, high"):
        resolve_model("gpt-5-mini", overrides={"reasoning_effort": "none"})
    with pytest.raises(ModelConfigurationError, match="no temperature"):
        resolve_model("o3-mini", overrides={"temperature": 0.5})
    with pytest.raises(ModelConfigurationError, match="thinking_budget is not supported by openai"):
        resolve_model("gpt-5", overrides={"thinking_budget": 2048})


def test_gpt5_chat_and_gpt51_rules(fake_llm_env):
    chat = resolve_model("gpt-5-chat-latest", role="evaluated")
    chat.generate("", user("q"))
    assert fake_llm_env.requests[-1]["body"]["temperature"] == 0
    assert fake_llm_env.requests[-1]["body"]["max_completion_tokens"] == 8192
    newer = resolve_model("gpt-5.1-2025-11-13", role="evaluated", overrides={"reasoning_effort": "none"})
    newer.generate("", user("q"))
    body = fake_llm_env.requests[-1]["body"]
    assert body["temperature"] == 0 and body["reasoning_effort"] == "none"
    assert fake_llm_env.refused == []


def test_reasoning_efforts_per_gpt5_generation(fake_llm_env):
    """gpt-5.1 takes none/low/medium/high (openai-python's reasoning_effort docstring), not
    xhigh, which came after gpt-5.1-codex-max; gpt-5.2 takes both."""
    with pytest.raises(ModelConfigurationError, match=r"\(it takes none, low, medium, high\)$"):
        resolve_model("gpt-5.1-2025-11-13", overrides={"reasoning_effort": "xhigh"})
    with pytest.raises(ModelConfigurationError, match="it takes none, low, medium, high"):
        resolve_model("gpt-5.1", overrides={"reasoning_effort": "minimal"})
    newer = resolve_model("gpt-5.2", role="evaluated", overrides={"reasoning_effort": "xhigh"})
    newer.generate("", user("q"))
    body = fake_llm_env.requests[-1]["body"]
    assert body["reasoning_effort"] == "xhigh" and "temperature" not in body
    assert fake_llm_env.refused == []


def test_an_effort_the_rules_do_not_know_is_passed_on_with_a_warning(fake_llm_env, capsys):
    """--model_args reasoning_effort takes what the provider takes: an effort the SDK does not
    name yet, or one a family open to newer efforts (gpt-5.2 and later, unknown names) is not
    known to take, is sent with a warning, and the provider's answer decides; a family whose
    efforts are sourced still refuses it before any request."""
    from cupid.utils.command_line import generation_params, known_reasoning_efforts

    assert "max" in known_reasoning_efforts()  # openai-python 2.45 and later
    assert generation_params("reasoning_effort=max") == {"reasoning_effort": "max"}
    assert capsys.readouterr().err == ""
    assert generation_params("reasoning_effort=ultra") == {"reasoning_effort": "ultra"}
    assert "reasoning_effort=ultra is not one the openai SDK names" in capsys.readouterr().err
    newer = resolve_model("gpt-6", role="evaluated", overrides={"reasoning_effort": "ultra"})
    assert "not known for the unknown family" in capsys.readouterr().err
    newer.generate("", user("q"))
    assert fake_llm_env.requests[-1]["body"]["reasoning_effort"] == "ultra"
    # gpt-5.4 is given "max": sent, and refused in OpenAI's words (the loopback server's rule).
    model = resolve_model("gpt-5.4", role="evaluated", overrides={"reasoning_effort": "max"})
    assert "not known for the gpt-5.2+ family" in capsys.readouterr().err
    with pytest.raises(ModelCallFailed, match="'max' is not supported with the 'gpt-5.4' model"):
        model.generate("", user("q"))
    with pytest.raises(ModelConfigurationError, match="not accepted by the gpt-5 family"):
        resolve_model("gpt-5-mini", overrides={"reasoning_effort": "max"})


def test_fake_server_refuses_an_effort_the_family_does_not_take(fake_llm_env):
    """The server's own rule, met by a client that skips the adapter's check: OpenAI's 400 for
    gpt-5.1 and 'minimal' (github.com/anomalyco/opencode/issues/4451)."""
    import openai

    client = openai.OpenAI(api_key="k", base_url=fake_llm_env.openai_base_url, max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="gpt-5.1", messages=user("q"), reasoning_effort="minimal")
    assert caught.value.code == "unsupported_value" and caught.value.param == "reasoning_effort"
    assert caught.value.body["message"] == ("Unsupported value: 'minimal' is not supported with the "
                                            "'gpt-5.1' model. Supported values are: 'none', 'low', "
                                            "'medium', and 'high'.")
    with pytest.raises(openai.BadRequestError, match="'none' is not supported with the 'gpt-5-mini'"):
        client.chat.completions.create(model="gpt-5-mini", messages=user("q"), reasoning_effort="none")
    client.chat.completions.create(model="gpt-5.2", messages=user("q"), reasoning_effort="xhigh")
    assert len(fake_llm_env.refused) == 2 and len(fake_llm_env.requests) == 3


def test_openai_answer_cut_by_reasoning_is_truncated(fake_llm_env):
    fake_llm_env.reasoning_tokens = 100
    fake_llm_env.responder = lambda req: "a long answer of seven words here"
    model = resolve_model("gpt-5-nano", role="evaluated", max_tokens=103)
    completion = model.generate("", user("q"))
    assert completion.ending == "length" and completion.text == "a long answer"
    assert completion.usage.completion_tokens == 103 and completion.usage.reasoning_tokens == 100
    assert model.usage.snapshot(model.name)["endings"]["length"] == 1


# -- An unknown model under the same rules: adapted once ----------------------------------------
def test_unknown_model_adapts_once_per_parameter(cupid_env, tmp_path, capsys):
    cupid_env.reasoning_models = {"gpt-7-preview", "gpt-7-judge"}
    results_dir = tmp_path / "res"
    assert run_cli(cupid_env, results_dir, "--model", "gpt-7-preview",
                   "--evaluator", "gpt-7-judge") == 0
    # The evaluated model is refused max_tokens, then temperature; the evaluator (asked with
    # max_completion_tokens, as the release asked its evaluator) only temperature. Once each,
    # however many calls: 12 answered + 3 refused.
    refused = [(r["model"], r["body"].get("max_tokens"), r["body"].get("temperature"))
               for r in cupid_env.refused]
    assert sorted(refused, key=str) == [("gpt-7-judge", None, 0), ("gpt-7-preview", 8192, 0),
                               ("gpt-7-preview", None, 0)]
    assert len(cupid_env.requests) == 12 + 3
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 3, notes
    assert sum("gpt-7-preview: the provider refused max_tokens (unsupported_parameter); "
               "max_tokens sent as max_completion_tokens" in n for n in notes) == 1

    results, manifest, record = read_run(results_dir, "gpt-7-preview")
    assert_expected(results)
    learned = manifest["invocations"][-1]["parameter_adaptations"]
    assert learned["gpt-7-preview"] == [
        {"parameter": "max_tokens", "renamed_to": "max_completion_tokens", "error": "unsupported_parameter"},
        {"parameter": "temperature", "renamed_to": None, "error": "unsupported_value"}]
    assert learned["gpt-7-judge"] == [
        {"parameter": "temperature", "renamed_to": None, "error": "unsupported_value"}]
    infer = record["steps"]["infer"]["sent"]
    assert infer["parameters"] == {"max_completion_tokens": 8192}
    assert [a["parameter"] for a in infer["adapted"]] == ["max_tokens", "temperature"]
    assert results["usage"]["this_invocation"]["model"]["retries"] == 0


def test_refusal_of_a_users_temperature_is_not_adapted(fake_llm_env):
    fake_llm_env.reasoning_models = {"gpt-7-preview"}
    model = resolve_model("gpt-7-preview", role="evaluator", overrides={"temperature": 0.3},
                          max_retries=0)
    from cupid.utils.models.call_errors import ModelCallFailed

    with pytest.raises(ModelCallFailed, match="does not support 0.3"):
        model.generate("", user("q"))
    assert len(fake_llm_env.requests) == 1


# -- Anthropic: Claude 4.x with and without thinking ----------------------------------------------
def test_claude_4_without_thinking(fake_llm_env):
    fake_llm_env.responder = lambda req: "plain answer"
    model = resolve_model("claude-sonnet-4-5-20250929", role="evaluated")
    completion = model.generate("sys", user("q"))
    body = fake_llm_env.requests[0]["body"]
    assert body["temperature"] == 0 and body["max_tokens"] == 8192
    assert "thinking" not in body and "top_p" not in body
    assert completion.text == "plain answer" and completion.usage.completion_tokens == 2
    assert completion.parameters == {"max_tokens": 8192, "temperature": 0}


def test_claude_4_with_thinking(fake_llm_env):
    fake_llm_env.responder = lambda req: "the answer"
    fake_llm_env.anthropic_thinking = "one two three four five six"
    model = resolve_model("claude-opus-4-1-20250805", role="evaluated",
                          overrides={"thinking_budget": 2048})
    completion = model.generate("sys", user("q"))
    body = fake_llm_env.requests[0]["body"]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["temperature"] == 1 and body["max_tokens"] == 8192
    assert fake_llm_env.refused == []
    assert completion.text == "the answer"  # the thinking block is not in the answer
    assert completion.usage.completion_tokens == 2 + 6  # thinking billed as output
    # Too small for its thinking: cut, recorded as truncated.
    small = resolve_model("claude-haiku-4-5-20251001", max_tokens=2100,
                          overrides={"thinking_budget": 2048})
    fake_llm_env.anthropic_thinking = " ".join(["t"] * 2099)
    cut = small.generate("", user("q"))
    assert fake_llm_env.requests[-1]["body"]["max_tokens"] == 2100
    assert cut.ending == "length" and cut.text == "the"


def test_claude_thinking_budget_is_validated(fake_llm_env):
    with pytest.raises(ModelConfigurationError, match="minimum of 1024"):
        resolve_model("claude-sonnet-4-5", overrides={"thinking_budget": 512})
    with pytest.raises(ModelConfigurationError, match="no extended thinking"):
        resolve_model("claude-3-5-sonnet-20241022", overrides={"thinking_budget": 2048})
    with pytest.raises(ModelConfigurationError, match="reasoning_effort is not supported by anthropic"):
        resolve_model("claude-sonnet-4-5", overrides={"reasoning_effort": "low"})
    # 0 turns the paper's thinking of Claude 3.7 Sonnet off.
    model = resolve_model("claude-3-7-sonnet-20250219", role="evaluated", overrides={"thinking_budget": 0})
    model.generate("", user("q"))
    assert "thinking" not in fake_llm_env.requests[-1]["body"]
    assert fake_llm_env.requests[-1]["body"]["temperature"] == 0


def test_claude_run_with_thinking_records_what_was_sent(cupid_env, tmp_path):
    results_dir = tmp_path / "res"
    assert run_cli(cupid_env, results_dir, "--model", "claude-sonnet-4-5-20250929",
                   "--model_args", "thinking_budget=2048", "--evaluator", "gpt-4o-2024-11-20") == 0
    results, manifest, record = read_run(results_dir, "claude-sonnet-4-5-20250929[thinking_budget=2048]")
    assert_expected(results)
    assert manifest["generation_overrides"] == {"thinking_budget": 2048}
    assert record["steps"]["infer"]["sent"]["parameters"] == {
        "thinking": {"type": "enabled", "budget_tokens": 2048}, "max_tokens": 8192, "temperature": 1}


# -- Google: Gemini's thoughts and an answer cut at MAX_TOKENS -----------------------------------
def test_gemini_thoughts_are_output_tokens(fake_llm_env):
    fake_llm_env.gemini_thoughts = 120
    fake_llm_env.responder = lambda req: "three word answer"
    model = resolve_model("gemini-2.5-flash", role="evaluated")
    completion = model.generate("", user("q"))
    assert completion.text == "three word answer" and completion.ending != "length"
    assert (completion.usage.completion_tokens, completion.usage.reasoning_tokens) == (123, 120)
    with pytest.raises(ModelConfigurationError, match="thinking cannot be turned off"):
        resolve_model("gemini-2.5-pro", overrides={"thinking_budget": 0})
    with pytest.raises(ModelConfigurationError, match="does not think"):
        resolve_model("gemini-2.0-flash", overrides={"thinking_budget": 1024})
    budgeted = resolve_model("gemini-2.5-flash", role="evaluated", overrides={"thinking_budget": 8190})
    cut = budgeted.generate("", user("q"))
    from fake_llm_server import gemini_thinking_budget

    assert gemini_thinking_budget(fake_llm_env.requests[-1]["body"]) == 8190
    assert cut.ending == "length" and cut.text == "three word"
    assert fake_llm_env.refused == []


def test_gemini_run_with_truncated_answers(cupid_env, tmp_path, capsys):
    results_dir = tmp_path / "res"
    # The thinking budget leaves 12 tokens of the 8192 for the answer: the inference
    # answers lose their preference (unparseable, asked 3 times), the responses are cut.
    code = run_cli(cupid_env, results_dir, "--model", "gemini-2.5-flash", "--model_args",
                   "thinking_budget=8180", "--evaluator", "gpt-4o-2024-11-20")
    assert code == 1
    results, _, record = read_run(results_dir, "gemini-2.5-flash[thinking_budget=8180]")
    infer = record["steps"]["infer"]
    assert infer["status"] == "failed" and infer["endings"] == ["length"] * 3
    assert "cut at the token limit" in infer["error"]
    assert record["steps"]["generate"]["endings"] == ["length"]
    cut = results["answer_endings"]
    assert cut["by_step"] == {"infer": {"length": 6}, "generate": {"length": 2}}
    assert cut["length"] == 8
    assert results["usage"]["this_invocation"]["model"]["endings"]["length"] == 8
    assert results["usage"]["this_invocation"]["model"]["reasoning_tokens"] == 8 * 8180
    out = capsys.readouterr().out
    assert f"answers: cut at the token limit 8, filtered 0, refused 0, blocked 0, empty 0 of {cut['answers']}" in out


# -- The context window: refused before sending ---------------------------------------------------
def test_request_longer_than_the_context_window_is_not_sent(fake_llm_env):
    model = resolve_model("gpt-4o-2024-11-20", role="evaluated")
    long_prompt = "word " * 220_000  # 1.1 M characters: at least 137,500 tokens
    with pytest.raises(ContextWindowExceeded) as caught:
        model.generate("", user(long_prompt))
    assert fake_llm_env.requests == []
    message = str(caught.value)
    assert "at least 137500 prompt tokens + 8192 max_tokens = 145692 > 128000 tokens" in message
    assert model.usage.snapshot()["failed_calls"] == 1
    # A step fails at once with both numbers; no retry, no request.
    from cupid.evaluation.steps import infer

    with pytest.raises(ModelCallFailed, match=r"at least 137\d\d\d prompt tokens \+ 8192 max_tokens"):
        infer.ask(long_prompt, "r").answer(model)
    assert fake_llm_env.requests == []
    # Within the window it is sent.
    model.generate("", user("word " * 1000))
    assert len(fake_llm_env.requests) == 1


def test_catalog_has_the_paper_models_windows_and_dated_prices():
    for name in ("gpt-4o-2024-11-20", "gpt-4.1-nano-2025-04-14", "gpt-4.1-mini-2025-04-14",
                 "o3-mini-2025-01-31", "o1", "claude-3-5-sonnet-20241022", "claude-3-7-sonnet-20250219",
                 "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
                 "meta-llama/Meta-Llama-3.1-405B-Instruct-Turbo", "gemini-2.0-pro-exp-02-05",
                 "gemini-2.0-flash-thinking-exp-01-21"):
        assert context_window_of(name) and context_window_of(name) >= 128_000, name
    # A dated snapshot missing from the table is priced as its alias.
    assert price_of("gpt-5-mini-2099-01-01") == price_of("gpt-5-mini") == (0.25, 2.00, 0.025, None)
    assert price_of("gpt-4o-2024-05-13")[:2] == (5.00, 15.00)  # not the alias's price
    assert price_of("some-new-model") is None and context_window_of("some-new-model") is None
    assert all(f.context_window is None or f.context_window >= 128_000
               for table in tables().values() for f in table.models.values())


def test_reasoning_flags_are_validated_on_the_command_line(fake_llm_env, tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    plans = two_instance_plans()
    data.write_text(json.dumps(make_row("p", "consistent", plans[0])) + "\n")
    common = ["--data", str(data), "--results_dir", str(tmp_path / "r")]
    cases = [
        (["--model", "gpt-4o-2024-11-20", "--model_args", "reasoning_effort=low"], "not a reasoning model"),
        (["--model", "gpt-5-mini", "--model_args", "reasoning_effort=low;high"], "expected an effort word"),
        (["--model", "gpt-5-mini", "--model_args", "reasoning_effort=extreme"], "not accepted by the gpt-5 family"),
        (["--model", "gpt-5-mini", "--model_args", "thinking_budget=2048"], "thinking_budget is not supported"),
        (["--model", "gpt-5-mini", "--evaluator", "claude-sonnet-4-5", "--evaluator_args",
          "thinking_budget=100"], "minimum of 1024"),
    ]
    for args, expected in cases:
        with pytest.raises(SystemExit) if ";" in args[-1] else _no_raise():
            code = run_module.main(args + common)
            assert code == 2
        err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("warning:")]
        assert len(err) == 1 and expected in err[0], (args, err)
    assert fake_llm_env.requests == []


class _no_raise:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_cache_keeps_truncation_and_reasoning_tokens(tmp_path):
    from cupid.utils.models.cache import ResponseCache
    from cupid.utils.models.request import Completion, Usage

    cache = ResponseCache(tmp_path / "cache")
    cache.put("k1", Completion("cut", Usage(5, 50, reasoning_tokens=47), ending="length"))
    cache.put("k2", Completion("whole", Usage(5, 3)))
    cache.close()
    other = ResponseCache(tmp_path / "cache")  # another process reads the first one's file
    cut, plain = other.get("k1"), other.get("k2")
    assert cut.ending == "length" and cut.usage.reasoning_tokens == 47 and cut.usage.completion_tokens == 50
    assert plain.ending != "length" and plain.usage.reasoning_tokens == 0
    # A line written before truncation was recorded reads as a whole answer.
    (tmp_path / "cache" / "old-1-20260101T000000-000000.jsonl").write_text(json.dumps(
        {"key": "k3", "text": "old", "prompt_tokens": 3, "completion_tokens": 2, "batch": False}) + "\n")
    old = other.get("k3")
    assert old.text == "old" and old.ending != "length" and old.usage.reasoning_tokens == 0
    other.close()


def test_served_model_is_checked_against_the_context_its_server_states(fake_server):
    from cupid.utils.models.vllm_models import VLLMModel

    model = VLLMModel(f"fake-model@{fake_server.openai_base_url}", max_tokens=100)
    model.generate("", user("short"))  # no stated context: unchecked, sent
    model.max_model_len = 1000  # as check() reads it from vLLM's models list
    with pytest.raises(ContextWindowExceeded, match="at least 1000 prompt tokens \\+ 100 max_tokens"):
        model.generate("", user("x" * 8000))
    assert len(fake_server.requests) == 1


@pytest.mark.parametrize("model_name, refusal", [
    ("claude-sonnet-4-5", "prompt is too long: 208656 tokens > 200000 maximum"),
    ("gemini-2.5-flash", "The input token count (1200293) exceeds the maximum number of tokens "
                         "allowed (1048576)."),
])
def test_providers_context_refusals_are_not_retried(fake_llm_env, model_name, refusal):
    from fake_llm_server import FakeResponse
    from cupid.utils.models.call_errors import ModelCallFailed

    fake_llm_env.script(FakeResponse(status=400, text=refusal))
    model = resolve_model(model_name, role="evaluated", max_retries=3)
    with pytest.raises(ModelCallFailed) as caught:
        model.generate("", user("q"))
    assert len(fake_llm_env.requests) == 1 and caught.value.attempts == 1
    assert "does not fit the model's context (HTTP 400)" in caught.value.reason
    assert refusal.rstrip(".") in caught.value.reason


def test_claude_opus_47_and_claude_5_get_no_temperature_and_no_budget(fake_llm_env):
    for name in ("claude-opus-4-7", "claude-sonnet-5"):
        model = resolve_model(name, role="evaluated")
        model.generate("sys", user("q"))
        body = fake_llm_env.requests[-1]["body"]
        assert "temperature" not in body and "thinking" not in body and body["max_tokens"] == 8192
        with pytest.raises(ModelConfigurationError, match="thinks adaptively"):
            resolve_model(name, overrides={"thinking_budget": 2048})
        with pytest.raises(ModelConfigurationError, match="refuses any temperature"):
            resolve_model(name, overrides={"temperature": 0.5})
    assert fake_llm_env.refused == []


def test_fake_server_keeps_anthropics_sampling_rules(fake_llm_env):
    """Temperature with top_p is refused on Sonnet 4.6 as on Sonnet 4.5
    (github.com/Vali-98/ChatterUI/issues/564); under API version 2026-10-21 any sampling
    parameter is refused (platform.claude.com/docs/en/api/versioning), under 2023-06-01 not."""
    import anthropic

    client = anthropic.Anthropic(api_key="k", base_url=fake_llm_env.base_url, max_retries=0)
    legacy = {"anthropic-version": "2023-06-01"}
    with pytest.raises(anthropic.BadRequestError, match="cannot both be specified"):
        client.messages.create(model="claude-sonnet-4-6", max_tokens=10, messages=user("q"),
                               extra_body={"temperature": 0, "top_p": 0.9}, extra_headers=legacy)
    client.messages.create(model="claude-sonnet-4-6", max_tokens=10, messages=user("q"),
                           extra_body={"temperature": 0}, extra_headers=legacy)
    with pytest.raises(anthropic.BadRequestError, match="temperature: Extra inputs are not permitted"):
        client.messages.create(model="claude-sonnet-4-6", max_tokens=10, messages=user("q"),
                               extra_body={"temperature": 0},
                               extra_headers={"anthropic-version": "2026-10-21"})
    with pytest.raises(anthropic.BadRequestError, match='Use "thinking.type.adaptive"'):
        client.messages.create(model="claude-opus-4-7", max_tokens=4096, messages=user("q"),
                               extra_body={"thinking": {"type": "enabled", "budget_tokens": 2048}},
                               extra_headers=legacy)
    assert len(fake_llm_env.refused) == 3 and len(fake_llm_env.requests) == 4


def test_claude_refusing_temperature_is_adapted_once(fake_llm_env, capsys):
    from concurrent.futures import ThreadPoolExecutor

    fake_llm_env.anthropic_no_sampling = {"claude-next-preview"}
    model = resolve_model("claude-next-preview", role="evaluator")
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda i: model.generate("", user(f"q{i}")), range(8)))
    assert [a.text for a in answers] == ["OK"] * 8
    assert len(fake_llm_env.refused) == 1 and len(fake_llm_env.requests) == 9
    assert all("temperature" not in r["body"] for r in fake_llm_env.requests[1:])
    assert answers[-1].adaptations == ({"parameter": "temperature", "renamed_to": None,
                                        "error": "`temperature` is deprecated for this model."},)
    assert capsys.readouterr().err.count("note: claude-next-preview") == 1


def test_an_adaptation_that_does_not_help_fails_the_call(fake_llm_env):
    from fake_llm_server import FakeResponse
    from cupid.utils.models.call_errors import ModelCallFailed

    refusal = FakeResponse(status=400, raw_body=json.dumps({"error": {
        "message": "Unsupported value: 'temperature' does not support 0 with this model.",
        "type": "invalid_request_error", "param": "temperature", "code": "unsupported_value"}}).encode())
    fake_llm_env.script(refusal, refusal)  # refused again once adapted: a server we cannot satisfy
    model = resolve_model("gpt-4o-2024-11-20", role="evaluator", max_retries=3)
    with pytest.raises(ModelCallFailed, match="does not support 0"):
        model.generate("", user("q"))
    bodies = [r["body"] for r in fake_llm_env.requests]
    assert len(bodies) == 2 and "temperature" in bodies[0] and "temperature" not in bodies[1]


def test_a_refusal_learned_by_another_call_is_resent_not_failed(fake_llm_env):
    from fake_llm_server import FakeResponse
    from cupid.utils.models.adaptations import ADAPTATIONS, Adaptation

    model = resolve_model("gpt-7-preview", role="evaluator")
    model.generate("", user("first"))  # the first call opens the model to concurrency
    # Another call learned the refusal while this one's request, built before, was in flight.
    ADAPTATIONS.learn(model.adaptation_key(), Adaptation("temperature", None, "unsupported_value"))
    fake_llm_env.script(FakeResponse(status=400, raw_body=json.dumps({"error": {
        "message": "Unsupported value", "type": "invalid_request_error", "param": "temperature",
        "code": "unsupported_value"}}).encode()))
    assert model.generate("", user("second")).text == "OK"
    assert "temperature" not in fake_llm_env.requests[-1]["body"]
