import pytest
from cupid.evaluation.steps import infer, judge
from cupid.evaluation.steps.decompose import parse as parse_checklist
from cupid.evaluation.steps.generate import parse as parse_response
from cupid.evaluation.steps.infer import parse as parse_inferred_preference
from cupid.evaluation.steps.judge import parse as parse_judge
from cupid.evaluation.steps.match import parse as parse_match
from cupid.evaluation.steps.summarize import parse as parse_summaries
from cupid.utils.answers import ParseError, extract_json
from cupid.utils.models import embedded_grammar

# --- inferred preference (Figure 21) -------------------------------------------------------


@pytest.mark.parametrize("header", [
    "### Most Likely Preferneces",       # the paper's own spelling
    "### Most Likely Preferences",
    "## most likely preference",
    "**Most Likely Preferences:**",
    "MOST LIKELY PREFERENCES:",
])
def test_inferred_preference_headers_are_lenient(header):
    text = f"### Analysis\nThe user wants X.\n\n{header}\nBullet lists with **exact** sources.\n"
    out = parse_inferred_preference(text)
    assert out["preference"] == "Bullet lists with **exact** sources."
    assert out["analysis"] == "The user wants X."


def test_inferred_preference_on_the_header_line_and_decorations():
    out = parse_inferred_preference('**Most Likely Preferences:** "Keep it to three bullets."')
    assert out["preference"] == "Keep it to three bullets."
    out = parse_inferred_preference("### Most Likely Preferences\n```\n- Use metric units.\n```")
    assert out["preference"] == "Use metric units."


def test_inferred_preference_stops_at_the_next_header():
    out = parse_inferred_preference("### Most Likely Preferences\nShort answers.\n### Notes\nignore me")
    assert out["preference"] == "Short answers."


def test_inferred_preference_is_the_first_line_as_the_release_reads_it():
    # The release's reading is kept character for character (quotes, bold), and a second
    # line is not part of it.
    out = parse_inferred_preference('### Analysis\n\nA.\n\n### Most Likely Preference\n\n'
                                    '"**Short** answers."\nSecond line.')
    assert out == {"analysis": "A.", "preference": '"**Short** answers."'}


@pytest.mark.parametrize("text", ["", "The user likes short answers.", "### Most Likely Preferences\n\n   \n"])
def test_inferred_preference_missing_or_empty_is_an_error(text):
    with pytest.raises(ParseError):
        parse_inferred_preference(text)


# --- judge (Figure 16) -----------------------------------------------------------------------


@pytest.mark.parametrize("tail, score", [
    ("### Evaluation Score\n8", 8),
    ("### Evaluation Score\n**8**", 8),
    ("### Evaluation Score\n8/10", 8),
    ("### Evaluation Score\nScore: 10 out of 10", 10),
    ("**Evaluation Score:** 7", 7),
    ("### evaluation score\n\n6.5", 6.5),
    ("### Evaluation Score\n\n6.5", 6),               # the release cuts at the first "."
    ("### **Evaluation Score**\n\n9", 9),
    ("### Evaluation Score\n1", 1),
])
def test_judge_scores(tail, score):
    text = "### Evaluation of AI Assistant's Response\n1. **Checklist item 1:** good (10 words).\n\n" + tail
    out = parse_judge(text)
    assert out["score"] == score
    assert "Checklist item 1" in out["analysis"]


@pytest.mark.parametrize("section, score", [
    # Several numbers in the section: the score is the first one, never the scale's end.
    ("7 out of 10", 7),
    ("Score: 3 (on a scale of 1 to 10)", 3),
    ("**6**, though 9 with examples", 6),
    ("2 - it misses 4 of the 5 items", 2),
    ("Score: 8.5 of 10", 8.5),
    ("8.5 of 10", 8),                     # the release's own reading: cut at the "."
    ("I give it a 4; a 10 needs every item.", 4),
])
def test_judge_score_is_the_first_number_of_its_section(section, score):
    text = "### Evaluation Label\n\nFair\n\n### Evaluation Score\n\n" + section
    assert parse_judge(text)["score"] == score


@pytest.mark.parametrize("text", [
    "### Evaluation Score\n12 out of 10", "### Evaluation Score\n0 of 10, 5 at most",
    "### Evaluation Score\n0", "### Evaluation Score\n11", "### Evaluation Score\nexcellent",
    "The response scores 8.", "",
])
def test_judge_rejects_missing_or_out_of_range_scores(text):
    with pytest.raises(ParseError):
        parse_judge(text)


# --- JSON answers ----------------------------------------------------------------------------


def test_extract_json_from_fences_prose_and_trailing_commas():
    assert extract_json('```json\n{"a": [1, 2,]}\n```') == {"a": [1, 2]}
    assert extract_json('Sure! Here it is: {"a": "b {c}"} Hope it helps.') == {"a": "b {c}"}
    assert extract_json('[{"x": 1}]') == [{"x": 1}]
    with pytest.raises(ParseError):
        extract_json("no json here")
    with pytest.raises(ParseError):
        extract_json('{"a": ')


