"""--task interaction against the loopback server: the evaluated model and the user simulator
are scripted so that each dialogue ends at a known round, with the prior sessions shown
(default) and without them (none), so rounds to satisfaction and rounds saved are computed
by hand."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cupid.evaluation import evaluate, run as run_module
from cupid.evaluation.steps import user_simulator
from cupid.evaluation.steps.ask import rebuild_request
from cupid_responder import InstancePlan, make_row
from fake_llm_server import FakeLLMServer
from repo_paths import ROOT
from cupid.utils.errors import BadInput

pytestmark = pytest.mark.usefixtures("fast_retries")  # tests/evaluation/conftest.py

MAX_ROUNDS = 4
# (persona, type, preference): the round the simulator ends on, with and without the history
# (None: never, so the dialogue stops unsatisfied at MAX_ROUNDS).
PLAN = {
    ("persona-a", "consistent", "Grant reports must quote the funder's criteria verbatim."): (1, 3),
    ("persona-a", "contrastive", "Emails to the board must open with the decision asked for."): (2, 4),
    ("persona-b", "consistent", "Recipes must list metric weights before volumes."): (3, None),
}
HISTORY_MARK, NO_HISTORY_MARK = "WITH-HISTORY", "NO-HISTORY"


def rows() -> list[dict]:
    out = []
    for (persona, kind, preference), _ in PLAN.items():
        plan = InstancePlan(request=f"Request of {persona} ({kind}).", truth=preference,
                            truth_checklist=[f"Does it follow: {preference}", "Is it short?"],
                            inferred="", inferred_checklist=[], precision_labels=[], recall_labels=[])
        out.append(make_row(persona, kind, plan))
    return out


def simulator_answer(score: int, ended: bool, message: str) -> str:
    return (f"#### Evaluation of AI Assistant's Response\n\n1. **Item**: assessed.\n\n#### Evaluation Score\n\n"
            f"{score}\n\n#### Continue or End?\n\n{'END' if ended else 'CONTINUE'}\n\n#### Selected Checklist "
            f"Items\n\n- 1. Item\n\n#### Thinking\n\nThinking.\n\n#### Your Message\n\n{message}")


class Responder:
    """The evaluated model replies '<mark> reply N' (the mark says whether its first request
    showed the sessions); the simulator ends on the plan's round for that mark, scoring 10,
    and otherwise scores 3 + round. ``garbled``: preferences whose simulator never answers in
    the layout."""

    def __init__(self, garbled: tuple[str, ...] = ()):
        self.garbled = garbled

    def __call__(self, req: dict) -> str:
        messages = req["messages"]
        if "Your Persona Profile" in req["system"]:
            (persona, kind, preference), ends = next(item for item in PLAN.items() if item[0][2] in req["system"])
            if preference in self.garbled:
                return "I am not sure what to say."
            replies = [m for m in messages if m["role"] == "user"]
            round_number = len(replies)
            end = ends[0] if replies[-1]["content"].startswith(HISTORY_MARK) else ends[1]
            ended = end == round_number
            return simulator_answer(10 if ended else 3 + round_number, ended, f"Feedback {round_number} for {kind}.")
        mark = HISTORY_MARK if "Session 1 request of" in messages[0]["content"] else NO_HISTORY_MARK
        return f"{mark} reply {sum(m['role'] == 'assistant' for m in messages) + 1}"


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows()))
    return path


def cli(server, data_file, results_dir, *extra):
    return ["--model", f"vllm:test-model@{server.openai_base_url}", "--task", "interaction",
            "--simulator", f"vllm:test-sim@{server.openai_base_url}",
            "--evaluator", f"vllm:test-evaluator@{server.openai_base_url}",
            "--data", str(data_file), "--results_dir", str(results_dir), "--max_rounds", str(MAX_ROUNDS),
            "--n_workers", "2", "--max_retries", "2", "--timeout", "5", *extra]


def dialogue_dir(results_dir, setting: str) -> Path:
    base = Path(results_dir) / "test-model"
    return (base if setting == "default" else base / setting) / f"interaction_test-sim_r{MAX_ROUNDS}"


def results_of(results_dir, setting: str) -> dict:
    return json.loads((dialogue_dir(results_dir, setting) / "results.json").read_text())


def test_rounds_to_satisfaction_and_rounds_saved_by_hand(data_file, tmp_path, capsys):
    with FakeLLMServer(responder=Responder()) as server:
        base = tmp_path / "res"
        assert run_module.main(cli(server, data_file, base, "--setting", "none")) == 0
        assert run_module.main(cli(server, data_file, base)) == 0
        billed = {model: server.billed_totals(model) for model in ("test-model", "test-sim")}
    none, default = results_of(base, "none"), results_of(base, "default")
    # Every token billed is in the dialogue files' usage (the two runs together).
    for role, model in (("model", "test-model"), ("simulator", "test-sim")):
        for kind in ("prompt_tokens", "completion_tokens"):
            assert none["usage"]["recorded"][role][kind] + default["usage"]["recorded"][role][kind] == billed[model][kind]
    assert none["counts"] == {"selected": 3, "satisfied": 2, "unsatisfied": 1, "failed": 0, "skipped": 0,
                              "unfinished": 0}
    assert default["counts"]["satisfied"] == 3
    # none: 3, 4 and the cap 4 (censored); default: 1, 2, 3.
    assert none["rounds_to_satisfaction"]["value"] == pytest.approx(11 / 3)
    assert none["rounds_to_satisfaction"]["censored"] == 1
    assert default["rounds_to_satisfaction"]["value"] == pytest.approx(2.0)
    assert default["feedback_rounds"]["value"] == pytest.approx(1.0)
    assert [p["value"] for p in default["satisfied_by_round"]] == pytest.approx([1 / 3, 2 / 3, 1, 1])
    assert [p["value"] for p in none["satisfied_by_round"]] == pytest.approx([0, 0, 1 / 3, 2 / 3])
    # Scores: 10 on the ending round (kept after it), else 3 + round.
    assert [p["value"] for p in default["score_by_round"]] == pytest.approx([6, 25 / 3, 10, 10])
    saved = default["rounds_saved_vs_none"]
    assert saved["difference"] == pytest.approx(11 / 3 - 2) and saved["n"] == 3
    assert saved["low"] <= saved["difference"] <= saved["high"]
    assert none["rounds_saved_vs_none"] is None
    assert default["by_instance_type"]["contrastive"]["rounds_to_satisfaction"]["value"] == 2
    # Per type, paired: consistent (3 - 1 and 4 - 3) / 2, contrastive 4 - 2.
    assert default["by_instance_type"]["consistent"]["rounds_saved_vs_none"]["difference"] == pytest.approx(1.5)
    assert default["by_instance_type"]["contrastive"]["rounds_saved_vs_none"]["difference"] == pytest.approx(2.0)
    assert default["settings"]["simulator"] == "test-sim" and default["settings"]["max_rounds"] == MAX_ROUNDS
    assert default["settings"]["persona_sources"] == {"stand-in": 3}
    # The dialogue reads turn by turn: reply, score, feedback, the next reply answering it.
    record = json.loads((dialogue_dir(base, "default") / "persona-b__consistent.json").read_text())
    assert [t["reply"] for t in record["rounds"]] == [f"{HISTORY_MARK} reply {n}" for n in (1, 2, 3)]
    assert [t["simulator"]["score"] for t in record["rounds"]] == [4, 5, 10]
    assert record["rounds"][0]["simulator"]["feedback"] == "Feedback 1 for consistent."
    captured = capsys.readouterr()
    assert "rounds to satisfaction: 2.00" in captured.out
    assert "progress test-model [default] interaction: 3/3 instances (100%), 0 failed" in captured.err


def test_first_round_is_the_generation_request_byte_for_byte(data_file, tmp_path):
    """Round 1 sends what --task generation sends the evaluated model; later rounds continue
    that chat with the simulator's feedback, and the simulator gets the release's request."""
    with FakeLLMServer(responder=Responder()) as server:
        assert run_module.main(cli(server, data_file, tmp_path / "gen")[:2] + [
            "--evaluator", f"vllm:test-evaluator@{server.openai_base_url}", "--task", "generation",
            "--data", str(data_file), "--results_dir", str(tmp_path / "gen"), "--no_cache"]) in (0, 1)
        generation = [r["body"] for r in server.requests if r["model"] == "test-model"]
        count = len(server.requests)
        assert run_module.main(cli(server, data_file, tmp_path / "int", "--no_cache")) == 0
        sent = server.requests[count:]
    firsts = [r["body"] for r in sent if r["model"] == "test-model" and len(r["messages"]) == 1]
    assert len(generation) == 3
    canonical = sorted(json.dumps(b, sort_keys=True) for b in generation)
    assert sorted(json.dumps(b, sort_keys=True) for b in firsts) == canonical
    # The recorded first request rebuilds to the same bytes.
    record = json.loads((dialogue_dir(tmp_path / "int", "default") / "persona-a__consistent.json").read_text())
    log = next(r for r in sent if r["model"] == "test-model" and len(r["messages"]) == 1
               and "persona-a (consistent)" in r["messages"][0]["content"])
    from cupid.evaluation.data import InstanceSource
    from cupid.evaluation.strategies import strategy_named

    instance = next(i for i in InstanceSource(data_path=str(data_file)) if i.instance_id == "persona-a__consistent")
    rebuilt = rebuild_request(record["rounds"][0]["sent"], strategy_named("default").shown(instance).text)
    assert rebuilt["messages"] == log["messages"] and rebuilt["system_prompt"] == log["system"]
    # The simulator: the release's system prompt, its opening turn, then the reply as a user turn.
    sim = next(r for r in sent if r["model"] == "test-sim" and "persona-a (consistent)" in r["messages"][0]["content"])
    assert sim["system"] == user_simulator.system_prompt(
        record["persona_description"], "Factor 1", instance.current_contextual_preference,
        instance.current_checklist)
    assert sim["messages"] == [{"role": "assistant", "content": user_simulator.opening_turn(instance.current_request)},
                               {"role": "user", "content": f"{HISTORY_MARK} reply 1"}]
    assert sim["body"]["temperature"] == 0.3 and sim["body"]["max_tokens"] == 8192
    # Round 2 of persona-a contrastive continues the chat with the feedback.
    second = next(r for r in sent if r["model"] == "test-model" and len(r["messages"]) == 3
                  and "persona-a (contrastive)" in r["messages"][0]["content"])
    assert second["messages"][1:] == [{"role": "assistant", "content": f"{HISTORY_MARK} reply 1"},
                                      {"role": "user", "content": "Feedback 1 for contrastive."}]


def test_unparseable_simulator_answer_fails_the_dialogue_and_is_counted(data_file, tmp_path, capsys):
    garbled = "Recipes must list metric weights before volumes."
    with FakeLLMServer(responder=Responder(garbled=(garbled,))) as server:
        base = tmp_path / "res"
        assert run_module.main(cli(server, data_file, base)) == 1
        asked = [r for r in server.requests if r["model"] == "test-sim" and garbled in r["system"]]
    # Asked as the release asks it: the same request, three times in all.
    assert len(asked) == 3  # the release's N_RETRIES
    assert len({json.dumps(r["messages"]) for r in asked}) == 1
    results = results_of(base, "default")
    assert results["counts"]["failed"] == 1 and results["counts"]["satisfied"] == 2
    assert results["failures"][0]["instance_id"] == "persona-b__consistent"
    assert results["failures"][0]["at"] == "simulator" and "unparseable" in results["failures"][0]["reason"]
    assert results["rounds_to_satisfaction"]["n"] == 2  # never scored
    assert "persona-b__consistent" not in {d["instance_id"] for d in results["dialogues"]}
    assert "FAILED 1" in capsys.readouterr().out
    # A rerun asks that call afresh and, answered, finishes the dialogue.
    with FakeLLMServer(responder=Responder()) as server:
        assert run_module.main(cli(server, data_file, base)) == 0
        assert [r["model"] for r in server.requests] == ["test-sim", "test-model", "test-sim", "test-model", "test-sim"]
    assert results_of(base, "default")["counts"]["failed"] == 0


def test_kill_minus_9_between_rounds_resumes_without_repeating_a_round(data_file, tmp_path):
    with FakeLLMServer(responder=Responder(), latency=0.3) as server:
        base = tmp_path / "res"
        args = cli(server, data_file, base, "--no_cache")
        args[args.index("--n_workers") + 1] = "1"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-m", "cupid.evaluation.run", *args], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        directory = dialogue_dir(base, "default")

        def recorded_calls() -> int:
            calls = 0
            for path in directory.glob("persona-*.json"):
                record = json.loads(path.read_text())  # atomic writes: never half a file
                calls += sum(1 + bool(t.get("simulator")) for t in record["rounds"])
            return calls

        deadline = time.time() + 60
        while recorded_calls() < 3 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        before = recorded_calls()
        assert 3 <= before < 12
        calls_before = len(server.requests)
        assert calls_before - before <= 1  # at most the call in flight was lost
        assert run_module.main(args) == 0
        # 12 calls in all (2 + 4 + 6): only those not recorded before the kill were asked.
        assert len(server.requests) - calls_before == 12 - before
    assert recorded_calls() == 12
    assert results_of(base, "default")["rounds_to_satisfaction"]["value"] == pytest.approx(2.0)


@pytest.mark.parametrize("flags, message, argument", [
    (["--use_matcher"], "use_matcher: does not apply to task interaction", {"use_matcher": True}),
    (["--setting", "summary"], "setting summary: session summaries are not supported", {"setting": "summary"}),
    (["--exclude_filtered"], "exclude_filtered: not supported", {"exclude_filtered": True}),
    (["--exclude_filtered", "--dry_run"], "exclude_filtered: not supported", {"exclude_filtered": True})])
def test_unsupported_combinations_are_refused(data_file, tmp_path, capsys, flags, message, argument):
    with FakeLLMServer(responder=Responder()) as server:
        assert run_module.main(cli(server, data_file, tmp_path / "res", *flags)) == 2
        assert not server.requests
    assert message in capsys.readouterr().err
    with pytest.raises(BadInput, match=message):
        evaluate("test-model", task="interaction", data=str(data_file), results_dir=str(tmp_path / "api"), **argument)
    assert not (tmp_path / "res").exists() and not (tmp_path / "api").exists()


def test_a_sweep_runs_none_then_default_and_tables_their_rounds(data_file, tmp_path, capsys):
    with FakeLLMServer(responder=Responder()) as server:
        sweep = tmp_path / "sweep.yaml"
        sweep.write_text(f"models: [vllm:test-model@{server.openai_base_url}]\nsettings: [none, default]\n")
        args = cli(server, data_file, tmp_path / "res")
        args[0:2] = ["--sweep", str(sweep)]
        assert run_module.main(args) == 0
    out = capsys.readouterr().out
    assert "rounds to satisfaction 3.67" in out and "rounds to satisfaction 2.00" in out
    assert results_of(tmp_path / "res", "default")["rounds_saved_vs_none"]["difference"] == pytest.approx(5 / 3)


def test_the_report_shows_rounds_saved_the_curve_and_each_dialogue_turn_by_turn(data_file, tmp_path, capsys):
    from cupid.evaluation.report import command as report_command

    base = tmp_path / "res"
    with FakeLLMServer(responder=Responder()) as server:
        assert run_module.main(cli(server, data_file, base, "--setting", "none")) == 0
        assert run_module.main(cli(server, data_file, base)) == 0
        # A generation run beside them: the report holds both.
        assert run_module.main(cli(server, data_file, base)[:2] + [
            "--evaluator", f"vllm:test-evaluator@{server.openai_base_url}", "--task", "generation",
            "--data", str(data_file), "--results_dir", str(base)]) in (0, 1)
    assert report_command.main([str(base)]) == 0
    assert "wrote " + str(base / "fig_interaction.png") in capsys.readouterr().out
    assert (base / "fig_interaction.png").read_bytes()[:4] == b"\x89PNG"
    md = (base / "report.md").read_text()
    assert "![Satisfied by round](fig_interaction.png)" in md
    section = md[md.index("## Interaction"):]
    default_row = next(line for line in section.splitlines() if line.startswith("| test-model | default |"))
    assert "| 3/3 | 0 | 2.00 [" in default_row and "+1.67 [" in default_row and "(n=3)" in default_row
    none_row = next(line for line in section.splitlines() if line.startswith("| test-model | none |"))
    assert "| 2/3 | 0 | 3.67 [" in none_row
    assert "| all | 0.33 [" in section
    assert "| consistent | 2.00 [1.00, 3.00] | +1.50 [" in section
    assert "## Generation" in md  # the other tasks' report is still there
    html = (base / "interaction.html").read_text()
    assert html.count("<details><summary>persona-") == 6
    # Beside each dialogue of the default setting, the sessions it was shown (none under none).
    assert html.count("The 3 prior sessions shown") == 3
    assert "Session 1 request of persona-b (consistent)." in html
    turn = html[html.index("persona-b__consistent (consistent): satisfied, 3 rounds"):]
    assert turn.index(f"Model, round 1</b><pre>{HISTORY_MARK} reply 1") < turn.index("Simulator: score 4, CONTINUE") \
        < turn.index("Feedback 1 for consistent.") < turn.index("Model, round 2") < turn.index("score 10, END")
    # The report's resampling reaches the interactive measures: one resample, one point.
    assert report_command.main([str(base), "--no_figures", "--no_html", "--n_bootstrap", "1"]) == 0
    md = (base / "report.md").read_text()
    row = next(line for line in md[md.index("## Interaction"):].splitlines() if line.startswith("| test-model | default |"))
    low, high = row.split("| 2.00 [")[1].split("]")[0].split(", ")
    assert low == high
    # --export: the dialogues in a file of their own beside the samples.
    assert report_command.main([str(base), "--export", str(tmp_path / "out" / "samples.csv")]) == 0
    import csv

    with open(tmp_path / "out" / "samples.interaction.csv", newline="") as handle:
        exported = list(csv.DictReader(row for row in handle if not row.startswith("#")))
    assert len(exported) == 6 and (tmp_path / "out" / "samples.csv").exists()
    row = next(r for r in exported if r["instance_id"] == "persona-b__consistent" and r["setting"] == "none")
    assert (row["status"], row["rounds_to_satisfaction"], row["scores"]) == ("unsatisfied", "4", "4 5 6 7")
    # Interactive runs alone are reported too.
    alone = tmp_path / "alone"
    (alone / "test-model").mkdir(parents=True)
    import shutil

    shutil.copytree(dialogue_dir(base, "default"), alone / "test-model" / dialogue_dir(base, "default").name)
    assert report_command.main([str(alone), "--no_figures"]) == 0
    assert "| test-model | default |" in (alone / "report.md").read_text()
    assert (alone / "interaction.html").exists()


def test_the_dry_run_forecasts_the_calls_and_tokens_of_a_dialogue(tmp_path, capsys):
    """Sessions of two replies forecast two rounds; with the simulator ending there, the
    forecast's calls are the run's and its input tokens within 25% of what was sent (counted
    alike, about four characters a token)."""
    from cupid.evaluation.dry_run import typical_response
    from cupid.evaluation.data import InstanceSource
    from cupid.utils.models.tokens import estimate_tokens

    data = []
    for row in rows():
        for session in row["prior_interactions"]:
            session["dialogue"][2:2] = [{"role": "user", "content": "Make it shorter, please."},
                                        {"role": "assistant", "content": "Answer, shorter."}]
        data.append(row)
    data_file = tmp_path / "data.jsonl"
    data_file.write_text("".join(json.dumps(row) + "\n" for row in data))
    replies = {i.current_request: typical_response(i) for i in InstanceSource(data_path=str(data_file))}

    def responder(req):
        request = next(r for r in replies if r in (req["messages"][0]["content"]))
        if "Your Persona Profile" in req["system"]:
            round_number = sum(m["role"] == "user" for m in req["messages"])
            return simulator_answer(10 if round_number == 2 else 5, round_number == 2, "Make it shorter, please.")
        return replies[request]

    with FakeLLMServer(responder=responder) as server:
        args = cli(server, data_file, tmp_path / "res")
        assert run_module.main(args + ["--dry_run", "--json"]) == 0
        forecast = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert not server.requests
        assert run_module.main(args) == 0
        sent = server.requests
    roles = {r["role"]: r for r in forecast["runs"][0]["roles"]} if isinstance(forecast["runs"][0].get("roles"), list) \
        else forecast["runs"][0]["roles"]
    for role, model in (("model", "test-model"), ("simulator", "test-sim")):
        calls = [r for r in sent if r["model"] == model]
        assert roles[role]["calls"] == len(calls) == 6
        actual = sum(estimate_tokens(r["system"]) + sum(estimate_tokens(m["content"]) for m in r["messages"])
                     for r in calls)
        assert abs(roles[role]["input_tokens"] - actual) <= 0.25 * actual, (role, roles[role]["input_tokens"], actual)
    assert any("as many replies as the instance's prior sessions" in a for a in forecast["assumptions"])
    with FakeLLMServer(responder=responder) as server:
        assert run_module.main(cli(server, data_file, tmp_path / "fresh", "--dry_run", "--json", "--judge_final")) == 0
    judged = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["runs"][0]["roles"]
    judged = {r["role"]: r for r in judged} if isinstance(judged, list) else judged
    assert judged["evaluator"]["calls"] == 3 and judged["simulator"]["calls"] == 6


def test_a_strategy_that_raises_fails_its_dialogue_counted_not_scored(data_file, tmp_path):
    strategy = tmp_path / "broken.py"
    strategy.write_text("class Broken:\n    def select(self, instance):\n"
                        "        if 'persona-b' in instance.prior_interactions[0].dialogue[0].content:\n"
                        "            raise RuntimeError('no index')\n"
                        "        return instance.prior_interactions\n")
    with FakeLLMServer(responder=Responder()) as server:
        assert run_module.main(cli(server, data_file, tmp_path / "res", "--setting", f"{strategy}:Broken")) == 1
    results = json.loads(next((tmp_path / "res").rglob("results.json")).read_text())
    assert results["counts"]["failed"] == 1 and results["counts"]["satisfied"] == 2
    assert results["failures"] == [{"instance_id": "persona-b__consistent", "at": "context", "round": 1,
                                    "reason": "RuntimeError: no index"}]


def test_batch_runs_one_call_of_every_dialogue_a_round_with_the_online_numbers(fake_llm_env, data_file, tmp_path,
                                                                                monkeypatch):
    """--batch through the openai SDK's batch API against the loopback server: round r holds
    every unfinished dialogue's next call; the measures are the online run's."""
    from cupid import config

    monkeypatch.setattr(config, "BATCH_POLL_INTERVAL", 0.05)
    fake_llm_env.responder = Responder()

    def args(results_dir, *extra):
        return ["--model", "gpt-4o-mini", "--task", "interaction", "--data", str(data_file), "--results_dir",
                str(results_dir), "--max_rounds", str(MAX_ROUNDS), "--n_workers", "2", "--max_retries", "2",
                "--timeout", "5", *extra]

    assert run_module.main(args(tmp_path / "online")) == 0
    count = len(fake_llm_env.requests)
    assert run_module.main(args(tmp_path / "batch", "--batch")) == 0
    sent = fake_llm_env.requests[count:]
    assert sent and all(r["path"] == "batch" for r in sent)
    directory = Path("gpt-4o-mini") / "interaction_gpt-4o-2024-11-20_r4"
    online = json.loads((tmp_path / "online" / directory / "results.json").read_text())
    batch = json.loads((tmp_path / "batch" / directory / "results.json").read_text())
    for key in ("counts", "rounds_to_satisfaction", "satisfied_by_round", "score_by_round", "dialogues"):
        assert batch[key] == online[key], key
    assert batch["rounds_to_satisfaction"]["value"] == pytest.approx(2.0)
    # Rounds: replies 1, simulator, replies 2 (two dialogues left), ... persona-b's third answer last.
    state = json.loads((tmp_path / "batch" / directory / "batches.json").read_text())
    assert [len(b["items"]) for b in sorted(state["batches"], key=lambda b: b["round"])] == [3, 3, 2, 2, 1, 1]
    assert batch["this_invocation"]["batch"]["rounds"] == 6
    assert batch["usage"]["this_invocation"]["simulator"]["batch_calls"] == 6


def test_shards_share_the_directory_and_its_results_cover_both(data_file, tmp_path):
    with FakeLLMServer(responder=Responder()) as server:
        base = tmp_path / "res"
        assert run_module.main(cli(server, data_file, base, "--shard", "1/2")) == 0
        first = results_of(base, "default")["counts"]
        assert run_module.main(cli(server, data_file, base, "--shard", "2/2")) == 0
        assert len(server.requests) == 12  # each dialogue once: 2 + 4 + 6 calls
    assert 0 < first["satisfied"] < 3
    results = results_of(base, "default")
    assert results["counts"]["satisfied"] == 3 and results["rounds_to_satisfaction"]["value"] == pytest.approx(2.0)
    manifest = json.loads((dialogue_dir(base, "default") / "interaction_run.json").read_text())
    assert [i["ran"] for i in manifest["invocations"]] == [first["satisfied"], 3 - first["satisfied"]]


def test_a_damaged_dialogue_file_is_asked_again_from_the_damage_and_heals_from_the_cache(data_file, tmp_path):
    with FakeLLMServer(responder=Responder()) as server:
        base = tmp_path / "res"
        assert run_module.main(cli(server, data_file, base)) == 0
        path = dialogue_dir(base, "default") / "persona-b__consistent.json"
        good = json.loads(path.read_text())
        record = json.loads(path.read_text())
        record["rounds"][1]["simulator"]["score"] = "five"
        path.write_text(json.dumps(record))
        count = len(server.requests)
        assert run_module.main(cli(server, data_file, base)) == 0
        assert len(server.requests) == count  # the cache replayed rounds 2 and 3
    healed = json.loads(path.read_text())
    assert [t["simulator"]["score"] for t in healed["rounds"]] == [4, 5, 10]
    assert [t["reply"] for t in healed["rounds"]] == [t["reply"] for t in good["rounds"]]
    assert results_of(base, "default")["rounds_to_satisfaction"]["value"] == pytest.approx(2.0)


def test_evaluate_runs_the_interactive_task_from_python(data_file, tmp_path):
    with FakeLLMServer(responder=Responder()) as server:
        url = server.openai_base_url
        run = evaluate(f"vllm:test-model@{url}", task="interaction", simulator=f"vllm:test-sim@{url}",
                       evaluator=f"vllm:test-evaluator@{url}", data=str(data_file), max_rounds=MAX_ROUNDS,
                       results_dir=str(tmp_path / "res"), setting="none", max_retries=1, timeout=5)
    assert run.run_dir == dialogue_dir(tmp_path / "res", "none") and run.failed == 0
    assert run.results["rounds_to_satisfaction"]["value"] == pytest.approx(11 / 3)
    assert json.loads((run.run_dir / "results.json").read_text())["counts"] == run.results["counts"]
    assert sorted((r["instance_id"], r["rounds_to_satisfaction"]) for r in run.samples) == [
        ("persona-a__consistent", 3), ("persona-a__contrastive", 4), ("persona-b__consistent", 4)]
    assert len(run.to_pandas()) == 3


def test_a_served_simulator_too_short_for_its_requests_is_refused_before_any_call(data_file, tmp_path, capsys):
    with FakeLLMServer(responder=Responder()) as server:
        server.serve_as_vllm({"test-model": 32768, "test-sim": 8192})
        assert run_module.main(cli(server, data_file, tmp_path / "res")) == 2
        assert not server.requests  # no chat call
    err = capsys.readouterr().err
    assert "test-sim (simulator): the server's max_model_len 8192 cannot hold" in err and "max_tokens 8192" in err


@pytest.mark.parametrize("model, simulator", [("claude-3-5-sonnet-20241022", "gemini-2.0-flash"),
                                              ("gemini-2.0-flash", "claude-3-5-sonnet-20241022")])
def test_the_chat_goes_through_the_anthropic_and_google_sdks(fake_llm_env, data_file, tmp_path, model, simulator):
    """Each provider's adapter sends the dialogue as a chat (roles kept, the system prompt
    apart): the scripted rounds come out as with the OpenAI-compatible server."""
    fake_llm_env.responder = Responder()
    assert run_module.main(["--model", model, "--simulator", simulator, "--task", "interaction", "--data",
                            str(data_file), "--results_dir", str(tmp_path / "res"), "--max_rounds", str(MAX_ROUNDS),
                            "--max_retries", "1", "--timeout", "5"]) == 0
    results = json.loads(next((tmp_path / "res").rglob("results.json")).read_text())
    assert results["rounds_to_satisfaction"]["value"] == pytest.approx(2.0)
    apis = {r["model"]: r["api"] for r in fake_llm_env.requests}
    assert apis == {model: "anthropic" if model.startswith("claude") else "google",
                    simulator: "anthropic" if simulator.startswith("claude") else "google"}
    third = next(r for r in fake_llm_env.requests if r["model"] == model and len(r["messages"]) == 5)
    assert [m["role"] for m in third["messages"]] == ["user", "assistant", "user", "assistant", "user"]



def test_judge_final_scores_each_finished_dialogues_last_reply(data_file, tmp_path, capsys):
    """--judge_final: the evaluator judges the last reply with the generation task's judge
    request; a rerun judges dialogues finished before without asking them again."""
    from cupid.evaluation.steps import judge

    def responder(req):
        if "### Evaluation Score" in req["system"] + "".join(m["content"] for m in req["messages"]) \
                and req["model"] == "test-evaluator":
            reply = req["messages"][0]["content"]
            score = 9 if f"{HISTORY_MARK} reply" in reply else 4
            return f"### Evaluation of AI Assistant's Response\n\nFine.\n\n### Evaluation Label\n\nGood\n\n" \
                   f"### Evaluation Score\n\n{score}\n"
        return Responder()(req)

    with FakeLLMServer(responder=responder) as server:
        base = tmp_path / "res"
        assert run_module.main(cli(server, data_file, base)) == 0
        assert not [r for r in server.requests if r["model"] == "test-evaluator"]
        assert run_module.main(cli(server, data_file, base, "--judge_final")) == 0
        judged = [r for r in server.requests if r["model"] == "test-evaluator"]
        assert len(judged) == 3 and all(r["model"] != "test-model" for r in server.requests[-3:])
    results = results_of(base, "default")
    assert results["final_judge"]["value"] == pytest.approx(9.0) and results["final_judge"]["n"] == 3
    assert results["final_judge"]["scorer"] == "test-evaluator"
    # The judge's request is the generation task's, given the dialogue's last reply.
    record = json.loads((dialogue_dir(base, "default") / "persona-b__consistent.json").read_text())
    from cupid.evaluation.data import InstanceSource

    instance = next(i for i in InstanceSource(data_path=str(data_file)) if i.instance_id == "persona-b__consistent")
    system, user = judge.ask(instance.current_contextual_preference, instance.current_checklist,
                             instance.current_request, record["rounds"][-1]["reply"]).render()
    assert any(r["system"] == system and r["messages"] == [{"role": "user", "content": user}] for r in judged)
    assert "judge score of the last reply (test-evaluator): 9.00" in capsys.readouterr().out


@pytest.mark.slow(minutes=1)
def test_the_embedded_model_holds_a_dialogue_offline(tmp_path):
    """The embedded model as model and simulator on data/sample: its chat goes through
    llama.cpp's chat template, the simulator's answer follows the release's layout (its
    grammar), and the dialogue is recorded turn by turn."""
    pytest.importorskip("llama_cpp", reason="the embedded model runs on llama-cpp-python")
    run = evaluate("smollm2-135m", task="interaction", simulator="smollm2-135m", evaluator="smollm2-135m",
                   data="data/sample", limit=1, max_rounds=1, results_dir=str(tmp_path), n_workers=1)
    assert run.failed == 0
    record = json.loads(next(p for p in run.run_dir.glob("*.json")
                             if p.name not in ("results.json", "interaction_run.json")).read_text())
    assert record["status"] in ("satisfied", "unsatisfied") and len(record["rounds"]) == 1
    turn = record["rounds"][0]
    assert turn["reply"].strip() and 1 <= turn["simulator"]["score"] <= 10 and turn["simulator"]["feedback"]
    assert run.results["counts"]["satisfied"] + run.results["counts"]["unsatisfied"] == 1



def test_a_dialogue_file_that_is_not_json_is_moved_aside_and_begun_afresh(data_file, tmp_path):
    with FakeLLMServer(responder=Responder()) as server:
        base = tmp_path / "res"
        assert run_module.main(cli(server, data_file, base)) == 0
        path = dialogue_dir(base, "default") / "persona-a__contrastive.json"
        path.write_text('{"instance_id": "persona-a__contr')  # cut mid-write by something else
        count = len(server.requests)
        assert run_module.main(cli(server, data_file, base)) == 0
        assert len(server.requests) == count  # begun afresh from the cache
    assert len(list(path.parent.glob("persona-a__contrastive.json.corrupt-*"))) == 1
    assert json.loads(path.read_text())["status"] == "satisfied"
    assert results_of(base, "default")["rounds_to_satisfaction"]["value"] == pytest.approx(2.0)


def test_a_disk_that_refuses_a_write_mid_dialogue_is_one_line_and_a_rerun_goes_on(data_file, tmp_path, monkeypatch,
                                                                                     capsys):
    import errno

    from file_system_faults import assert_one_line_error, refuse_atomic_writes
    from cupid.utils.io import STORAGE_EXIT

    base = tmp_path / "res"
    with FakeLLMServer(responder=Responder()) as server:
        # interaction_run.json and four calls' saves succeed, then the disk is full.
        state = refuse_atomic_writes(monkeypatch, errno.ENOSPC, base / "test-model", lambda writes: writes > 5)
        args = cli(server, data_file, base)
        args[args.index("--n_workers") + 1] = "1"
        assert run_module.main(args) == STORAGE_EXIT
        err = capsys.readouterr().err
        assert_one_line_error(err, dialogue_dir(base, "default"), "disk full (ENOSPC)")
        assert "safe:" in err
        assert len(server.requests) < 12
        state["on"] = False
        assert run_module.main(args) == 0
        assert len(server.requests) == 12  # every answer already paid for came from the cache
    assert results_of(base, "default")["rounds_to_satisfaction"]["value"] == pytest.approx(2.0)


def test_model_objects_as_model_and_simulator_are_used_as_they_are_and_left_unchanged(data_file, tmp_path):
    """A caller's Model objects (complete(request) over the whole chat): the run works on
    copies; the objects' cache and usage are as they were."""
    from cupid.utils.models.model import Completion, Model

    class Scripted(Model):
        def complete(self, request):
            return Completion(text=Responder()({"system": request.system_prompt, "messages": list(request.messages)}))

    model, simulator = Scripted("my-model"), Scripted("my-sim")
    before = [(m.cache, m.usage) for m in (model, simulator)]
    run = evaluate(model, simulator=simulator, task="interaction", data=str(data_file), max_rounds=MAX_ROUNDS,
                   results_dir=str(tmp_path / "res"))
    assert run.results["rounds_to_satisfaction"]["value"] == pytest.approx(2.0)
    assert run.results["settings"]["simulator"] == "my-sim"
    assert [(m.cache, m.usage) for m in (model, simulator)] == before
