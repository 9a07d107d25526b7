"""Batch mode (--batch) for a model whose provider refuses a parameter: the refusal in the
batch's results is learned once (as online: printed once, in run.json and each step's
``sent``) and the refused items are submitted again, adapted, in the next batch round, not
asked online. Through the real openai and anthropic SDKs against the loopback server's
batch endpoints, which refuse what the chat server refuses."""
from __future__ import annotations

import io
import json

import pytest

from cupid import config
from counts_check import assert_counts_agree
from fake_llm_server import FakeResponse, _google_refusal, _openai_refusal
from tests.evaluation.test_run import assert_expected
from tests.utils.models.test_model_families import cupid_env, read_run, run_cli  # noqa: F401
from cupid.utils.models.adaptations import ADAPTATIONS
from cupid.utils.models.batch import BatchDeferred, BatchRunner
from cupid.utils.models.cache import ResponseCache
from cupid.utils.models.registry import resolve_model

MODEL, EVALUATOR = "gpt-7-preview", "gpt-7-judge"  # names no family rule knows
MAX_TOKENS_SENT_AS = {"parameter": "max_tokens", "renamed_to": "max_completion_tokens",
                      "error": "unsupported_parameter"}
TEMPERATURE_LEFT_OUT = {"parameter": "temperature", "renamed_to": None, "error": "unsupported_value"}


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setattr(config, "BATCH_POLL_INTERVAL", 0.05)


def batch_lines(server, run_dir) -> list[tuple[int, str, list[dict]]]:
    """(round, model, the bodies sent) of each batch the run submitted, in order."""
    state = json.loads((run_dir / "batches.json").read_text())
    return [(entry["round"], entry["model"],
             [line["body"] for line in server.batches[entry["batch_id"]]["items"]])
            for entry in state["batches"]]


