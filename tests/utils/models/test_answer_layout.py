"""Answer layouts (utils/models/answer_layout.py) and how the models follow them.

The grammar texts below are the ones the steps wrote by hand before they declared layouts,
copied here as golden data: the embedded model's cache key holds the grammar text, so the
compiled grammars must equal them byte for byte (a change orphans every cached answer)."""
from __future__ import annotations

import dataclasses

import pytest

from cupid.evaluation.steps import decompose, error_type, infer, judge, match, summarize, user_simulator
from cupid.utils.models.answer_layout import Choice, Headed, Json, Lines, Number
from cupid.utils.models.embedded_grammar import follow, grammar, unfollowed
from cupid.utils.models.model import Model
from cupid.utils.models.request import Completion, Request
from cupid.utils.models.scripted import ScriptedModel
from cupid.utils.models.smollm2 import SmolLM2

GOLDEN = {
    "infer": (
        'root ::= "### Analysis\\n\\n" line line? line? "\\n### Most Likely Preference\\n\\n" line\n'
        '\n'
        'line ::= [^\\n#] [^\\n]{0,400} "\\n"\n'),
    "judge": (
        'root ::= "### Evaluation of AI Assistant\'s Response\\n\\n" line line? line? line? "\\n### Evaluation Label\\n\\n" label "\\n\\n### Evaluation Score\\n\\n" score "\\n"\n'
        'score ::= "10" | [1-9]\n'
        'label ::= "Exceptional" | "Excellent" | "Very Good" | "Good" | "Above Average" | "Acceptable" | "Below Average" | "Poor" | "Very Poor" | "Unacceptable"\n'
        '\n'
        'line ::= [^\\n#] [^\\n]{0,400} "\\n"\n'),
    "error_type": (
        'root ::= "### Analysis\\n\\n" line line? "\\n### Error Type\\n\\n" type "\\n"\n'
        'type ::= "Incorrect Context" | "Shallow Inference" | "Vagueness" | "Hallucination"\n'
        '\n'
        'line ::= [^\\n#] [^\\n]{0,400} "\\n"\n'),
    "user_simulator": (
        'root ::= "#### Evaluation of AI Assistant\'s Response\\n\\n" line line? line? "\\n#### Evaluation Score\\n\\n" score "\\n\\n#### Continue or End?\\n\\n" status "\\n\\n#### Selected Checklist Items\\n\\n" line line? "\\n#### Thinking\\n\\n" line "\\n#### Your Message\\n\\n" line\n'
        'score ::= "10" | [1-9]\n'
        'status ::= "CONTINUE" | "END"\n'
        'line ::= [^\\n#] [^\\n]{0,400} "\\n"\n'),
    "user_simulator_ending": (
        'root ::= "#### Evaluation of AI Assistant\'s Response\\n\\n" line line? line? "\\n#### Evaluation Score\\n\\n" score "\\n\\n#### Continue or End?\\n\\n" status "\\n\\n#### Selected Checklist Items\\n\\n" line line? "\\n#### Thinking\\n\\n" line "\\n#### Your Message\\n\\n" line\n'
        'score ::= "10" | [1-9]\n'
        'status ::= "END"\n'
        'line ::= [^\\n#] [^\\n]{0,400} "\\n"\n'),
}

STEPS = {"infer": infer.LAYOUT, "judge": judge.LAYOUT, "error_type": error_type.LAYOUT,
         "user_simulator": user_simulator.LAYOUT, "user_simulator_ending": user_simulator.ENDING_LAYOUT}
MESSAGES = ({"role": "user", "content": "q"},)


@pytest.mark.parametrize("step", sorted(STEPS))
def test_each_steps_layout_compiles_to_the_grammar_it_always_sent(step):
    assert grammar(STEPS[step].followed()) == GOLDEN[step]


def test_a_model_that_does_not_follow_layouts_keeps_the_grammar_its_cache_keys_hold():
    # Hosted models were sent the grammar in the request (never on the wire), the ending one never.
    for step in ("judge", "user_simulator_ending"):
        request = unfollowed(Request("s", MESSAGES, layout=STEPS[step]))
        assert request.layout is None and request.json_schema is None
        assert request.answer_grammar == GOLDEN[step.replace("_ending", "")]
    schema = {"type": "object"}
    assert unfollowed(Request("s", MESSAGES, json_schema=schema, layout=Json({"type": "array"}))) == \
        Request("s", MESSAGES, json_schema=schema)


