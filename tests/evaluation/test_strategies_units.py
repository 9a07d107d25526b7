"""Context strategies (evaluation/strategies.py) in process: what each built-in shows, the
positions a selection is recorded under, rendered text, the canonical names, typed
parameters, and every refusal named (tests/evaluation/test_strategies.py runs them through
cupid-eval)."""
from __future__ import annotations

import pytest

from cupid.evaluation import strategies as S
from cupid.evaluation.strategies import Strategy, strategy_named
from cupid.evaluation.steps.layouts import format_session_log
from cupid.utils.dataset import Instance, Session, Turn
from cupid.utils.errors import BadInput


def session(k: int, preference: str) -> Session:
    return Session(f"Factor {k}", preference, (Turn("user", f"message {k}"), Turn("assistant", f"reply {k}")))


SESSIONS = (session(1, "Short."), session(2, "Long."), session(3, "Short."), session(4, "Tables."))


def instance(sessions=SESSIONS, current="Short.") -> Instance:
    return Instance("i1", "p1", "consistent", "Write it.", "Factor 1", current, ("Is it short?",), tuple(sessions))


def test_the_paper_settings_and_what_each_shows():
    i = instance()
    assert list(S.PAPER_STRATEGIES) == ["default", "oracle", "summary", "oracle_preference"]
    default = S.PAPER_STRATEGIES["default"].shown(i)
    assert default == S.Shown(format_session_log(SESSIONS), SESSIONS, (1, 2, 3, 4))
    oracle = S.PAPER_STRATEGIES["oracle"].shown(i)
    assert oracle.sessions == (SESSIONS[0], SESSIONS[2]) and oracle.positions == (1, 3)
    assert S.PAPER_STRATEGIES["oracle"].skip_reason(i) is None
    assert S.PAPER_STRATEGIES["oracle"].skip_reason(instance(current="Other.")) == "no prior session has the current preference"
    assert S.PAPER_STRATEGIES["default"].skip_reason(instance(current="Other.")) is None
    assert strategy_named("none").shown(i) == S.Shown(format_session_log(()), (), ())
    summary, given = S.PAPER_STRATEGIES["summary"], S.PAPER_STRATEGIES["oracle_preference"]
    assert (summary.summaries, summary.preference_given, summary.tasks) == (True, False, S.TASKS)
    assert (given.summaries, given.preference_given, given.tasks) == (False, True, ("generation",))
    assert given.shown(i).positions == ()
    assert S.PAPER_STRATEGIES["default"].summaries is False and S.PAPER_STRATEGIES["default"].preference_given is False
    assert S.TASKS == ("inference", "generation", "both")


def test_positions_follow_the_selection_order_and_equal_sessions_are_found():
    class Reversed:
        def select(self, inst):
            return list(reversed(inst.prior_interactions))

    class Copies:  # equal sessions that are not the same objects
        uses_labels = True

        def select(self, inst):
            return [Session(s.context_factor, s.contextual_preference, s.dialogue) for s in inst.prior_interactions[2:]]

    assert strategy_named(Reversed()).shown(instance()).positions == (4, 3, 2, 1)
    assert strategy_named(Copies()).shown(instance()).positions == (3, 4)


def test_a_foreign_session_is_refused_naming_the_setting_and_instance():
    class Foreign:
        name = "foreign"

        def select(self, inst):
            return [session(9, "Invented.")]

    with pytest.raises(ValueError, match=r"setting foreign@\w+: select\(\) returned a Session that is not one of "
                                         r"instance i1's prior sessions"):
        strategy_named(Foreign()).shown(instance())


def test_render_gives_the_text_and_select_the_sessions_it_drew_on():
    class Notes:
        def render(self, inst):
            return "notes about the user"

    class Both(Notes):
        def select(self, inst):
            return inst.prior_interactions[1:2]

    class Bad:
        name = "bad"

        def render(self, inst):
            return ["not", "text"]

    assert strategy_named(Notes()).shown(instance()) == S.Shown("notes about the user", None, None, rendered=True)
    assert strategy_named(Both()).shown(instance()) == S.Shown("notes about the user", (SESSIONS[1],), (2,),
                                                                  rendered=True)
    with pytest.raises(TypeError, match=r"setting bad@\w+: render\(\) returned a list, not a str"):
        strategy_named(Bad()).shown(instance())


