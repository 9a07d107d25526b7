"""Infer (the paper's Figure 21): the user's most likely preference for the current request,
from the prior sessions the setting shows (or their summaries). The evaluated model answers.

As the release sends it: its prompt files, the session log in its layout (layouts.py), the
evaluated model's parameters (temperature 0, max_tokens 8192; config.ROLE_PARAMS).
The answer ends with ``### Most Likely Preference`` and one sentence; the release reads the
first line after that header, and so do we wherever that line has words.
"""
from __future__ import annotations

import re

from .. import release
from .ask import SESSION_LOG, Ask
from ...utils.answers import ParseError, find_section, strip_decoration
from ...utils.models.answer_layout import Headed, Lines

PROMPT = "evaluation/preference_inferrer"
PROMPT_FROM_SUMMARIES = "evaluation/infer_preference_from_summaries"
# The release skipped an instance whose inference call failed.
RELEASE_ON_FAILED_CALL = "drop"

# The answer's layout, which a model may follow (utils/models/answer_layout.py): the headers
# ``parse`` reads, a line after the last.
LAYOUT = Headed(("### Analysis\n\n", Lines(3), f"\n{release.PREFERENCE_HEADER}\n\n", Lines(1)))


def ask(history: str, request: str, *, from_summaries: bool = False) -> Ask:
    if from_summaries:
        return Ask(PROMPT_FROM_SUMMARIES, {"session_summaries": history, "curr_request": request},
                   parse, layout=LAYOUT)
    return Ask(PROMPT, {"interaction_log": history, "curr_request": request}, parse,
               refs={"interaction_log": SESSION_LOG}, layout=LAYOUT)


# "Most Likely Preference(s)", the paper's "Preferneces", any case.
_HEADER = r"most[ \t]+likely[ \t]+pref[a-z]*"
# A code fence's opening or closing line (```` ``` ````, ```` ```text ````): a wrapper, never a preference.
_FENCE_LINE = re.compile(r"```[\w+.-]*")


def _usable(text: str) -> bool:
    return any(ch.isalnum() for ch in text) and not _FENCE_LINE.fullmatch(text.strip())


def parse(text: str) -> dict:
    """``{"analysis", "preference"}``. The release's reading (the first line after the
    header) is taken when the header line holds nothing else and that line has words;
    otherwise the first line of the section after a lenient header (any level, bold,
    "Preferences", "Preferneces", a colon), or the text after the header on its own line."""
    analysis = _analysis(text)
    if release.PREFERENCE_HEADER in text:
        after = text.strip().split(release.PREFERENCE_HEADER, 1)[1]
        header_rest = after.split("\n", 1)[0]
        preference = release.release_preference(text)
        if not header_rest.strip() and _usable(preference):
            return {"analysis": analysis, "preference": preference}
    body = find_section(text, _HEADER)
    if body is None:
        raise ParseError("no 'Most Likely Preference' section")
    lines = [line for line in (l.strip() for l in body.splitlines()) if line and not _FENCE_LINE.fullmatch(line)]
    preference = strip_decoration(lines[0]) if lines else ""
    if not _usable(preference):
        raise ParseError("the 'Most Likely Preference' section is empty")
    return {"analysis": analysis, "preference": preference}


def _analysis(text: str) -> str:
    analysis = find_section(text, r"analysis") or ""
    # The analysis section ends where the preference header starts.
    return re.split(r"(?im)^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*)?[ \t]*" + _HEADER, analysis)[0].strip()


def check(output: dict) -> str | None:
    if not isinstance(output.get("preference"), str):
        return f"preference is {type(output.get('preference')).__name__}, not str"
    return None


def release_view(first_answer: str, output: dict | None, sent: dict) -> dict:
    """What the release read as the preference from the first answer."""
    try:
        value = release.release_preference(first_answer)
    except release.ReleaseFailure as exc:
        return {"outcome": "drop", "value": None, "note": str(exc)}
    ours = output and output.get("preference")
    return {"outcome": "same" if value == ours else "differs", "value": value}
