"""Golden files from the released harness itself, for the tests that CI runs without it.

Runs the release (kixlab/CUPID at a8560ca) against the loopback server and writes to
tests/golden/release/:

- prompts.json: the text of every prompt file of the release, its eight matcher examples
  and its 114 occupation tokens (read from its source with ``ast``, nothing executed);
- evaluation_requests.json: every request body the release's ``python -m evaluation.run``
  sends for the instances of --data_dir, in both matcher modes, keyed by (step, instance,
  direction) with the scripted answers of tests/support/release_responder.py;
- parsers.json: what the release's own parsers (PreferenceInferrer.process_output,
  parse_json, match_label_to_score, ResponseJudger.process_output and
  process_generation_result) make of every answer of tests/evaluation/test_release_parsing.py;
- synthesis_requests.json: every request the release's synthesis sends for one persona
  (its own modules driven as in benchmarks/release_side_by_side_synthesis.py): per stage,
  the SHA-256 of each request's (model, system, messages, temperature, max_tokens) and the
  first request of each stage in full.

Each file records the release commit it came from and the command that wrote it. The tests
(tests/test_release_golden.py, tests/evaluation/test_prompts.py, tests/synthesis/test_units.py)
compare what this project sends with these files; they never rewrite them.

    python benchmarks/make_release_golden.py --release_git /path/to/CUPID.git
    CUPID_RELEASE_DIR=/path/to/CUPID python benchmarks/make_release_golden.py

Not run in CI (the release is not part of this repository). Only 127.0.0.1 is used.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]

from fake_llm_server import FakeLLMServer  # noqa: E402
from release_checkout import RELEASE_REPOSITORY, add_release_arguments, release_checkout  # noqa: E402
from release_responder import Script  # noqa: E402
import release_side_by_side as evaluation_side  # noqa: E402
import release_side_by_side_synthesis as synthesis_side  # noqa: E402
from synthesis_responder import ScriptedSynthesis, stage_of  # noqa: E402

GOLDEN_DIR = ROOT / "tests" / "golden" / "release"
DATA_DIR = ROOT / "data" / "sample"
INSTANCES = ("sample-02-noor-haddad__consistent", "sample-02-noor-haddad__changing",
             "sample-02-noor-haddad__contrastive")
# One persona, the release's 8 factors and 13 sessions, short dialogues: every stage and
# both simulators' multi-turn layouts, in a file small enough to review.
SYNTHESIS_SIZES = ["1", "8", "13", "3"]


def literal(source: str, name: str):
    """The value of a top-level ``NAME = <literal>`` in a release source file."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit(f"the release has no {name}")


def header(commit: str, args: argparse.Namespace) -> dict:
    source = "--release_git GIT_DIR" if args.release_git else "--release_dir CHECKOUT"
    return {"release": {"repository": RELEASE_REPOSITORY, "commit": commit},
            "written_by": f"python benchmarks/make_release_golden.py {source}"}


def release_prompts(release: Path) -> dict:
    files = {str(p.relative_to(release)): p.read_text(encoding="utf-8")
             for p in sorted((release / "prompts").rglob("*.yaml"))}
    matcher = (release / "evaluation" / "modules" / "preference_matcher.py").read_text(encoding="utf-8")
    sampler = (release / "synthesis" / "modules" / "persona_template_sampler.py").read_text(encoding="utf-8")
    return {"prompt_files": files, "matcher_examples": literal(matcher, "EXAMPLES"),
            "occupation_tokens": literal(sampler, "COMMON_OCCUPATION_TOKENS")}


