"""Sweeps (--model A B, --sweep FILE), shards (--shard I/N) and the progress log."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from cupid_responder import CupidResponder, make_row, two_instance_plans
from evaluation import run as run_module
from evaluation.sweep import ProgressLog, parse_shard, shard_of
from fake_llm_server import FakeLLMServer
from test_evaluation_run import assert_expected, cli, read_results


@pytest.fixture
def data_file(tmp_path):
    plans = two_instance_plans()
    rows = [make_row("persona-a", "consistent", plans[0]),
            make_row("persona-b", "contrastive", plans[1], relevant=(2, 3))]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


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
        with pytest.raises(ValueError, match="--shard"):
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
