"""docs/architecture.md's worked example: a persona stage added as one module and one row of
synthesis/stages.py. The persona's writing voice, asked of the synthesizer once per persona
from its description and context factors (a real stage renders its prompt from prompts/)."""
from __future__ import annotations

from cupid.synthesis.documents import generate_validated
from cupid.utils.answers import ParseError

SYSTEM = "VOICE-STAGE: describe how this user writes to an assistant, in one sentence."


def validate(raw: str) -> dict:
    voice = raw.strip()
    if not voice or "\n" in voice:
        raise ParseError("the voice must be one line")
    return {"voice": voice}


def request(model, persona, inputs, cfg, taxonomy, **attempts):
    factors = ", ".join(f["context_factor"] for f in inputs["factors"]["factors"])
    return generate_validated(model, SYSTEM, f"{persona['description']}\nContexts: {factors}", validate,
                              params={"temperature": 0.7, "max_tokens": 200}, **attempts)


def document(answer, persona, inputs, cfg) -> dict:
    return answer.value


def stand_in(persona, inputs, cfg) -> dict:
    return {"voice": "terse " * 20}


def answer_tokens(cfg) -> int:
    return 30
