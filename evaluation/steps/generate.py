"""Generate (the paper's Figure 22): the evaluated model's response to the current request,
given the prior sessions the setting shows, their summaries, or (the oracle-preference
setting, §4.1) the user's true preference. As the release sends it: its prompt files and
the evaluated model's parameters (temperature 0, max_tokens 8192; config.ROLE_PARAMS)."""
from __future__ import annotations

from .ask import SESSION_LOG, Ask
from ...utils.answers import ParseError

PROMPT = "evaluation/response_generator"
PROMPT_FROM_SUMMARIES = "evaluation/generate_response_from_summaries"
PROMPT_GIVEN_PREFERENCE = "evaluation/generate_response_oracle_preference"
# The release skipped an instance whose generation call failed.
RELEASE_ON_FAILED_CALL = "drop"


def ask(history: str, request: str, *, from_summaries: bool = False) -> Ask:
    if from_summaries:
        return Ask(PROMPT_FROM_SUMMARIES, {"session_summaries": history, "curr_request": request}, parse)
    return Ask(PROMPT, {"interaction_log": history, "curr_request": request}, parse,
               refs={"interaction_log": SESSION_LOG})


def ask_given_preference(preference: str, request: str) -> Ask:
    """The oracle-preference setting: the model is told the true preference."""
    return Ask(PROMPT_GIVEN_PREFERENCE, {"preference": preference, "request": request}, parse)


def parse(text: str) -> dict:
    response = text.strip()
    if not response:
        raise ParseError("empty response")
    return {"response": response}


def check(output: dict) -> str | None:
    if not isinstance(output.get("response"), str):
        return f"response is {type(output.get('response')).__name__}, not str"
    return None


def release_view(first_answer: str, output: dict | None, sent: dict) -> dict:
    return {"outcome": "same", "value": None}  # the release scores the text as it is
