"""The synthesis scheduler's ordering: the task with the longest chain of calls ahead first.

Orders are pinned with one worker (tasks then run one at a time, in key order), not timed.
"""
from __future__ import annotations

from collections import Counter

import pytest

from cupid.synthesis.dialogues import MESSAGE_HEADER
from cupid.synthesis.pipeline import DIALOGUES_PER_WORKER, SynthesisConfig, run_synthesis
from cupid.synthesis.scheduler import Continue, CriticalPathFirst, TaskRunner
from synthesis_responder import ScriptedSynthesis, stage_of
from cupid.utils.io import read_json


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


def test_a_window_holds_the_chains_of_its_kind_beyond_its_size():
    runner = TaskRunner(1, windows={"chat": 2})
    started: list[str] = []

    def chat(name: str, made: int) -> Continue | None:
        started.append(f"{name}{made}")
        if made + 1 < 3:
            return Continue((made + 1 - 3,), chat, (name, made + 1))
        return None

    for name in "abc":
        runner.submit((-3,), chat, name, 0, kind="chat")
    runner.submit((5,), started.append, "other")  # a kind without a window is never held
    runner.run()
    # c starts when a ends, and then goes before b, which has fewer calls ahead.
    assert started == ["a0", "b0", "a1", "b1", "a2", "c0", "c1", "b2", "c2", "other"]


def test_an_error_stops_the_run_and_drops_the_continuations_and_held_tasks():
    runner = TaskRunner(1, windows={"chat": 1})
    started: list[str] = []

    def step(made: int) -> Continue:
        started.append(f"step{made}")
        return Continue((made + 1,), step, (made + 1,))

    def broken() -> None:
        started.append("broken")
        raise RuntimeError("a bug")

    runner.submit((0,), step, 0, kind="chat")
    runner.submit((0,), started.append, "held", kind="chat")
    runner.submit((1.5,), broken)
    with pytest.raises(RuntimeError, match="a bug"):
        runner.run()
    assert started == ["step0", "step1", "broken"]


def test_one_worker_runs_upstream_stages_first_then_the_dialogues_in_flight_call_by_call(fake_server, tmp_path):
    """With one worker the requests arrive in scheduling order: each stage's calls before the
    next stage's, then the dialogues: DIALOGUES_PER_WORKER of them in flight, each call from
    one that has made the fewest calls (a dialogue's call with n messages is its n-th)."""
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

    calls = {}  # a dialogue's request -> its number of calls
    for path in (tmp_path / "out").glob("personas/*/dialogues/*.json"):
        dialogue = read_json(path)
        calls[dialogue["dialogue"][0]["content"].strip()] = dialogue["n_turns"] - 1
    assert len(calls) == 24 and max(calls.values()) == 6 and min(calls.values()) == 2
    made: Counter = Counter()
    in_flight: set[str] = set()
    widest = 0
    for req in fake_server.requests[n_upstream:]:
        request = req["messages"][0]["content"].split(MESSAGE_HEADER)[-1].strip()
        assert made[request] == len(req["messages"]) - 1
        in_flight.add(request)
        assert made[request] == min(made[r] for r in in_flight)
        widest = max(widest, len(in_flight))
        made[request] += 1
        if made[request] == calls[request]:
            in_flight.remove(request)
    assert widest == DIALOGUES_PER_WORKER and made == calls
