"""cupid-self-enhancement's parts in process (studies/self_enhancement.py): the personas it
takes and their profiles, each model's family and directories, the engines' arguments, a data
set's rows, and the line that names a failed evaluation (tests/studies/test_self_enhancement.py
runs the whole command against the loopback server)."""
from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import pytest

from cupid.studies import self_enhancement as command
from cupid.utils.errors import BadInput
from fixtures_results import CLAUDE, GPT4O, build_results_dir


def args(tmp_path, **over) -> argparse.Namespace:
    parsed = command.build_parser().parse_args(["--models", "gpt-4o-2024-11-20", "--output_dir", str(tmp_path / "out")])
    for key, value in over.items():
        setattr(parsed, key, value)
    return parsed


def profiles_file(tmp_path, ids=("p1", "p2", "p3")):
    path = tmp_path / "profiles.jsonl"
    path.write_text("".join(json.dumps({"persona_id": p, "description": f"{p} is careful.", "occupation": "nurse"})
                            + "\n" for p in ids), encoding="utf-8")
    return path


def test_the_defaults_of_the_command():
    a = command.build_parser().parse_args(["--models", "m1", "m2", "m1", "--output_dir", "o"])
    assert (a.n_personas, a.n_workers, a.n_bootstrap, a.seed, a.batch, a.dry_run) == (64, 4, 1000, 0, False, False)
    assert a.models == ["m1", "m2", "m1"] and a.rate_limit == [] and a.existing_data is None
    assert command.key_value("org/m=anthropic") == ("org/m", "anthropic")
    assert command.key_value("a=b=c") == ("a=b", "c")
    for bad in ("nothing", "=x", "x="):
        with pytest.raises(argparse.ArgumentTypeError, match=f"expected MODEL=VALUE, got {bad!r}"):
            command.key_value(bad)


def test_the_worst_personas_lowest_first_ties_by_id(tmp_path):
    results = build_results_dir(tmp_path / "r")
    assert [p["persona_id"] for p in command.worst_personas(results, 2)] == ["p1", "p2"]
    assert command.worst_personas(results, 1) == [{"persona_id": "p1", "mean_f1": round(5 / 9, 6), "results": 9}]
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match="from_results: .*empty: no default-setting inference results"):
        command.worst_personas(tmp_path / "empty", 2)


def test_profiles_from_json_jsonl_and_a_synthesis_output(tmp_path):
    jsonl = profiles_file(tmp_path)
    assert command.read_profiles(jsonl)["p2"] == {"persona_id": "p2", "description": "p2 is careful.",
                                                  "occupation": "nurse"}
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps({"personas": [{"persona_id": "a", "description": "A."}]}), encoding="utf-8")
    assert command.read_profiles(listed) == {"a": {"persona_id": "a", "description": "A.", "occupation": None}}
    out = tmp_path / "synth"
    (out / "instances").mkdir(parents=True)
    (out / "personas.json").write_text(json.dumps([{"persona_id": "x", "description": "X."}]), encoding="utf-8")
    assert list(command.read_profiles(out)) == ["x"] and list(command.read_profiles(out / "instances")) == ["x"]


@pytest.mark.parametrize("text, message", [
    ('{"persona_id": "a"}', "expected a list of personas"),
    ('[{"persona_id": "a", "description": "  "}]', "row 1: field 'description' must be a non-empty string"),
    ('[{"persona_id": "a", "description": "A."}, ["x"]]', "row 2: field 'persona_id' must be a non-empty string"),
    ('[{"description": "A."}]', "row 1: field 'persona_id'"),
    ("[", "cannot read it"),
])
def test_a_bad_profile_file_is_named_by_row_and_field(tmp_path, text, message):
    path = tmp_path / "profiles.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BadInput, match=f"persona_profiles: {path}: .*{message}"):
        command.read_profiles(path)
    with pytest.raises(BadInput, match="cannot read it"):
        command.read_profiles(tmp_path / "absent.json")


