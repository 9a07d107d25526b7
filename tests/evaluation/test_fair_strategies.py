"""Fair context strategies (issue 41; evaluation/strategy_view.py, strategies.py): a user's
strategy is blind unless it declares it reads the labels, and then it is marked; nothing it
does to what it is given changes a score; its run is keyed by what it is (class, parameters,
source); what it returned is kept with the instance and not asked again on a resume."""
from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from cupid.evaluation import run as run_module
from cupid.evaluation.strategies import strategy_named
from cupid.evaluation.store import run_dir_for
from cupid.evaluation.strategy_view import LabelHidden
from cupid.utils.dataset import Instance, Session, Turn

from .test_strategies import PLANS, cli, data_file, results, server, shown_sessions  # noqa: F401 (fixtures)

pytestmark = pytest.mark.usefixtures("fast_retries")  # tests/evaluation/conftest.py


def instance() -> Instance:
    sessions = tuple(Session(f"factor {i}", f"preference {i}", (Turn("user", f"request {i}"), Turn("assistant", "ok")))
                     for i in range(1, 4))
    return Instance("p__consistent", "p", "consistent", "Help me now.", "factor 2", "preference 2",
                    ("Is it short?",), sessions)


def strategy_file(directory: Path, body: str, name: str = "mine.py") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(textwrap.dedent(body))
    return path


PEEKS = {
    "instance.current_contextual_preference": "instance.current_contextual_preference",
    "instance.current_checklist": "instance.current_checklist",
    "instance.current_context_factor": "instance.current_context_factor",
    "instance.instance_type": "instance.instance_type",
    "instance.prior_interactions[1].contextual_preference": "instance.prior_interactions[1].contextual_preference",
    "instance.prior_interactions[0].context_factor": "instance.prior_interactions[0].context_factor",
    "instance.relevant_positions()": "instance.relevant_positions",
}


@pytest.mark.parametrize("expression", list(PEEKS))
def test_a_blind_strategy_reading_a_label_fails_naming_the_strategy_and_the_field(expression, tmp_path):
    path = strategy_file(tmp_path, f"""
        class Peek:
            def select(self, instance):
                {expression}
                return instance.prior_interactions[:1]
    """)
    setting = strategy_named(f"{path}:Peek")
    with pytest.raises(LabelHidden) as raised:
        setting.shown(instance())
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"setting {setting.name}: read {PEEKS[expression]}, which the evaluated model is not "
                              f"shown")
    assert "uses_labels = True" in message


def test_a_blind_strategy_sees_the_request_and_the_dialogues_in_order_and_cannot_change_them():
    seen = {}

    class Look:
        def select(self, view):
            seen["request"] = view.current_request
            seen["dialogues"] = [[(t.role, t.content) for t in s.dialogue] for s in view.prior_interactions]
            with pytest.raises(Exception):
                view.current_request = "changed"
            object.__setattr__(view.prior_interactions[0], "dialogue", (Turn("user", "forged"),))
            return [view.prior_interactions[0]]

    context = strategy_named(Look()).shown(instance())
    assert seen["request"] == "Help me now."
    assert seen["dialogues"] == [[("user", f"request {i}"), ("assistant", "ok")] for i in (1, 2, 3)]
    # What is shown is read from the data by position: the forged dialogue is not.
    assert context.positions == (1,) and "request 1" in context.text and "forged" not in context.text
    assert instance().fingerprint() == instance().fingerprint()


def test_a_strategy_that_reaches_past_its_view_to_change_the_instance_fails_the_instance():
    import sys

    class Reach:
        uses_labels = True

        def select(self, view):
            frame = sys._getframe(1)
            while frame is not None:  # the caller's real instance, found on the stack
                real = frame.f_locals.get("instance")
                if isinstance(real, Instance) and real is not view:
                    object.__setattr__(real, "current_checklist", ("Forged?",))
                    break
                frame = frame.f_back
            return view.prior_interactions[:1]

    with pytest.raises(RuntimeError, match=r"data changed while the strategy ran .*nothing of the instance is scored"):
        strategy_named(Reach()).shown(instance())


WRITERS = """
    class Forge:
        uses_labels = True

        def select(self, instance):
            object.__setattr__(instance, "current_checklist", ("Forged item?",))
            object.__setattr__(instance, "current_contextual_preference", "Forged preference")
            for session in instance.prior_interactions:
                object.__setattr__(session, "contextual_preference", "Forged preference")
            return instance.prior_interactions[-2:]

    class BlindForge:
        def select(self, instance):
            object.__setattr__(instance, "current_checklist", ("Forged item?",))
            object.__setattr__(instance, "current_request", "Forged request")
            return instance.prior_interactions[-2:]
"""


