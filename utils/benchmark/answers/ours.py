"""Our parsers of the evaluation's answers (the decomposer's is utils/benchmark/decomposer.py's).

Every answer the released harness (kixlab/CUPID at a8560ca) reads is read the same way:
where its reading yields a usable value (release.py, beside this file) that value is
taken as it is, so the scores and the next step's request are the release's. Beyond that
the parsers are lenient where models vary (header case and spelling, bold markers, code
fences, "Score: 8") and strict where the release would silently score 0 or count a broken
answer: a matcher answer must label every checklist entry with one of the three labels,
and a judge score must lie in 1-10. A parser raises ``ParseError`` with a short reason; the
step then asks again (bounded) and finally records the failure with the raw answers.
docs/release_parsing.md lists the cases.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from cupid.utils.benchmark.answers import release
from cupid.utils.benchmark.answers.reading import ParseError, extract_json
from cupid.utils.benchmark.answers.release import LABEL_SCORES


# ---------------------------------------------------------------------------------------
# Markdown sections
# ---------------------------------------------------------------------------------------
def _strip_decoration(text: str) -> str:
    text = text.strip()
    text = re.sub(r"^```[A-Za-z]*\s*\n?|\n?```\s*$", "", text).strip()
    text = re.sub(r"^\s*(?:[-*]\s+|>\s*)", "", text)
    text = text.strip().strip("*_").strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'“”":
        text = text[1:-1].strip()
    if text.startswith("“") and text.endswith("”"):
        text = text[1:-1].strip()
    return text


def find_section(text: str, header_pattern: str) -> str | None:
    """Return the body under the first header matching ``header_pattern`` (a regex matched
    case-insensitively against the header's words), up to the next header.

    Headers may be markdown (``### Title``), bold (``**Title**`` or ``**Title:** body``) or
    a plain ``Title:`` line.
    """
    header = re.compile(
        r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?[ \t]*(?:" + header_pattern +
        r")[ \t]*:?[ \t]*(?:\*\*|__)?[ \t]*:?[ \t]*(?P<rest>.*)$",
        re.IGNORECASE | re.MULTILINE)
    match = header.search(text)
    if match is None:
        return None
    body_lines = [match.group("rest")] if match.group("rest").strip() else []
    for line in text[match.end():].splitlines():
        if re.match(r"^\s*#{1,6}\s+\S", line):
            break
        body_lines.append(line)
    return "\n".join(body_lines).strip()


# "Most Likely Preference(s)", the paper's "Preferneces", any case.
_PREFERENCE_HEADER = r"most[ \t]+likely[ \t]+pref[a-z]*"


# A code fence's opening or closing line (```` ``` ````, ```` ```text ````): a wrapper, never a preference.
_FENCE_LINE = re.compile(r"```[\w+.-]*")


def _usable(text: str) -> bool:
    return any(ch.isalnum() for ch in text) and not _FENCE_LINE.fullmatch(text.strip())


def parse_inferred_preference(text: str) -> dict:
    """The inference answer: ``### Analysis`` then ``### Most Likely Preference``.

    The release's reading (the first line after the header) is taken when the header line
    holds nothing else and that line has words; otherwise the first line of the section
    after a lenient header (any level, bold, "Preferences", "Preferneces", a colon), or
    the text after the header on its own line."""
    analysis = _analysis(text)
    if release.PREFERENCE_HEADER in text:
        after = text.strip().split(release.PREFERENCE_HEADER, 1)[1]
        header_rest = after.split("\n", 1)[0]
        preference = release.release_preference(text)
        if not header_rest.strip() and _usable(preference):
            return {"analysis": analysis, "preference": preference}
    body = find_section(text, _PREFERENCE_HEADER)
    if body is None:
        raise ParseError("no 'Most Likely Preference' section")
    lines = [line for line in (l.strip() for l in body.splitlines()) if line and not _FENCE_LINE.fullmatch(line)]
    preference = _strip_decoration(lines[0]) if lines else ""
    if not _usable(preference):
        raise ParseError("the 'Most Likely Preference' section is empty")
    return {"analysis": analysis, "preference": preference}


def _analysis(text: str) -> str:
    analysis = find_section(text, r"analysis") or ""
    # The analysis section ends where the preference header starts.
    return re.split(r"(?im)^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*)?[ \t]*" + _PREFERENCE_HEADER,
                    analysis)[0].strip()


def parse_response(text: str) -> dict:
    response = text.strip()
    if not response:
        raise ParseError("empty response")
    return {"response": response}


def parse_judge(text: str) -> dict:
    """The judge's answer: the score under ``### Evaluation Score`` (1-10).

    The release's reading is taken when it gives a score in 1-10 (it cuts "7.5" to 7 and
    "8/10" to 8); otherwise the first number of a leniently found section ("Score: 8",
    "8 (Very Good)", a bold or "##" header). A score outside 1-10 is an error."""
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


# ---------------------------------------------------------------------------------------
# JSON answers (the lenient reading, extract_json, is reading.py's)
# ---------------------------------------------------------------------------------------
def normalize_label(label: Any) -> str:
    if not isinstance(label, str):
        raise ParseError(f"label {label!r} is not a string")
    key = re.sub(r"[\s_\-]+", " ", label.strip().strip("\"'*").lower()).title()
    if key in LABEL_SCORES:
        return key
    raise ParseError(f"unknown label {label!r}")


def parse_match(text: str, checklist: Sequence[str]) -> dict:
    """Figure 14's answer: every checklist entry labelled exactly once.

    Entries are identified by ``index`` (1-based as in the prompt; a 0-based answer is
    accepted when it is exactly 0..n-1), or by position when the answer lists exactly n
    results without indices.
    """
    data = extract_json(text)
    results = data.get("results") if isinstance(data, dict) else data
    if not isinstance(results, list):
        raise ParseError("no 'results' list")
    n = len(checklist)
    parsed = []
    for i, item in enumerate(results):
        if not isinstance(item, dict):
            raise ParseError(f"result {i + 1} is not an object")
        parsed.append((item.get("index"), normalize_label(item.get("label"))))
    indices = []
    for position, (index, _) in enumerate(parsed):
        if index is None:
            indices.append(None)
            continue
        found = re.fullmatch(r"\s*\(?\s*(\d+)\s*[.):]?\s*", str(index))  # 2, "2", "2.", "(2)"
        if found is None:
            raise ParseError(f"result {position + 1} has index {index!r}")
        indices.append(int(found.group(1)))
    if None in indices:
        if len(parsed) != n:
            raise ParseError(f"{len(parsed)} results, some without indices, for {n} checklist entries")
        indices = list(range(1, n + 1))  # the results in the checklist's order
    elif sorted(indices) == list(range(n)):
        indices = [i + 1 for i in indices]
    by_index: dict[int, str] = {}
    for index, (_, label) in zip(indices, parsed):
        if not 1 <= index <= n:
            raise ParseError(f"index {index} is outside 1..{n}")
        if index in by_index and by_index[index] != label:
            raise ParseError(f"entry {index} is labelled twice, differently")
        by_index[index] = label
    missing = [i for i in range(1, n + 1) if i not in by_index]
    if missing:
        raise ParseError(f"entries {missing} are not labelled")
    return {"results": [
        {"index": i, "entry": checklist[i - 1], "label": by_index[i],
         "score": LABEL_SCORES[by_index[i]]}
        for i in range(1, n + 1)]}


def parse_summaries(text: str, n_sessions: int) -> dict:
    """Figure 23's answer: one summary per session, with context and preferences."""
    data = extract_json(text)
    summaries = data.get("summaries") if isinstance(data, dict) else data
    if not isinstance(summaries, list) or not summaries:
        raise ParseError("no 'summaries' list")
    if len(summaries) != n_sessions:
        raise ParseError(f"{len(summaries)} summaries for {n_sessions} sessions")
    out = []
    for i, item in enumerate(summaries, start=1):
        if not isinstance(item, dict):
            raise ParseError(f"summary {i} is not an object")
        entry = {"session_id": i}
        for key in ("context", "preferences"):
            value = item.get(key)
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ParseError(f"summary {i}: '{key}' is not a list of strings")
            entry[key] = [v.strip() for v in value if v.strip()]
        out.append(entry)
    return {"summaries": out}


# JSON schemas for adapters that can constrain decoding (llama.cpp, vLLM).
def match_schema(n_entries: int) -> dict:
    return {
        "type": "object",
        "properties": {"results": {
            "type": "array", "minItems": n_entries, "maxItems": n_entries,
            "items": {"type": "object", "properties": {
                "index": {"type": "integer"},
                "entry": {"type": "string"},
                "label": {"type": "string",
                          "enum": ["Fully Covered", "Partially Covered", "Not Covered"]}},
                "required": ["index", "entry", "label"]}}},
        "required": ["results"],
    }


SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {"summaries": {"type": "array", "items": {
        "type": "object", "properties": {
            "session_id": {"type": "integer"},
            "analysis": {"type": "string"},
            "context": {"type": "array", "items": {"type": "string"}},
            "preferences": {"type": "array", "items": {"type": "string"}}},
        "required": ["session_id", "context", "preferences"]}}},
    "required": ["summaries"],
}


# Layout grammars (llama.cpp GBNF) for the free-text answers, followed by the embedded model
# only (see Request.answer_grammar). They fix the headers the parsers above look for and
# bound each line, so that a small model reaches the part that is scored before its token
# limit. The words inside stay the model's own.
_LAYOUT_RULES = r'''
line ::= [^\n#] [^\n]{0,400} "\n"
'''

INFERENCE_ANSWER_GRAMMAR = r'''root ::= "### Analysis\n\n" line line? line? "\n### Most Likely Preference\n\n" line
''' + _LAYOUT_RULES

# The judge's rubric labels, in the prompt's order (10 down to 1).
JUDGE_LABELS = ("Exceptional", "Excellent", "Very Good", "Good", "Above Average", "Acceptable",
                "Below Average", "Poor", "Very Poor", "Unacceptable")

JUDGE_ANSWER_GRAMMAR = (r'''root ::= "### Evaluation of AI Assistant's Response\n\n" line line? line? line? "\n### Evaluation Label\n\n" label "\n\n### Evaluation Score\n\n" score "\n"
score ::= "10" | [1-9]
label ::= ''' + " | ".join(f'"{label}"' for label in JUDGE_LABELS) + "\n" + _LAYOUT_RULES)
