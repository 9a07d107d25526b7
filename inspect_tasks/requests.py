"""The benchmark's requests through inspect's models: a step's ``Ask`` as chat messages, the
parameters the release sends a model family as inspect's ``GenerateConfig``, and the re-asks
of an answer that does not parse.

The parameters are not restated here: they are read off the body our own adapter would send
the same model in the same role (utils/models/, config.ROLE_PARAMS: temperature 0, max_tokens
8192, none for o-series, Claude 3.7 Sonnet thinking with a 1,024-token budget, ...). A model
of a provider our model layer does not know (mockllm, openai-api, ollama, ...) is sent the
role's parameters as they are.
"""
from __future__ import annotations

from typing import Callable

from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser, GenerateConfig, Model, ModelName

from .. import config
from ..evaluation.steps.ask import Ask
from ..utils.answers import ParseError
from ..utils.models.registry import resolve_model
from ..utils.models.request import Request

# inspect's provider names whose model families our model layer knows, and its prefix for them.
OUR_PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "google": "google",
                 "together": "together", "vllm": "vllm"}
DEFAULT_GRADER = f"openai/{config.DEFAULT_EVALUATOR}"  # GPT-4o, as in the paper
TOKEN_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def messages(ask: Ask) -> list[ChatMessage]:
    """The step's request as inspect's messages: the system prompt, then the user message."""
    system_prompt, user_prompt = ask.render()
    return [ChatMessageSystem(content=system_prompt), ChatMessageUser(content=user_prompt)]


def release_parameters(model: str, role: str, max_tokens: int | None = None) -> tuple[dict, str]:
    """The generation parameters our adapter sends ``model`` (inspect's "provider/name") in
    ``role`` ("evaluated", "evaluator", "matcher"), as they go on the wire, and the role of
    its system message; ``max_tokens`` is a step's own limit (the decomposer's 4096)."""
    provider, _, name = model.partition("/")
    if provider not in OUR_PROVIDERS:
        params = config.ROLE_PARAMS[role]
        return {"temperature": params["temperature"], "max_tokens": max_tokens or params["max_tokens"]}, "system"
    ours = resolve_model(f"{OUR_PROVIDERS[provider]}:{name}", role=role)
    request = Request(system_prompt="", messages=({"role": "user", "content": ""},),
                      temperature=ours.temperature, max_tokens=max_tokens or ours.max_tokens)
    return ours.wire_parameters(request) or {}, getattr(ours, "system_role", "system")


def config_of(wire: dict) -> GenerateConfig:
    """inspect's config for parameters as our adapter sends them."""
    thinking = wire.get("thinking") or {}
    return GenerateConfig(temperature=wire.get("temperature"),
                          max_tokens=next((wire[k] for k in TOKEN_FIELDS if k in wire), None),
                          reasoning_effort=wire.get("reasoning_effort"),
                          reasoning_tokens=thinking.get("budget_tokens"), seed=wire.get("seed"))


def release_config(model: Model, role: str, ask: Ask) -> GenerateConfig:
    """The config of one grader call: the family's parameters under the ones the user set for
    the role (``--model-role grader='{model: ..., temperature: ...}'``).

    inspect's OpenAI provider gives a developer message and ``max_completion_tokens`` to
    reasoning models only (o-series, gpt-5); the release gives them to its evaluator whatever
    the OpenAI model (GPT-4o). Where they differ, the release's fields go in ``extra_body``,
    which the SDK lays over the fields inspect rendered: the body is then the release's."""
    wire, system_role = release_parameters(str(model), role, ask.max_tokens)
    chosen = config_of(wire).merge(model.config)
    api = model.api
    if ModelName(model).api != "openai" or getattr(api, "responses_api", True) \
            or api.is_o_series() or api.is_gpt_5():
        return chosen
    extra = dict(chosen.extra_body or {})
    if "max_completion_tokens" in wire and model.config.max_tokens is None:
        extra["max_completion_tokens"], chosen.max_tokens = chosen.max_tokens, None
    if system_role == "developer":
        system_prompt, user_prompt = ask.render()
        extra["messages"] = [{"role": "developer", "content": system_prompt},
                             {"role": "user", "content": user_prompt}]
    chosen.extra_body = extra or None
    return chosen


class Unparsed(Exception):
    """Every answer to a step stayed unusable; ``reason`` is the last one's."""

    def __init__(self, reason: str, answers: list[str]):
        super().__init__(reason)
        self.reason = f"unparseable answer: {reason}"
        self.answers = answers


def parsed(parse: Callable[[str], dict], text: str, reasons: list[str]) -> dict | None:
    """The answer read by a step's parser, or None (its reason added to ``reasons``)."""
    try:
        return parse(text)
    except ParseError as exc:
        reasons.append(str(exc))
        return None


async def answer(model: Model, ask: Ask, role: str | None) -> dict:
    """Ask ``model`` in ``role`` (None: with its own config, the evaluated model's, which the
    task's config and the command line set) until the answer parses: the identical request
    again, at most ``config.MAX_PARSE_RETRIES`` times, as cupid-eval asks. Raises ``Unparsed``."""
    request = messages(ask)
    generate_config = release_config(model, role, ask) if role else GenerateConfig()
    reasons: list[str] = []
    answers: list[str] = []
    for _ in range(config.MAX_PARSE_RETRIES + 1):
        output = await model.generate(request, config=generate_config)
        answers.append(output.completion)
        value = parsed(ask.parse, output.completion, reasons)
        if value is not None:
            return value
    raise Unparsed(reasons[-1], answers)
