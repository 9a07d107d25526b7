"""The user simulator (Appendix B.4, the paper's Figure 19), as one step: the release's
(kixlab/CUPID@a8560ca, synthesis/modules/interaction_simulator.py, ``UserSimulator``).

Synthesis's dialogues (synthesis/dialogues.py) and the interactive evaluation
(evaluation/interaction.py) both ask it through this module, so the two send the same bytes.

Its chat has the roles flipped: the simulator speaks as the assistant role; its first turn is
a stand-in answer whose message is the request (``opening_turn``), and each reply it is to
judge comes as a user turn. Its system prompt is the release's, filled with a persona
description, the context factor, the preference and the checklist as ``1. item`` lines
(``system_prompt``). It answers in the release's markdown layout: an evaluation, a score,
CONTINUE or END, the selected items, its thinking, its message (``parse``). Its parameters are
the release's (temperature 0.3, max_tokens 8192); an answer the release's parser rejects is
asked again with the same request, ``TRIES`` times in all, as the release does.
"""
from __future__ import annotations

import re

from ...utils.answers import ParseError
from ...utils.models.answer_layout import SCORE, Choice, Headed, Lines
from ...utils.models.reask import Answer, UnusableAnswer, ask_until_usable
from ...utils.prompts import load_prompt

PROMPT = "synthesis/user_simulator"
# As the release sends it (UserSimulator's constructor).
PARAMS = {"temperature": 0.3, "max_tokens": 8192}
# How the release's utils/generation.py sends a chat to an OpenAI model (generate_chat): the
# system prompt as a "system" message, with max_completion_tokens; other adapters ignore these.
OPENAI_WIRE = {"system_role": "system", "max_tokens_field": "max_completion_tokens"}
# An answer that cannot be parsed is asked again with the same request, this many times in
# all (UserSimulator.N_RETRIES).
TRIES = 3
# The release has no evaluation step of it: a failed call fails the dialogue.
RELEASE_ON_FAILED_CALL = None

CONTINUE_HEADER = "#### Continue or End?"
ITEMS_HEADER = "#### Selected Checklist Items"
MESSAGE_HEADER = "#### Your Message"
SCORE_HEADER = "#### Evaluation Score"

# The answer's layout, which a model may follow (utils/models/answer_layout.py); hosted models
# answer unconstrained, as in the release.
LAYOUT = Headed(("#### Evaluation of AI Assistant's Response\n\n", Lines(3), f"\n{SCORE_HEADER}\n\n", SCORE,
                 f"\n\n{CONTINUE_HEADER}\n\n", Choice("status", ("CONTINUE", "END")), f"\n\n{ITEMS_HEADER}\n\n",
                 Lines(2), "\n#### Thinking\n\n", Lines(1), f"\n{MESSAGE_HEADER}\n\n", Lines(1)))
# The same layout, a model that follows it held to END: synthesis's user simulator from its
# second message on (the embedded model, left to choose, went on after 6 of 7 first messages).
ENDING_LAYOUT = LAYOUT.holding(Choice("status", ("END",)))


class InvalidUserTurn(ParseError):
    """An answer the release's user-simulator parser would reject (it asks again)."""


def opening_turn(request: str) -> str:
    """The simulator's stand-in first answer, whose message is the request."""
    return (f"#### Evaluation of AI Assistant's Response\n\nN/A\n\n#### Evaluation Score\n\nN/A"
            f"\n\n#### Continue or End?\n\nCONTINUE\n\n#### Selected Checklist Items\n\nN/A\n\n"
            f"#### Thinking\n\nN/A\n\n#### Your Message\n\n{request}")


def system_prompt(persona_description: str, context_factor: str, preference: str, checklist) -> str:
    """The release's system prompt, the checklist numbered from 1."""
    system, _ = load_prompt(PROMPT).render(
        user_profile=persona_description, context_factor=context_factor, preference=preference,
        checklist="\n".join(f"{i}. {item}" for i, item in enumerate(checklist, start=1)))
    return system


def parse(text: str) -> tuple[str, bool, int | None]:
    """(message, ended, score) of an answer. Raises InvalidUserTurn where the release's parser
    fails (no '#### Continue or End?', no '#### Selected Checklist Items' after it, no
    '#### Your Message' after that), and also on an empty message or a status that is neither
    CONTINUE nor END (the release reads anything but END as CONTINUE). The score is the first
    whole number under '#### Evaluation Score' (None without one: the release reads none)."""
    parts = text.split(CONTINUE_HEADER)
    if len(parts) < 2:
        raise InvalidUserTurn(f"the answer lacks '{CONTINUE_HEADER}'")
    after = parts[1].split(ITEMS_HEADER)
    if len(after) < 2:
        raise InvalidUserTurn(f"the answer lacks '{ITEMS_HEADER}' after '{CONTINUE_HEADER}'")
    status, rest = after[0], after[1]
    if MESSAGE_HEADER not in rest:
        raise InvalidUserTurn(f"the answer lacks '{MESSAGE_HEADER}' after '{ITEMS_HEADER}'")
    message = rest.split(MESSAGE_HEADER)[1].strip()
    status = status.strip()
    if status not in ("CONTINUE", "END"):
        raise InvalidUserTurn(f"'{CONTINUE_HEADER}' must be CONTINUE or END, got {status[:40]!r}")
    if not message:
        raise InvalidUserTurn("the message is empty")
    score = None
    if SCORE_HEADER in text:
        found = re.search(r"\d+", text.split(SCORE_HEADER, 1)[1].split(CONTINUE_HEADER, 1)[0])
        score = int(found.group()) if found else None
    return message, status == "END", score


def check(output: dict) -> str | None:
    """What is wrong with a stored turn of the simulator (None: usable)."""
    if not isinstance(output.get("feedback"), str) or not output["feedback"].strip():
        return "feedback is not a non-empty string"
    if not isinstance(output.get("ended"), bool):
        return f"ended {output.get('ended')!r} is not true or false"
    score = output.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, int)):
        return f"score {score!r} is not a whole number"
    return None


def ask(model, system: str, chat: list[dict], *, first_variant: int = 0, ending: bool = False) -> Answer:
    """The simulator's answer to ``chat`` (its own, roles flipped): its raw text (stripped),
    its tries, and ``parse``'s value. Asked again with the same request up to ``TRIES`` times
    in all, as the release does; then ``UnusableAnswer``. ``ending``: a model that follows the
    layout is held to END (synthesis's simulator after its first message)."""
    try:
        return ask_until_usable(model, system, chat, parse, tries=TRIES, invalid=(InvalidUserTurn,),
                                first_variant=first_variant, strip=True,
                                layout=ENDING_LAYOUT if ending else LAYOUT, **PARAMS)
    except UnusableAnswer as exc:
        raise UnusableAnswer(f"user simulator answer unusable after {TRIES} tries: {exc.reason}",
                             exc.answer) from None