def test_a_strategy_object_is_named_by_its_name_or_class():
    class Plain:
        def select(self, inst):
            return ()

    named = type("Named", (), {"name": "my-memory", "select": lambda self, inst: ()})()
    assert strategy_named(named).name.split("@")[0] == "my-memory"
    assert strategy_named(Plain()).name.split("@")[0] == f"{__name__}:{Plain.__qualname__}"
    same = Strategy("x", Plain())
    assert strategy_named(same) is same
    with pytest.raises(BadInput, match="setting .*: a strategy needs select\\(instance\\) or render\\(instance\\); "
                                       "object has neither"):
        strategy_named(object())


@pytest.mark.parametrize("text, name, k", [
    ("recent:k=2", "recent:k=2", 2), (" bm25:k=03 ", "bm25:k=3", 3), ("recent:k=10", "recent:k=10", 10)])
def test_built_in_retrievers_take_k_and_are_named_canonically(text, name, k):
    found = strategy_named(text)
    assert found.name == name and found.impl.k == k and found.spec is None


def test_parameters_are_typed_and_sorted():
    assert S._split_parameters("x:b=2,a=true") == ("x", {"b": 2, "a": True})
    assert S._split_parameters("x") == ("x", {})
    assert S._split_parameters("path/f.py:Class") == ("path/f.py:Class", {})
    assert S._split_parameters("m:Cls:k=1.5, name = memo ,flag=FALSE") == ("m:Cls", {"k": 1.5, "name": "memo",
                                                                                    "flag": False})
    assert [S._typed(v) for v in ("7", "-2", "0.25", "True", "false", "org/name", "1e3")] == \
        [7, -2, 0.25, True, False, "org/name", 1000.0]
    assert isinstance(S._typed("7"), int) and isinstance(S._typed("7.0"), float)
    for bad in ("x:k=1,=2", "x:k=1,2bad=3", "x:k=1,novalue"):
        with pytest.raises(BadInput, match="expected key=value parameters after the name"):
            S._split_parameters(bad)
    with pytest.raises(BadInput, match="expected key=value parameters after recent:, e.g. recent:k=2"):
        S._split_parameters("recent:k")


def test_refusals_name_the_setting():
    with pytest.raises(BadInput, match="setting recent:k=0: k: expected a whole number"):
        strategy_named("recent:k=0")
    with pytest.raises(BadInput, match=r"unknown 'recnt' \(did you mean 'recent'\?\)\. Built in: default, none, oracle"):
        strategy_named("recnt")
    with pytest.raises(BadInput, match=r"unknown 'zzzz'\. Built in"):
        strategy_named("zzzz")
    with pytest.raises(BadInput, match="setting default:k=2: "):
        strategy_named("default:k=2")


STRATEGY_FILE = '''
class Picks:
    def __init__(self, k=1, label="x"):
        self.k, self.label = k, label

    def select(self, instance):
        return instance.prior_interactions[:self.k]


ready = Picks(2)
'''


