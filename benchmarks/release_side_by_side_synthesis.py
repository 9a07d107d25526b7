"""Side by side: the released synthesis (kixlab/CUPID@a8560ca) and ours, request for request.

Not part of CI: it needs the release (--release_git, a git repository holding a8560ca, or
--release_dir, a checkout; or CUPID_RELEASE_GIT / CUPID_RELEASE_DIR) and the SDKs it
imports (openai, anthropic, google-genai). Run from the repository root:

    python benchmarks/release_side_by_side_synthesis.py --release_git /path/to/CUPID.git \
        [--n_personas 2] [--max_turns 4]

What runs: one loopback server (tests/support/fake_llm_server.py) answers both sides with the
scripted synthesis responder (tests/support/synthesis_responder.py), which answers from the prompt alone,
so equal requests get equal answers and both sides walk the same path. The release is
extracted with ``git archive`` (or copied) into a temporary directory and driven in its own process
through its own modules (PersonaTemplateSampler, PersonaGenerator, then
``synthesize_data`` per persona, which runs its context-factor, session, decomposer and
interaction modules); its Together client (hard-wired to Together's host) is pointed at the
loopback server. Ours runs as ``python -m synthesis.run``. ``--model`` is a Together-hosted
name by default; a ``gpt-*`` name goes to OpenAI's API on both sides (OPENAI_BASE_URL is the
loopback server, which lists the name, as the release asks for OpenAI's model list at import).
The assistant simulator is the release's fixed Together model on both sides.

What is compared: per stage, the multiset of requests as (model, system prompt, messages,
temperature, max_tokens); the count of identical whole JSON bodies is printed too.

Identical inputs: both sides read the same seed descriptions (our bundled list; PersonaHub
is out of reach, so the release's ``datasets.load_dataset`` is replaced by a function
returning that list). Template sampling: the release seeds Python's global random with 42
and ours draws the same sequence from ``random.Random(42)``. Journey positions: ours draws
them from ``random.Random("42:journey:<persona_id>")``; the release draws them from the
global random in ``synthesis/modules/sessions_generator.py``, which the driver replaces,
before each persona, by a ``random.Random`` seeded the same way. Nothing else is random.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from fake_llm_server import FakeLLMServer  # noqa: E402
from synthesis_responder import ScriptedSynthesis, stage_of  # noqa: E402
from cupid.synthesis.taxonomy import BUNDLED_SEEDS_FILE  # noqa: E402
from release_checkout import add_release_arguments, release_checkout  # noqa: E402

MODEL = "meta-llama/Meta-Llama-3.1-405B-Instruct-Turbo"

DRIVER = r'''
import hashlib, json, random, sys, types
import openai

seeds = [json.loads(line)["input persona"] for line in open(sys.argv[1]) if line.strip()]
model, base_url, out = sys.argv[2], sys.argv[3], sys.argv[4]
n_personas, n_factors, n_sessions, max_turns = map(int, sys.argv[5:9])
datasets = types.ModuleType("datasets")
datasets.load_dataset = lambda *a, **k: {"train": [{"input persona": s} for s in seeds]}
sys.modules["datasets"] = datasets

import utils.generation as generation
generation.together_client = openai.OpenAI(api_key="loopback", base_url=base_url)
from synthesis.modules import PersonaTemplateSampler, PersonaGenerator
import synthesis.modules.sessions_generator as sessions_generator
from synthesis.pipeline.synthesize import synthesize_data

templates = PersonaTemplateSampler()(n_personas, [], random_seed=42)
personas = PersonaGenerator(model_name=model)(templates)
for index, persona in enumerate(personas):
    digest = hashlib.sha256(persona["seed"].encode("utf-8")).hexdigest()[:6]
    sessions_generator.random = random.Random(f"42:journey:persona_{index:04d}_{digest}")
    synthesize_data(model, persona, out, n_factors, n_sessions, max_turns)
'''


def request_key(req: dict) -> str:
    body = req["body"]
    return json.dumps([req["model"], req["system"], req["messages"], body.get("temperature"),
                       body.get("max_tokens", body.get("max_completion_tokens"))], sort_keys=True)


def compare(release: list[dict], ours: list[dict]) -> bool:
    stages = sorted({stage_of(r) for r in release + ours})
    all_identical = True
    print(f"{'stage':<16}{'release':>9}{'ours':>7}{'identical':>11}{'bodies':>8}")
    for stage in stages:
        a = [r for r in release if stage_of(r) == stage]
        b = [r for r in ours if stage_of(r) == stage]
        same = sum((collections.Counter(map(request_key, a)) & collections.Counter(map(request_key, b))).values())
        bodies = sum((collections.Counter(json.dumps(r["body"], sort_keys=True) for r in a)
                      & collections.Counter(json.dumps(r["body"], sort_keys=True) for r in b)).values())
        print(f"{stage:<16}{len(a):>9}{len(b):>7}{same:>6} ({100 * same / max(len(a), len(b), 1):.0f}%){bodies:>6}")
        all_identical &= same == len(a) == len(b)
    return all_identical


def side_env(server: FakeLLMServer, model: str, pythonpath: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(TOGETHER_API_KEY="loopback", TOGETHER_BASE_URL=server.openai_base_url,
               PYTHONPATH=str(pythonpath))
    if model.startswith("gpt-"):
        server.models = [model]
        env.update(OPENAI_API_KEY="loopback", OPENAI_BASE_URL=server.openai_base_url)
    return env


def run_release(release_dir: Path, server: FakeLLMServer, model: str, sizes: list[str],
                out: Path) -> int:
    """The release's synthesis through its own modules; its requests land in server.requests."""
    done = subprocess.run([sys.executable, "-c", DRIVER, str(BUNDLED_SEEDS_FILE), model,
                           server.openai_base_url, str(out), *sizes],
                          cwd=release_dir, env=side_env(server, model, release_dir),
                          capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
    return done.returncode


def run_ours(server: FakeLLMServer, model: str, sizes: list[str], out: Path,
             root: Path = ROOT) -> int:
    """Our `python -m synthesis.run` with the same sizes and seeds."""
    done = subprocess.run([sys.executable, "-m", "cupid.synthesis.run", "--model", model,
                           "--output_dir", str(out), "--persona_seeds", str(BUNDLED_SEEDS_FILE),
                           "--n_personas", sizes[0], "--n_factors", sizes[1],
                           "--n_sessions", sizes[2], "--max_turns", sizes[3],
                           "--n_workers", "2", "--no_progress"],
                          cwd=root, env=side_env(server, model, root), capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
    return done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_release_arguments(parser)
    parser.add_argument("--n_personas", type=int, default=2)
    parser.add_argument("--n_factors", type=int, default=8)
    parser.add_argument("--n_sessions", type=int, default=13)
    parser.add_argument("--max_turns", type=int, default=4)
    parser.add_argument("--model", default=MODEL, help="--model of both sides")
    parser.add_argument("--dump", default=None, help="write both sides' requests to this JSON file")
    args = parser.parse_args()
    sizes = [str(args.n_personas), str(args.n_factors), str(args.n_sessions), str(args.max_turns)]
    with tempfile.TemporaryDirectory(prefix="cupid_release_") as tmp, \
            FakeLLMServer(responder=ScriptedSynthesis()) as server:
        tmp = Path(tmp)
        release_dir, commit = release_checkout(args, tmp / "release")
        if run_release(release_dir, server, args.model, sizes, tmp / "release_out") != 0:
            return 2
        release = list(server.requests)
        if run_ours(server, args.model, sizes, tmp / "ours_out") != 0:
            return 2
        ours = server.requests[len(release):]
        if args.dump:
            Path(args.dump).write_text(json.dumps(
                {"release": release, "ours": ours}, indent=1,
                default=lambda o: o.decode("utf-8", "replace") if isinstance(o, bytes) else str(o)))
    print(f"release kixlab/CUPID@{commit[:7]} vs ours, --model {args.model}, "
          f"{args.n_personas} personas, --max_turns {args.max_turns}")
    return 0 if compare(release, ours) else 1


if __name__ == "__main__":
    sys.exit(main())
