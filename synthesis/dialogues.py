"""Stage 6 (Appendix B.4): a user simulator and an assistant simulator talk, as in the
release (kixlab/CUPID@a8560ca, synthesis/modules/interaction_simulator.py).

Both are multi-turn chats. The assistant simulator's chat is the dialogue itself: the
session's request (as the sessions stage wrote it, unstripped) and then the user's
messages, with the release's system prompt. The user simulator's chat has the roles
flipped: it speaks as the assistant role, its first turn is a stand-in answer whose message
is the request, and each assistant-simulator reply comes as a user turn; it answers in the
release's markdown layout (an evaluation, a score, CONTINUE or END, the selected items, its
thinking, its message).

``max_turns`` counts what the release counts: rounds of the loop, each asking the
assistant simulator once (the first round answers the request; every later round first
asks the user simulator, and ends the dialogue when it says END). So a dialogue has at most
``max_turns`` assistant replies and ``max_turns - 1`` user-simulator messages.
"""
from __future__ import annotations

import re
from typing import Generator

from cupid.utils.models.asking import Answer, UnusableAnswer, ask_until_usable
from cupid.utils.models.errors import ModelCallFailed
from cupid.utils.models.model import Model
from cupid.utils.answers import ParseError
from cupid.utils.prompts import load_prompt

USER_PROMPT = "synthesis/user_simulator"
ASSISTANT_PROMPT = "synthesis/assistant_simulator"
# As the release sends them (interaction_simulator.py's constructors).
USER_SIMULATOR_PARAMS = {"temperature": 0.3, "max_tokens": 8192}
ASSISTANT_SIMULATOR_PARAMS = {"temperature": 0.7, "max_tokens": 2048}
# A user simulator's answer that cannot be parsed is asked again this many times in all
# (UserSimulator.N_RETRIES), with the same request.
USER_SIMULATOR_TRIES = 3

CONTINUE_HEADER = "#### Continue or End?"
ITEMS_HEADER = "#### Selected Checklist Items"
MESSAGE_HEADER = "#### Your Message"
SCORE_HEADER = "#### Evaluation Score"

# The layout of the user simulator's answer, followed by the embedded model only (see
# Request.answer_grammar); hosted models answer unconstrained, as in the release.
USER_SIMULATOR_GRAMMAR = r'''root ::= "#### Evaluation of AI Assistant's Response\n\n" line line? line? "\n#### Evaluation Score\n\n" score "\n\n#### Continue or End?\n\n" status "\n\n#### Selected Checklist Items\n\n" line line? "\n#### Thinking\n\n" line "\n#### Your Message\n\n" line
score ::= "10" | [1-9]
status ::= "CONTINUE" | "END"
line ::= [^\n#] [^\n]{0,400} "\n"
'''
# The embedded model's user simulator ends the dialogue at its second message: left to choose,
# it went on after 6 of 7 first messages (measured), so that a dialogue ran to --max_turns.
ENDING_USER_SIMULATOR_GRAMMAR = USER_SIMULATOR_GRAMMAR.replace('status ::= "CONTINUE" | "END"', 'status ::= "END"')


class InvalidUserTurn(ParseError):
    """An answer the release's user-simulator parser would reject (it asks again)."""


def opening_turn(request: str) -> str:
    """The user simulator's stand-in first answer, whose message is the request."""
    return (f"#### Evaluation of AI Assistant's Response\n\nN/A\n\n#### Evaluation Score\n\nN/A"
            f"\n\n#### Continue or End?\n\nCONTINUE\n\n#### Selected Checklist Items\n\nN/A\n\n"
            f"#### Thinking\n\nN/A\n\n#### Your Message\n\n{request}")


def parse_user_turn(text: str) -> tuple[str, bool, int | None]:
    """(message, ended, score) of a user-simulator answer. Raises InvalidUserTurn where the
    release's parser fails, and also on an empty message or a status that is neither
    CONTINUE nor END (the release reads anything but END as CONTINUE)."""
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


def user_simulator_system_prompt(persona_description: str, session: dict, checklist: list[str]) -> str:
    system, _ = load_prompt(USER_PROMPT).render(
        user_profile=persona_description, context_factor=session["context_factor"],
        preference=session["contextual_preference"],
        checklist="\n".join(f"{i}. {item}" for i, item in enumerate(checklist, start=1)))
    return system


