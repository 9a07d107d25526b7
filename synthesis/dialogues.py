"""Stage 6 (Appendix B.4): a user simulator and an assistant simulator talk until the user
simulator scores the assistant's last reply 10, or the dialogue reaches ``max_turns``
messages.

The session's request opens the dialogue (no call). Then, turn by turn: the assistant
simulator answers the conversation so far (its real roles, with the paper's system prompt);
the user simulator (Figure 19) sees the whole dialogue as a transcript in one user prompt
and answers with our JSON format: a per-item evaluation, a score, the items it references,
its thinking and its message. A transcript rather than flipped roles, because the
simulator answers with a structured evaluation, not a bare chat message; as "assistant"
turns, its earlier plain messages would contradict the JSON format it must produce.
"""
from __future__ import annotations

from evaluation.data import format_checklist
from evaluation.models.model import Model, ModelCallFailed
from synthesis.generation import GenerationFailed, generate_validated
from synthesis.schemas import user_turn_schema
from synthesis.validate import validate_user_turn
from utils.prompts import load_prompt

ASSISTANT_SYSTEM_PROMPT = "You are a conversational assistant. Limit your answers to 6 sentences."
PROMPT = "synthesis/user_simulator"


def format_transcript(dialogue: list[dict]) -> str:
    return "\n\n".join(f"{'You (the user)' if m['role'] == 'user' else 'AI Assistant'}: {m['content']}"
                       for m in dialogue)


def format_selected(selected: list[int], checklist: list[str]) -> str:
    if not selected:
        return "None yet."
    return "\n".join(f"{i}. {checklist[i - 1]}" for i in sorted(set(selected)))


def assistant_reply(model: Model, dialogue: list[dict], max_attempts: int, first_variant: int = 0) -> str:
    for variant in range(first_variant, first_variant + max_attempts):
        reply = model.generate(ASSISTANT_SYSTEM_PROMPT, dialogue, variant=variant).text.strip()
        if reply:
            return reply
    raise GenerationFailed(f"the assistant simulator answered with empty text {max_attempts} times",
                           max_attempts, "", first_variant + max_attempts)


def simulate_dialogue(user_model: Model, assistant_model: Model, persona_description: str,
                      session: dict, checklist: list[str], *, max_turns: int,
                      max_attempts: int, first_variant: int = 0) -> dict:
    """One session's dialogue artifact. Raises GenerationFailed when the user simulator's
    answers stay invalid or a call fails for good.

    ``first_variant`` > 0 simulates the dialogue afresh after an earlier run failed on it
    (every call gets new variants, so the cache does not replay the failed attempts)."""
    if max_turns < 2:
        raise ValueError("a dialogue needs at least 2 turns (the request and a reply)")
    prompt = load_prompt(PROMPT)
    dialogue = [{"role": "user", "content": session["request"]}]
    user_turns: list[dict] = []
    selected_so_far: list[int] = []
    regenerations = 0
    satisfied = False
    try:
        while len(dialogue) < max_turns:
            dialogue.append({"role": "assistant",
                             "content": assistant_reply(assistant_model, dialogue, max_attempts,
                                                        first_variant)})
            if len(dialogue) >= max_turns:
                break
            system, user = prompt.render(
                user_persona=persona_description,
                context_factor=session["context_factor"],
                preference=session["contextual_preference"],
                checklist=format_checklist(checklist),
                dialogue=format_transcript(dialogue),
                previously_selected=format_selected(selected_so_far, checklist),
            )
            generated = generate_validated(user_model, system, user,
                                           lambda raw: validate_user_turn(raw, len(checklist)),
                                           max_attempts=max_attempts, first_variant=first_variant,
                                           json_schema=user_turn_schema(len(checklist)))
            regenerations += generated.attempts - 1
            turn = generated.value
            selected_so_far.extend(turn["selected_items"])
            user_turns.append({"after_message": len(dialogue), "score": turn["score"],
                               "selected_items": turn["selected_items"],
                               "evaluation": turn["evaluation"], "thinking": turn["thinking"],
                               "attempts": generated.attempts})
            dialogue.append({"role": "user", "content": turn["message"]})
            if turn["end_conversation"]:
                satisfied = True
                break
    except ModelCallFailed as exc:  # the assistant simulator's call failed for good
        raise GenerationFailed(f"assistant simulator call failed: {exc}", 0, None,
                               first_variant + max_attempts) from exc
    except GenerationFailed as exc:
        exc.reason = f"user simulator after {len(dialogue)} messages: {exc.reason}"
        raise
    return {
        "session_index": session["index"],
        "context_factor": session["context_factor"],
        "contextual_preference": session["contextual_preference"],
        "checklist": list(checklist),
        "dialogue": dialogue,
        "scores": [t["score"] for t in user_turns],
        "satisfied": satisfied,
        "n_turns": len(dialogue),
        "user_turns": user_turns,
        "regenerations": regenerations,
    }
