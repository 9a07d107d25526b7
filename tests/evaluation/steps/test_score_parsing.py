"""The numbers read from an answer at their edges: the judge's score at 1 and 10 through
both readings, its type (7, not 7.0, in results.json), and the matcher's indices."""
from __future__ import annotations

import json

import pytest

from cupid.evaluation.steps.decompose import parse as parse_checklist
from cupid.evaluation.steps.generate import parse as parse_response
from cupid.evaluation.steps.infer import parse as parse_inferred_preference
from cupid.evaluation.steps.judge import parse as parse_judge
from cupid.evaluation.steps.match import parse as parse_match
from cupid.evaluation.steps.summarize import parse as parse_summaries
from cupid.utils.answers import ParseError

HEAD = "### Evaluation of AI Assistant's Response\n\n1. Short.\n\n### Evaluation Label\n\nGood\n\n"


@pytest.mark.parametrize("section, score", [
    ("### Evaluation Score\n\n1", 1),            # the release's reading
    ("### Evaluation Score\n\n10", 10),
    ("### Evaluation Score\n\nScore: 1", 1),     # the lenient reading
    ("### Evaluation Score\n\nScore: 10", 10),
    ("### Evaluation Score\n\n**1**", 1),
    ("**Evaluation Score:** 10 (Excellent)", 10),
])
def test_judge_scores_at_the_ends_of_the_scale(section, score):
    out = parse_judge(HEAD + section)
    assert out["score"] == score and type(out["score"]) is int


@pytest.mark.parametrize("section", ["### Evaluation Score\n\nScore: 0", "### Evaluation Score\n\nScore: 11",
                                     "### Evaluation Score\n\nScore: 10.5", "### Evaluation Score\n\nScore: 0.5"])
def test_judge_scores_just_outside_the_scale(section):
    with pytest.raises(ParseError, match="outside 1-10"):
        parse_judge(HEAD + section)


def test_judge_score_types():
    assert type(parse_judge(HEAD + "### Evaluation Score\n\n7")["score"]) is int
    assert type(parse_judge(HEAD + "### Evaluation Score\n\nScore: 7")["score"]) is int
    assert type(parse_judge(HEAD + "### Evaluation Score\n\nScore: 7.0")["score"]) is int
    assert parse_judge(HEAD + "### Evaluation Score\n\nScore: 6.5")["score"] == 6.5


def test_judge_analysis_is_the_text_before_the_score_section():
    out = parse_judge(HEAD + "### Evaluation Score\n\n8")
    assert out["analysis"] == HEAD.strip()
    # The first mention of the section names where the analysis ends.
    text = "Intro line.\n### Evaluation Score\n\n8\n\nThe evaluation score reflects brevity."
    assert parse_judge(text)["analysis"] == "Intro line."
    assert parse_judge("### Evaluation Score\n\n8")["analysis"] == ""


@pytest.mark.parametrize("message, text", [
    ("no 'Evaluation Score' section", "The response is fine: 8."),
    ("no number under 'Evaluation Score'", "### Evaluation Score\n\nexcellent"),
])
def test_judge_errors_say_what_is_missing(message, text):
    with pytest.raises(ParseError) as info:
        parse_judge(text)
    assert str(info.value) == message


CHECKLIST = ["Is it short?", "Is it formal?", "Does it cite sources?"]


def answer(items) -> str:
    return "```json\n" + json.dumps({"results": items}) + "\n```"


def test_match_first_entry_unlabelled_is_an_error():
    with pytest.raises(ParseError, match=r"entries \[1\] are not labelled"):
        parse_match(answer([{"index": 2, "label": "Fully Covered"}, {"index": 3, "label": "Not Covered"}]),
                    CHECKLIST)


def test_match_positional_results_keep_the_checklist_order():
    out = parse_match(answer([{"label": "Fully Covered"}, {"label": "Not Covered"},
                              {"label": "Partially Covered"}]), CHECKLIST)
    assert [(r["index"], r["entry"], r["score"]) for r in out["results"]] == [
        (1, "Is it short?", 1.0), (2, "Is it formal?", 0.0), (3, "Does it cite sources?", 0.5)]


@pytest.mark.parametrize("items, message", [
    (["Fully Covered", {"index": 2, "label": "Not Covered"}, {"index": 3, "label": "Not Covered"}],
     "result 1 is not an object"),
    ([{"index": 1, "label": "Not Covered"}, {"index": "two", "label": "Not Covered"},
      {"index": 3, "label": "Not Covered"}], "result 2 has index 'two'"),
    ({"results": "none"}, "no 'results' list"),
])
def test_match_errors_name_the_result(items, message):
    text = "```json\n" + json.dumps(items if isinstance(items, dict) else {"results": items}) + "\n```"
    with pytest.raises(ParseError) as info:
        parse_match(text, CHECKLIST)
    assert str(info.value) == message