def test_choose_personas_pins_them_at_the_first_run(tmp_path):
    profiles = profiles_file(tmp_path)
    chosen = command.choose_personas(args(tmp_path, personas=["p3", "p1", "p3"], persona_profiles=str(profiles)))
    assert [p["persona_id"] for p in chosen] == ["p3", "p1"]
    assert chosen[0] == {"persona_id": "p3", "description": "p3 is careful.", "occupation": "nurse"}
    with pytest.raises(BadInput, match="persona_profiles: no profile for p9 in .*profiles.jsonl"):
        command.choose_personas(args(tmp_path, personas=["p9"], persona_profiles=str(profiles)))
    with pytest.raises(BadInput, match=r"no profile for p1 in no profile source \(give --persona_profiles\)"):
        command.choose_personas(args(tmp_path, personas=["p1"]))
    with pytest.raises(BadInput, match="personas: give --personas ID ... or --from_results RESULTS_DIR"):
        command.choose_personas(args(tmp_path))
    # pinned: the same personas again, or none named, are the pinned ones; others are refused
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / command.PERSONAS_FILE).write_text(json.dumps({"personas": chosen}), encoding="utf-8")
    assert command.choose_personas(args(tmp_path)) == chosen
    assert command.choose_personas(args(tmp_path, personas=["p1", "p3"])) == chosen
    with pytest.raises(BadInput, match="holds this experiment's personas \\(p3, p1\\); give the same"):
        command.choose_personas(args(tmp_path, personas=["p1"]))


def test_choose_the_worst_personas_with_profiles_from_the_runs_data(tmp_path):
    results = build_results_dir(tmp_path / "r")
    profiles = profiles_file(tmp_path)
    chosen = command.choose_personas(args(tmp_path, from_results=str(results), n_personas=2,
                                          persona_profiles=str(profiles)))
    assert [(p["persona_id"], p["results"], p["description"]) for p in chosen] == [
        ("p1", 9, "p1 is careful."), ("p2", 9, "p2 is careful.")]


def test_profile_sources_are_the_synthesis_outputs_the_runs_evaluated(tmp_path):
    results = tmp_path / "results"
    data = tmp_path / "synth"
    (data / "instances").mkdir(parents=True)
    (data / "personas.json").write_text("[]", encoding="utf-8")
    for model, source in (("m1", data / "instances"), ("m2", data), ("m3", tmp_path / "elsewhere")):
        (results / model).mkdir(parents=True)
        (results / model / "run.json").write_text(json.dumps({"model": model, "setting": "default",
                                                              "data_source": str(source)}), encoding="utf-8")
        (results / model / "i__consistent.json").write_text("{}", encoding="utf-8")
    assert command.profile_sources(results) == [data]


def test_plan_names_each_models_directories_and_refuses_clashes(tmp_path):
    a = args(tmp_path, models=["vllm:orga/alpha@http://127.0.0.1:1/v1", "gpt-4o-2024-11-20",
                               "vllm:orga/alpha@http://127.0.0.1:1/v1"],
             family=[("gpt-4o-2024-11-20", "mine")], existing_data=[("orga/alpha", str(tmp_path / "data.jsonl"))])
    plan = command.Plan(a, [{"persona_id": "p1", "description": "P1.", "occupation": None}])
    spec = "vllm:orga/alpha@http://127.0.0.1:1/v1"
    assert plan.models == {spec: ("orga/alpha", "orga"), "gpt-4o-2024-11-20": ("gpt-4o-2024-11-20", "mine")}
    assert plan.existing == {spec: str(tmp_path / "data.jsonl")}
    from cupid.utils.dataset import safe_name

    assert plan.data_dir(spec) == tmp_path / "out" / "data" / safe_name("orga/alpha")
    assert plan.results_dir(spec) == tmp_path / "out" / "results" / safe_name("orga/alpha")
    assert plan.results_dir("gpt-4o-2024-11-20") == tmp_path / "out" / "results" / "gpt-4o-2024-11-20"
    with pytest.raises(BadInput, match="existing_data: nobody is not one of --models"):
        command.Plan(args(tmp_path, existing_data=[("nobody", "x")]), [])
    with pytest.raises(BadInput, match="models: two of .* have the same name"):
        command.Plan(args(tmp_path, models=["vllm:org/m@http://127.0.0.1:1/v1", "vllm:org/m@http://127.0.0.1:2/v1"]), [])