def evaluation_requests(release: Path, work: Path) -> dict:
    data = work / "data"
    data.mkdir()
    instances = {}
    for name in INSTANCES:
        instances[name] = json.loads((DATA_DIR / f"{name}.json").read_text(encoding="utf-8"))
        shutil.copy(DATA_DIR / f"{name}.json", data / f"{name}.json")
    logs = evaluation_side.release_session_logs(release, instances)
    out: dict = {"evaluated": evaluation_side.EVALUATED, "evaluator": evaluation_side.EVALUATOR,
                 "instances": list(INSTANCES), "session_logs": logs, "modes": {}}
    with FakeLLMServer() as server:
        server.models = [evaluation_side.EVALUATED, evaluation_side.EVALUATOR]
        server.responder = script = Script(instances, logs)
        config = release / "config.py"
        text = config.read_text()
        patched = re.sub(r'VLLM_HOST = "[^"]*"', f'VLLM_HOST = "{server.base_url}"', text)
        if patched == text:
            raise SystemExit(f"{config}: no VLLM_HOST line to point at the loopback server")
        config.write_text(patched)
        for use_matcher in (False, True):
            start = len(server.requests)
            evaluation_side.run_release(release, server, data, work, use_matcher)
            bodies: dict[str, list] = defaultdict(list)
            for key, reqs in sorted(evaluation_side.collect(server, script, start).items()):
                bodies["|".join(key)] = [r["body"] for r in reqs]
            if not bodies:
                raise SystemExit("the release sent no request: see the output above")
            out["modes"]["prefmatcher" if use_matcher else "gpt4o_matcher"] = bodies
        if server.responder_errors:
            raise SystemExit(f"the scripted answers failed: {server.responder_errors[:3]}")
    return out


def parser_results(release: Path) -> dict:
    """The release's parsers, run inside its checkout, on every documented answer."""
    from tests.evaluation.test_release_parsing import CASES

    cases = [(step, answer, False) for step, answer, *_ in CASES]
    with FakeLLMServer() as server:
        server.models = [evaluation_side.EVALUATED, evaluation_side.EVALUATOR]
        done = subprocess.run([sys.executable, "-c", evaluation_side.RELEASE_PARSERS], cwd=release,
                              env=evaluation_side.side_env(server, release), input=json.dumps(cases),
                              capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the release's parsers did not run: {done.stderr[-2000:]}")
    results = json.loads(done.stdout.strip().splitlines()[-1])
    return {"results": [{"step": step, "answer": answer, "release": result}
                        for (step, answer, _), result in zip(cases, results)]}


def synthesis_key(req: dict) -> str:
    """What the synthesis comparison holds equal: the request's model, prompts and sampling."""
    body = req["body"]
    return json.dumps([req["model"], req["system"], req["messages"], body.get("temperature"),
                       body.get("max_tokens", body.get("max_completion_tokens"))],
                      sort_keys=True, ensure_ascii=False)


def synthesis_digest(req: dict) -> str:
    return hashlib.sha256(synthesis_key(req).encode("utf-8")).hexdigest()


def synthesis_requests(release: Path, work: Path) -> dict:
    with FakeLLMServer(responder=ScriptedSynthesis()) as server:
        if synthesis_side.run_release(release, server, synthesis_side.MODEL, SYNTHESIS_SIZES,
                                      work / "synthesis_out") != 0:
            raise SystemExit("the release's synthesis failed: see the output above")
        requests = list(server.requests)
    stages: dict[str, list[str]] = defaultdict(list)
    first: dict[str, dict] = {}
    for req in requests:
        stage = stage_of(req)
        stages[stage].append(synthesis_digest(req))
        first.setdefault(stage, json.loads(synthesis_key(req)))
    return {"model": synthesis_side.MODEL, "sizes": dict(zip(
                ["n_personas", "n_factors", "n_sessions", "max_turns"], SYNTHESIS_SIZES)),
            "sha256_by_stage": {s: sorted(d) for s, d in sorted(stages.items())},
            "first_request_by_stage": dict(sorted(first.items()))}


def write(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KiB)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_release_arguments(p)
    p.add_argument("--out", default=str(GOLDEN_DIR), help=f"default: {GOLDEN_DIR.relative_to(ROOT)}")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cupid-release-golden-") as tmp:
        work = Path(tmp)
        release, commit = release_checkout(args, work / "release")
        write(out / "prompts.json", header(commit, args) | release_prompts(release))
        write(out / "parsers.json", header(commit, args) | parser_results(release))
        write(out / "evaluation_requests.json", header(commit, args) | evaluation_requests(release, work))
        write(out / "synthesis_requests.json", header(commit, args) | synthesis_requests(release, work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
