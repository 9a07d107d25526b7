"""The synthesis scheduler's ordering: the task with the longest chain of calls ahead first.

Orders are pinned with one worker (tasks then run one at a time, in key order), not timed.
"""
from __future__ import annotations

import pytest

from synthesis.pipeline import SynthesisConfig, run_synthesis
from synthesis.scheduler import Continue, CriticalPathFirst, TaskRunner
from synthesis_responder import ScriptedSynthesis, stage_of


def test_keys_count_the_calls_ahead_to_the_end_of_the_chain():
    keys = CriticalPathFirst([("setup", 0), ("draft", 1), ("chat", 5), ("pack", 0)])
    assert keys.key("setup") == (-6, 0)
    assert keys.key("draft") == (-6, 1)       # a tie: the earlier stage first
    assert keys.key("chat") == (-5, 2)
    assert keys.key("chat", calls_made=3) == (-2, 2)
    assert keys.key("pack") == (0, 3)
    assert sorted([keys.key("chat", 1), keys.key("pack"), keys.key("draft"), keys.key("setup")]) == \
        [keys.key("setup"), keys.key("draft"), keys.key("chat", 1), keys.key("pack")]


def test_a_continued_task_waits_behind_the_tasks_with_more_calls_ahead():
    runner = TaskRunner(1)
    started: list[str] = []

    def chat(name: str, made: int, length: int) -> Continue | None:
        started.append(f"{name}{made}")
        if made + 1 < length:
            return Continue((made + 1 - length,), chat, (name, made + 1, length))
        return None

    def unlock() -> None:
        started.append("unlock")
        runner.submit((-9,), chat, "c", 0, 2)  # submitted mid-run, still ahead of the others

    runner.submit((-3,), chat, "a", 0, 3)
    runner.submit((-3,), chat, "b", 0, 3)
    runner.submit((-10,), unlock)
    runner.run()
    # c1 has one call ahead, a1 and b1 two: the dialogues go on in rounds.
    assert started == ["unlock", "c0", "a0", "b0", "a1", "b1", "c1", "a2", "b2"]


def test_an_error_stops_the_run_and_drops_the_continuations():
    runner = TaskRunner(1)
    started: list[str] = []

    def step(made: int) -> Continue:
        started.append(f"step{made}")
        return Continue((made + 1,), step, (made + 1,))

    def broken() -> None:
        started.append("broken")
        raise RuntimeError("a bug")

    runner.submit((0,), step, 0)
    runner.submit((1.5,), broken)
    with pytest.raises(RuntimeError, match="a bug"):
        runner.run()
    assert started == ["step0", "step1", "broken"]


def test_one_worker_runs_upstream_stages_first_then_every_dialogue_call_by_call(fake_server, tmp_path):
    """With one worker the requests arrive in scheduling order: each stage's calls before the
    next stage's, then the dialogues in rounds: every dialogue's first call, then every
    second call, ... (a dialogue's call that has n messages is its n-th call)."""
    fake_server.responder = ScriptedSynthesis(max_rounds=3)
    url = fake_server.openai_base_url
    cfg = SynthesisConfig(output_dir=tmp_path / "out", n_personas=2, persona_seeds="bundled", n_workers=1,
                          show_progress=False, model=f"vllm:synth@{url}", user_model=f"vllm:user@{url}",
                          assistant_model=f"vllm:assistant@{url}", decomposer_model=f"vllm:decomposer@{url}")
    summary = run_synthesis(cfg)
    assert summary["counts"]["dialogues"] == 24 and summary["failures"] == []

    stages = [stage_of(req) for req in fake_server.requests]
    upstream = ["descriptions", "factors", "sessions", "decompose"]
    n_upstream = sum(stage in upstream for stage in stages)
    assert [upstream.index(s) for s in stages[:n_upstream]] == sorted(upstream.index(s) for s in stages[:n_upstream])
    assert set(stages[n_upstream:]) == {"assistant", "user_simulator"}

    calls_made = [len(req["messages"]) - 1 for req in fake_server.requests[n_upstream:]]
    assert calls_made == sorted(calls_made)
    assert calls_made.count(0) == 24                  # every dialogue started before any went on
    assert max(calls_made) == 5                       # the longest dialogues: 6 calls (3 rounds)