def test_the_engines_arguments_and_the_seeded_personas(tmp_path):
    a = args(tmp_path, n_factors=4, n_sessions=9, max_turns=3, n_workers=2, batch=True, no_progress=True,
             rate_limit=["tpm=10"], evaluator="judge-model", assistant_model="helper")
    personas = [{"persona_id": "p1", "description": "P1.", "occupation": "nurse", "mean_f1": 0.1}]
    plan = command.Plan(a, personas)
    s = plan.synthesis_arguments("gpt-4o-2024-11-20")
    assert (s["output_dir"], s["model"], s["assistant_model"], s["n_personas"], s["n_factors"], s["n_sessions"],
            s["max_turns"], s["n_workers"], s["batch"], s["no_progress"], s["embedded"]) == (
        plan.data_dir("gpt-4o-2024-11-20"), "gpt-4o-2024-11-20", "helper", 1, 4, 9, 3, 2, True, True, False)
    assert plan.synthesis_arguments("gpt-4o-2024-11-20", tmp_path / "x")["output_dir"] == tmp_path / "x"
    e = plan.evaluation_arguments("gpt-4o-2024-11-20", "gpt-4o-2024-11-20", "DATA")
    assert e == {"model": "gpt-4o-2024-11-20", "evaluator": "judge-model", "data": "DATA", "task": "both",
                 "results_dir": str(plan.results_dir("gpt-4o-2024-11-20")), "n_workers": 2, "batch": True,
                 "rate_limit": ["tpm=10"]}
    directory = tmp_path / "seeded"
    directory.mkdir()
    plan.seed_personas(directory)
    seeded = json.loads((directory / command.PERSONAS_FILE).read_text(encoding="utf-8"))
    assert seeded["personas"] == [{"persona_id": "p1", "description": "P1.", "occupation": "nurse"}]
    assert seeded["seed_source"] == f"self-enhancement personas ({tmp_path / 'out' / command.PERSONAS_FILE})"
    (directory / command.PERSONAS_FILE).write_text("{}", encoding="utf-8")
    plan.seed_personas(directory)   # written once: a rerun keeps what is there
    assert (directory / command.PERSONAS_FILE).read_text(encoding="utf-8") == "{}"


def test_a_data_set_is_the_synthesized_instances_or_the_existing_ones_of_the_personas(tmp_path):
    sample = command.Path(command.__file__).resolve().parents[1] / "data" / "sample"
    persona = "sample-02-noor-haddad"
    a = args(tmp_path, existing_data=[("gpt-4o-2024-11-20", str(sample))])
    rows = command.Plan(a, [{"persona_id": persona, "description": "N."}]).dataset_rows("gpt-4o-2024-11-20")
    assert sorted(r["instance_id"] for r in rows) == [f"{persona}__{k}" for k in ("changing", "consistent", "contrastive")]
    with pytest.raises(BadInput, match=f"existing_data: {sample} holds no instance of the experiment's personas"):
        command.Plan(a, [{"persona_id": "nobody", "description": "N."}]).dataset_rows("gpt-4o-2024-11-20")
    a = args(tmp_path)
    plan = command.Plan(a, [{"persona_id": "p1", "description": "P1."}])
    assert plan.dataset_rows("gpt-4o-2024-11-20") == []
    instances = plan.data_dir("gpt-4o-2024-11-20") / "instances"
    instances.mkdir(parents=True)
    for name in ("b.json", "a.json"):
        (instances / name).write_text(json.dumps({"instance_id": name}), encoding="utf-8")
    assert plan.dataset_rows("gpt-4o-2024-11-20") == [{"instance_id": "a.json"}, {"instance_id": "b.json"}]


def test_a_failed_evaluation_is_one_line_with_its_steps_and_reasons():
    done = SimpleNamespace(failed=3, results={"counts": {"failures_by_step": {
        "infer": {"HTTP 500": 2}, "match_recall": {"unparseable answer": 1}}}})
    assert command.failed_line("orga/alpha", "orgb/beta", done) == (
        "FAILED orga/alpha on the data set by orgb/beta: 3 instances failed (rerun to ask them again); "
        "infer: HTTP 500 (2); match_recall: unparseable answer (1)")
    one = SimpleNamespace(failed=1, results={"counts": {"failures_by_step": {"judge": {"timeout": 1}}}})
    assert "1 instance failed (rerun" in command.failed_line(GPT4O, CLAUDE, one)


