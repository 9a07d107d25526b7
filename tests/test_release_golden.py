"""Our requests against the released harness's own (kixlab/CUPID@a8560ca), without it.

tests/golden/release/ holds what the release itself sent and shipped, written once by
benchmarks/make_release_golden.py from a copy of the release (never by a test): its prompt
files, its matcher examples, the request bodies of its ``evaluation.run`` on three sample
instances in both matcher modes, and digests of every request of its synthesis for one
persona. Here our own command lines run on the same inputs against the loopback server,
with the same scripted answers, and every request must be the release's.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import yaml

from cupid import config
from fake_llm_server import FakeLLMServer
from release_responder import Script
from synthesis_responder import ScriptedSynthesis, stage_of
from cupid.synthesis.taxonomy import BUNDLED_SEEDS_FILE

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "release"
SAMPLE = ROOT / "data" / "sample"


def golden(name: str) -> dict:
    return json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))


def side_env(server: FakeLLMServer, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.endswith(("_API_KEY", "_BASE_URL")) and k != "GEMINI_PROJECT_ID"}
    env.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", **extra)
    return env


@pytest.mark.parametrize("name", ["prompts", "evaluation_requests", "synthesis_requests"])
def test_golden_files_say_which_release_they_came_from(name):
    data = golden(name)
    assert data["release"]["repository"] == "kixlab/CUPID"
    assert data["release"]["commit"].startswith("a8560ca") and len(data["release"]["commit"]) == 40
    assert data["written_by"].startswith("python benchmarks/make_release_golden.py")


def test_matcher_examples_are_the_releases():
    ours = yaml.safe_load((config.PROMPTS_DIR / "evaluation" / "preference_matcher.yaml")
                          .read_text(encoding="utf-8"))["examples"]
    assert ours == golden("prompts")["matcher_examples"]


def test_golden_prompts_are_what_the_release_checkout_holds(tmp_path):
    """Only where a copy of the release is at hand (CUPID_RELEASE_GIT or CUPID_RELEASE_DIR):
    the committed file is what the script makes from it."""
    if not (os.environ.get("CUPID_RELEASE_GIT") or os.environ.get("CUPID_RELEASE_DIR")):
        pytest.skip("no copy of the release: set CUPID_RELEASE_GIT (a git repository holding "
                    "a8560ca) or CUPID_RELEASE_DIR (a checkout) to check the golden files against it")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import argparse

    from make_release_golden import release_prompts
    from release_checkout import RELEASE_COMMIT, release_checkout

    args = argparse.Namespace(release_git=os.environ.get("CUPID_RELEASE_GIT"),
                              release_dir=None if os.environ.get("CUPID_RELEASE_GIT")
                              else os.environ.get("CUPID_RELEASE_DIR"),
                              release_commit=RELEASE_COMMIT)
    release, commit = release_checkout(args, tmp_path / "release")
    data = golden("prompts")
    assert commit == data["release"]["commit"]
    fresh = release_prompts(release)
    assert fresh == {k: data[k] for k in fresh}


# ---------------------------------------------------------------------------------------
# Evaluation: every request of `python -m evaluation.run`, body for body
# ---------------------------------------------------------------------------------------
EVALUATION = golden("evaluation_requests")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["gpt4o_matcher", "prefmatcher"])
def test_evaluation_requests_are_the_releases(tmp_path, mode):
    data = tmp_path / "data"
    data.mkdir()
    instances = {}
    for name in EVALUATION["instances"]:
        text = (SAMPLE / f"{name}.json").read_text(encoding="utf-8")
        (data / f"{name}.json").write_text(text, encoding="utf-8")
        instances[name] = json.loads(text)
    script = Script(instances, EVALUATION["session_logs"])
    with FakeLLMServer(responder=script) as server:
        # The matcher's name too: the run's pre-flight asks the server for it.
        server.models = [EVALUATION["evaluated"], EVALUATION["evaluator"], "kixlab/prefmatcher-7b"]
        cmd = [sys.executable, "-m", "cupid.evaluation.run", "--results_dir", str(tmp_path / "results"),
               "--model", EVALUATION["evaluated"], "--evaluator", EVALUATION["evaluator"],
               "--data_dir", str(data), "--task", "both", "--no_cache", "--n_workers", "2"]
        if mode == "prefmatcher":
            cmd += ["--use_matcher", "--matcher_url", server.openai_base_url]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                              env=side_env(server, OPENAI_API_KEY="sk-loopback",
                                           OPENAI_BASE_URL=server.openai_base_url))
        assert done.returncode == 0, done.stderr[-3000:]
        assert server.responder_errors == []
        ours: dict[str, list] = defaultdict(list)
        for req in server.requests:
            ours["|".join(script.classify(req))].append(req["body"])
    theirs = EVALUATION["modes"][mode]
    assert sorted(ours) == sorted(theirs)
    for key, bodies in theirs.items():
        assert len(ours[key]) == len(bodies), key
        for mine, release in zip(ours[key], bodies):
            # sort_keys: the SDK's field order is its own; values and types (0 vs 0.0) are ours.
            assert json.dumps(mine, sort_keys=True) == json.dumps(release, sort_keys=True), key


# ---------------------------------------------------------------------------------------
# Synthesis: every request of `python -m synthesis.run` for one persona
# ---------------------------------------------------------------------------------------
def synthesis_key(req: dict) -> str:
    body = req["body"]
    return json.dumps([req["model"], req["system"], req["messages"], body.get("temperature"),
                       body.get("max_tokens", body.get("max_completion_tokens"))],
                      sort_keys=True, ensure_ascii=False)


@pytest.mark.slow
def test_synthesis_requests_are_the_releases(tmp_path):
    expected = golden("synthesis_requests")
    sizes = expected["sizes"]
    with FakeLLMServer(responder=ScriptedSynthesis()) as server:
        cmd = [sys.executable, "-m", "cupid.synthesis.run", "--model", expected["model"],
               "--output_dir", str(tmp_path / "out"), "--persona_seeds", str(BUNDLED_SEEDS_FILE),
               "--n_personas", sizes["n_personas"], "--n_factors", sizes["n_factors"],
               "--n_sessions", sizes["n_sessions"], "--max_turns", sizes["max_turns"],
               "--n_workers", "2", "--no_progress"]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                              env=side_env(server, TOGETHER_API_KEY="loopback",
                                           TOGETHER_BASE_URL=server.openai_base_url))
        assert done.returncode == 0, done.stderr[-3000:]
        requests = server.requests
    by_stage: dict[str, list[dict]] = defaultdict(list)
    for req in requests:
        by_stage[stage_of(req)].append(req)
    assert sorted(by_stage) == sorted(expected["sha256_by_stage"])
    for stage, digests in expected["sha256_by_stage"].items():
        keys = [synthesis_key(r) for r in by_stage[stage]]
        # The release's first request of the stage in full, for a readable difference ...
        release_first = expected["first_request_by_stage"][stage]
        assert release_first in [json.loads(k) for k in keys], stage
        # ... and every request by its digest.
        mine = Counter(hashlib.sha256(k.encode("utf-8")).hexdigest() for k in keys)
        assert mine == Counter(digests), stage
