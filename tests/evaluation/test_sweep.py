"""Sweeps (--model A B, --sweep FILE), shards (--shard I/N) and the progress log."""
from __future__ import annotations

import io
import json

import pytest

from cupid_responder import CupidResponder, two_instance_plans, write_two_instance_data
from cupid.evaluation import run as run_module
from cupid.utils.progress import ProgressLog
from cupid.evaluation.shards import parse_shard, shard_of
from fake_llm_server import FakeLLMServer
from tests.evaluation.test_run import assert_expected, cli, read_results


@pytest.fixture
def data_file(tmp_path):
    return write_two_instance_data(tmp_path / "data.jsonl")


@pytest.fixture
def server():
    with FakeLLMServer(responder=CupidResponder(two_instance_plans())) as srv:
        yield srv


def test_shards_are_stable_and_partition_the_ids():
    ids = [f"persona-{i}__consistent" for i in range(300)]
    shards = [shard_of(i, 4) for i in ids]
    assert shards == [shard_of(i, 4) for i in ids]  # the same on every machine
    assert set(shards) == {1, 2, 3, 4}
    assert all(40 < shards.count(k) < 110 for k in range(1, 5))
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "a/b", "3"):
        with pytest.raises(ValueError, match="expected I/N"):
            parse_shard(bad)


def test_shards_in_one_directory_aggregate_to_the_single_run(server, data_file, tmp_path):
    assert run_module.main(cli(server, data_file, tmp_path / "single", "--task", "both")) == 0
    single = read_results(tmp_path / "single")
    shared = tmp_path / "shared"
    for shard in ("1/2", "2/2"):
        assert run_module.main(cli(server, data_file, shared, "--task", "both", "--shard", shard)) == 0
    # results.json aggregates every instance file in the directory: after the last shard
    # it holds the single run's numbers.
    after_shards = read_results(shared)
    for key in ("inference", "inference_macro", "generation", "by_instance_type"):
        assert after_shards[key] == single[key], key
    before = len(server.requests)
    # A run without --shard over the shared directory reads every finished instance back.
    assert run_module.main(cli(server, data_file, shared, "--task", "both")) == 0
    assert len(server.requests) == before
    combined = read_results(shared)
    assert_expected(combined)
    for key in ("inference", "inference_macro", "generation", "by_instance_type", "counts"):
        assert combined[key] == single[key], key


def test_sweep_of_two_models_one_table(server, data_file, tmp_path, capsys):
    args = cli(server, data_file, tmp_path / "res", "--task", "both")
    url = server.openai_base_url
    args[1] = f"vllm:test-model@{url}"
    args.insert(2, f"vllm:other-model@{url}")
    assert run_module.main(args) == 0
    assert_expected(read_results(tmp_path / "res"))
    other = read_results(tmp_path / "res", model="other-model")
    assert other["counts"]["instances"] == 2
    # The shared evaluator's usage is counted per run, not summed over the sweep; the
    # second model infers the same preferences, so its evaluator calls come from the cache.
    assert read_results(tmp_path / "res")["usage"]["this_invocation"]["evaluator"]["calls"] == 8
    second = other["usage"]["this_invocation"]["evaluator"]
    assert (second["calls"], second["cache_hits"]) == (0, 8)
    out = capsys.readouterr().out
    assert "sweep: 2 runs" in out
    table = out[out.index("sweep: 2 runs"):]
    assert "test-model" in table and "other-model" in table and "0.545" in table


def test_sweep_file(server, data_file, tmp_path, capsys):
    url = server.openai_base_url
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"models: ['vllm:test-model@{url}']\nsettings: [default, oracle]\n"
                     f"task: both\nruns:\n  - {{model: 'vllm:other-model@{url}', task: inference}}\n")
    args = ["--sweep", str(sweep), "--evaluator", f"vllm:test-evaluator@{url}",
            "--data", str(data_file), "--results_dir", str(tmp_path / "res"), "--n_workers", "2"]
    assert run_module.main(args) == 0
    assert_expected(read_results(tmp_path / "res"))
    assert read_results(tmp_path / "res", setting="oracle")["settings"]["setting"] == "oracle"
    assert read_results(tmp_path / "res", model="other-model")["settings"]["task"] == "inference"
    assert "sweep: 3 runs" in capsys.readouterr().out

    sweep.write_text("models: [a]\ntemprature: 0\n")
    assert run_module.main(args) == 2
    err = capsys.readouterr().err
    assert str(sweep) in err and "temprature" in err


def test_progress_log_lines():
    now = [0.0]
    out = io.StringIO()
    progress = ProgressLog(10, 4, "m [default]", out=out, clock=lambda: now[0])
    for i in range(10):
        now[0] += 6.0
        progress.add(failed=i == 1)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3  # at 4, 8 and the end
    assert lines[0] == ("progress m [default]: 4/10 instances (40%), 1 failed, 10.0/min, "
                        "elapsed 0:00:24, ETA 0:00:36")
    assert lines[-1].startswith("progress m [default]: 10/10 instances (100%)")


