"""utils/benchmark/answers (reading.py, release.py) on the answers that tell its readings apart: JSON found leniently in an
answer (extract_json) and the release's own reading (release_json, release_checklist)."""
from __future__ import annotations

import pytest

from cupid.utils.answers import ParseError, extract_json
from cupid.evaluation.release import ReleaseFailure, release_checklist, release_json


@pytest.mark.parametrize("answer, value", [
    # A closing brace or bracket inside a string does not end the object.
    ('Sure: {"a": "x } y ]", "b": 1} and later {"c": 2}', {"a": "x } y ]", "b": 1}),
    # An escaped quote does not end the string.
    ('Here: {"q": "say \\"hi\\" {now}"} trailing', {"q": 'say "hi" {now}'}),
    # An escaped quote followed by a brace, both inside the string.
    ('{"q": "a \\" }"} tail', {"q": 'a " }'}),
    # A stray quote before an object whose string holds a brace.
    ('The 5" screen: {"a": "}"} as asked', {"a": "}"}),
    # An empty key first: the string's first character is its closing quote.
    ('{"": 1} trailing words', {"": 1}),
    # The object ends at its closing brace even when text follows at once.
    ('{"a": 1}x', {"a": 1}),
    # A stray quote before the object does not open a string.
    ('The 5" screen: {"size": 5}', {"size": 5}),
    # The first array, not the last.
    ("[1, 2] then [3]", [1, 2]),
    # A fenced block wins over a draft object before it, multi-line, in either case.
    ('Draft: {"a": 0}\nFinal:\n```json\n{\n  "a": 1\n}\n```', {"a": 1}),
    ('Draft: {"a": 0}\nFinal:\n```JSON\n{"a": 1}\n```', {"a": 1}),
    # An empty fenced block is passed over, not the end of the search.
    ('```json\n```\n{"a": 1}', {"a": 1}),
    # Trailing commas, a common slip.
    ('{"a": [1, 2,],}', {"a": [1, 2]}),
])
def test_extract_json(answer, value):
    assert extract_json(answer) == value


@pytest.mark.parametrize("answer", ["x 42", "no json here", "{not json}", ""])
def test_extract_json_refuses_answers_without_json(answer):
    with pytest.raises(ParseError, match="^no valid JSON in the answer$"):
        extract_json(answer)


def test_release_json_cuts_at_the_last_fence():
    # Up to the last ``` of the answer: a fence inside a string is kept ...
    assert release_json('```json\n{"a": "```"}\n```') == {"a": "```"}
    # ... and text after the closing fence is cut off.
    assert release_json('```json\n{"a": 1}\n```\nDone.') == {"a": 1}
    # A second fenced block after the JSON one: the release reads both as one and fails.
    with pytest.raises(ValueError):
        release_json('```json\n{"a": 1}\n```\nand\n```\nmore\n```')


def test_release_checklist_failure_names_the_error():
    with pytest.raises(ReleaseFailure, match="^checklist unreadable: JSONDecodeError$"):
        release_checklist("```json\n{not json}\n```")
    with pytest.raises(ReleaseFailure, match="^checklist unreadable: KeyError$"):
        release_checklist('{"questions": []}')