def test_a_strategy_that_writes_to_what_it_is_given_changes_no_score(server, data_file, tmp_path):
    base, path = tmp_path / "res", strategy_file(tmp_path, WRITERS)
    assert run_module.main(cli(server, data_file, base, "--setting", "recent:k=2")) == 0
    plain = results(base, "recent_k=2")["inference"]
    for name in ("Forge", "BlindForge"):
        setting = strategy_named(f"{path}:{name}")
        assert run_module.main(cli(server, data_file, base, "--setting", f"{path}:{name}")) == 0
        found = json.loads((run_dir_for(base, "test-model", setting.name) / "results.json").read_text())
        assert found["counts"]["failed"] == 0
        assert found["inference"] == plain  # the same sessions shown, the same scores
    matches = [r["messages"][-1]["content"] for r in server.requests if server.cupid.kind(r) == "match"]
    assert matches and not any("Forged" in text for text in matches)
    assert all(PLANS[0].request in r["messages"][-1]["content"] or PLANS[1].request in r["messages"][-1]["content"]
               for r in server.requests if server.cupid.kind(r) == "infer")


def test_a_label_reading_strategy_fails_its_instances_unless_declared_and_then_is_marked(server, data_file, tmp_path,
                                                                                          capsys):
    body = """
        class Matching:
            {declared}
            def select(self, instance):
                return [s for s in instance.prior_interactions
                        if s.contextual_preference == instance.current_contextual_preference]
    """
    blind = strategy_file(tmp_path / "blind", body.format(declared="pass"))
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base, "--setting", f"{blind}:Matching")) == 1
    setting = strategy_named(f"{blind}:Matching")
    counts = results(base, run_dir_for(base, "test-model", setting.name).name)["counts"]
    assert counts["failed"] == 2
    reasons = " ".join(counts["failures_by_step"]["context"])
    assert f"setting {setting.name}: read instance.prior_interactions[0].contextual_preference" in reasons
    assert not shown_sessions(server, PLANS[0])  # nothing was asked of the model

    declared = strategy_file(tmp_path / "declared", body.format(declared="uses_labels = True"))
    capsys.readouterr()
    assert run_module.main(cli(server, data_file, base, "--setting", f"{declared}:Matching")) == 0
    assert f"setting {strategy_named(f'{declared}:Matching').name} (uses labels)" in capsys.readouterr().out
    assert shown_sessions(server, PLANS[0]) == [[1, 8]]  # the relevant sessions of rows()
    run_dir = run_dir_for(base, "test-model", strategy_named(f"{declared}:Matching").name)
    assert json.loads((run_dir / "run.json").read_text())["setting_uses_labels"] is True
    assert json.loads((run_dir / "results.json").read_text())["settings"]["uses_labels"] is True
    assert json.loads((run_dir_for(base, "test-model", setting.name) / "run.json").read_text())[
        "setting_uses_labels"] is False


ONE = """
    class Mine:
        def select(self, instance):
            return instance.prior_interactions[{which}]
"""


def test_two_files_of_one_name_and_an_edited_file_never_share_a_run(server, data_file, tmp_path, capsys):
    base = tmp_path / "res"
    first = strategy_file(tmp_path / "a", ONE.format(which="-1:"))
    second = strategy_file(tmp_path / "b", ONE.format(which=":1"))
    assert run_module.main(cli(server, data_file, base, "--setting", f"{first}:Mine")) == 0
    calls = len(server.requests)
    capsys.readouterr()
    assert run_module.main(cli(server, data_file, base, "--setting", f"{second}:Mine")) == 0
    err = capsys.readouterr().err
    assert len(server.requests) > calls and shown_sessions(server, PLANS[0]) == [[8], [1]]
    dirs = sorted(p.name for p in (base / "test-model").iterdir())
    assert len(dirs) == 2 and all(re.fullmatch(r"mine\.py_Mine-[0-9a-f]{10}", d) for d in dirs)
    assert "another source of the same name ran there" in err and "not resumed" in err

    # The first file edited: a new run, said so; the old one is kept as it was.
    first.write_text(textwrap.dedent(ONE.format(which="-2:-1")))
    assert run_module.main(cli(server, data_file, base, "--setting", f"{first}:Mine")) == 0
    err = capsys.readouterr().err
    assert "its source changed since there" in err and "0 of 2 instances already done" in err
    assert shown_sessions(server, PLANS[0])[-1] == [7]
    assert len(list((base / "test-model").iterdir())) == 3

    # Back as it was: the first run resumes, nothing asked.
    first.write_text(textwrap.dedent(ONE.format(which="-1:")))
    calls = len(server.requests)
    assert run_module.main(cli(server, data_file, base, "--setting", f"{first}:Mine")) == 0
    assert len(server.requests) == calls
    assert "2 of 2 instances already done" in capsys.readouterr().err