def test_a_users_file_is_loaded_named_by_its_file_and_recorded_portably(tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text(STRATEGY_FILE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    found = strategy_named("mine.py:Picks:k=3,label=memo")
    assert found.name.split("@")[0] == "mine.py:Picks:k=3,label=memo"
    assert found.spec == f"{(tmp_path / 'mine.py').resolve()}:Picks:k=3,label=memo"
    assert (found.impl.k, found.impl.label) == (3, "memo")
    assert found.shown(instance()).positions == (1, 2, 3)
    plain = strategy_named("mine.py:Picks")
    assert plain.name.split("@")[0] == "mine.py:Picks" and plain.spec == f"{(tmp_path / 'mine.py').resolve()}:Picks"
    ready = strategy_named("mine.py:ready")
    assert ready.shown(instance()).positions == (1, 2)
    with pytest.raises(BadInput, match="setting mine.py:ready:k=1: mine.py:ready is an object, not a class: it takes no "
                                       "parameters"):
        strategy_named("mine.py:ready:k=1")
    with pytest.raises(BadInput, match="setting mine.py:Picks:depth=2: .*unexpected keyword argument 'depth'"):
        strategy_named("mine.py:Picks:depth=2")
    with pytest.raises(BadInput, match="^setting absent.py:Picks: no such file absent.py"):
        strategy_named("absent.py:Picks")


class FakeEntryPoint:
    def __init__(self, name, target, value="pkg.mod:Thing"):
        self.name, self.target, self.value = name, target, value

    def load(self):
        if isinstance(self.target, Exception):
            raise self.target
        return self.target


def test_an_installed_entry_point_is_a_strategy_too(monkeypatch):
    from cupid.utils.models import registry

    class Memory:
        def __init__(self, size=1):
            self.size = size

        def render(self, inst):
            return f"memory of {self.size}"

    points = {"notes": FakeEntryPoint("notes", Memory), "broken": FakeEntryPoint("broken", ImportError("no pkg"))}
    asked = []
    monkeypatch.setattr(registry, "_entry_points",
                        lambda group: asked.append(group) or (points if group == "cupid.strategies" else {}))
    found = strategy_named("notes:size=4")
    assert asked[0] == S.ENTRY_POINT_GROUP == "cupid.strategies"
    assert found.name.split("@")[0] == "notes:size=4" and found.spec is None
    assert found.shown(instance()) == S.Shown("memory of 4", None, None, rendered=True)
    with pytest.raises(BadInput, match=r"^setting broken: the entry point pkg.mod:Thing failed to load: "
                                       r"ImportError: no pkg$"):
        strategy_named("broken")
    with pytest.raises(BadInput, match=r"unknown 'notse' \(did you mean 'notes'\?\)\. .*installed cupid.strategies "
                                       r"entry points: broken, notes$"):
        strategy_named("notse")
    monkeypatch.setattr(registry, "_entry_points", lambda group: {})
    with pytest.raises(BadInput, match=r"\(recent, bm25 and dense take k=N\); your own: path/file.py:Class or "
                                       r"package.module:Class; installed cupid.strategies entry points: none$"):
        strategy_named("zzzz")


MORE_STRATEGIES = STRATEGY_FILE + '''

def make(k=1):
    return Picks(k, label="made")


class Callable:
    """A strategy object that is also callable: used as it is, never called."""

    def __call__(self, **kwargs):
        raise AssertionError("called")

    def select(self, instance):
        return instance.prior_interactions[-1:]


callable_strategy = Callable()
number = 5


class Empty:
    pass
'''


def test_what_a_file_names_a_class_a_factory_an_object_or_neither(tmp_path, monkeypatch):
    nested = tmp_path / "sub" / "d:x"
    nested.mkdir(parents=True)
    (nested / "mine.py").write_text(MORE_STRATEGIES, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    made = strategy_named("sub/d:x/mine.py:make:k=2")
    assert made.name.split("@")[0] == "mine.py:make:k=2" and (made.impl.k, made.impl.label) == (2, "made")
    used = strategy_named("sub/d:x/mine.py:callable_strategy")
    assert used.shown(instance()).positions == (4,)
    with pytest.raises(BadInput) as info:
        strategy_named("sub/d:x/mine.py:number")
    assert str(info.value) == ("setting sub/d:x/mine.py:number: a strategy needs select(instance) or "
                               "render(instance); int has neither")
    with pytest.raises(BadInput) as info:
        strategy_named("sub/d:x/mine.py:Empty")
    assert str(info.value) == ("setting sub/d:x/mine.py:Empty: a strategy needs select(instance) or "
                               "render(instance); Empty has neither")
    assert S._split_parameters("x:model=org=name") == ("x", {"model": "org=name"})


def test_an_object_of_a_script_is_named_by_its_class_alone():
    kind = type("Script", (), {"select": lambda self, inst: ()})
    kind.__module__ = "__main__"
    assert strategy_named(kind()).name.split("@")[0] == "Script"
    with pytest.raises(BadInput) as info:
        strategy_named(object())
    assert str(info.value) == ("setting builtins:object: a strategy needs select(instance) or render(instance); "
                               "object has neither")


def test_a_selected_session_is_recorded_at_its_own_position_among_equal_ones():
    same = session(1, "Short.")
    sessions = (same, session(2, "Long."), Session(same.context_factor, same.contextual_preference, same.dialogue))

    class Last:
        def select(self, inst):
            return [inst.prior_interactions[2]]

    assert strategy_named(Last()).shown(instance(sessions)).positions == (3,)


def test_render_is_given_the_instance():
    class ById:
        def render(self, inst):
            return f"notes on {inst.current_request}"

    assert strategy_named(ById()).shown(instance()).text == "notes on Write it."


def test_a_users_strategy_is_identified_by_its_class_parameters_and_source(tmp_path, monkeypatch):
    import hashlib

    (tmp_path / "mine.py").write_text(MORE_STRATEGIES, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    source = hashlib.sha256((tmp_path / "mine.py").read_bytes()).hexdigest()
    picks = strategy_named("mine.py:Picks:k=3,label=memo")
    assert {k: picks.identity[k] for k in ("class", "parameters", "source_sha256")} == {
        "class": "Picks", "parameters": {"k": 3, "label": "memo"}, "source_sha256": source}
    assert picks.name == f"mine.py:Picks:k=3,label=memo@{picks.identity['hash']}" and len(picks.identity["hash"]) == 10
    assert strategy_named("mine.py:Picks:k=3,label=memo").name == picks.name
    assert strategy_named("mine.py:Picks:k=4,label=memo").name != picks.name
    made = strategy_named("mine.py:make:k=2")
    assert (made.identity["class"], made.identity["parameters"]) == ("make", {"k": 2})
    ready = strategy_named("mine.py:ready")      # an object: its class, and its simple public attributes
    assert (ready.identity["class"], ready.identity["parameters"]) == ("Picks", {"k": 2, "label": "x"})
    assert strategy_named("recent:k=2").identity is None and "@" not in strategy_named("recent:k=2").name


def test_an_objects_parameters_are_its_simple_public_attributes():
    class Memory:
        def __init__(self):
            self.size, self.name_, self._hidden, self.model, self.items = 4, "n", 1, "m", [1]
            self.flag, self.none, self.rate = True, None, 0.5

        def select(self, inst):
            return ()

    assert S._simple_attributes(Memory()) == {"flag": True, "name_": "n", "none": None, "rate": 0.5, "size": 4}
    assert S._simple_attributes(object()) == {}
    found = strategy_named(Memory())
    assert found.identity["parameters"] == S._simple_attributes(found.impl)
    assert found.identity["class"].endswith("Memory")


def test_a_users_strategy_is_asked_once_per_instance_and_a_built_in_each_time():
    asked = []

    class Counting:
        def select(self, inst):
            asked.append(inst.current_request)
            return inst.prior_interactions[:1]

    counting = strategy_named(Counting())
    first, second = counting.shown(instance()), counting.shown(instance())
    assert first == second == S.Shown(format_session_log(SESSIONS[:1]), SESSIONS[:1], (1,))
    assert asked == ["Write it."]
    other = Instance("i2", "p1", "consistent", "Other request.", "Factor 1", "Short.", ("Is it short?",), SESSIONS)
    counting.shown(other)
    assert asked == ["Write it.", "Other request."]
    plain = Strategy("plain", Counting())      # no identity (as a built-in): asked every time
    plain.shown(instance())
    plain.shown(instance())
    assert asked[-2:] == ["Write it.", "Write it."]
