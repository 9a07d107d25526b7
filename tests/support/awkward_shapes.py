"""The providers' awkward answers as the loopback server gives them (fake_llm_server.py's
FakeResponse), one per documented shape, with how each should end: shared by
tests/utils/models/test_answer_endings.py and benchmarks/awkward_answers.py."""
from __future__ import annotations

from fake_llm_server import FakeResponse

GPT, CLAUDE, GEMINI = "gpt-4o-2024-11-20", "claude-3-5-sonnet-20241022", "gemini-2.5-flash"
TOGETHER = "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"
FRAGMENT = "Responses should be conci"
SORRY = "I'm sorry, but I can't help with that."

# (id, model, the server's answer, ending, withheld: no text reaches the caller, words in the reason)
SHAPES = [
    ("openai refusal, no content", GPT, FakeResponse(refusal=SORRY), "refused", True, SORRY),
    ("openai refusal with content", GPT, FakeResponse(text=FRAGMENT, refusal=SORRY), "refused", False, None),
    ("openai content_filter, no content", GPT,
     FakeResponse(text=FRAGMENT, finish="content_filter", hide_text=True), "filtered", True, "content_filter"),
    ("openai content_filter with content", GPT, FakeResponse(text=FRAGMENT, finish="content_filter"),
     "filtered", False, None),
    ("together content_filter, no content", TOGETHER,
     FakeResponse(text=FRAGMENT, finish="content_filter", hide_text=True), "filtered", True, "content_filter"),
    ("anthropic refusal, no text", CLAUDE,
     FakeResponse(text=FRAGMENT, finish="refusal", hide_text=True, refusal="declined by policy"),
     "refused", True, "declined by policy"),
    ("anthropic refusal with text", CLAUDE, FakeResponse(text=FRAGMENT, finish="refusal"), "refused", False, None),
    ("anthropic thinking only", CLAUDE, FakeResponse(text=FRAGMENT, thinking_only=True), "empty", True, "end_turn"),
    ("gemini SAFETY, no parts", GEMINI, FakeResponse(text=FRAGMENT, finish="SAFETY", hide_text=True),
     "filtered", True, "SAFETY"),
    ("gemini SAFETY with parts", GEMINI, FakeResponse(text=FRAGMENT, finish="SAFETY"), "filtered", False, None),
    ("gemini blocked prompt", GEMINI, FakeResponse(block_reason="SAFETY", refusal="The prompt is unsafe."),
     "blocked", True, "The prompt is unsafe."),
]
