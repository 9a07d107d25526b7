"""The synthesis pipeline end to end against the loopback server with scripted answers."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from cupid_responder import CupidResponder, _section
from cupid.evaluation.data import load_instances
from cupid.utils.dataset import make_instance_id
from fake_llm_server import FakeLLMServer
from cupid.synthesis import run as cli
from cupid.synthesis.dialogues import ASSISTANT_PROMPT
from cupid.utils.prompts import load_prompt
from cupid.synthesis.personas import SeedSourceError
from cupid.synthesis import personas as P
from cupid.synthesis.pipeline import OptionsMismatch, SynthesisConfig, run_synthesis
from synthesis_responder import ScriptedSynthesis, stage_of
from cupid.utils.io import read_json
from repo_paths import ROOT



def specs(server: FakeLLMServer) -> dict:
    url = server.openai_base_url
    return {"model": f"vllm:synth-model@{url}", "user_model": f"vllm:user-model@{url}",
            "assistant_model": f"vllm:assistant-model@{url}",
            "decomposer_model": f"vllm:decomposer-model@{url}"}


def make_config(server, out, **overrides) -> SynthesisConfig:
    values = dict(output_dir=out, n_personas=2, persona_seeds="bundled", n_workers=4,
                  show_progress=False, **specs(server))
    values.update(overrides)
    return SynthesisConfig(**values)


def cli_args(server, out, *extra) -> list[str]:
    s = specs(server)
    return ["--output_dir", str(out), "--model", s["model"], "--user_model", s["user_model"],
            "--assistant_model", s["assistant_model"], "--decomposer_model", s["decomposer_model"],
            "--no_progress", *extra]


def request_key(req: dict) -> str:
    return json.dumps([req["model"], req["system"], req["messages"], req["body"].get("temperature")],
                      sort_keys=True)


# ---------------------------------------------------------------------------------------
# A generic evaluator for the evaluation pipeline: every entry fully covered, score 7
# ---------------------------------------------------------------------------------------
def evaluation_responder(req: dict) -> str:
    kind = CupidResponder(plans=[]).kind(req)
    user = req["messages"][-1]["content"]
    if kind == "infer":
        return "### Analysis\nA guess.\n\n### Most Likely Preference\nThe user wants formal messages."
    if kind == "decompose":
        return '```json\n{"checklist": ["Is the response formal?"]}\n```'
    if kind == "match":
        entries = [line for line in _section(user, "#### Checklist").splitlines() if line.strip()]
        results = [{"index": i, "entry": e, "label": "Fully Covered"} for i, e in enumerate(entries, 1)]
        return "```json\n" + json.dumps({"results": results}) + "\n```"
    if kind == "generate":
        return "Here is my answer."
    if kind == "judge":
        return "### Evaluation of AI Assistant's Response\n1. fine\n\n### Evaluation Score\n7"
    raise AssertionError(kind)


# ---------------------------------------------------------------------------------------
# The full pipeline
# ---------------------------------------------------------------------------------------
def test_full_pipeline_two_personas_six_instances_then_evaluated(fake_server, tmp_path):
    responder = ScriptedSynthesis()
    fake_server.responder = responder
    out = tmp_path / "synthetic_data"
    summary = run_synthesis(make_config(fake_server, out))

    counts = summary["counts"]
    assert counts == {"personas_requested": 2, "personas_complete": 2, "personas_failed": 0,
                      "sessions": 26, "dialogues": 24, "dialogues_satisfied": 24, "instances": 6}
    assert summary["failures"] == [] and summary["regenerations"]["total"] == 0
    assert summary["seed_source"].startswith("bundled:")
    assert read_json(out / "summary.json") == summary
    assert not fake_server.responder_errors

    # Every call went through the seam with the release's parameters for its stage; the
    # assistant simulator has the release's system prompt.
    params = {}
    for req in fake_server.requests:
        params.setdefault(stage_of(req), set()).add((req["body"].get("temperature"),
                                                     req["body"].get("max_tokens")))
    assert params == {"descriptions": {(0.7, 4096)}, "factors": {(1.0, 8192)},
                      "sessions": {(0.7, 8192)}, "decompose": {(0, 4096)},
                      "user_simulator": {(0.3, 8192)}, "assistant": {(0.7, 2048)}}
    assistant_system = load_prompt(ASSISTANT_PROMPT).system_prompt
    assistant_calls = [r for r in fake_server.requests if r["model"] == "assistant-model"]
    assert assistant_calls and all(r["system"] == assistant_system for r in assistant_calls)
    assert responder.calls["descriptions"] == 1  # both personas described in one batch

    # Every structured stage sends its document's schema to a vLLM server (which constrains
    # decoding with it), except the decomposer, whose request is the released harness's;
    # the simulators answer in free text and send none.
    roots = {}
    for req in fake_server.requests:
        response_format = req["body"].get("response_format")
        root = None if response_format is None else \
            tuple(response_format["json_schema"]["schema"]["properties"])
        roots.setdefault(stage_of(req), set()).add(root)
    assert roots == {"descriptions": {("personas",)}, "factors": {("context_factors",)},
                     "sessions": {("scenarios",)}, "decompose": {None},
                     "user_simulator": {None}, "assistant": {None}}

    personas = read_json(out / "personas.json")["personas"]
    assert len(personas) == 2 and all(p["description"] for p in personas)
    for persona in personas:
        pdir = out / "personas" / persona["persona_id"]
        factors = read_json(pdir / "factors.json")["factors"]
        assert len(factors) == 8
        sessions_doc = read_json(pdir / "sessions.json")
        sessions = sessions_doc["sessions"]
        assert [s["role"] for s in sessions] == sessions_doc["journey"]["roles"]
        checklists = read_json(pdir / "checklists.json")
        assert set(checklists) == {s["contextual_preference"] for s in sessions}
        dialogue_files = sorted((pdir / "dialogues").glob("*.json"))
        assert len(dialogue_files) == 12  # every session but the final one
        for session in sessions[:-1]:
            d = read_json(pdir / "dialogues" / f"{session['index']:02d}.json")
            turns = d["dialogue"]
            assert turns[0] == {"role": "user", "content": session["request"]}
            assert [t["role"] for t in turns] == ["user", "assistant"] * (len(turns) // 2) + ["user"]
            assert d["satisfied"] and d["scores"][-1] == 10 and all(s < 10 for s in d["scores"][:-1])
            assert 3 <= d["n_turns"] == len(turns) <= 2 * 16
            assert d["checklist"] == checklists[session["contextual_preference"]]

        # Instances: the evaluation's format, a stable id, the final request, SPEC §3.7 truths.
        for instance_type in ("consistent", "contrastive", "changing"):
            row = read_json(out / "instances" / f"{make_instance_id(persona['persona_id'], instance_type)}.json")
            assert row["current_request"] == sessions[-1]["request"]
            assert row["current_context_factor"] == sessions_doc["current_factor"]
            truth = (sessions_doc["changed_preference"] if instance_type == "changing"
                     else sessions_doc["original_preference"])
            assert row["current_contextual_preference"] == truth
            assert row["current_checklist"] == checklists[truth]
            assert len(row["prior_interactions"]) == 8
            # The profile the user simulator played, which --task interaction's simulator is given.
            assert row["metadata"]["persona_description"] == persona["description"]

    instances = load_instances(data_path=out)
    assert len(instances) == 6
    from cupid.evaluation.interaction import persona_description

    described = {p["persona_id"]: p["description"] for p in personas}
    assert {persona_description(i) for i in instances} == \
        {(described[i.persona_id], "metadata.persona_description") for i in instances}
    assert Counter(i.instance_type for i in instances) == {"consistent": 2, "contrastive": 2, "changing": 2}

    # The evaluation pipeline evaluates the directory as it is.
    from cupid.evaluation import run as evaluation_run

    with FakeLLMServer(responder=evaluation_responder) as evaluator_server:
        url = evaluator_server.openai_base_url
        rc = evaluation_run.main(["--model", f"vllm:evaluated@{url}", "--evaluator", f"vllm:judge@{url}",
                                  "--data_dir", str(out), "--results_dir", str(tmp_path / "results"),
                                  "--task", "both", "--n_workers", "2"])
    assert rc == 0
    results = read_json(next((tmp_path / "results").rglob("results.json")))
    assert results["generation"]["n_instances"] == 6
    assert results["generation"]["average_score"] == 7
    assert results["inference"]["precision"] == 1.0 and results["inference"]["recall"] == 1.0


def test_rerun_of_a_finished_directory_makes_no_call(fake_server, tmp_path):
    fake_server.responder = ScriptedSynthesis()
    out = tmp_path / "data"
    first = run_synthesis(make_config(fake_server, out, n_personas=1))
    files = {p: p.read_bytes() for p in out.rglob("*.json") if p.name != "summary.json"}
    n_requests = len(fake_server.requests)
    second = run_synthesis(make_config(fake_server, out, n_personas=1))
    assert len(fake_server.requests) == n_requests
    assert {p: p.read_bytes() for p in out.rglob("*.json") if p.name != "summary.json"} == files
    assert second["counts"] == first["counts"]
    assert second["stages"]["dialogues"] == {"done": 0, "skipped": 12}


def test_more_personas_later_extend_the_directory(fake_server, tmp_path):
    fake_server.responder = ScriptedSynthesis()
    out = tmp_path / "data"
    run_synthesis(make_config(fake_server, out, n_personas=1))
    first = read_json(out / "personas.json")["personas"]
    summary = run_synthesis(make_config(fake_server, out, n_personas=2))
    personas = read_json(out / "personas.json")["personas"]
    assert personas[0] == first[0] and len(personas) == 2
    assert personas[0]["occupation_token"] != personas[1]["occupation_token"]
    assert summary["counts"]["instances"] == 6


def test_other_settings_in_the_same_directory_are_refused(fake_server, tmp_path):
    fake_server.responder = ScriptedSynthesis()
    out = tmp_path / "data"
    run_synthesis(make_config(fake_server, out, n_personas=1))
    with pytest.raises(OptionsMismatch, match="n_factors"):
        run_synthesis(make_config(fake_server, out, n_personas=1, n_factors=6))
    assert cli.main(cli_args(fake_server, out, "--n_personas", "1", "--persona_seeds", "bundled",
                             "--n_sessions", "10")) == 2


# ---------------------------------------------------------------------------------------
# Seeds: the hub by default, never loaded when templates exist
# ---------------------------------------------------------------------------------------
def test_hub_is_tried_first_and_not_loaded_again_on_resume(fake_server, tmp_path, monkeypatch):
    fake_server.responder = ScriptedSynthesis()
    out = tmp_path / "data"
    tried = []

    def unreachable_hub():
        tried.append(1)
        raise SeedSourceError("could not load proj-persona/PersonaHub (instruction): offline")

    monkeypatch.setattr(P, "load_hub_seeds", unreachable_hub)
    summary = run_synthesis(make_config(fake_server, out, n_personas=1, persona_seeds=None))
    assert tried == [1] and "hub unreachable" in summary["seed_source"]

    def must_not_be_called():
        raise AssertionError("the hub was loaded although the templates exist")

    monkeypatch.setattr(P, "load_hub_seeds", must_not_be_called)
    again = run_synthesis(make_config(fake_server, out, n_personas=1, persona_seeds=None))
    assert again["counts"]["instances"] == 3


def test_existing_personas_go_on_while_the_hub_loads(fake_server, tmp_path, monkeypatch):
    out = tmp_path / "data"
    fake_server.responder = ScriptedSynthesis(always_invalid={"user_simulator": "Session 3:"})
    first = run_synthesis(make_config(fake_server, out, n_personas=1, n_workers=1))
    assert first["counts"]["personas_failed"] == 1  # persona 1 is unfinished

    asked_at = []
    scripted = ScriptedSynthesis()

    def responder(req):
        asked_at.append(time.perf_counter())
        return scripted(req)

    loaded_at = []

    def slow_hub():
        time.sleep(1.5)
        loaded_at.append(time.perf_counter())
        from cupid.synthesis.personas import read_seed_file
        from cupid.synthesis.taxonomy import BUNDLED_SEEDS_FILE
        return read_seed_file(BUNDLED_SEEDS_FILE)

    fake_server.responder = responder
    monkeypatch.setattr(P, "load_hub_seeds", slow_hub)
    summary = run_synthesis(make_config(fake_server, out, n_personas=2, n_workers=2, persona_seeds=None))
    assert summary["counts"]["instances"] == 6 and summary["failures"] == []
    assert summary["seed_source"].startswith("bundled:") and "hub:proj-persona" in summary["seed_source"]
    assert asked_at and min(asked_at) < loaded_at[0]  # persona 1 went on during the load


# ---------------------------------------------------------------------------------------
# Invalid generations: regenerated, then the persona fails and the others go on
# ---------------------------------------------------------------------------------------
def test_malformed_answers_are_regenerated(fake_server, tmp_path):
    responder = ScriptedSynthesis(malformed={"descriptions": 1, "factors": 1, "sessions": 1,
                                             "user_simulator": 1})
    fake_server.responder = responder
    summary = run_synthesis(make_config(fake_server, tmp_path / "data", n_personas=1, n_workers=1))
    assert summary["failures"] == []
    assert summary["counts"]["instances"] == 3
    regen = summary["regenerations"]
    assert (regen["descriptions"], regen["factors"], regen["sessions"], regen["dialogues"]) == (1, 1, 1, 1)
    # The re-ask showed the model its answer and why it was rejected.
    factor_calls = [r for r in fake_server.requests if stage_of(r) == "factors"]
    assert len(factor_calls) == 2
    assert len(factor_calls[0]["messages"]) == 1
    assert factor_calls[1]["messages"][1]["role"] == "assistant"
    assert "not valid YAML" in factor_calls[1]["messages"][2]["content"]


def test_failed_persona_is_reported_and_others_go_on(fake_server, tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("A teacher in a small town.\nA writer who volunteers as a nurse. FAILME\n")
    responder = ScriptedSynthesis(always_invalid={"factors": "FAILME"})
    fake_server.responder = responder
    out = tmp_path / "data"
    args = cli_args(fake_server, out, "--n_personas", "2", "--persona_seeds", str(seeds),
                    "--n_workers", "2")
    assert cli.main(args) == 1
    summary = read_json(out / "summary.json")
    assert summary["counts"]["personas_failed"] == 1 and summary["counts"]["personas_complete"] == 1
    assert summary["counts"]["instances"] == 3
    (failure,) = summary["failures"]
    assert failure["stage"] == "factors"
    assert "invalid after 3 attempts" in failure["reason"] and "expected 8 context factors" in failure["reason"]
    assert "context_factors" in failure["last_raw_output"]
    assert summary["regenerations"]["in_failed_generations"] == 2
    assert (out / "personas" / failure["persona_id"] / "failure.json").exists()
    assert not list((out / "instances").glob(f"{failure['persona_id']}*"))
    assert responder.calls["factors"] == 4  # 3 for the failing persona, 1 for the other

    # A rerun tries the failed stage again with fresh attempts (not the cached ones).
    assert cli.main(args) == 1
    assert responder.calls["factors"] == 7
    fresh = [r for r in fake_server.requests if stage_of(r) == "factors"][-3:]
    assert all(len(r["messages"]) == 3 for r in fresh)
    assert fresh[0]["messages"][2]["content"].startswith("Your answer could not be used: expected 8")


def test_failed_dialogue_is_simulated_afresh_on_rerun(fake_server, tmp_path):
    out = tmp_path / "data"
    # Every user-simulator answer in session 3's dialogue is invalid in the first run.
    fake_server.responder = ScriptedSynthesis(always_invalid={"user_simulator": "Session 3:"})
    first = run_synthesis(make_config(fake_server, out, n_personas=1, n_workers=1))
    (failure,) = first["failures"]
    assert failure["stage"] == "dialogues" and failure["reason"].startswith("session 3:")
    pdir = out / "personas" / failure["persona_id"]
    assert (pdir / "dialogues" / "03.retry").exists() and not (pdir / "dialogues" / "03.json").exists()
    n_first = len(fake_server.requests)

    fake_server.responder = ScriptedSynthesis()  # the model behaves now
    second = run_synthesis(make_config(fake_server, out, n_personas=1, n_workers=1))
    assert second["failures"] == [] and second["counts"]["instances"] == 3
    assert not (pdir / "dialogues" / "03.retry").exists() and not (pdir / "failure.json").exists()
    assert read_json(pdir / "dialogues" / "03.json")["satisfied"]
    # Session 3 was asked again (new variants, not the cached invalid answers).
    session3 = [r for r in fake_server.requests[n_first:]
                if stage_of(r) == "user_simulator" and "Session 3:" in r["messages"][0]["content"]]
    assert session3


# ---------------------------------------------------------------------------------------
# Resume after kill -9
# ---------------------------------------------------------------------------------------
def run_reference(tmp_path: Path) -> list[dict]:
    with FakeLLMServer(responder=ScriptedSynthesis()) as server:
        run_synthesis(make_config(server, tmp_path / "reference", n_workers=2))
        return server.requests


@pytest.mark.slow
def test_resume_after_kill_repeats_no_finished_call(tmp_path):
    n_workers = 2
    with FakeLLMServer(responder=ScriptedSynthesis(), latency=0.03) as server:
        out = tmp_path / "data"
        args = [sys.executable, "-m", "cupid.synthesis.run",
                *cli_args(server, out, "--n_personas", "2", "--persona_seeds", "bundled",
                          "--n_workers", str(n_workers))]
        proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if len(list(out.glob("personas/*/dialogues/*.json"))) >= 3:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done_at_kill = len(list(out.glob("personas/*/dialogues/*.json")))
        assert 3 <= done_at_kill < 24
        # Nothing written was left half-written.
        for path in out.rglob("*.json"):
            read_json(path)
        first = server.requests

        rerun = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        second = server.requests[len(first):]

    assert len(load_instances(data_path=out)) == 6
    first_keys = Counter(request_key(r) for r in first)
    repeated = [r for r in second if request_key(r) in first_keys]
    # Only calls in flight at the kill (at most one per worker) may be asked again.
    assert len(repeated) <= n_workers
    # Together the two runs asked exactly what an uninterrupted run asks.
    reference = Counter(request_key(r) for r in run_reference(tmp_path))
    assert set(first_keys) | {request_key(r) for r in second} == set(reference)
    assert len(first) + len(second) - len(repeated) == sum(reference.values())


def test_cli_defaults_match_the_original():
    from cupid.synthesis.api import synthesis_config

    def settings(argv):
        args = cli.build_parser().parse_args(argv)
        return args, synthesis_config(**{name: getattr(args, name, None) for name in cli.ARGUMENTS
                                         if name not in ("rate_limit", "log_file")})

    args, cfg = settings([])
    assert (args.output_dir, cfg.model, args.n_personas, args.n_factors, args.n_sessions,
            args.max_turns, args.n_workers) == ("synthetic_data", "claude-3-5-sonnet-20241022",
                                                4, 8, 13, 16, 1)
    assert cfg.user_model == cfg.decomposer_model == "claude-3-5-sonnet-20241022"  # --model
    assert cfg.assistant_model == "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"
    _, cfg = settings(["--model", "gpt-4o-2024-11-20"])
    assert cfg.user_model == cfg.decomposer_model == "gpt-4o-2024-11-20"
    assert args.persona_seeds is None  # PersonaHub by default