def test_the_identity_covers_class_parameters_and_source(tmp_path):
    path = strategy_file(tmp_path, """
        class Mine:
            def __init__(self, k=1):
                self.k = k
            def select(self, instance):
                return instance.prior_interactions[-self.k:]
    """)
    one, two = strategy_named(f"{path}:Mine:k=1"), strategy_named(f"{path}:Mine:k=2")
    assert one.identity["hash"] != two.identity["hash"] and one.identity["parameters"] == {"k": 1}
    assert strategy_named(f"{path}:Mine:k=1").name == one.name  # stable
    copy = strategy_file(tmp_path / "elsewhere", path.read_text())
    assert strategy_named(f"{copy}:Mine:k=1").name == one.name  # the same content is the same strategy
    assert strategy_named("recent:k=2").identity is None and strategy_named("recent:k=2").name == "recent:k=2"


COUNTING = """
    import pathlib

    LOG = pathlib.Path(__file__).with_name("calls.log")

    class Counted:
        def select(self, instance):
            with LOG.open("a") as log:
                log.write("select\\n")
            return instance.prior_interactions[:2]

    class Notes:
        def render(self, instance):
            with LOG.open("a") as log:
                log.write("render\\n")
            return "NOTES: " + instance.current_request
"""


@pytest.mark.parametrize("name", ["Counted", "Notes"])
def test_what_a_strategy_returned_is_kept_and_not_asked_again_on_a_resume(name, server, data_file, tmp_path):
    base, path = tmp_path / "res", strategy_file(tmp_path, COUNTING)
    log = tmp_path / "calls.log"
    assert run_module.main(cli(server, data_file, base, "--setting", f"{path}:{name}")) == 0
    assert len(log.read_text().splitlines()) == 2  # once per instance
    first = [r["messages"][-1]["content"] for r in server.requests if server.cupid.kind(r) == "infer"]
    # A finished run again, then its unfinished generation: the strategy is not called, and
    # the generate requests show what the infer requests showed.
    assert run_module.main(cli(server, data_file, base, "--setting", f"{path}:{name}")) == 0
    assert run_module.main(cli(server, data_file, base, "--setting", f"{path}:{name}", "--task", "both")) == 0
    assert len(log.read_text().splitlines()) == 2
    generated = [r["messages"][-1]["content"] for r in server.requests if server.cupid.kind(r) == "generate"]
    assert len(generated) == 2
    for plan in PLANS:
        shown = "NOTES: " + plan.request if name == "Notes" else "Session 2 request of persona"
        assert any(shown in text and plan.request in text for text in first)
        assert any(shown in text and plan.request in text for text in generated)
    record = json.loads((run_dir_for(base, "test-model", strategy_named(f"{path}:{name}").name)
                         / "persona-a__consistent.json").read_text())
    assert record["shown"].get("text") == (f"NOTES: {PLANS[0].request}" if name == "Notes" else None)


def test_the_dry_run_names_a_blind_strategy_reading_a_label_in_one_line(data_file, tmp_path, capsys):
    path = strategy_file(tmp_path, """
        class Peek:
            def select(self, instance):
                return [s for s in instance.prior_interactions if s.context_factor]
    """)
    code = run_module.main(["--model", "gpt-4o-mini", "--data", str(data_file), "--results_dir", str(tmp_path / "res"),
                            "--setting", f"{path}:Peek", "--dry_run"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "the context strategy raised (a run fails the instance): LabelHidden: setting mine.py:Peek@" in err
    assert "read instance.prior_interactions[0].context_factor" in err


def test_a_served_models_context_check_does_not_ask_a_strategy_again_for_what_the_run_kept(server, data_file, tmp_path):
    """Against a server that states its context (vLLM), the check before the run renders each
    instance's requests: a strategy is asked once per instance in the first run (the check and
    the run share its answer), and not at all when the run directory keeps what it returned."""
    server.serve_as_vllm({"test-model": 1_000_000, "test-evaluator": 1_000_000})
    base, path = tmp_path / "res", strategy_file(tmp_path, """
        import pathlib

        class Counted:
            def select(self, instance):
                with pathlib.Path(__file__).with_name("calls.log").open("a") as log:
                    log.write("select\\n")
                return instance.prior_interactions[-2:]
    """)
    log = tmp_path / "calls.log"
    assert run_module.main(cli(server, data_file, base, "--setting", f"{path}:Counted")) == 0
    assert len(log.read_text().splitlines()) == 2
    assert run_module.main(cli(server, data_file, base, "--setting", f"{path}:Counted")) == 0
    assert len(log.read_text().splitlines()) == 2
