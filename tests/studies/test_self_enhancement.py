"""``cupid-self-enhancement`` (Figure 10) at tiny scale against the loopback server: two
models (``orga/alpha``, ``orgb/beta``) each synthesize a data set on the two personas the
fixture results rank lowest, each is evaluated on both, and the matrix is the one the
scripted answers imply; a rerun after an interruption resumes; the dry run prices it all
and writes nothing."""
from __future__ import annotations

import json
import os
import re
import signal
import threading
from collections import Counter

import pytest

from cupid_responder import CupidResponder, _section
from fake_llm_server import FakeLLMServer
from fixtures_results import build_results_dir
from stop_signal_dispositions import default_dispositions_here
from synthesis_responder import ScriptedSynthesis, stage_of
from cupid.studies import self_enhancement as command

MODELS = ("alpha", "beta")
# Scripted outcomes (see Responder): a model on its own data matches every entry and is
# judged 9; alpha on beta's data matches half (P = R = 0.5) and is judged 6; beta on alpha's
# data matches none of its own entries (P = 0, R = 0.5, F1 = 0) and is judged 3.
EXPECTED_F1 = {("orga/alpha", "orga/alpha"): 1.0, ("orga/alpha", "orgb/beta"): 0.5,
               ("orgb/beta", "orga/alpha"): 0.0, ("orgb/beta", "orgb/beta"): 1.0}
EXPECTED_SCORE = {("orga/alpha", "orga/alpha"): 9, ("orga/alpha", "orgb/beta"): 6,
                  ("orgb/beta", "orga/alpha"): 3, ("orgb/beta", "orgb/beta"): 9}


class TaggedSynthesis(ScriptedSynthesis):
    """Synthesis answers whose factors (hence every preference, request and checklist of the
    data set) carry the word ``madeby<model>``."""

    def answer_factors(self, req: dict, user: str) -> str:
        tag = "madeby" + req["model"].rsplit("/", 1)[-1]
        return super().answer_factors(req, user).replace("of persona ", f"of persona {tag} ") \
            .replace("(case ", f"({tag} case ")


class Responder:
    """Synthesis for the synthesizers, evaluation for everyone: the evaluated model writes
    ``guessedby<model>``, and the evaluator answers from who guessed (E) on whose data (S)."""

    def __init__(self) -> None:
        self.synthesis = TaggedSynthesis(max_rounds=2)
        self.calls: Counter = Counter()
        self.asked: Counter = Counter()  # each evaluation request's text: how often it was asked
        self.on_call = None
        self.lock = threading.Lock()

    def __call__(self, req: dict) -> str:
        stage = stage_of(req)
        phase = "synthesis" if stage != "unknown" and req["model"] != "judge" else "evaluation"
        with self.lock:
            self.calls[phase] += 1
            if phase == "evaluation":
                self.asked[json.dumps([req["model"], req["system"], req["messages"]])] += 1
            if self.on_call:
                self.on_call(phase, self.calls[phase])
        return self.synthesis(req) if phase == "synthesis" else self.evaluate(req)

    @staticmethod
    def evaluate(req: dict) -> str:
        user = req["messages"][-1]["content"]
        kind = CupidResponder(plans=[]).kind(req)
        me = req["model"].rsplit("/", 1)[-1]
        if kind == "infer":
            return f"### Analysis\n\nA guess.\n\n### Most Likely Preference\n\nAs guessedby{me} thinks it best."
        if kind == "generate":
            return f"A response by guessedby{me}."
        evaluated = re.search(r"guessedby(\w+)", user).group(1)
        if kind == "decompose":
            return ("```json\n" + json.dumps({"checklist": [f"Is it as guessedby{evaluated} thinks, part {i}?"
                                                            for i in (1, 2)]}) + "\n```")
        maker = re.search(r"madeby(\w+)", user).group(1)
        if kind == "judge":
            score = 9 if evaluated == maker else 6 if evaluated == "alpha" else 3
            return f"### Evaluation of AI Assistant's Response\n1. fine\n\n### Evaluation Score\n**{score}/10**"
        entries = [line for line in _section(user, "#### Checklist").splitlines() if line.strip()]
        precision = "madeby" in _section(user, "#### Preference")
        if evaluated == maker:
            labels = ["Fully Covered"] * len(entries)
        elif evaluated == "beta" and precision:
            labels = ["Not Covered"] * len(entries)
        else:
            labels = ["Fully Covered"] + ["Not Covered"] * (len(entries) - 1)
        return "```json\n" + json.dumps({"results": [{"index": i, "entry": e, "label": label} for i, (e, label)
                                                     in enumerate(zip(entries, labels), start=1)]}) + "\n```"