def ask_user_simulator(model: Model, system: str, chat: list[dict], first_variant: int,
                       messages_before: int = 0) -> Answer:
    """The answer: its raw text (stripped), its tries, and its value ``parse_user_turn``'s.
    An unparseable answer is asked again with the same request, as the release does, up to
    USER_SIMULATOR_TRIES times in all. ``messages_before``: the user simulator's messages so
    far in the dialogue."""
    ending = messages_before > 0 and getattr(model, "supports_answer_grammar", False)
    try:
        return ask_until_usable(model, system, chat, parse_user_turn, tries=USER_SIMULATOR_TRIES,
                                invalid=(InvalidUserTurn,), first_variant=first_variant, strip=True,
                                answer_grammar=ENDING_USER_SIMULATOR_GRAMMAR if ending else USER_SIMULATOR_GRAMMAR,
                                **USER_SIMULATOR_PARAMS)
    except UnusableAnswer as exc:
        raise UnusableAnswer(f"user simulator answer unusable after {USER_SIMULATOR_TRIES} tries: "
                             f"{exc.reason}", exc.answer) from None


def _nonempty(reply: str) -> str:
    if not reply:
        raise ValueError("empty reply")
    return reply


def assistant_reply(model: Model, chat: list[dict], max_attempts: int, first_variant: int = 0) -> str:
    system, _ = load_prompt(ASSISTANT_PROMPT).render()
    try:
        return ask_until_usable(model, system, chat, _nonempty, tries=max_attempts,
                                first_variant=first_variant, strip=True,
                                **ASSISTANT_SIMULATOR_PARAMS).value
    except UnusableAnswer as exc:
        raise UnusableAnswer(f"the assistant simulator answered with empty text {max_attempts} times",
                             exc.answer) from None


def dialogue_steps(user_model: Model, assistant_model: Model, persona_description: str,
                   session: dict, checklist: list[str], *, max_turns: int,
                   max_attempts: int, first_variant: int = 0) -> Generator[None, None, dict]:
    """One session's dialogue, one simulator call at a time: each ``next()`` makes one call
    (with its retries) and the generator returns the dialogue artifact after the last one.
    The synthesis scheduler runs each step as a task of its own, so that a dialogue does not
    hold a worker while the others wait. Raises UnusableAnswer when the user simulator's
    answers stay unusable, ModelCallFailed when a call fails for good. ``first_variant`` > 0
    simulates the dialogue afresh after an earlier run failed on it (every call gets new
    variants, so the cache does not replay the failed attempts)."""
    request_sent = session.get("request_sent", session["request"])
    system = user_simulator_system_prompt(persona_description, session, checklist)
    user_chat = [{"role": "assistant", "content": opening_turn(session["request"])}]
    assistant_chat = [{"role": "user", "content": request_sent}]
    dialogue = [{"role": "user", "content": session["request"]}]
    user_turns: list[dict] = []
    regenerations = 0
    satisfied = False
    variant = first_variant
    try:
        for turn in range(max_turns):
            if turn > 0:
                yield  # after the assistant's reply
                user_chat.append({"role": "user", "content": dialogue[-1]["content"]})
                answer = ask_user_simulator(user_model, system, user_chat, variant, len(user_turns))
                regenerations += answer.attempts - 1
                user_chat.append({"role": "assistant", "content": answer.raw})
                message, ended, score = answer.value
                user_turns.append({"after_message": len(dialogue), "score": score, "raw": answer.raw,
                                   "attempts": answer.attempts})
                dialogue.append({"role": "user", "content": message})
                if ended:
                    satisfied = True
                    break
                assistant_chat.append({"role": "user", "content": message})
                yield  # after the user simulator's message
            reply = assistant_reply(assistant_model, assistant_chat, max_attempts, variant)
            assistant_chat.append({"role": "assistant", "content": reply})
            dialogue.append({"role": "assistant", "content": reply})
    except ModelCallFailed as exc:
        # A rerun simulates the dialogue afresh, with variants after every one this run used.
        exc.answer = Answer(next_variant=first_variant + max_attempts)
        raise
    except UnusableAnswer as exc:
        raise UnusableAnswer(f"user simulator after {len(dialogue)} messages: {exc.reason}",
                             exc.answer) from None
    return {
        "session_index": session["index"],
        "context_factor": session["context_factor"],
        "contextual_preference": session["contextual_preference"],
        "checklist": list(checklist),
        "dialogue": dialogue,
        "scores": [turn["score"] for turn in user_turns],
        "satisfied": satisfied,
        "n_turns": len(dialogue),
        "user_turns": user_turns,
        "regenerations": regenerations,
    }
