"""Each provider's batch results are matched to their requests by id, never by position: the
loopback server writes them out of submission order (as OpenAI, Together and Anthropic say
they may, and as Gemini's were seen to), and every adapter's ``fetch`` still gives each
request its own answer. Through the real SDKs."""
from __future__ import annotations

import time

import pytest

from cupid.utils.models.registry import resolve_model
from cupid.utils.models.request import Completion, Request

MODELS = ["gpt-4o-mini", "claude-3-5-haiku-20241022",
          "together:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo", "gemini-2.0-flash"]


def echo(req: dict) -> str:
    return f"answer to {req['messages'][-1]['content']}"


@pytest.mark.parametrize("name", MODELS)
def test_batch_answers_are_matched_by_id_not_by_position(fake_llm_env, name):
    fake_llm_env.responder = echo
    model = resolve_model(name)
    adapter = model.batch_adapter()
    questions = {f"item-{i}": f"question {i}" for i in range(5)}
    lines = [adapter.line(custom_id, Request(system_prompt="", temperature=0.0, max_tokens=50,
                                             messages=({"role": "user", "content": text},)))
             for custom_id, text in questions.items()]
    batch_id = adapter.submit(lines)
    deadline = time.time() + 10
    while not adapter.poll(batch_id)[0]:
        assert time.time() < deadline
        time.sleep(0.02)

    answers = adapter.fetch(batch_id)

    batch = fake_llm_env.batches[batch_id]
    written = [r.get("custom_id") or r["metadata"]["key"] for r in batch["results"]]
    assert sorted(written) == sorted(questions) and written != list(questions)  # out of order
    assert set(answers) == set(questions)
    for custom_id, text in questions.items():
        assert isinstance(answers[custom_id], Completion)
        assert answers[custom_id].text == f"answer to {text}"