@pytest.mark.parametrize("label, expected", [
    ('"Fully Covered"', 1.0), ("**Partially Covered**", 0.5), ("'not covered'", 0.0),
    ("Not-Covered", 0.0), ("partially_covered", 0.5),
])
def test_match_labels_with_decoration(label, expected):
    items = [{"index": 1, "label": label}, {"index": 2, "label": "Not Covered"},
             {"index": 3, "label": "Not Covered"}]
    assert parse_match(answer(items), CHECKLIST)["results"][0]["score"] == expected


# ---------------------------------------------------------------------------------------
# The inferred preference: its text is what the next step decomposes
# ---------------------------------------------------------------------------------------
LENIENT = "## Analysis\n\nSeen before.\n\n## Most Likely Preference\n\n"  # "##": the lenient reading


@pytest.mark.parametrize("line, preference", [
    ('"Short answers."', "Short answers."),
    ("'Short answers.'", "Short answers."),
    ("“Short answers.”", "Short answers."),
    ('"Brief" answers are preferred.', '"Brief" answers are preferred.'),   # not a quoted whole
    ("“Brief” answers are preferred.", "“Brief” answers are preferred."),
    ("**Prefer option X**", "Prefer option X"),
    ("X before Y, then X", "X before Y, then X"),
    ("_Short answers._", "Short answers."),
    ("``` Short answers. ```", "Short answers."),
    ("```json Short answers.```", "Short answers."),
    ("```TEXT Short answers.```", "Short answers."),
    ("- Short answers.", "Short answers."),
    ("> Short answers.", "Short answers."),
])
def test_inferred_preference_decoration_is_removed(line, preference):
    assert parse_inferred_preference(LENIENT + line)["preference"] == preference


def test_inferred_preference_and_response_errors():
    with pytest.raises(ParseError) as info:
        parse_inferred_preference("The user wants short answers.")
    assert str(info.value) == "no 'Most Likely Preference' section"
    with pytest.raises(ParseError) as info:
        parse_inferred_preference(LENIENT + "***")
    assert str(info.value) == "the 'Most Likely Preference' section is empty"
    with pytest.raises(ParseError) as info:
        parse_response("  \n")
    assert str(info.value) == "empty response"


def test_inferred_preference_analysis():
    text = "### Analysis\n\nSeen before.\n\n### Most Likely Preference\n\nShort answers."
    assert parse_inferred_preference(text)["analysis"] == "Seen before."
    assert parse_inferred_preference("### Most Likely Preference\n\nShort answers.")["analysis"] == ""


@pytest.mark.parametrize("answer, message", [
    ("[]", "no 'summaries' list"),
    ('{"summaries": "none"}', "no 'summaries' list"),
    ('{"summaries": [1]}', "summary 1 is not an object"),
    ('{"summaries": [{"context": ["c"], "preferences": [1]}]}', "summary 1: 'preferences' is not a list of strings"),
    ('{"summaries": [{"context": 3, "preferences": []}]}', "summary 1: 'context' is not a list of strings"),
])
def test_summaries_errors(answer, message):
    with pytest.raises(ParseError) as info:
        parse_summaries(answer, 1)
    assert str(info.value) == message


def test_summaries_as_a_bare_list():
    out = parse_summaries('[{"context": "c", "preferences": "p"}]', 1)
    assert out == {"summaries": [{"session_id": 1, "context": ["c"], "preferences": ["p"]}]}


# ---------------------------------------------------------------------------------------
# The matcher's answer schema (constrained decoding on llama.cpp and vLLM)
# ---------------------------------------------------------------------------------------
VALID = {"results": [{"index": 1, "entry": "a", "label": "Fully Covered"},
                     {"index": 2, "entry": "b", "label": "Not Covered"}]}


def invalid(change) -> dict:
    doc = json.loads(json.dumps(VALID))
    change(doc)
    return doc


