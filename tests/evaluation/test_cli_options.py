"""Command-line behaviour a new user meets first: flags validated as flags, data validated
whole, shape warnings, --seed and per-role generation overrides (sent, recorded, naming the
run), every missing key at once, synthesis on the embedded model with one flag, and the
report's notes about what it lacks and what it left out."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cupid_responder import CupidResponder, make_row, two_instance_plans
from cupid.evaluation import report as R
from cupid.evaluation import run as run_module
from cupid.evaluation.data import InstanceSource
from cupid.utils.dataset import DataValidationError
from cupid.utils.models.call_errors import ModelConfigurationError
from cupid.utils.models.model import Model
from cupid.utils.models.registry import resolve_model
from cupid.utils.models.request import Completion
from fake_llm_server import FakeLLMServer
from cupid.synthesis import run as synthesis_run
from fixtures_results import build_results_dir
from repo_paths import ROOT


@pytest.fixture(autouse=True)
def restore_logging():
    """synthesis.run.main installs a root handler on the (captured) stderr; later tests must
    not log into that closed stream."""
    import logging
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def rows():
    plans = two_instance_plans()
    return [make_row(f"p{i}", "consistent", plans[i % 2], n_sessions=8) for i in range(5)]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag, value", [
    ("--limit", "0"), ("--limit", "-1"), ("--limit", "two"), ("--n_workers", "0"),
    ("--timeout", "0"), ("--timeout", "-5"), ("--max_retries", "-1"), ("--seed", "-3"),
    ("--model_args", "temperature=9"), ("--model_args", "top_k=3"), ("--evaluator_args", "max_tokens=0"),
    ("--model_args", "temperature"),
])
def test_bad_flag_values_are_flag_errors_on_one_line(flag, value, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_module.main(["--model", "smollm2-135m", "--data_dir", "data/sample",
                         "--results_dir", str(tmp_path / "r"), flag, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"argument {flag}" in err and "bad data" not in err
    assert not (tmp_path / "r").exists()


def test_matcher_args_need_the_matcher(tmp_path, capsys):
    code = run_module.main(["--model", "smollm2-135m", "--data_dir", "data/sample",
                            "--results_dir", str(tmp_path), "--matcher_args", "temperature=0.1"])
    assert code == 2 and "matcher_args needs use_matcher" in capsys.readouterr().err


def test_synthesis_flags_are_validated(capsys):
    with pytest.raises(SystemExit) as exit_info:
        synthesis_run.main(["--n_personas", "0"])
    assert exit_info.value.code == 2
    assert "argument --n_personas" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# Data: validated whole, shape departures named
# ---------------------------------------------------------------------------------------
def test_a_broken_row_past_the_limit_is_still_reported(rows, tmp_path, capsys):
    rows[3]["prior_interactions"][1].pop("contextual_preference")
    path = write_jsonl(tmp_path / "data.jsonl", rows)
    with pytest.raises(DataValidationError, match=r"row 4: field 'prior_interactions\[1\]\.contextual_preference'"):
        InstanceSource(data_path=path, limit=2).validate()
    code = run_module.main(["--model", "smollm2-135m", "--data", str(path), "--limit", "2",
                            "--results_dir", str(tmp_path / "r")])
    assert code == 2
    assert "row 4" in capsys.readouterr().err


def test_limit_counts_and_iterates_only_the_first_rows(rows, tmp_path):
    source = InstanceSource(data_path=write_jsonl(tmp_path / "data.jsonl", rows), limit=2)
    assert source.validate() == 2 and source.total == 5
    assert [i.persona_id for i in source] == ["p0", "p1"]


def test_instances_departing_from_the_datasets_shape_are_named(rows, tmp_path):
    plans = two_instance_plans()
    rows[1] = make_row("p1", "consistent", plans[1], n_sessions=7)
    rows[2] = make_row("p2", "consistent", plans[0], n_sessions=7)
    rows[4]["prior_interactions"][0]["dialogue"][0]["role"] = "assistant"
    source = InstanceSource(data_path=write_jsonl(tmp_path / "data.jsonl", rows), limit=1)
    source.validate()
    assert source.warnings == [
        "2 instance(s) with 7 prior sessions, not 8: p1__consistent, p2__consistent",
        "1 instance(s) with session 1 opens with the assistant, not the user: p4__consistent"]
    assert InstanceSource(data_path="data/sample").validate() == 6
    sample = InstanceSource(data_path="data/sample")
    sample.validate()
    assert sample.warnings == []


# ---------------------------------------------------------------------------------------
# Seed and per-role overrides at the seam
# ---------------------------------------------------------------------------------------
class RecordingModel(Model):
    model_name = "test-recording-model"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.requests = []

    def complete(self, request):
        self.requests.append(request)
        return Completion(text="ok")


def test_overrides_replace_what_the_step_asks_for_and_name_the_model():
    plain = RecordingModel()
    plain.generate("s", [{"role": "user", "content": "u"}], temperature=0.7, max_tokens=8192)
    assert (plain.requests[0].temperature, plain.requests[0].max_tokens, plain.requests[0].seed) == (0.7, 8192, None)
    assert plain.label == plain.name

    model = RecordingModel()
    model.overrides = {"temperature": 0.2, "max_tokens": 1024, "seed": 7}
    model.generate("s", [{"role": "user", "content": "u"}], temperature=0.7, max_tokens=8192)
    request = model.requests[0]
    assert (request.temperature, request.max_tokens, request.seed) == (0.2, 1024, 7)
    assert model.label == "test-recording-model[max_tokens=1024,seed=7,temperature=0.2]"
    # A seed is part of the cache key; an unseeded request keeps its key.
    assert request.cache_key("m") != plain.requests[0].cache_key("m")


def test_resolve_model_refuses_unknown_overrides():
    with pytest.raises(ModelConfigurationError, match="cannot override top_p"):
        resolve_model("smollm2-135m", role="evaluated", overrides={"top_p": 0.5})


@pytest.fixture
def server():
    plans = two_instance_plans()
    with FakeLLMServer(responder=CupidResponder(plans)) as srv:
        yield srv


def test_seed_and_role_args_are_sent_recorded_and_make_another_run(server, tmp_path):
    plans = two_instance_plans()
    data = write_jsonl(tmp_path / "data.jsonl", [make_row("persona-a", "consistent", plans[0])])
    base = ["--model", f"vllm:test-model@{server.openai_base_url}",
            "--evaluator", f"vllm:test-evaluator@{server.openai_base_url}",
            "--data", str(data), "--results_dir", str(tmp_path / "results"), "--n_workers", "1",
            "--task", "both"]
    assert run_module.main(base + ["--seed", "11", "--model_args", "temperature=0.3,max_tokens=99",
                                   "--evaluator_args", "max_tokens=77"]) == 0
    bodies = {r["model"]: [] for r in server.requests}
    for r in server.requests:
        bodies[r["model"]].append(r["body"])
    assert all(b["seed"] == 11 and b["temperature"] == 0.3 and b["max_tokens"] == 99
               for b in bodies["test-model"])
    assert all(b["seed"] == 11 and b["max_tokens"] == 77 and b["temperature"] == 0.0
               for b in bodies["test-evaluator"])
    run_dirs = [p.parent for p in (tmp_path / "results").rglob("run.json")]
    assert len(run_dirs) == 1
    manifest = json.loads((run_dirs[0] / "run.json").read_text())
    assert manifest["model"] == "test-model[max_tokens=99,seed=11,temperature=0.3]"
    assert manifest["generation_overrides"] == {"seed": 11, "temperature": 0.3, "max_tokens": 99}
    results = json.loads((run_dirs[0] / "results.json").read_text())
    assert results["settings"]["scorer"] == "test-evaluator[max_tokens=77,seed=11]"
    assert results["settings"]["generation_overrides"]["evaluator"] == {"seed": 11, "max_tokens": 77}
    # The benchmark's default run is another directory, untouched by the overridden one.
    n_before = len(server.requests)
    assert run_module.main(base) == 0
    assert (tmp_path / "results" / "test-model" / "run.json").is_file()
    new = server.requests[n_before:]
    assert new and all("seed" not in r["body"] for r in new)


# ---------------------------------------------------------------------------------------
# Missing keys: all named at once
# ---------------------------------------------------------------------------------------
def test_evaluation_names_every_missing_key_at_once(tmp_path, capsys):
    code = run_module.main(["--model", "claude-3-5-sonnet-20241022", "--evaluator", "gpt-4o-2024-11-20",
                            "--data_dir", "data/sample", "--results_dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "ANTHROPIC_API_KEY" in err and "OPENAI_API_KEY" in err


def test_synthesis_names_every_missing_key_at_once(tmp_path, capsys):
    code = synthesis_run.main(["--output_dir", str(tmp_path / "s"), "--persona_seeds", "bundled",
                               "--user_model", "gpt-4o-2024-11-20", "--n_personas", "1",
                               "--no_progress"])
    err = capsys.readouterr().err
    assert code == 2
    line = next(line for line in err.splitlines() if "problems" in line)
    assert all(key in line for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "TOGETHER_API_KEY"))


# ---------------------------------------------------------------------------------------
# Synthesis: one flag for the embedded model in every role
# ---------------------------------------------------------------------------------------
def synthesis_roles(argv: list[str]) -> dict:
    """The model of each synthesis role the flags give."""
    from cupid.synthesis.api import synthesis_config

    args = synthesis_run.build_parser().parse_args(argv)
    cfg = synthesis_config(**{name: getattr(args, name, None) for name in synthesis_run.ARGUMENTS
                              if name not in ("rate_limit", "log_file")})
    return {role: getattr(cfg, role) for role in synthesis_run.ROLE_FLAGS}


def test_embedded_flag_puts_the_embedded_model_in_every_role():
    assert set(synthesis_roles(["--embedded"]).values()) == {"smollm2-135m"}
    models = synthesis_roles(["--all_models", "gpt-4o", "--user_model", "claude-3-5-sonnet-20241022"])
    assert models == {"model": "gpt-4o", "user_model": "claude-3-5-sonnet-20241022",
                      "assistant_model": "gpt-4o", "decomposer_model": "gpt-4o"}


def test_embedded_and_all_models_together_is_bad_input(capsys, tmp_path):
    code = synthesis_run.main(["--embedded", "--all_models", "gpt-4o", "--output_dir", str(tmp_path / "o")])
    assert code == 2 and capsys.readouterr().err.startswith("error: embedded: give embedded=True or all_models")
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------------------
# Report: what it lacks, and folders that are not runs
# ---------------------------------------------------------------------------------------
def test_report_names_what_each_missing_table_lacks_and_the_command(tmp_path, capsys):
    results = build_results_dir(tmp_path / "results")
    synthesis_output = results / "synthetic_data"
    (synthesis_output / "instances").mkdir(parents=True)
    (synthesis_output / "run.json").write_text(json.dumps({"settings": {"model": "x", "n_factors": 8}}))
    (results / "broken").mkdir()
    (results / "broken" / "run.json").write_text("{not json")
    assert R.main([str(results), "--output", str(tmp_path / "out"), "--n_bootstrap", "20"]) == 0
    out = capsys.readouterr().out
    md = (tmp_path / "out" / "report.md").read_text()
    for text in (md, out):
        assert "Tables 9 and 10" in text and "summary-setting results for DeepSeek-R1, Claude 3.7 Sonnet" in text
        assert (f"cupid-eval --model claude-3-7-sonnet-20250219 --results_dir {results} "
                f"--setting summary --task both --data_dir fixture") in text
        assert f"cupid-eval --model deepseek-ai/DeepSeek-R1 --results_dir {results} " \
               f"--setting oracle_preference --task generation" in text
        assert "synthetic_data: left out, not an evaluation run: a synthesis output" in text
        assert "broken: left out, its run.json cannot be read" in text
    # GPT-4o has every setting: it is named under no gap.
    gaps = md[md.index("## What this report cannot show yet"):md.index("## Inference")]
    assert "gpt-4o-2024-08-06 --results_dir" not in gaps


def test_report_says_when_a_correlation_needs_more_models(tmp_path, capsys):
    from fixtures_results import instance_file, write_run
    write_run(tmp_path, "some-model", "default", [
        instance_file("some-model", "default", "p1", "consistent", s_counts=(1, 2, 1, 2), score=4)])
    files = R.build_report(tmp_path, n_bootstrap=20)
    items = {gap.item: gap for gap in files.gaps}
    assert "a correlation needs 3" in items["Figure 5"].lacks
    assert any("OTHER_MODEL" in c for c in items["Figure 5"].commands)
    assert "--use_matcher" in items["Table 11 and Figure 4"].commands[0]


# ---------------------------------------------------------------------------------------
# Every environment variable the code reads is documented
# ---------------------------------------------------------------------------------------
def test_every_environment_variable_the_code_reads_is_documented():
    import re
    root = ROOT
    pattern = re.compile(r"""(?:environ\.get\(|getenv\(|_env\w*\s*=\s*|_env\(|_float\(|_int\()\s*["']([A-Z][A-Z0-9_]+)["']""")
    names = set()
    for path in [root / "config.py", *(root / "evaluation").rglob("*.py"), *(root / "synthesis").rglob("*.py"),
                 *(root / "utils").rglob("*.py")]:
        names |= set(pattern.findall(path.read_text(encoding="utf-8")))
    assert {"CUPID_LOCAL_SERVER_URL", "CUPID_REQUEST_TIMEOUT", "OPENAI_API_KEY", "CUPID_EMBEDDED_THREADS"} <= names
    table = (root / "docs" / "models.md").read_text(encoding="utf-8")  # its environment table
    assert sorted(n for n in names if f"`{n}`" not in table) == []