def test_refused_parameters_are_sent_adapted_in_the_next_batch_round(cupid_env, tmp_path, capsys):  # noqa: F811
    cupid_env.reasoning_models = {MODEL, EVALUATOR}
    args = ("--model", MODEL, "--evaluator", EVALUATOR)
    assert run_cli(cupid_env, tmp_path / "online", *args) == 0
    capsys.readouterr()
    online_results, _, _ = read_run(tmp_path / "online", MODEL)
    n_online, n_refused_online = len(cupid_env.requests), len(cupid_env.refused)
    ADAPTATIONS.reset()  # the batch run learns on its own, as a new process would

    assert run_cli(cupid_env, tmp_path / "batch", *args, "--batch") == 0
    captured = capsys.readouterr()
    sent = cupid_env.requests[n_online:]
    assert sent and [r for r in sent if r["path"] != "batch"] == []  # nothing asked online
    refused = cupid_env.refused[n_refused_online:]
    assert {r["path"] for r in refused} == {"batch"}

    results, manifest, record = read_run(tmp_path / "batch", MODEL)
    assert_expected(results)
    for key in ("inference", "inference_macro", "generation", "by_instance_type", "counts"):
        assert results[key] == online_results[key], key

    # The evaluated model's first round is refused max_tokens, its second temperature (each
    # of its 4 items once), its third answered; the evaluator (asked with
    # max_completion_tokens, as the release asked its evaluator) is refused temperature in
    # its first round only, and its later rounds are sent adapted from the start.
    sent_fields = [(round_, model, len(bodies), {frozenset(b) - {"model", "messages"} for b in bodies})
                   for round_, model, bodies in batch_lines(cupid_env, tmp_path / "batch" / MODEL)]
    assert sent_fields == [
        (1, MODEL, 4, {frozenset({"max_tokens", "temperature"})}),
        (2, MODEL, 4, {frozenset({"max_completion_tokens", "temperature"})}),
        (3, MODEL, 4, {frozenset({"max_completion_tokens"})}),
        (4, EVALUATOR, 4, {frozenset({"max_completion_tokens", "temperature"})}),
        (5, EVALUATOR, 4, {frozenset({"max_completion_tokens"})}),
        (6, EVALUATOR, 4, {frozenset({"max_completion_tokens"})})]
    assert len(refused) == 12

    notes = [line for line in captured.err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 3, notes  # each adaptation printed once, however many items
    assert manifest["invocations"][-1]["parameter_adaptations"] == {
        MODEL: [MAX_TOKENS_SENT_AS, TEMPERATURE_LEFT_OUT], EVALUATOR: [TEMPERATURE_LEFT_OUT]}
    infer = record["steps"]["infer"]["sent"]
    assert infer["parameters"] == {"max_completion_tokens": 8192}
    assert [a["parameter"] for a in infer["adapted"]] == ["max_tokens", "temperature"]

    batch = results["this_invocation"]["batch"]
    assert (batch["rounds"], batch["items_submitted"], batch["items_answered"],
            batch["items_adapted"], batch["items_failed"]) == (6, 24, 12, 12, 0)
    assert "12 answered · 0 failed in their batch · 12 refused a parameter (submitted again, " \
           "adapted)" in captured.out
    for role in ("model", "evaluator"):
        usage = results["usage"]["this_invocation"][role]
        assert usage["batch_calls"] == usage["calls"] > 0  # all at the batch price
    assert_counts_agree(tmp_path / "batch" / MODEL, captured.out)


def ask(model, text):
    return model.chat("", [{"role": "user", "content": text}])


def defer(model, *texts):
    for text in texts:
        with pytest.raises(BatchDeferred):
            ask(model, text)


def two_batch_rounds(name, tmp_path):
    """``name``'s model asked "one" and "two" in a batch round, the refused items again in a
    second round; then the answers."""
    model = resolve_model(name, cache=ResponseCache(tmp_path / "cache.sqlite"))
    model.batch_runner = runner = BatchRunner(tmp_path / "batches.json", poll_interval=0.05,
                                              out=io.StringIO())
    for _ in range(2):
        defer(model, "one", "two")
        runner.run_round()
    return model, runner, [model.generate("", [{"role": "user", "content": t}]) for t in ("one", "two")]


def test_an_item_refused_again_after_its_adaptation_is_asked_online(fake_llm_env, tmp_path, capsys):
    """Round 1 refuses temperature (the documented rule): learned, submitted again without it;
    round 2 refuses it again (a proxy that says so whatever is sent): asked online, once."""
    fake_llm_env.reasoning_models = {MODEL}
    again = _openai_refusal("Unsupported value: 'temperature' does not support 0 with this "
                            "model.", "temperature", "unsupported_value")
    fake_llm_env.responder = lambda req: again if req["path"] == "batch" else "online answer"
    model = resolve_model(MODEL, cache=ResponseCache(tmp_path / "cache.sqlite"))
    out = io.StringIO()
    model.batch_runner = runner = BatchRunner(tmp_path / "batches.json", poll_interval=0.05, out=out)
    defer(model, "hello")
    runner.run_round()
    assert "1 request(s) refused a parameter" in out.getvalue()
    defer(model, "hello")  # submitted again, adapted
    runner.run_round()
    assert ask(model, "hello") == "online answer"
    bodies = [r["body"] for r in fake_llm_env.requests]
    assert [("temperature" in b) for b in bodies] == [True, False, False]
    assert [r["path"] for r in fake_llm_env.requests] == ["batch", "batch", "/v1/chat/completions"]
    counts = runner.counts()
    assert (counts["items_submitted"], counts["items_adapted"], counts["items_failed"]) == (2, 1, 1)
    assert capsys.readouterr().err.count("note: gpt-7-preview: the provider refused temperature") == 1
    state = json.loads((tmp_path / "batches.json").read_text())["batches"]
    assert [len(b.get("adapted_keys", ())) for b in state] == [1, 0]
    assert [b["failed_items"] for b in state] == [0, 1]


def test_anthropic_refused_temperature_is_left_out_in_the_next_round(fake_llm_env, tmp_path, capsys):
    """A Claude name no rule knows (a proxy alias) whose API refuses any temperature: the
    batch's errored results are learned from, and the items are batched again without it."""
    name = "claude-house-alias"
    fake_llm_env.anthropic_no_sampling = {name}
    fake_llm_env.responder = lambda req: f"answer to {req['messages'][-1]['content']}"
    model, runner, answers = two_batch_rounds(name, tmp_path)
    assert [a.text for a in answers] == ["answer to one", "answer to two"]
    assert all("temperature" not in a.parameters and
               [x["parameter"] for x in a.adaptations] == ["temperature"] for a in answers)
    first, second = [batch["items"] for batch in fake_llm_env.batches.values()]
    assert [p["params"]["temperature"] for p in first] == [0.0, 0.0]
    assert not any("temperature" in p["params"] for p in second)
    assert [r["path"] for r in fake_llm_env.requests] == ["batch"] * 4 and len(fake_llm_env.refused) == 2
    assert ADAPTATIONS.snapshot() == {name: [{"parameter": "temperature", "renamed_to": None,
                                              "error": "`temperature` is deprecated for this model."}]}
    assert capsys.readouterr().err.count(f"note: {name}: the provider refused temperature") == 1
    counts = runner.counts()
    assert (counts["items_adapted"], counts["items_answered"], counts["items_failed"]) == (2, 2, 0)
    assert model.usage.snapshot()["batch_calls"] == 2


@pytest.mark.parametrize("name, refusal", [
    ("meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
     _openai_refusal("Unsupported value: 'temperature' does not support 0 with this model.", "temperature",
                     "unsupported_value")),
    ("gemini-2.0-flash", _google_refusal("temperature is not supported for this model")),
], ids=["together", "google"])
def test_together_and_gemini_refused_temperature_is_left_out_in_the_next_round(fake_llm_env, tmp_path, capsys,
                                                                             name, refusal):
    """Together's (OpenAI's error lines) and the Gemini API's batches (the item's error: its
    status, Google's message) are learned from as OpenAI's and Anthropic's are: the refused
    items are batched again without temperature, never asked online."""
    def answer(req):
        if req["path"] == "batch" and '"temperature"' in json.dumps(req["body"]):
            return refusal
        return f"answer to {req['messages'][-1]['content']}"

    fake_llm_env.responder = answer
    model, runner, answers = two_batch_rounds(name, tmp_path)
    assert [a.text for a in answers] == ["answer to one", "answer to two"]
    assert all([x["parameter"] for x in a.adaptations] == ["temperature"] for a in answers)
    assert [r["path"] for r in fake_llm_env.requests] == ["batch"] * 4  # nothing asked online
    assert capsys.readouterr().err.count(f"note: {name}: the provider refused temperature") == 1
    counts = runner.counts()
    assert (counts["items_adapted"], counts["items_answered"], counts["items_failed"]) == (2, 2, 0)