@pytest.mark.parametrize("body, named", [
    ("models: [m]\nsettings: [default, orcale]\n", "settings: unknown 'orcale' (did you mean 'oracle'?)"),
    ("models: [m]\ntask: bogus\n", "task: expected one of inference, generation, both, interaction, got 'bogus'"),
    ("models: [m]\nlimit: 0\n", "limit: expected a whole number of at least 1, got 0"),
    ("models: [m]\nshard: 5/3\n", "shard: '5/3': expected I/N"),
    ("models: [m]\nn_workers: \"eight\"\n", "n_workers: expected a whole number of at least 1, got 'eight'"),
    ("models: [m]\nn_workers: 0\n", "n_workers: expected a whole number"),
    ("models: [m]\ntimeout: -1\n", "timeout: expected a number above 0, got -1"),
    ("models: [m]\nmodel_args: temperature=hot\n", "model_args: temperature: expected a temperature"),
    ("models: [m]\nmodel_args: {temperature: 5}\n", "model_args: temperature: expected a temperature"),
    ("models: [m]\nbatch: 'yes'\n", "batch: expected true or false"),
    ("models: [m]\nbatch: true\nno_cache: true\n", "drop no_cache"),
    ("models: [m]\nsetting: oracle\nsettings: [default]\n", "give 'setting' or 'settings', not both"),
    ("runs:\n  - {model: m}\n  - {model: m, limit: 0}\n", "runs #2: limit: expected a whole number"),
    ("runs:\n  - {model: m, n_worker: 2}\n", "runs #1: unknown option 'n_worker' (did you mean 'n_workers'?)"),
    ("runs:\n  - {model: [a, b]}\n", "runs #1: model: one model per run"),
    ("runs:\n  - {model: m, setting: oracle_preference}\n", "runs #1: setting oracle_preference applies"),
    ("runs: 3\n", "runs: expected a list of runs"),
    ("models: [m]\nsweep: other.yaml\n", "sweep: a sweep file cannot name another"),
    ("models: [m\n", "cannot read the sweep file"),
])
def test_sweep_file_values_are_checked_as_evaluate_checks_them(tmp_path, capsys, body, named):
    """Each bad value is one line naming the file, the run and the key, exit 2, before
    anything is read or written."""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(body)
    assert run_module.main(["--sweep", str(sweep), "--data_dir", "data/sample",
                            "--results_dir", str(tmp_path / "res")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {sweep}: "), err
    assert named in err
    assert not (tmp_path / "res").exists()


def test_sweep_file_values_are_honoured(tmp_path):
    from cupid.evaluation.run import build_parser
    from cupid.evaluation.sweep import sweep_runs

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("models: [a, b]\nsetting: summary\nmodel_args: temperature=0.2\nlimit: 3\n"
                     "batch: true\nrate_limit: tpm=1000\nruns:\n"
                     "  - {model: c, settings: [default, oracle], model_args: {max_tokens: 64}, n_workers: 8}\n"
                     "  - {model: d}\n")
    parser = build_parser()
    args = parser.parse_args(["--sweep", str(sweep), "--timeout", "7", "--rate_limit", "rpm=5"])
    runs = sweep_runs(args, parser)
    got = [(r["model"], r["setting"], r["model_args"], r["limit"], r["n_workers"], r["timeout"], r["batch"],
            r["rate_limit"]) for r in runs]
    common = ({"temperature": 0.2}, 3)
    assert got == [
        ("a", "summary", *common, 4, 7.0, True, ["tpm=1000"]),
        ("b", "summary", *common, 4, 7.0, True, ["tpm=1000"]),
        ("c", "default", {"max_tokens": 64}, 3, 8, 7.0, True, ["tpm=1000"]),
        ("c", "oracle", {"max_tokens": 64}, 3, 8, 7.0, True, ["tpm=1000"]),
        ("d", "summary", *common, 4, 7.0, True, ["tpm=1000"]),
    ]
    assert args.rate_limit == ["rpm=5"]  # the command line's own list is left alone
    assert not any("settings" in r for r in runs)


def test_sweep_file_model_args_run(server, data_file, tmp_path):
    """``model_args: temperature=0.2`` (a traceback before) runs, in its own directory."""
    url = server.openai_base_url
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"models: ['vllm:test-model@{url}']\nmodel_args: temperature=0.2\n")
    assert run_module.main(["--sweep", str(sweep), "--evaluator", f"vllm:test-evaluator@{url}",
                            "--data", str(data_file), "--results_dir", str(tmp_path / "res"),
                            "--n_workers", "2"]) == 0
    (run_dir,) = [p for p in (tmp_path / "res").iterdir() if p.name.startswith("test-model_temperature")]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["settings"]["generation_overrides"] == {"model": {"temperature": 0.2}}
    infer = [r for r in server.requests if r["model"] == "test-model"]
    assert infer and all(r["body"]["temperature"] == 0.2 for r in infer)
