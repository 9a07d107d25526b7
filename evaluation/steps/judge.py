"""Judge (the paper's Figure 16): a 1-10 score of the generated response against the user's
true preference and its checklist. The evaluator answers.

As the release sends it: its prompt file, the checklist as ``- entry`` lines (layouts.py),
the evaluator's parameters (temperature 0, max_tokens 8192; config.ROLE_PARAMS). The score
sits under ``### Evaluation Score``; the release reads the first such header's text.
"""
from __future__ import annotations

import math
import re
from typing import Any, Sequence

from .. import release
from .ask import Ask
from .layouts import format_checklist_bullets
from ...utils.answers import ParseError, find_section
from ...utils.models.answer_layout import SCORE, Choice, Headed, Lines

PROMPT = "evaluation/response_judger"
# The release scored a failed judge call 0.
RELEASE_ON_FAILED_CALL = "zero"

# The rubric's labels, in the prompt's order (10 down to 1).
LABELS = ("Exceptional", "Excellent", "Very Good", "Good", "Above Average", "Acceptable",
          "Below Average", "Poor", "Very Poor", "Unacceptable")
# The answer's layout, which a model may follow (utils/models/answer_layout.py): an analysis,
# a label, the score ``parse`` reads.
LAYOUT = Headed(("### Evaluation of AI Assistant's Response\n\n", Lines(4), "\n### Evaluation Label\n\n",
                 Choice("label", LABELS), "\n\n### Evaluation Score\n\n", SCORE, "\n"))


def ask(preference: str, checklist: Sequence[str], request: str, response: str) -> Ask:
    return Ask(PROMPT, {"preference": preference, "checklist": format_checklist_bullets(checklist),
                        "user_request": request, "ai_response": response},
               parse, layout=LAYOUT)


def parse(text: str) -> dict:
    """``{"analysis", "score"}``. The release's reading is taken when it gives a score in
    1-10 (it cuts "7.5" to 7 and "8/10" to 8); otherwise the first number of a leniently
    found section ("Score: 8", "8 (Very Good)", a bold or "##" header). A score outside 1-10
    is an error."""
    position = text.lower().find("evaluation score")
    analysis = text[: text.rfind("\n", 0, position) + 1].strip() if position >= 0 else ""
    score = release.release_judge_score(text)
    if 1 <= score <= 10:
        return {"analysis": analysis, "score": int(score) if score.is_integer() else score}
    body = find_section(text, r"evaluation[ \t]+score")
    if body is None:
        raise ParseError("no 'Evaluation Score' section")
    cleaned = body.replace("*", " ")
    match = re.search(r"(?<![\d.])(\d+(?:\.\d+)?)", cleaned)
    if match is None:
        raise ParseError("no number under 'Evaluation Score'")
    value = float(match.group(1))
    if not 1 <= value <= 10:
        raise ParseError(f"score {match.group(1)} is outside 1-10")
    return {"analysis": analysis, "score": int(value) if value.is_integer() else value}


def score_problem(score: Any, what: str = "score") -> str | None:
    """What is wrong with a stored judge score (None: a number in 1-10)."""
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score) \
            or not 1 <= score <= 10:
        return f"{what} {score!r} is not a number in 1-10"
    return None


def check(output: dict) -> str | None:
    return score_problem(output.get("score"))


def release_view(first_answer: str, output: dict | None, sent: dict) -> dict:
    value = release.release_judge_score(first_answer)
    if value == 0:
        try:
            note = f"score text {release.release_score_text(first_answer)[:40]!r}"
        except release.ReleaseFailure:
            note = "no '### Evaluation Score' header"
        return {"outcome": "zero", "value": 0.0, "note": f"the release reads no score ({note})"}
    ours = output and output.get("score")
    return {"outcome": "same" if ours is not None and value == ours else "differs", "value": value}
