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

from typing import Generator

from ..evaluation.steps import user_simulator
from ..evaluation.steps.user_simulator import (CONTINUE_HEADER, ITEMS_HEADER, MESSAGE_HEADER,  # noqa: F401
                                               SCORE_HEADER, InvalidUserTurn, opening_turn)
from ..utils.models.reask import Answer, UnusableAnswer, ask_until_usable
from ..utils.models.call_errors import ModelCallFailed
from ..utils.models.model import Model
from ..utils.prompts import load_prompt

USER_PROMPT = user_simulator.PROMPT
ASSISTANT_PROMPT = "synthesis/assistant_simulator"
# As the release sends them (interaction_simulator.py's constructors).
USER_SIMULATOR_PARAMS = user_simulator.PARAMS
ASSISTANT_SIMULATOR_PARAMS = {"temperature": 0.7, "max_tokens": 2048}
USER_SIMULATOR_TRIES = user_simulator.TRIES
parse_user_turn = user_simulator.parse


def user_simulator_system_prompt(persona_description: str, session: dict, checklist: list[str]) -> str:
    return user_simulator.system_prompt(persona_description, session["context_factor"],
                                        session["contextual_preference"], checklist)


def ask_user_simulator(model: Model, system: str, chat: list[dict], first_variant: int,
                       messages_before: int = 0) -> Answer:
    """The user simulator's answer (evaluation/steps/user_simulator.py's ``ask``);
    ``messages_before``: its messages so far in the dialogue (from the second on, the embedded
    model is held to END)."""
    return user_simulator.ask(model, system, chat, first_variant=first_variant, ending=messages_before > 0)


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
