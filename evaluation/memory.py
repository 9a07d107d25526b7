"""The memory baseline (``--setting memory[:k=N]``, docs/strategies.md): an LLM memory beside
recent, BM25, dense and summary, written through the interface any LLM-backed strategy uses
(strategy_model.py), blind as any strategy is (it sees the request and the dialogues).

Write path, after Mem0's extraction (prompts/memory/extract_notes.yaml): each prior session
becomes a few short notes of the user's preferences, each with its situation ("In <situation>:
<preference>"), one call per distinct session, kept for every instance that shares it (a
persona's instances share most sessions). Read path (prompts/memory/recall_notes.yaml): the
notes, numbered oldest first, and the current request; the model names at most k that
apply. Shown: the recalled notes, oldest first, in place of the session log; ``select``
names the sessions they came from, so that the session recall is measured as for the others.
"""
from __future__ import annotations

import hashlib
import re
import threading
from typing import Any, Sequence

from .retrieval import positive_k
from .steps.layouts import format_session_log
from ..utils.prompts import load_prompt

EXTRACT, RECALL = "memory/extract_notes", "memory/recall_notes"
MAX_NOTES = 5           # notes written per session, at most
MAX_NOTE_CHARS = 300    # a note's length, at most (a rambling answer is cut)
NOTES_MAX_TOKENS = 256  # an extraction's answer, at most: five notes of a sentence each
RECALL_MAX_TOKENS = 32  # a recall's answer, at most: a few numbers
_NOTE = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.*\S)\s*$")


def parse_notes(answer: str) -> list[str]:
    """The notes of an extraction answer: its "- " (or numbered) lines, "none" left out; an
    answer with no such line and more than "none" is one note, its first line."""
    notes, listed = [], False
    for line in answer.splitlines():
        found = _NOTE.match(line)
        if found:
            listed = True
            if not _none(found.group(1)):
                notes.append(found.group(1)[:MAX_NOTE_CHARS])
    if not listed:
        first = next((line.strip() for line in answer.splitlines() if line.strip(" #\t")), "")
        notes = [] if not first or _none(first) else [first[:MAX_NOTE_CHARS]]
    return notes[:MAX_NOTES]


def _none(text: str) -> bool:
    return text.strip(" .\"'").lower() in ("none", "no preference", "n/a", "")


def parse_recall(answer: str, n_notes: int, k: int) -> list[int]:
    """The 1-based note numbers an answer names, in its order, each once, at most k."""
    picked: list[int] = []
    for number in (int(n) for n in re.findall(r"\d+", answer)):
        if 1 <= number <= n_notes and number not in picked:
            picked.append(number)
    return picked[:k]


class Memory:
    """An LLM memory of the user's preferences: notes written per session, recalled per request."""
    uses_model = True
    answer_tokens = 100           # the dry run's stand-in answer (a recall's is capped at RECALL_MAX_TOKENS)
    prompts = (EXTRACT, RECALL)   # recorded in run.json's prompt_versions

    def __init__(self, k: int = 5):
        self.k = positive_k(k)
        self.model: Any = None    # given by the harness (strategy_model.py)
        self._notes: dict[str, list[str]] = {}        # a session's text -> its notes
        self._recalled: dict[str, list[tuple[int, str]]] = {}  # request and sessions' hash -> recalled
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def notes(self, session) -> list[str]:
        """The write path: a session's notes, written once per distinct session."""
        conversation = format_session_log([session])
        with self._lock(conversation):
            if conversation not in self._notes:
                system, user = load_prompt(EXTRACT).render(conversation=conversation, max_notes=MAX_NOTES)
                self._notes[conversation] = parse_notes(self.model(system, user, max_tokens=NOTES_MAX_TOKENS))
            return self._notes[conversation]

    def recall(self, instance) -> list[tuple[int, str]]:
        """The read path: (1-based session position, note) of the notes recalled for the
        request, oldest first."""
        sessions: Sequence = instance.prior_interactions
        texts = [instance.current_request] + [format_session_log([s]) for s in sessions]
        key = hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()
        with self._lock(key):
            if key not in self._recalled:
                written = [(position, note) for position, session in enumerate(sessions, start=1)
                           for note in self.notes(session)]
                picked: list[int] = []
                if written:
                    numbered = "\n".join(f"{i}. {note}" for i, (_, note) in enumerate(written, start=1))
                    system, user = load_prompt(RECALL).render(notes=numbered, request=instance.current_request,
                                                              k=self.k)
                    answer = self.model(system, user, max_tokens=RECALL_MAX_TOKENS)
                    picked = parse_recall(answer, len(written), self.k)
                self._recalled[key] = [written[i - 1] for i in sorted(picked)]
            return self._recalled[key]

    def select(self, instance) -> list:
        """The sessions the recalled notes came from, oldest first."""
        positions = sorted({position for position, _ in self.recall(instance)})
        return [instance.prior_interactions[p - 1] for p in positions]

    def render(self, instance) -> str:
        return "\n".join(f"- {note}" for _, note in self.recall(instance))
