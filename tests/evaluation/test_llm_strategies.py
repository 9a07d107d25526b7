"""LLM-backed context strategies through the seam (issue 41 item 3; evaluation/strategy_model.py):
a strategy with ``uses_model`` is given the model ``--strategy_model`` names (the evaluator by
default) as a model of its own; its calls reach the loopback server through the real SDK, are
cached (a rerun, or a resume from scratch, repeats none), forecast by the dry run and counted
apart ("memory cost") in results.json and on the console."""
from __future__ import annotations

import json
import re
import shutil
import textwrap

import pytest

from cupid.evaluation import run as run_module
from cupid.evaluation.strategies import strategy_named
from cupid.evaluation.store import run_dir_for
from cupid.utils.models.tokens import estimate_tokens
from cupid_responder import CupidResponder
from fake_llm_server import FakeLLMServer

from .test_strategies import PLANS, cli, data_file  # noqa: F401 (fixtures)

pytestmark = pytest.mark.usefixtures("fast_retries")  # tests/evaluation/conftest.py

NOTES_SYSTEM = "You keep short notes about a user."
MEMORY = '''
class Notes:
    uses_model = True
    answer_tokens = 12

    def __init__(self, k=2):
        self.k = k

    def note(self, session):
        said = "\\n".join(t.content for t in session.dialogue if t.role == "user")
        return self.model("You keep short notes about a user.", "What does the user want here?\\n\\n" + said)

    def render(self, instance):
        return "\\n".join("- " + self.note(s) for s in instance.prior_interactions[-self.k:])
'''


def note_for(user: str) -> str:
    session = re.search(r"Session (\d+) request of persona", user)
    return f"NOTE about session {session.group(1) if session else '?'}: the user wants it done well today."


@pytest.fixture
def server():
    cupid = CupidResponder(PLANS)

    def respond(req: dict) -> str:
        if req["system"] == NOTES_SYSTEM:
            return note_for(req["messages"][-1]["content"])
        return cupid(req)

    with FakeLLMServer(responder=respond) as srv:
        srv.cupid = cupid
        yield srv


def notes_requests(server) -> list[dict]:
    return [r for r in server.requests if r["system"] == NOTES_SYSTEM]


def infer_prompts(server) -> list[str]:
    return [r["messages"][-1]["content"] for r in server.requests
            if r["system"] != NOTES_SYSTEM and "## Current Interaction" in r["messages"][-1]["content"]
            and server.cupid.kind(r) == "infer"]