def test_checklist_parsing():
    assert parse_checklist('```json\n{"checklist": ["Is it short?", " Is it formal? "]}\n```') == \
        {"checklist": ["Is it short?", " Is it formal? "]}  # as the release reads it
    assert parse_checklist('Here: {"checklist": [" Is it short? "]}') == {"checklist": ["Is it short?"]}
    assert parse_checklist('["Is it short?"]') == {"checklist": ["Is it short?"]}
    for bad in ('{"checklist": []}', '{"items": ["a"]}', '{"checklist": ["ok", 3]}', '{"checklist": [""]}'):
        with pytest.raises(ParseError):
            parse_checklist(bad)


CHECKLIST = ["Is it short?", "Is it formal?", "Does it cite sources?"]


def _match_json(items):
    import json
    return "```json\n" + json.dumps({"results": items}) + "\n```"


def test_match_labels_every_entry_with_scores():
    text = _match_json([{"index": 1, "entry": "x", "label": "Fully Covered"},
                        {"index": 2, "entry": "y", "label": "partially covered"},
                        {"index": 3, "entry": "z", "label": "NOT_COVERED"}])
    out = parse_match(text, CHECKLIST)
    assert [r["score"] for r in out["results"]] == [1.0, 0.5, 0.0]
    assert [r["entry"] for r in out["results"]] == CHECKLIST  # entries come from our checklist
    assert [r["label"] for r in out["results"]] == ["Fully Covered", "Partially Covered", "Not Covered"]


def test_match_accepts_zero_based_or_positional_indices():
    zero = _match_json([{"index": i, "label": "Not Covered"} for i in range(3)])
    assert [r["index"] for r in parse_match(zero, CHECKLIST)["results"]] == [1, 2, 3]
    positional = _match_json([{"label": "Fully Covered"}] * 3)
    assert [r["score"] for r in parse_match(positional, CHECKLIST)["results"]] == [1.0] * 3
    some = _match_json([{"index": 1, "label": "Fully Covered"}, {"label": "Not Covered"},
                        {"index": "3.", "label": "Partially Covered"}])
    assert [r["score"] for r in parse_match(some, CHECKLIST)["results"]] == [1.0, 0.0, 0.5]
    # PrefMatcher answers with the list itself, unfenced.
    bare = '[{"index": 1, "label": "Fully Covered"}, {"index": 2, "label": "Not Covered"}, ' \
           '{"index": "(3)", "label": "Fully Covered"}]'
    assert [r["score"] for r in parse_match(bare, CHECKLIST)["results"]] == [1.0, 0.0, 1.0]


@pytest.mark.parametrize("items", [
    [{"index": 1, "label": "Fully Covered"}, {"index": 2, "label": "Fully Covered"}],  # one missing
    [{"index": 1, "label": "Mostly Covered"}, {"index": 2, "label": "Fully Covered"},
     {"index": 3, "label": "Not Covered"}],                                               # bad label
    [{"index": 1, "label": "Fully Covered"}, {"index": 2, "label": "Fully Covered"},
     {"index": 7, "label": "Not Covered"}],                                               # bad index
    [{"index": 1, "label": "Fully Covered"}, {"index": 1, "label": "Not Covered"},
     {"index": 2, "label": "Fully Covered"}, {"index": 3, "label": "Not Covered"}],       # contradiction
    [{"label": "Fully Covered"}] * 2,                                                    # too few, no index
])
def test_match_is_strict_where_the_metric_depends_on_it(items):
    with pytest.raises(ParseError):
        parse_match(_match_json(items), CHECKLIST)


def test_summaries_and_response():
    text = _match_json([])  # reuse helper shape only for fences
    with pytest.raises(ParseError):
        parse_summaries(text, 1)
    good = '{"summaries": [{"session_id": 1, "context": "c", "preferences": ["p1", " "]}]}'
    assert parse_summaries(good, 1) == {"summaries": [{"session_id": 1, "context": ["c"],
                                                      "preferences": ["p1"]}]}
    with pytest.raises(ParseError):
        parse_summaries(good, 2)
    assert parse_response("  hello \n") == {"response": "hello"}
    with pytest.raises(ParseError):
        parse_response("  \n")


def test_layout_grammars_match_what_the_parsers_read():
    # An answer laid out exactly as each grammar's fixed text parses, as the release reads
    # it too, so the embedded model's constrained answers reach the scored fields.
    from cupid.evaluation import release
    inferred = ("### Analysis\n\nThe user wants short answers.\n"
                "\n### Most Likely Preference\n\nKeep it under 100 words.\n")
    assert parse_inferred_preference(inferred)["preference"] == "Keep it under 100 words."
    assert release.release_preference(inferred) == "Keep it under 100 words."
    judged = ("### Evaluation of AI Assistant's Response\n\n1. It is short.\n"
              "\n### Evaluation Label\n\nExceptional\n\n### Evaluation Score\n\n10\n")
    assert parse_judge(judged)["score"] == 10
    assert release.release_judge_score(judged) == 10
    for grammar, headers in ((embedded_grammar.grammar(infer.LAYOUT), ["### Analysis", "### Most Likely Preference\\n"]),
                             (embedded_grammar.grammar(judge.LAYOUT), ["### Evaluation of AI Assistant's Response",
                                                              "### Evaluation Label", "### Evaluation Score"])):
        assert grammar.startswith("root ::= ")
        assert [grammar.index(h) for h in headers] == sorted(grammar.index(h) for h in headers)
    for label in judge.LABELS:
        assert f'"{label}"' in embedded_grammar.grammar(judge.LAYOUT)
