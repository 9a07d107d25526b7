"""How an answer ended: six outcomes for every provider, and the one rule that reads them.

Each provider's file holds one table (``Model.finish_signals``) from its raw finish signals
(``Completion.finish``: OpenAI's ``finish_reason``, Anthropic's ``stop_reason``, Gemini's
``finishReason``, and the fields that signal by being set: OpenAI's ``message.refusal``,
Gemini's ``promptFeedback.blockReason``) to these outcomes; the seam (model.py) and the batch
runner (batch.py) call ``ending_of`` on every answer, and nowhere else decides.

- ``stop``: the model finished its answer;
- ``length``: cut at the token limit (the thinking counts against it);
- ``filtered``: a content filter or safety system stopped the answer;
- ``refused``: the model or provider says it refuses;
- ``blocked``: the prompt itself was refused (no answer was generated);
- ``empty``: it ended normally with no text at all (a thinking-only answer).

A ``filtered``, ``refused``, ``blocked`` or ``empty`` answer without text is withheld: the seam
raises ``AnswerWithheld`` (call_errors.py) with the provider's own words and the attempt's usage, and
the re-ask loop (reask.py) asks again at most once (a blocked prompt never). With text, the
answer is read as any other and flagged (``FLAGGED``) wherever its scores appear.
"""
from __future__ import annotations

from typing import Mapping

ENDINGS = ("stop", "length", "filtered", "refused", "blocked", "empty")
# Endings that hold back the answer when it has no text.
WITHHOLDING = ("filtered", "refused", "blocked", "empty")
# Endings whose text, when read and scored, is marked so (and left out by --exclude_filtered).
FLAGGED = ("filtered", "refused")


def signal_name(finish: object) -> str | None:
    """A provider's finish signal as text (an SDK's enum by its name)."""
    return getattr(finish, "name", None) or (None if finish is None else str(finish))


def ending_of(signals: Mapping[str, str], finish: object, text: str) -> str:
    """The outcome of an answer whose provider said ``finish`` (its table: ``signals``). A
    signal the table does not name ends it as ``stop``; ``stop`` with no text is ``empty``."""
    ending = signals.get(signal_name(finish), "stop")
    if ending == "stop" and not text.strip():
        return "empty"
    return ending


def is_withheld(ending: str, text: str) -> bool:
    return ending in WITHHOLDING and not text.strip()


def describe(ending: str, finish: object, words: str | None) -> str:
    """A withheld answer's reason, in the provider's own words when it gave some."""
    name = signal_name(finish)
    said = f" ({name})" if name is not None else ""
    what = {"filtered": f"the answer was filtered{said}", "refused": f"the model refused{said}",
            "blocked": f"the prompt was blocked{said}", "empty": f"the answer was empty{said}"}[ending]
    return f"{what}: {words}" if words else f"{what}, no text"