def test_an_llm_backed_strategy_asks_its_own_model_cached_and_counted_apart(server, data_file, tmp_path, capsys):
    base = tmp_path / "res"
    (tmp_path / "memory.py").write_text(MEMORY)
    setting = f"{tmp_path / 'memory.py'}:Notes"
    args = cli(server, data_file, base, "--setting", setting, "--strategy_model",
               f"vllm:note-model@{server.openai_base_url}")
    assert run_module.main(args) == 0
    out = capsys.readouterr().out
    asked = notes_requests(server)
    assert len(asked) == 4 and {r["model"] for r in asked} == {"note-model"}  # 2 instances x 2 sessions
    infer = infer_prompts(server)
    assert len(infer) == 2 and all("- NOTE about session 7" in text and "- NOTE about session 8" in text for text in infer)
    assert not any("Session 7 request of persona" in text for text in infer)  # the notes, not the sessions

    run_dir = run_dir_for(base, "test-model", strategy_named(setting).name)
    results = json.loads((run_dir / "results.json").read_text())
    memory = results["memory_cost"]
    sent = sum(len(r["system"].split()) + sum(len(m["content"].split()) for m in r["messages"]) for r in asked)
    assert (memory["model"], memory["calls"], memory["instances"]) == ("note-model", 4, 2)
    assert memory["prompt_tokens"] == sent and memory["completion_tokens"] > 0
    usage = results["usage"]["this_invocation"]
    assert usage["strategy"]["model"] == "note-model" and usage["strategy"]["calls"] == 4
    assert usage["evaluator"]["calls"] == 6 and usage["model"]["calls"] == 2  # the steps' calls alone
    assert results["settings"]["strategy_model"] == "note-model"
    record = json.loads((run_dir / "persona-a__consistent.json").read_text())
    assert record["shown"]["model_usage"]["calls"] == 2 and record["shown"]["text"].startswith("- NOTE")
    assert "memory cost (the strategy's own LLM, note-model): 4 calls recorded for 2 instances" in out
    # The report's "Memory cost": the same calls and tokens, apart from the steps'.
    from cupid.evaluation import report as R

    assert R.main([str(base), "--n_bootstrap", "20", "--no_figures", "--no_html"]) == 0
    report = (base / "report.md").read_text()
    section = report.split("## Memory cost", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| test-model"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1].startswith("`memory.py:Notes@") and cells[2] == "`note-model`"
    assert cells[3:7] == ["2", "4", f"{memory['prompt_tokens']:,}", f"{memory['completion_tokens']:,}"]

    # A finished run again: nothing asked. Its instance files gone (a run killed before it
    # wrote them): the strategy asked again, its calls answered by the cache, none sent.
    assert run_module.main(args) == 0 and len(notes_requests(server)) == 4
    for path in run_dir.glob("persona-*.json"):
        path.unlink()
    calls = len(notes_requests(server))
    assert run_module.main(args) == 0
    assert len(notes_requests(server)) == calls
    assert json.loads((run_dir / "results.json").read_text())["memory_cost"]["calls"] == 4


def test_the_strategy_model_is_the_evaluator_by_default_with_its_own_count(server, data_file, tmp_path):
    base = tmp_path / "res"
    (tmp_path / "memory.py").write_text(MEMORY)
    setting = f"{tmp_path / 'memory.py'}:Notes:k=1"
    assert run_module.main(cli(server, data_file, base, "--setting", setting)) == 0
    assert {r["model"] for r in notes_requests(server)} == {"test-evaluator"}
    results = json.loads((run_dir_for(base, "test-model", strategy_named(setting).name) / "results.json").read_text())
    usage = results["usage"]["this_invocation"]
    assert usage["strategy"]["calls"] == 2 and usage["evaluator"]["calls"] == 6
    assert results["memory_cost"]["calls"] == 2


def test_the_dry_run_forecasts_the_strategys_calls(server, data_file, tmp_path, capsys):
    (tmp_path / "memory.py").write_text(MEMORY)
    setting = f"{tmp_path / 'memory.py'}:Notes"
    assert run_module.main(["--model", "gpt-4o-mini", "--data", str(data_file), "--results_dir",
                            str(tmp_path / "dry"), "--setting", setting, "--strategy_model", "gpt-4o-mini",
                            "--dry_run", "--json"]) == 0
    forecast = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    strategy = forecast["runs"][0]["roles"]["strategy"]
    # The run itself: the requests the server received, estimated as the dry run estimates.
    assert run_module.main(cli(server, data_file, tmp_path / "res", "--setting", setting)) == 0
    asked = notes_requests(server)
    sent = sum(estimate_tokens(r["system"]) + sum(estimate_tokens(m["content"]) for m in r["messages"])
               for r in asked)
    assert strategy["calls"] == len(asked) == 4
    assert abs(strategy["input_tokens"] - sent) <= 0.25 * sent
    assert strategy["output_tokens"] == 4 * 12  # answer_tokens each
    assert any("answer_tokens" in line for line in forecast["assumptions"])


def test_a_strategy_model_without_an_llm_strategy_is_refused(data_file, tmp_path, capsys):
    assert run_module.main(["--model", "m", "--data", str(data_file), "--setting", "recent:k=2",
                            "--strategy_model", "gpt-4o-mini", "--results_dir", str(tmp_path / "res")]) == 2
    assert "strategy_model: setting recent:k=2 asks no LLM" in capsys.readouterr().err
    assert not (tmp_path / "res").exists()


def test_the_documented_memory_example_runs(server, data_file, tmp_path):
    """docs/strategies.md's LLM memory example, verbatim, against the loopback server."""
    from repo_paths import ROOT

    doc = (ROOT / "docs" / "strategies.md").read_text()
    code = re.search(r"```python\n(# memory\.py.*?)```", doc, re.S).group(1)
    assert len(code.strip().splitlines()) <= 25
    (tmp_path / "memory.py").write_text(textwrap.dedent(code))
    base = tmp_path / "res"
    original = server.responder

    def respond(req: dict) -> str:
        if "notes about a user" in req["system"]:
            return "Prefers short, exact answers."
        return original(req)

    server.responder = respond
    setting = f"{tmp_path / 'memory.py'}:Notes:k=2"
    assert run_module.main(cli(server, data_file, base, "--setting", setting)) == 0
    asked = [r for r in server.requests if "notes about a user" in r["system"]]
    assert len(asked) == 4  # two sessions of each instance, each noted once
    infer = [r["messages"][-1]["content"] for r in server.requests if r not in asked and server.cupid.kind(r) == "infer"]
    assert len(infer) == 2 and all("- Prefers short, exact answers." in text for text in infer)
    results = json.loads((run_dir_for(base, "test-model", strategy_named(setting).name) / "results.json").read_text())
    assert results["memory_cost"]["calls"] >= 2
    shutil.rmtree(base)


# ---------------------------------------------------------------------------------------
# The memory baseline (evaluation/memory.py; prompts/memory/)
# ---------------------------------------------------------------------------------------
def memory_server():
    """The loopback server: each session's notes name it; the recall picks the notes of
    sessions 2 and 8 (of A) or 7 (of B), numbered as the notes were listed."""
    cupid = CupidResponder(PLANS)

    def respond(req: dict) -> str:
        user = req["messages"][-1]["content"]
        if "keep a memory of a user" in req["system"]:
            session = re.search(r"Session (\d+) request of (persona-\w)", user)
            number, persona = session.group(1), session.group(2)
            if number == "3":
                return "- none"
            return f"- In situation {persona}/{number}: wants tidy answers.\n- In situation {persona}/{number}: wants dates."
        if "recall a user's memory" in req["system"]:
            listed = re.findall(r"^(\d+)\. In situation persona-\w/(\d+):", user, re.M)
            wanted = {"2", "8"} if "Hollis" in user.split("## New Request", 1)[1] else {"7"}
            return ", ".join(n for n, session in listed if session in wanted) + ", 99"
        return cupid(req)

    return cupid, respond


def test_the_memory_baseline_writes_notes_per_session_recalls_them_and_reports_its_recall_and_cost(data_file, tmp_path,
                                                                                                   capsys):
    from cupid.evaluation.memory import parse_notes, parse_recall

    assert parse_notes("Sure:\n- In a: b\n* In c: d\n3. In e: f\n- none\nthe end") == ["In a: b", "In c: d", "In e: f"]
    assert parse_notes("\nIn a: the user wants b.\nMore words.") == ["In a: the user wants b."]  # no list: one note
    assert parse_notes("None.") == [] and parse_notes("- none") == [] and parse_notes("") == []
    assert parse_recall("7, 3, 7, 0, 12 and 2", n_notes=10, k=3) == [7, 3, 2]
    cupid, respond = memory_server()
    base = tmp_path / "res"
    with FakeLLMServer(responder=respond) as server:
        server.cupid = cupid
        args = cli(server, data_file, base, "--setting", "memory:k=3", "--task", "both")
        assert run_module.main(args) == 0
        out = capsys.readouterr().out
        extract = [r for r in server.requests if "keep a memory of a user" in r["system"]]
        recall = [r for r in server.requests if "recall a user's memory" in r["system"]]
        assert len(extract) == 16 and len(recall) == 2  # every session once; one recall per instance
        assert {r["model"] for r in extract + recall} == {"test-evaluator"}
        infer = [r["messages"][-1]["content"] for r in server.requests
                 if r not in extract + recall and server.cupid.kind(r) == "infer"]
        a = next(t for t in infer if PLANS[0].request in t)
        # At most k=3 notes, oldest first: session 2's two, then session 8's first.
        assert "- In situation persona-a/2: wants tidy answers.\n- In situation persona-a/2: wants dates.\n" \
               "- In situation persona-a/8: wants tidy answers." in a
        assert "Session 2 request of persona" not in a
        run_dir = base / "test-model" / "memory_k=3"
        manifest = json.loads((run_dir / "run.json").read_text())
        assert {"memory/extract_notes", "memory/recall_notes"} <= set(manifest["prompt_versions"])
        assert manifest["setting_uses_labels"] is False
        results = json.loads((run_dir / "results.json").read_text())
        # The sessions its notes came from: A 2 and 8 (relevant 1, 8), B 7 (relevant 7, 8).
        record = json.loads((run_dir / "persona-a__consistent.json").read_text())
        assert record["shown"]["positions"] == [2, 8]
        assert results["session_selection"]["recall"] == pytest.approx((0.5 + 0.5) / 2)
        memory = results["memory_cost"]
        assert (memory["calls"], memory["instances"]) == (18, 2) and memory["prompt_tokens"] > 0
        assert "memory cost (the strategy's own LLM, test-evaluator): 18 calls" in out
        # Done: a rerun asks nothing of anyone.
        calls = len(server.requests)
        assert run_module.main(args) == 0 and len(server.requests) == calls
        # The report: its session recall beside the default setting's, its memory cost apart.
        assert run_module.main(cli(server, data_file, base, "--task", "both")) == 0
    from cupid.evaluation import report as R

    assert R.main([str(base), "--n_bootstrap", "20", "--no_figures", "--no_html"]) == 0
    report = (base / "report.md").read_text()
    kept = report.split("### What each strategy kept", 1)[1].split("###", 1)[0]
    row = next(line for line in kept.splitlines() if "`memory:k=3`" in line)
    assert row.split(" | ")[2:4] == ["1.5", "50.0 [50.0, 50.0]"]  # sessions shown, session recall (%)
    assert "(uses labels)" not in row
    memory_row = next(line for line in report.split("## Memory cost", 1)[1].splitlines()
                      if line.startswith("| test-model"))
    assert [c.strip() for c in memory_row.strip("|").split("|")][1:5] == ["`memory:k=3`", "`test-evaluator`", "2", "18"]


@pytest.mark.slow
def test_the_memory_baseline_killed_with_sigkill_resumes_without_asking_a_finished_call_again(data_file, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from repo_paths import ROOT

    cupid, respond = memory_server()
    with FakeLLMServer(responder=respond, latency=0.15) as server:
        server.cupid = cupid
        base = tmp_path / "res"
        args = cli(server, data_file, base, "--setting", "memory:k=3")
        args[args.index("--n_workers") + 1] = "1"

        def memory_calls() -> list[str]:
            return [r["system"] + "\n" + r["messages"][-1]["content"] for r in list(server.requests)
                    if "memory of a user" in r["system"] or "recall a user's memory" in r["system"]]

        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-m", "cupid.evaluation.run", *args], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while len(memory_calls()) < 6 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        before = memory_calls()
        assert 6 <= len(before) < 18
        assert run_module.main(args) == 0
        after = memory_calls()[len(before):]
        # Every call answered before the kill is replayed from the cache; only the one in
        # flight when it came (n_workers 1: at most one) is asked again.
        assert len(set(before[:-1]) & set(after)) == 0
        assert len(before) + len(after) <= 18 + 1
        assert sorted(set(before + after)) == sorted(set(memory_calls())) and len(set(memory_calls())) == 18
        results = json.loads((base / "test-model" / "memory_k=3" / "results.json").read_text())
        assert results["counts"]["evaluated"] == 2 and results["memory_cost"]["calls"] == 18