@pytest.mark.parametrize("doc", [
    {},
    {"results": {}},
    invalid(lambda d: d["results"].pop()),
    invalid(lambda d: d["results"].append(dict(d["results"][0]))),
    invalid(lambda d: d["results"].__setitem__(0, "Fully Covered")),
    invalid(lambda d: d["results"][0].update(label="Covered")),
    invalid(lambda d: d["results"][0].update(index="1")),
    invalid(lambda d: d["results"][0].update(entry=1)),
    invalid(lambda d: d["results"][0].update(label=1)),
    invalid(lambda d: d["results"][0].pop("index")),
    invalid(lambda d: d["results"][0].pop("entry")),
    invalid(lambda d: d["results"][0].pop("label")),
])
def test_match_schema_refuses_what_parse_match_cannot_use(doc):
    import jsonschema

    from cupid.evaluation.steps.match import schema as match_schema

    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, match_schema(2))


def test_match_schema_accepts_every_label():
    import jsonschema

    from cupid.evaluation.release import LABEL_SCORES
    from cupid.evaluation.steps.match import schema as match_schema

    schema = match_schema(2)
    jsonschema.Draft202012Validator.check_schema(schema)
    for label in LABEL_SCORES:
        doc = invalid(lambda d: d["results"][1].update(label=label.title()))
        jsonschema.validate(doc, schema)
        assert parse_match(json.dumps(doc), ["a", "b"])["results"][1]["score"] == LABEL_SCORES[label]



@pytest.mark.parametrize("section, score", [
    ("### Evaluation Score\n\n1.5", 1),     # the release cuts at the "." (kept: it is in 1-10)
    ("### Evaluation Score\n\n10.5", 10),
])
def test_judge_release_reading_at_the_ends_of_the_scale(section, score):
    assert parse_judge(HEAD + section)["score"] == score


def test_judge_section_ends_at_the_next_header():
    with pytest.raises(ParseError, match="no number under"):
        parse_judge("### Evaluation Score\n\n### Notes\n\nAbout 8.")


def test_inferred_preference_header_with_text_then_a_clean_one():
    text = "### Most Likely Preference: see below\n\n### Most Likely Preference\n\nShort answers."
    assert parse_inferred_preference(text)["preference"] == "see below"


@pytest.mark.parametrize("items, message", [
    ([{"label": "Fully Covered"}, {"index": "two", "label": "Not Covered"}, {"index": 3, "label": "Not Covered"}],
     "result 2 has index 'two'"),
    ([{"index": 1, "label": "Fully Covered"}, {"index": 2, "label": "Not Covered"}, {"index": 4, "label": "Not Covered"}],
     "index 4 is outside 1..3"),
    ([{"index": 1, "label": "Fully Covered"}, {"index": 1, "label": "Not Covered"}, {"index": 2, "label": "Not Covered"},
      {"index": 3, "label": "Not Covered"}], "entry 1 is labelled twice, differently"),
    ([{"index": 1, "label": 1}, {"index": 2, "label": "Not Covered"}, {"index": 3, "label": "Not Covered"}],
     "label 1 is not a string"),
    ([{"index": 1, "label": "XFully Covered"}, {"index": 2, "label": "Not Covered"}, {"index": 3, "label": "Not Covered"}],
     "unknown label 'XFully Covered'"),
])
def test_match_refusals_name_the_result(items, message):
    with pytest.raises(ParseError) as info:
        parse_match(answer(items), CHECKLIST)
    assert str(info.value) == message


def test_summaries_count_must_match_the_sessions():
    with pytest.raises(ParseError) as info:
        parse_summaries('{"summaries": [{"context": [], "preferences": []}]}', 2)
    assert str(info.value) == "1 summaries for 2 sessions"


@pytest.mark.parametrize("doc", [[], "results", 3])
def test_match_schema_wants_an_object(doc):
    import jsonschema

    from cupid.evaluation.steps.match import schema as match_schema

    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, match_schema(2))


def test_match_positional_results_must_cover_the_checklist():
    with pytest.raises(ParseError) as info:
        parse_match(answer([{"label": "Fully Covered"}, {"index": 2, "label": "Not Covered"}]), CHECKLIST)
    assert str(info.value) == "2 results, some without indices, for 3 checklist entries"


@pytest.mark.parametrize("first, second, score", [
    ("8", "3", 8),                    # the release's reading
    ("Score: 8", "Score: 3", 8),      # the lenient reading, when the release reads no score
    ("**9**", "2", 9),
])
def test_judge_with_two_score_headers_reads_the_first(first, second, score):
    """The release takes the text after the first "### Evaluation Score" (str.split(...)[1]);
    a parser reading the last header would score these answers otherwise."""
    text = f"{HEAD}### Evaluation Score\n\n{first}\n\n### Evaluation Score\n\n{second}"
    assert parse_judge(text)["score"] == score
