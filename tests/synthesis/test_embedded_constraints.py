"""What the embedded model decodes under in synthesis: every document its schemas allow
passes its stage's validator, its user simulator ends a dialogue at its second message, and
only a model that follows answer layouts gets any of it (a hosted model's request and cache
key are the release's, a vLLM server's carries the document schema it always did)."""
from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from cupid.evaluation.steps.user_simulator import ENDING_LAYOUT, LAYOUT
from cupid.synthesis.dialogues import opening_turn
from cupid.synthesis.documents import generate_validated
from cupid.synthesis.factors import EMBEDDED_PAIR, embedded_factors_schema, factors_schema, validate_factors
from cupid.synthesis.journey import make_journey
from cupid.synthesis.personas import persona_batch_schema, validate_persona_batch
from cupid.synthesis.sessions import embedded_sessions_schema, validate_sessions
from cupid.synthesis.taxonomy import load_taxonomy
from cupid.utils.models.answer_layout import Json
from cupid.utils.models.embedded_grammar import follow, grammar
from cupid.utils.models.model import Completion, Model
from synthesis_responder import simulate_dialogue

TAX = load_taxonomy()
# Printable text: the grammar leaves out quotes, backslashes and control characters; a model
# writes from its vocabulary, where unassigned and private code points do not occur.
TEXT = st.characters(codec="utf-8", exclude_categories=("Cs", "Co", "Cn"))


def documents(schema: dict) -> st.SearchStrategy:
    """Every document ``schema`` allows, for the features the embedded schemas use."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "pattern" in schema:
        return st.from_regex(schema["pattern"], fullmatch=True, alphabet=TEXT)
    if schema["type"] == "object":
        return st.fixed_dictionaries({key: documents(value) for key, value in schema["properties"].items()})
    if schema["type"] == "array" and "prefixItems" in schema:
        return st.tuples(*map(documents, schema["prefixItems"])).map(list)
    if schema["type"] == "array":
        return st.lists(documents(schema["items"]), min_size=schema["minItems"], max_size=schema["maxItems"])
    raise AssertionError(f"not a feature of the embedded schemas: {schema}")


def check_schema(schema: dict, document) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator(schema).validate(document)


EXAMPLES = settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))


@EXAMPLES
@given(st.data())
def test_every_persona_batch_the_embedded_schema_allows_passes(data):
    schema = persona_batch_schema(2, embedded=True)
    document = data.draw(documents(schema))
    check_schema(schema, document)
    described = validate_persona_batch(json.dumps(document, ensure_ascii=False), 2)
    assert all(len(re.findall(r"[.!?](?= |$)", p["description"])) >= 6 for p in described)


@pytest.mark.parametrize("n_factors", [3, 27])  # 27: past the last initial letter
def test_every_factor_list_the_embedded_schema_allows_passes(n_factors):
    schema = embedded_factors_schema(n_factors, TAX)

    @EXAMPLES
    @given(documents(schema))
    def check(document):
        check_schema(schema, document)
        factors = validate_factors(json.dumps(document, ensure_ascii=False), n_factors, TAX)["factors"]
        assert [f["context_factor"] for f in factors[-2:]] == [name for name, _, _ in EMBEDDED_PAIR]
        assert factors[-2]["related_factor"] == factors[-1]["context_factor"]

    check()


@pytest.mark.parametrize("n_sessions, n_factors", [(9, 3), (13, 8)])
def test_every_session_list_the_embedded_schema_allows_passes(n_sessions, n_factors):
    factor_schema = embedded_factors_schema(n_factors, TAX)

    @EXAMPLES
    @given(st.data(), st.randoms(use_true_random=False))
    def check(data, rng):
        factors = validate_factors(json.dumps(data.draw(documents(factor_schema)), ensure_ascii=False), n_factors, TAX)["factors"]
        journey = make_journey(rng, n_sessions, (factors[-2]["context_factor"], factors[-1]["context_factor"]))
        schema = embedded_sessions_schema(journey, factors)
        document = data.draw(documents(schema))
        check_schema(schema, document)
        sessions = validate_sessions(json.dumps(document, ensure_ascii=False), journey, factors, TAX)
        assert sessions["current_factor"] == factors[-2]["context_factor"]
        assert sessions["changed_preference"] == factors[-1]["contextual_preference"]
        assert sessions["warnings"] == []  # task types of the factor's, each resource in its request

    check()


class Recorder(Model):
    """Answers ``answer`` and keeps the schema each request carried."""

    def __init__(self, name: str, answer: str) -> None:
        super().__init__(name)
        self.answer, self.schemas = answer, []

    def complete(self, request):
        self.schemas.append(request.json_schema)
        return Completion(text=self.answer)


class Grammatical(Recorder):
    def constrain(self, request):
        return follow(request)


class GuidedServer(Recorder):
    supports_json_schema = True


def test_only_a_model_that_follows_layouts_gets_the_embedded_schema():
    tight, loose = embedded_factors_schema(3, TAX), factors_schema(3, TAX)
    for model, sent in ((Grammatical("g", "{}"), tight), (GuidedServer("v", "{}"), loose),
                        (Recorder("hosted", "{}"), loose)):
        answer = generate_validated(model, "system", "user", json.loads, max_attempts=1,
                                    json_schema=loose, layout=Json(tight))
        assert answer.value == {} and model.schemas == [sent]


def test_the_decomposers_schema_takes_questions_and_refuses_the_filler_smollm2_wrote():
    from cupid.evaluation.steps.decompose import SCHEMA

    checklist = {"checklist": ["Are the responsibilities communicated in a stern tone?",
                               "Does the response use three bullet points at most?"]}
    check_schema(SCHEMA, checklist)
    jsonschema = pytest.importorskip("jsonschema")
    for entry in ("]  # 1  # 2  # 3", "Is it?", "Does it end without a question mark", "Two? Questions?"):
        with pytest.raises(jsonschema.ValidationError):
            check_schema(SCHEMA, {"checklist": [entry]})


class LaidOut(Grammatical):
    """A user simulator that follows the layout grammar (it ends when the grammar says so)."""

    def complete(self, request):
        self.schemas.append(request.answer_grammar)
        status = "END" if request.answer_grammar == grammar(ENDING_LAYOUT.followed()) else "CONTINUE"
        return Completion(text=opening_turn("more, please").replace("CONTINUE", status))


class Unconstrained(Recorder):
    def complete(self, request):
        self.schemas.append(request.answer_grammar)
        return Completion(text=opening_turn("more, please"))


def test_the_embedded_user_simulator_ends_at_its_second_message_and_others_are_asked_as_before():
    session = {"index": 1, "request": "Plan my week.", "context_factor": "Advisor Meeting",
               "contextual_preference": "Brief answers."}
    for user, grammars, turns in ((LaidOut("g", ""), [grammar(LAYOUT), grammar(ENDING_LAYOUT.followed())], 5),
                                  (Unconstrained("hosted", ""), [grammar(LAYOUT)] * 5, 12)):
        dialogue = simulate_dialogue(user, Recorder("assistant", "A plan."), "A farmer.", session,
                                     ["Is it brief?"], max_turns=6, max_attempts=1)
        assert user.schemas == grammars and dialogue["n_turns"] == turns
