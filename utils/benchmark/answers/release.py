"""What the released harness (kixlab/CUPID at a8560ca) makes of an answer.

The release reads answers with exact string splits: the inferred preference is the first
line after the first ``### Most Likely Preference``; the judge's score is the text after
``### **Evaluation Score**`` or ``### Evaluation Score``, cut at the first "/", "." and
blank line, with "**" removed, as a float (0 when that fails); JSON is the text between
the first ```json and the last ```, or the whole answer. An answer it cannot read either
drops the instance (inference, decomposition, generation: the instance is skipped and
not counted) or scores it 0 (matching, judging).

Our parsers (ours.py beside this file, and the decomposer's) take the release's reading whenever it yields a usable
value, so the numbers and the next step's request are the release's; where it fails they
read the answer leniently or ask again. This module tells, for each step, what the release
would have done with the first answer, so that results.json can say how far a run is from
the release's scoring (docs/release_parsing.md lists the cases).

Outcomes, per step and per instance and task: ``same`` (the release reads the same value),
``differs`` (it reads another value), ``zero`` (it scores 0 here), ``drop`` (it skips the
instance).
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


# ---------------------------------------------------------------------------------------
# Per step and per instance
# ---------------------------------------------------------------------------------------
# What the release did when the call itself failed: inference, decomposition and
# generation skip the instance; matching and judging score it 0.
_ON_CALL_ERROR = {"infer": "drop", "decompose": "drop", "generate": "drop",
                  "match_precision": "zero", "match_recall": "zero", "judge": "zero"}


def step_view(name: str, step: dict | None, *, prefmatcher: bool = False) -> dict | None:
    """What the release would have made of this step's first answer:
    ``{"outcome": ..., "value": ..., "note": ...}``; None for steps it has no reading of."""
    if step is None or name not in _ON_CALL_ERROR:
        return None
    raw = step.get("raw") or []
    output = step.get("output") if step.get("status") == "done" else None
    if not raw:
        return {"outcome": _ON_CALL_ERROR[name], "value": None, "note": "the call failed"}
    first = raw[0]
    try:
        if name == "infer":
            value = release_preference(first)
            ours = output and output.get("preference")
            return {"outcome": "same" if value == ours else "differs", "value": value}
        if name == "decompose":
            value = release_checklist(first)
            if not isinstance(value, list) or not value:
                return {"outcome": "drop", "value": value,
                        "note": "an empty or non-list checklist stops the release's aggregation"}
            ours = output and output.get("checklist")
            return {"outcome": "same" if value == ours else "differs", "value": value}
        if name in ("match_precision", "match_recall"):
            matched = release_matched(release_match_results(first, prefmatcher))
            ours = sum(r["score"] for r in output["results"]) if output else None
            return {"outcome": "same" if ours is not None and matched == ours else "differs",
                    "value": matched}
        if name == "generate":
            return {"outcome": "same", "value": None}
        if name == "judge":
            value = release_judge_score(first)
            if value == 0:
                return {"outcome": "zero", "value": 0.0,
                        "note": "the release reads no score (" + _score_note(first) + ")"}
            ours = output and output.get("score")
            return {"outcome": "same" if ours is not None and value == ours else "differs",
                    "value": value}
    except ReleaseFailure as exc:
        outcome = "drop" if name in ("infer", "decompose") else "zero"
        return {"outcome": outcome, "value": None, "note": str(exc)}
    return None


def _score_note(text: str) -> str:
    try:
        return f"score text {release_score_text(text)[:40]!r}"
    except ReleaseFailure:
        return "no '### Evaluation Score' header"


def worst(outcomes: list[str | None]) -> str | None:
    known = [o for o in outcomes if o is not None]
    return max(known, key=OUTCOMES.index) if known else None


def instance_outcomes(views: dict[str, dict | None], task: str) -> dict[str, str | None]:
    """Per task, what the release would have done with the instance, from its step views.

    Inference: any step dropping it drops it; a match it cannot read scores it 0; else the
    worst of the views. Generation: the same over generate and judge; an instance the
    release dropped during inference never reaches generation (the release runs inference
    first and returns)."""
    def outcome(steps: tuple[str, ...]) -> str | None:
        return worst([(views.get(s) or {}).get("outcome") for s in steps])

    out: dict[str, str | None] = {}
    if task in ("inference", "both"):
        out["inference"] = outcome(("infer", "decompose", "match_precision", "match_recall"))
    if task in ("generation", "both"):
        generation = outcome(("generate", "judge"))
        if task == "both" and out.get("inference") == "drop":
            generation = "drop"
        out["generation"] = generation
    return out
