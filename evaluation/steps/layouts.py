"""The session log and checklist layouts: the released harness's (kixlab/CUPID at a8560ca,
utils/formatting.py and the matcher and judge modules), character for character, since the
prompts were written for them and the published numbers were measured with them.
"""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Iterable

from ..release import LABEL_SCORES
from ...utils.dataset import Session
from ...utils.prompts import load_prompt

MATCHER_PROMPT = "evaluation/preference_matcher"


def format_session_log(sessions: Iterable[Session]) -> str:
    """Sessions numbered from 1 (``### Session 1``), oldest first, each message under a
    ``#### User`` or ``#### AI Assistant`` heading, a ``---`` line after each session."""
    parts = []
    for number, session in enumerate(sessions, start=1):
        parts.append(f"### Session {number}\n\n")
        for turn in session.dialogue:
            speaker = "User" if turn.role == "user" else "AI Assistant"
            parts.append(f"#### {speaker}\n\n{turn.content}\n\n")
        parts.append("---\n\n")
    return "".join(parts).strip()  # the log ends with the last "---"


def format_checklist(checklist: Iterable[str]) -> str:
    """Numbered entries, one a line (``1. entry``): the matcher's layout."""
    return "\n".join(f"{i}. {item}" for i, item in enumerate(checklist, start=1))


def format_checklist_bullets(checklist: Iterable[str]) -> str:
    """``- entry`` lines: the judge's layout."""
    return "\n".join(f"- {item}" for item in checklist)


@lru_cache(maxsize=None)
def few_shot_block() -> str:
    """The matcher's few-shot block: per example its preference and, as the expected output,
    a ```json block of its labelled checklist, then a ``---`` line."""
    label_of = {score: label for label, score in LABEL_SCORES.items()}
    blocks = []
    for example in load_prompt(MATCHER_PROMPT).data["examples"]:
        results = {"results": [
            {"index": i, "entry": entry, "label": label_of[score]}
            for i, (entry, score) in enumerate(example["checklist"].items(), start=1)]}
        blocks.append(f"#### Preference\n\n{example['preference']}\n\n#### Output\n\n```json\n"
                      f"{json.dumps(results, indent=2)}\n```\n\n---\n\n")
    return "".join(blocks).strip()
