"""The tasks' data: the samples' input is the request our step renders, the task arguments reach
the data loader (a hub revision through the real hub libraries against tests/support/
fake_hub.py, limit, data_dir), and an instance the setting skips or whose strategy raises is
kept, unscored, with its reason."""
from __future__ import annotations

import json
import os

import pytest

from cupid_responder import CupidResponder, two_instance_plans, two_instance_rows
from fake_hub import FakeHub, dataset_card, parquet_bytes
from inspect_runs import clustered_plans, require_inspect, run_inspect, scripted_model, write_clustered_data

require_inspect()

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import list_eval_logs, read_eval_log  # noqa: E402

from cupid.evaluation.data import load_instances  # noqa: E402
from cupid.evaluation.strategies import strategy_named  # noqa: E402
from cupid.evaluation.steps import infer  # noqa: E402
from cupid.evaluation.steps.layouts import format_session_log  # noqa: E402
from cupid.inspect_tasks.samples import sample_of  # noqa: E402

CUPID = "kixlab/CUPID"
HF_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HOME",
                "HF_DATASETS_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_ENDPOINT")


@pytest.fixture
def data(tmp_path):
    return write_clustered_data(tmp_path / "data.jsonl", clustered_plans())


def test_the_input_is_the_request_the_infer_step_renders(data):
    instance = load_instances(data_path=data)[0]
    sample = sample_of("inference", instance, strategy_named("default"))
    system_prompt, user_prompt = infer.ask(format_session_log(instance.prior_interactions),
                                           instance.current_request).render()
    assert [(m.role, m.text) for m in sample.input] == [("system", system_prompt), ("user", user_prompt)]
    assert sample.target == instance.current_contextual_preference
    assert sample.metadata["persona_id"] == instance.persona_id


def test_skipped_and_failed_contexts_are_kept_unscored_with_their_reason(data, tmp_path):
    (tmp_path / "strategy.py").write_text(
        "class Picky:\n"
        "    def render(self, instance):\n"
        "        if 'case C' in instance.current_request or 'case D' in instance.current_request:\n"
        "            raise RuntimeError('no index for this request')\n"
        "        return 'No history.'\n")
    responder = CupidResponder(clustered_plans())

    def run(setting: str):
        (log,) = inspect_eval("cupid/inference", model=scripted_model(responder),
                              model_roles={"grader": scripted_model(responder)},
                              task_args={"data_dir": str(data), "setting": setting},
                              log_dir=str(tmp_path / "logs"), display="none")
        return read_eval_log(log.location)

    oracle, picky = run("oracle"), run(f"{tmp_path / 'strategy.py'}:Picky")
    explanations = {s.id: s.scores["checklist_match"].explanation for s in oracle.samples}
    assert explanations["p3__changing"] == "skipped: no prior session has the current preference"
    assert oracle.results.scores[0].scored_samples == 5
    failed = {s.id: s.scores["checklist_match"].explanation for s in picky.samples if s.metadata["context_error"]}
    assert failed == {"p2__changing": "context failed: RuntimeError: no index for this request",
                      "p2__consistent": "context failed: RuntimeError: no index for this request"}
    assert picky.results.scores[0].scored_samples == 4
    assert responder.calls["infer"] == 5 + 4  # nothing was sent for the others


def test_limit_takes_the_first_instances(data, tmp_path):
    responder = CupidResponder(clustered_plans())
    (log,) = inspect_eval("cupid/inference", model=scripted_model(responder),
                          model_roles={"grader": scripted_model(responder)},
                          task_args={"data_dir": str(data), "limit": 2}, log_dir=str(tmp_path), display="none")
    assert [s.id for s in read_eval_log(log.location).samples] == ["p1__consistent", "p1__contrastive"]


def published(rows: list[dict]) -> dict[str, bytes]:
    return {"README.md": dataset_card({"test": "test.parquet"}), "test.parquet": parquet_bytes(rows),
            ".gitattributes": b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"}


@pytest.mark.slow
def test_a_hub_revision_is_the_data_inspect_evaluates(fake_llm_env, tmp_path):
    """kixlab/CUPID with two commits, the older holding instance A only; -T revision=OLDER."""
    fake_llm_env.responder = CupidResponder(two_instance_plans())
    rows = two_instance_rows()
    hub = FakeHub()
    older = hub.add_dataset(CUPID, published(rows[:1]))
    hub.add_dataset(CUPID, published(rows))
    env = {k: v for k, v in os.environ.items() if k not in HF_VARIABLES}
    with hub:
        env.update(hub.proxy_env(), HF_HOME=str(tmp_path / "hf"), OPENAI_BASE_URL=fake_llm_env.openai_base_url,
                   OPENAI_API_KEY="sk-test")
        run_inspect(["eval", "cupid/inference", "--model", "openai/gpt-4.1-nano-2025-04-14",
                     "-T", f"revision={older}", "--log-dir", str(tmp_path / "logs"), "--display", "none"],
                    tmp_path, env)
    (log,) = map(read_eval_log, list_eval_logs(str(tmp_path / "logs")))
    assert log.eval.metadata["data"]["commit"] == older
    assert [s.id for s in log.samples] == ["persona-a__consistent"]
    metrics = {name: m.value for name, m in log.results.scores[0].metrics.items()}
    assert metrics["precision"] == 0.75 and metrics["recall"] == pytest.approx(1 / 3)  # instance A's
    assert json.loads(json.dumps(log.eval.metadata))["grader"] == "openai/gpt-4o-2024-11-20"