# ---------------------------------------------------------------------------------------
# The run loop and the command, with both engines stood in for
# ---------------------------------------------------------------------------------------
class Engines:
    """synthesize() and evaluate() as stand-ins: each call recorded; a synthesis writes one
    instance per persona, and listed (model, data set) pairs fail."""

    def __init__(self, failing_personas=(), failing_cells=()):
        self.synthesized, self.evaluated = [], []
        self.failing_personas, self.failing_cells = failing_personas, failing_cells

    def synthesize(self, **kwargs):
        self.synthesized.append(kwargs)
        out = kwargs["output_dir"] / "instances"
        out.mkdir(parents=True, exist_ok=True)
        personas = json.loads((kwargs["output_dir"] / command.PERSONAS_FILE).read_text(encoding="utf-8"))["personas"]
        for p in personas:
            (out / f"{p['persona_id']}__consistent.json").write_text(json.dumps({"instance_id": p["persona_id"]}))
        return SimpleNamespace(failures=[{"persona_id": p, "stage": "dialogues", "reason": "HTTP 500"}
                                         for p in self.failing_personas])

    def evaluate(self, **kwargs):
        self.evaluated.append(kwargs)
        failed = 2 if (kwargs["model"], kwargs["results_dir"].rsplit("/", 1)[-1]) in self.failing_cells else 0
        return SimpleNamespace(failed=failed, results={"counts": {"failures_by_step": {"judge": {"timeout": failed}}}})


@pytest.fixture
def engines(monkeypatch):
    from cupid.evaluation import api as evaluation_api
    from cupid.synthesis import api as synthesis_api

    made = Engines()
    monkeypatch.setattr(synthesis_api, "synthesize", lambda **kw: made.synthesize(**kw))
    monkeypatch.setattr(evaluation_api, "evaluate", lambda model, **kw: made.evaluate(model=model, **kw))
    return made


SPECS = ["vllm:orga/alpha@http://127.0.0.1:1/v1", "vllm:orgb/beta@http://127.0.0.1:1/v1"]


def test_run_synthesizes_each_data_set_then_evaluates_every_model_on_every_one(tmp_path, engines, capsys):
    plan = command.Plan(args(tmp_path, models=SPECS), [{"persona_id": "p1", "description": "P1.", "occupation": None}])
    assert command.run(plan) == 0
    assert [s["model"] for s in engines.synthesized] == SPECS
    assert [s["output_dir"] for s in engines.synthesized] == [plan.data_dir(spec) for spec in SPECS]
    assert all(s["rate_limit"] == [] for s in engines.synthesized)
    assert [(e["model"], e["results_dir"]) for e in engines.evaluated] == [
        (SPECS[0], str(plan.results_dir(SPECS[0]))), (SPECS[1], str(plan.results_dir(SPECS[0]))),
        (SPECS[0], str(plan.results_dir(SPECS[1]))), (SPECS[1], str(plan.results_dir(SPECS[1])))]
    assert engines.evaluated[0]["data"] == str(plan.data_dir(SPECS[0]))
    err = capsys.readouterr().err
    assert f"=== synthesizing 1 personas with orga/alpha into {plan.data_dir(SPECS[0])} ===" in err
    assert "=== evaluating orgb/beta on the data set by orga/alpha ===" in err
    assert "FAILED" not in err


def test_run_names_each_failure_and_returns_1(tmp_path, engines, capsys):
    from cupid.utils.dataset import safe_name

    engines.failing_personas = ("p1",)
    engines.failing_cells = {(SPECS[1], safe_name("orga/alpha"))}
    plan = command.Plan(args(tmp_path, models=SPECS), [{"persona_id": "p1", "description": "P1.", "occupation": None}])
    assert command.run(plan) == 1
    err = capsys.readouterr().err
    assert err.count("FAILED p1 at dialogues: HTTP 500") == 2
    assert ("FAILED orgb/beta on the data set by orga/alpha: 2 instances failed (rerun to ask them again); "
            "judge: timeout (2)") in err
    assert err.count("FAILED orgb/beta") == 1


def test_run_with_existing_data_synthesizes_nothing_for_that_model(tmp_path, engines, capsys):
    sample = command.Path(command.__file__).resolve().parents[1] / "data" / "sample"
    persona = "sample-02-noor-haddad"
    plan = command.Plan(args(tmp_path, models=SPECS, existing_data=[("orgb/beta", str(sample))]),
                        [{"persona_id": persona, "description": "N."}])
    assert command.run(plan) == 0
    assert [s["model"] for s in engines.synthesized] == [SPECS[0]]
    from_existing = [e for e in engines.evaluated if e["results_dir"] == str(plan.results_dir(SPECS[1]))]
    assert len(from_existing) == 2 and all(isinstance(e["data"], list) and len(e["data"]) == 3 for e in from_existing)