@pytest.fixture
def server():
    with FakeLLMServer(responder=Responder()) as srv:
        yield srv


@pytest.fixture
def inputs(tmp_path):
    results = build_results_dir(tmp_path / "benchmark")
    profiles = tmp_path / "profiles.jsonl"
    profiles.write_text("".join(json.dumps({"persona_id": p, "description": f"{name} is a careful {job}. They keep "
                                            f"notes. They ask many questions. They like plain words.",
                                            "occupation": job}) + "\n"
                                for p, name, job in (("p1", "Ana Ruiz", "nurse"), ("p2", "Ben Okoro", "pilot"),
                                                     ("p3", "Chen Li", "baker"))))
    return results, profiles


def argv(server, inputs, out, *extra) -> list[str]:
    url = server.openai_base_url
    results, profiles = inputs
    return ["--models", f"vllm:orga/alpha@{url}", f"vllm:orgb/beta@{url}", "--output_dir", str(out),
            "--from_results", str(results), "--n_personas", "2", "--persona_profiles", str(profiles),
            "--evaluator", f"vllm:judge@{url}", "--assistant_model", f"vllm:assistant@{url}",
            "--n_factors", "4", "--n_sessions", "9", "--max_turns", "4", "--n_workers", "4",
            "--n_bootstrap", "200", "--no_progress", *extra]


def cells(out) -> dict:
    data = json.loads((out / "self_enhancement.json").read_text())
    return {(c["model"], c["data"]): c for c in data["cells"]}


def test_the_worst_personas_of_the_fixture_results(tmp_path):
    # Mean per-instance F1 over the three models' default runs (scorer S), worked by hand
    # from tests/support/fixtures_results.py: p1 5/9, p2 (2/3 + 1/2 + 1/2 + 3/2 + 2)/9, p3 4.5/7.
    ranked = command.worst_personas(build_results_dir(tmp_path / "r"), 3)
    assert [p["persona_id"] for p in ranked] == ["p1", "p2", "p3"]
    assert [p["mean_f1"] for p in ranked] == pytest.approx([5 / 9, (2 / 3 + 4.5) / 9, 4.5 / 7])
    assert [p["results"] for p in ranked] == [9, 9, 7]  # p3: one failed, one missing


@pytest.mark.parametrize("spec, family", [
    ("claude-3-5-sonnet-20241022", "anthropic"), ("claude-3-7-sonnet-20250219", "anthropic"),
    ("gpt-4o-2024-11-20", "openai"), ("o3-mini-2025-01-31", "openai"),
    ("deepseek-ai/DeepSeek-R1", "deepseek-ai"), ("vllm:Qwen/Qwen2.5-7B-Instruct@http://h:1/v1", "qwen"),
    ("gemini-2.0-flash-thinking-exp", "google")])
def test_a_models_family_is_its_maker(spec, family):
    assert command.model_family(spec, {})[1] == family
    assert command.model_family(spec, {spec: "mine"})[1] == "mine"


