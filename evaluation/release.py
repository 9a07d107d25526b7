"""What the released harness (kixlab/CUPID at a8560ca) makes of an answer: its readings, by
exact string splits, each below; an answer it cannot read drops the instance (inference,
decomposition, generation) or scores it 0 (matching, judging). docs/release_parsing.md lists
the cases.

Each step's parser (evaluation/steps/) takes the release's reading whenever it yields a
usable value, so the numbers and the next step's request are the release's; each step's
``release_view`` says, with these readers, what the release would have done with the first
answer: ``same`` (it reads the same value), ``differs`` (another value), ``zero`` (it scores 0
here), ``drop`` (it skips the instance); results.json counts them per task.
"""
from __future__ import annotations

import json
from typing import Any

PREFERENCE_HEADER = "### Most Likely Preference"
SCORE_HEADERS = ("### **Evaluation Score**", "### Evaluation Score")
# The matcher's labels and what each scores: the benchmark's one table (ours reads a label
# in any case and spacing; the release takes these spellings only, any other scoring 0).
LABEL_SCORES = {"Fully Covered": 1.0, "Partially Covered": 0.5, "Not Covered": 0.0}
OUTCOMES = ("same", "differs", "zero", "drop")  # from best to worst


class ReleaseFailure(ValueError):
    """The release would raise here."""


def release_json(text: str) -> Any:
    """The release's ``parse_json``."""
    if "```json" in text:
        text = text.split("```json")[1].rsplit("```", 1)[0].strip()
        return json.loads(text)
    return json.loads(text.strip())


def release_checklist(text: str) -> Any:
    """The release's decomposed checklist (``parse_json(answer)['checklist']``)."""
    try:
        data = release_json(text.strip())
        return data["checklist"]
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ReleaseFailure(f"checklist unreadable: {type(exc).__name__}") from exc


def release_preference(text: str) -> str:
    """The release's inferred preference: the first line after the header."""
    if PREFERENCE_HEADER not in text:
        raise ReleaseFailure(f"no {PREFERENCE_HEADER!r}")
    return text.strip().split(PREFERENCE_HEADER)[1].strip().split("\n")[0].strip()


def release_match_results(text: str, prefmatcher: bool) -> Any:
    """The release's match results: ``parse_json(answer)['results']``, or the whole JSON
    value for PrefMatcher."""
    try:
        data = release_json(text.strip())
        return data if prefmatcher else data["results"]
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ReleaseFailure(f"match unreadable: {type(exc).__name__}") from exc


def release_matched(results: Any) -> float:
    """The release's matched count: the sum of the label scores (an unknown label is 0).
    Raises ReleaseFailure where the release's aggregation itself would raise."""
    try:
        return float(sum(LABEL_SCORES.get(item["label"], 0) for item in results))
    except (KeyError, TypeError) as exc:
        raise ReleaseFailure(f"the release's aggregation would raise ({type(exc).__name__})") from exc


def release_score_text(text: str) -> str:
    """The text the release stores as the judge's score."""
    text = text.strip()
    for header in SCORE_HEADERS:
        if header in text:
            return text.split(header)[1].strip()
    raise ReleaseFailure("no score header")


def release_judge_score(text: str) -> float:
    """The release's judge score; 0 where it cannot read one."""
    try:
        score = release_score_text(text)
    except ReleaseFailure:
        return 0.0
    score = score.strip()
    if "/" in score:
        score = score.split("/")[0]
    if "." in score:
        score = score.split(".")[0]
    if "\n\n" in score:
        score = score.split("\n\n")[0]
    if "**" in score:
        score = score.replace("**", "")
    try:
        return float(score)
    except ValueError:
        return 0.0


def worst(outcomes: list[str | None]) -> str | None:
    known = [o for o in outcomes if o is not None]
    return max(known, key=OUTCOMES.index) if known else None