@pytest.mark.parametrize("model_class", [SmolLM2, ScriptedModel])
def test_the_embedded_and_scripted_models_send_todays_requests_under_todays_cache_keys(model_class):
    model = model_class()
    sent = {
        "judge": Request("s", MESSAGES, answer_grammar=GOLDEN["judge"]),
        "ending": Request("s", MESSAGES, answer_grammar=GOLDEN["user_simulator_ending"]),
        "match": Request("s", MESSAGES, json_schema=match.schema(3)),
        "decompose": Request("s", MESSAGES, json_schema=decompose.SCHEMA),
        "summarize": Request("s", MESSAGES, json_schema=summarize.SCHEMA),
    }
    laid_out = {"judge": judge.LAYOUT, "ending": user_simulator.ENDING_LAYOUT, "match": Json(match.schema(3)),
                "decompose": Json(decompose.SCHEMA), "summarize": Json(summarize.SCHEMA)}
    for name, layout in laid_out.items():
        followed = model.constrain(Request("s", MESSAGES, layout=layout))
        assert followed == sent[name], name
        assert followed.cache_key(model.name, model.provider) == sent[name].cache_key(model.name, model.provider)


def test_a_stage_layout_replaces_the_portable_schema_only_for_a_model_that_follows_it():
    portable, tight = {"type": "object"}, {"type": "object", "required": ["x"]}
    request = Request("s", MESSAGES, json_schema=portable, layout=Json(tight))
    assert SmolLM2().constrain(request).json_schema == tight
    assert Model("hosted").constrain(request).json_schema == portable


class Recorder(Model):
    def complete(self, request):
        self.request = request
        return Completion(text="ok")


def test_the_seam_applies_the_hook_before_the_cache_key_and_never_keeps_the_layout():
    class Follower(Recorder):
        def constrain(self, request):
            return dataclasses.replace(request, layout=None, answer_grammar="root ::= \"x\"\n")

    follower, other = Follower("f"), Recorder("r")
    for model in (follower, other):
        model.generate("s", list(MESSAGES), layout=Headed(("# A\n", Lines(1))))
        assert model.request.layout is None
    assert follower.request.answer_grammar == 'root ::= "x"\n'
    assert other.request.answer_grammar == 'root ::= "# A\\n" line\n\nline ::= [^\\n#] [^\\n]{0,400} "\\n"\n'


def test_a_number_and_options_compile_to_their_rules():
    layout = Headed(("A\n", Choice("pick", ("x", 'say "y"')), "\n", Number("n", 3, 12), "\n"))
    assert grammar(layout) == ('root ::= "A\\n" pick "\\n" n "\\n"\n'
                               'n ::= "12" | "11" | "10" | [3-9]\n'
                               'pick ::= "x" | "say \\"y\\""\n')


def test_a_held_choice_narrows_only_what_a_following_model_is_held_to():
    layout = Headed(("S\n", Choice("status", ("GO", "STOP")), "\n")).holding(Choice("status", ("STOP",)))
    assert layout.held == (Choice("status", ("STOP",)),)
    assert grammar(layout.followed()).splitlines()[1] == 'status ::= "STOP"'
    assert grammar(layout).splitlines()[1] == 'status ::= "GO" | "STOP"'  # what the parser reads, unheld
    assert layout.holding(Choice("other", ("x",))).held == (Choice("status", ("STOP",)), Choice("other", ("x",)))


@pytest.mark.parametrize("low, high, rule", [(10, 12, '"12" | "11" | "10"'), (9, 10, '"10" | [9-9]'),
                                             (1, 9, "[1-9]")])
def test_a_number_has_its_two_digit_literals_and_its_one_digit_range_only_where_it_reaches_them(low, high, rule):
    assert grammar(Headed((Number("n", low, high),))) == f"root ::= n\nn ::= {rule}\n"


def test_a_literal_escapes_backslashes_quotes_and_newlines():
    assert grammar(Headed(('a\\b "c"\n',))) == 'root ::= "a\\\\b \\"c\\"\\n"\n'