def test_profiles_come_from_the_synthesis_output_the_runs_evaluated(tmp_path):
    data = tmp_path / "synthetic"
    (data / "instances").mkdir(parents=True)
    (data / "personas.json").write_text(json.dumps({"personas": [{"persona_id": "x", "description": "X."}]}))
    (tmp_path / "res" / "m").mkdir(parents=True)
    (tmp_path / "res" / "m" / "run.json").write_text(json.dumps({"model": "m", "data_source": str(data)}))
    assert command.profile_sources(tmp_path / "res") == [data]
    assert command.read_profiles(data / "instances")["x"]["description"] == "X."
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"persona_id": "y", "description": "Y."}\n{"persona_id": "z"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl: row 2: field 'description'"):
        command.read_profiles(bad)


def test_two_models_two_personas_the_matrix_and_its_figure(server, inputs, tmp_path, capsys):
    out = tmp_path / "se"
    assert command.main(argv(server, inputs, out)) == 0
    assert [p["persona_id"] for p in json.loads((out / "personas.json").read_text())["personas"]] == ["p1", "p2"]
    for model in ("orga_alpha", "orgb_beta"):
        made = sorted(p.name for p in (out / "data").glob(f"{model}*/instances/*.json"))
        assert made == [f"{p}__{t}.json" for p in ("p1", "p2") for t in ("changing", "consistent", "contrastive")]
    found = cells(out)
    assert set(found) == set(EXPECTED_F1)
    for key, f1 in EXPECTED_F1.items():
        assert found[key]["f1"]["value"] == pytest.approx(f1), key
        assert found[key]["f1"]["n"] == 6 and found[key]["score"]["n"] == 6
        assert found[key]["score"]["value"] == EXPECTED_SCORE[key]
        assert found[key]["same_family"] == (key[0] == key[1])
    # Constant per cell: the persona-clustered interval is the point itself.
    assert found[("orga/alpha", "orga/alpha")]["f1"]["low"] == found[("orga/alpha", "orga/alpha")]["f1"]["high"] == 1
    text = (out / "self_enhancement.md").read_text()
    assert "**100.0 [100.0, 100.0] (n=6)**" in text and "| orgb/beta (orgb) | 0.0 [0.0, 0.0] (n=6) |" in text
    assert (out / "self_enhancement.png").read_bytes()[:4] == b"\x89PNG"


def test_one_family_marks_every_cell(server, inputs, tmp_path):
    out = tmp_path / "se"
    assert command.main(argv(server, inputs, out, "--family", "orga/alpha=same", "--family", "orgb/beta=same",
                             "--no_figures")) == 0
    assert all(c["same_family"] for c in cells(out).values())


def test_an_interrupted_experiment_resumes_and_asks_nothing_twice(server, inputs, tmp_path):
    responder = server.responder
    out = tmp_path / "se"

    def interrupt(phase: str, n: int) -> None:
        if phase == "evaluation" and n == 20:  # during the evaluations, after both syntheses
            os.kill(os.getpid(), signal.SIGINT)

    responder.on_call = interrupt
    with default_dispositions_here():  # not an ignored SIGINT, as in a background job without job control
        assert command.main(argv(server, inputs, out, "--n_workers", "1", "--no_figures")) == 130
    assert not (out / "self_enhancement.json").exists()
    asked = Counter(responder.calls)
    responder.on_call = None
    assert command.main(argv(server, inputs, out, "--n_workers", "1", "--no_figures")) == 0
    again = responder.calls - asked
    assert again["synthesis"] == 0  # both data sets were finished and are found so
    # The evaluation went on where it stopped: of the 20 requests before the stop, only those
    # in flight at it may have been asked twice (one instance at a time, but its two chains,
    # and its two matches, side by side: at most 3).
    assert again["evaluation"] > 0
    assert sum(n - 1 for n in responder.asked.values()) <= 3
    assert {k: c["f1"]["value"] for k, c in cells(out).items()} == pytest.approx(EXPECTED_F1)


def test_the_dry_run_prices_both_engines_and_writes_nothing(server, inputs, tmp_path, capsys):
    out = tmp_path / "se"
    assert command.main(argv(server, inputs, out, "--dry_run", "--json")) == 0
    assert not out.exists() and server.requests == []
    forecast = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    roles = forecast["roles"]
    assert forecast["personas"] == ["p1", "p2"]
    # Synthesis: per model, factors and sessions for each persona (no descriptions: the
    # profiles are given), checklists and dialogues; evaluation: 6 calls x 6 instances x 4.
    assert roles["synthesis synthesizer"]["by_step"]["factors"]["calls"] == 2
    assert roles["synthesis synthesizer (orgb/beta)"]["by_step"]["sessions"]["calls"] == 2
    assert "descriptions" not in roles["synthesis synthesizer"]["by_step"]
    evaluation = sum(v["calls"] for k, v in roles.items() if k.startswith("evaluation"))
    assert evaluation == 144
    assert forecast["total"]["calls"] == sum(v["calls"] for v in roles.values())

    # After the run, the same dry run prices nothing left to do.
    assert command.main(argv(server, inputs, out, "--no_figures")) == 0
    capsys.readouterr()
    assert command.main(argv(server, inputs, out, "--dry_run", "--json")) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["total"]["calls"] == 0


def test_existing_data_stands_for_a_models_data_set_with_only_the_experiments_personas(server, inputs, tmp_path,
                                                                                       capsys):
    from cupid_responder import InstancePlan, make_row

    plan = InstancePlan("Request?", "Truth.", ["Q1?", "Q2?"], "Guess.", ["G?"], ["Fully Covered"],
                        ["Fully Covered"] * 2)
    original = tmp_path / "original.jsonl"
    original.write_text("".join(json.dumps(make_row(p, t, plan)) + "\n"
                                for p in ("p1", "p2", "p9") for t in ("consistent", "contrastive", "changing")))
    out = tmp_path / "se"
    assert command.main(argv(server, inputs, out, "--existing_data", f"orgb/beta={original}",
                             "--dry_run", "--json")) == 0
    forecast = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert not [role for role in forecast["roles"] if "orgb/beta" in role and role.startswith("synthesis")]
    # Each model on alpha's 6 stand-in instances and on p1 and p2's 6 original ones (not p9's).
    assert sum(v["calls"] for k, v in forecast["roles"].items() if k.startswith("evaluation")) == 2 * 12 * 6
    assert command.main(argv(server, inputs, out, "--existing_data", f"nobody={original}", "--dry_run")) == 2
    assert "existing_data: nobody is not one of --models" in capsys.readouterr().err


class FailingInference(Responder):
    """beta's inference on alpha's data answers nothing readable, every time."""

    def __call__(self, req: dict) -> str:
        user = req["messages"][-1]["content"]
        if req["model"].endswith("beta") and "madebyalpha" in user and CupidResponder(plans=[]).kind(req) == "infer":
            with self.lock:
                self.calls["evaluation"] += 1
            return "I would rather not say."
        return super().__call__(req)


def test_a_failed_cell_is_named_with_its_step_and_reason(inputs, tmp_path, capsys):
    """The cell whose evaluation failed said "—" with exit 1 and nothing about which
    evaluation failed or why: a line names the model, the data set, the step and the reason,
    and the matrix's cell says it too."""
    out = tmp_path / "se"
    with FakeLLMServer(responder=FailingInference()) as server:
        assert command.main(argv(server, inputs, out, "--no_figures")) == 1
    err = capsys.readouterr().err
    line = next(l for l in err.splitlines() if l.startswith("FAILED"))
    assert re.fullmatch(r"FAILED orgb/beta on the data set by orga/alpha: 6 instances failed \(rerun to ask them "
                        r"again\); infer: unparseable answer: .+ \(6\)", line), line
    cell = cells(out)[("orgb/beta", "orga/alpha")]
    assert cell["f1"] is None and cell["failed"]["f1"] == {"instances": 6, "steps": {"infer": 6}}
    assert cells(out)[("orga/alpha", "orga/alpha")]["failed"] == {}
    text = (out / "self_enhancement.md").read_text()
    assert "| — (6 failed at infer) |" in text.split("## Judge score")[0]