def test_an_empty_data_set_leaves_its_column_empty_and_is_said(tmp_path, monkeypatch, capsys):
    from cupid.synthesis import api as synthesis_api

    monkeypatch.setattr(synthesis_api, "synthesize", lambda **kw: SimpleNamespace(failures=[]))
    plan = command.Plan(args(tmp_path, models=SPECS[:1]), [{"persona_id": "p1", "description": "P1."}])
    assert command.run(plan) == 1
    assert "note: no instance in orga/alpha's data set; its column stays empty" in capsys.readouterr().err


def test_the_command_pins_its_personas_and_writes_the_matrix(tmp_path, engines, capsys, monkeypatch):
    profiles = profiles_file(tmp_path)
    out = tmp_path / "out"
    code = command.main(["--models", *SPECS, "--output_dir", str(out), "--personas", "p2", "p1",
                         "--persona_profiles", str(profiles), "--no_figures", "--n_bootstrap", "20"])
    assert code == 0
    pinned = json.loads((out / command.PERSONAS_FILE).read_text(encoding="utf-8"))["personas"]
    assert [p["persona_id"] for p in pinned] == ["p2", "p1"]
    printed = capsys.readouterr().out
    assert f"wrote {out / 'self_enhancement.json'}" in printed and "self_enhancement.png" not in printed
    matrix = json.loads((out / "self_enhancement.json").read_text(encoding="utf-8"))
    assert matrix["personas"] == pinned and matrix["n_bootstrap"] == 20
    assert [(d["label"], d["instances"]) for d in matrix["datasets"]] == [("orga/alpha", 2), ("orgb/beta", 2)]
    assert command.main(["--models", *SPECS, "--output_dir", str(out), "--personas", "p3",
                         "--persona_profiles", str(profiles)]) == 2
    assert "holds this experiment's personas" in capsys.readouterr().err
    assert command.main(["--models", SPECS[0], "--output_dir", str(tmp_path / "o2")]) == 2


def test_a_stop_between_the_engines_calls_says_how_to_resume(tmp_path, monkeypatch, capsys):
    from cupid.synthesis import api as synthesis_api

    def interrupted(**kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(synthesis_api, "synthesize", interrupted)
    code = command.main(["--models", SPECS[0], "--output_dir", str(tmp_path / "o"), "--personas", "p1",
                         "--persona_profiles", str(profiles_file(tmp_path))])
    assert code == 130
    assert "rerun the same command to resume" in capsys.readouterr().err


def test_the_options_defaults_come_from_the_engines_settings(capsys):
    from cupid import config
    from cupid.synthesis.options import SynthesisConfig

    d = SynthesisConfig()
    a = command.build_parser().parse_args(["--models", "m", "--output_dir", "o", "--family", "m=mine",
                                           "--existing_data", "m=data/x", "--rate_limit", "tpm=1",
                                           "--rate_limit", "m=rpm=2", "--no_figures", "--json", "--dry_run"])
    assert (a.evaluator, a.assistant_model, a.n_factors, a.n_sessions, a.max_turns) == (
        config.DEFAULT_EVALUATOR, d.assistant_model, d.n_factors, d.n_sessions, d.max_turns)
    assert a.family == [("m", "mine")] and a.existing_data == [("m", "data/x")]
    assert a.rate_limit == ["tpm=1", "m=rpm=2"] and a.no_figures and a.json and a.dry_run
    assert (a.personas, a.from_results, a.persona_profiles, a.no_progress, a.batch) == (None, None, None, False, False)
    for bad in (["--n_personas", "0"], ["--n_workers", "-1"], ["--n_bootstrap", "x"], ["--family", "nofamily"]):
        with pytest.raises(SystemExit):
            command.build_parser().parse_args(["--models", "m", "--output_dir", "o", *bad])
    with pytest.raises(SystemExit):
        command.build_parser().parse_args(["--output_dir", "o"])          # --models is required
    capsys.readouterr()
    assert command.build_parser().prog.endswith("self_enhancement") or "self-enhancement" in command.build_parser().prog
