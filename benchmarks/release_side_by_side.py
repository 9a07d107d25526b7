"""The released harness and ours, side by side: are their requests identical?

Runs the release (kixlab/CUPID at a8560ca) and this project on the same instances against
one loopback server that records every request and answers both with the same scripted
answers, then prints per step how many of the release's requests ours sent byte for byte
(the JSON body: model, messages, temperature, token limit, any other field).

    python benchmarks/release_side_by_side.py --release_git /path/to/CUPID.git   # data/sample
    python benchmarks/release_side_by_side.py --release_dir /path/to/CUPID --use_matcher
    python benchmarks/release_side_by_side.py --release_dir /path/to/CUPID --workers 1 8 32  # speed
    CUPID_RELEASE_DIR=/path/to/CUPID python benchmarks/release_side_by_side.py

Needs the release's imports (openai, anthropic, google-genai, datasets, pyyaml: all in our
requirements.txt). Not run in CI: the release is not ours to ship. Only 127.0.0.1 is used.

How it runs the release: from a copy (``git archive`` of --release_git at a8560ca, or
--release_dir copied; see benchmarks/release_checkout.py) whose config.py has VLLM_HOST pointed at the loopback server (the release reads
the PrefMatcher server's address from there, not from the environment); OPENAI_BASE_URL
points its OpenAI client at the server, whose model list holds the evaluated model and the
evaluator (the release routes a model by that list). Nothing else of the release changes.

Requests are matched to (step, instance, direction) by their content: the step by the
system prompt, the instance by the current request or by the scripted inferred
preference, which names its instance.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from fake_llm_server import FakeLLMServer  # noqa: E402
from release_responder import Script  # noqa: E402
from release_checkout import add_release_arguments, release_checkout  # noqa: E402

EVALUATED = "gpt-4.1-nano-2025-04-14"
EVALUATOR = "gpt-4o-2024-11-20"
PREFMATCHER = "kixlab/prefmatcher-7b"

# ---------------------------------------------------------------------------------------
# The two runs
# ---------------------------------------------------------------------------------------
def prepare_release(args: argparse.Namespace, work: Path, server_url: str) -> tuple[Path, str]:
    """The release's checkout (and its commit), its PrefMatcher address the loopback server."""
    target, commit = release_checkout(args, work / "release")
    config = target / "config.py"
    text = config.read_text()
    patched = re.sub(r'VLLM_HOST = "[^"]*"', f'VLLM_HOST = "{server_url}"', text)
    if patched == text:
        raise SystemExit(f"{config}: no VLLM_HOST line to point at the loopback server")
    config.write_text(patched)
    return target, commit


def release_session_logs(release_root: Path, instances: dict[str, dict]) -> dict[str, str]:
    """Each instance's session log as the release's own utils/formatting.py writes it
    (loaded from its file alone: the utils package would make API clients at import)."""
    spec = importlib.util.spec_from_file_location("release_formatting",
                                                  release_root / "utils" / "formatting.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: module.format_interaction_log(row["prior_interactions"])
            for name, row in instances.items()}


# Runs inside the release's directory: its own parsers on each answer.
RELEASE_PARSERS = r'''
import json, sys
from evaluation.modules.preference_inferrer import PreferenceInferrer
from evaluation.modules.response_judger import ResponseJudger
from evaluation.pipeline.result import process_generation_result, match_label_to_score
from utils import parse_json
out = []
for step, answer, prefmatcher in json.load(sys.stdin):
    answer = answer.strip()  # the release's models and Generator strip every answer
    try:
        if step == "infer":
            value = PreferenceInferrer.process_output(None, answer)
        elif step == "decompose":
            value = parse_json(answer)["checklist"]
        elif step == "match":
            matches = parse_json(answer)
            results = matches if prefmatcher else matches["results"]
            value = float(sum(match_label_to_score(r["label"]) for r in results))
        else:
            try:
                _, score = ResponseJudger.process_output(None, answer)
            except Exception:
                score = 0  # evaluate() records a failed judgement as score 0
            value = float(process_generation_result({"alignment": {"score": score}})["score"])
        out.append(["ok", value])
    except Exception as exc:
        out.append(["raises", type(exc).__name__])
print(json.dumps(out))
'''


def check_parsers(release_root: Path, env: dict) -> tuple[int, int, list[str]]:
    """The release's own parsers against our account of them (evaluation/release.py)
    on every documented case of tests/evaluation/test_release_parsing.py."""
    sys.path.insert(0, str(ROOT))
    from cupid.evaluation import release
    from tests.evaluation.test_release_parsing import CASES

    cases = [(step, answer, False) for step, answer, *_ in CASES]
    done = subprocess.run([sys.executable, "-c", RELEASE_PARSERS], cwd=release_root, env=env,
                          input=json.dumps(cases), capture_output=True, text=True)
    if done.returncode != 0:
        return 0, len(cases), [f"the release's parsers did not run: {done.stderr[-500:]}"]
    actual = json.loads(done.stdout.strip().splitlines()[-1])
    agree, notes = 0, []
    for (step, answer, _), (status, value) in zip(cases, actual):
        try:
            expected = ["ok", {"infer": release.release_preference, "decompose": release.release_checklist,
                               "match": lambda a: release.release_matched(release.release_match_results(a, False)),
                               "judge": release.release_judge_score}[step](answer)]
        except release.ReleaseFailure:
            expected = ["raises"]
        if expected[0] == status and (status == "raises" or expected[1] == value):
            agree += 1
        else:
            notes.append(f"{step} {answer[:60]!r}: release {status} {value!r}, our account {expected}")
    return agree, len(cases), notes


def run(cmd: list[str], cwd: Path, env: dict, label: str, log: Path) -> float:
    started = time.perf_counter()
    with open(log, "w") as out:
        done = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        print(f"{label} exited {done.returncode}; its output is in {log}:", file=sys.stderr)
        print(log.read_text()[-3000:], file=sys.stderr)
    return seconds


def run_release(release_root: Path, server: FakeLLMServer, data: Path, work: Path,
                use_matcher: bool, workers: int = 1, tag: str = "") -> float:
    """The release's own `python -m evaluation.run` over ``data``; returns its seconds.
    The server lists the two OpenAI models only: the release sends a listed name through
    OpenAI's client, the PrefMatcher's too."""
    server.models = [EVALUATED, EVALUATOR]
    cmd = [sys.executable, "-m", "evaluation.run", "--results_dir", str(work / f"r-release-{use_matcher}{tag}"),
           "--model", EVALUATED, "--evaluator", EVALUATOR, "--data_dir", str(data),
           "--task", "both", "--log_file", str(work / f"release-{use_matcher}.log"),
           "--n_workers", str(workers)]
    return run(cmd + (["--use_matcher"] if use_matcher else []), release_root,
               side_env(server, release_root), "the release", work / f"release-{use_matcher}.out")


def run_ours(server: FakeLLMServer, data: Path, work: Path, use_matcher: bool, workers: int = 2,
             tag: str = "") -> float:
    server.models = [EVALUATED, EVALUATOR, PREFMATCHER]  # our pre-flight asks for the matcher's name
    cmd = [sys.executable, "-m", "cupid.evaluation.run", "--results_dir", str(work / f"r-ours-{use_matcher}{tag}"),
           "--model", EVALUATED, "--evaluator", EVALUATOR, "--data_dir", str(data),
           "--task", "both", "--no_cache", "--n_workers", str(workers)]
    if use_matcher:
        cmd += ["--use_matcher", "--matcher_url", server.openai_base_url]
    return run(cmd, ROOT, side_env(server, ROOT), "ours", work / f"ours-{use_matcher}.out")


def print_speed(args: argparse.Namespace, release_root: Path, server: FakeLLMServer, data: Path,
                work: Path) -> None:
    """Both harnesses' wall time over the same instances at the same --n_workers, each answer
    delayed by --latency (a hosted API's latency, where the harness's own overhead shows).
    The instances are copied --copies times, so that many workers have work."""
    copies = work / "data-copies"
    copies.mkdir()
    for path in data.glob("*.json"):
        row = json.loads(path.read_text())
        for k in range(args.copies):  # a copy is another persona's instance to ours
            copy = {**row, "persona_id": f"{row['persona_id']}-copy{k}"}
            (copies / f"{path.stem}-copy{k}.json").write_text(json.dumps(copy))
    server.latency = args.latency
    print(f"\nspeed, {args.copies} x {len(list(data.glob('*.json')))} instances, "
          f"{args.latency * 1000:.0f} ms per answer (GPT-4o matcher):")
    for workers in args.workers:
        theirs = run_release(release_root, server, copies, work, False, workers, tag=f"-w{workers}")
        mine = run_ours(server, copies, work, False, workers, tag=f"-w{workers}")
        print(f"  {workers:>3} workers: the release {theirs:6.1f} s, ours {mine:6.1f} s: "
              f"{theirs / mine:.1f}x the release's speed")
    server.latency = 0.0


def side_env(server: FakeLLMServer, pythonpath: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.endswith(("_API_KEY", "_BASE_URL")) and k not in ("GEMINI_PROJECT_ID",)}
    env.update(OPENAI_API_KEY="sk-loopback", OPENAI_BASE_URL=server.openai_base_url,
               PYTHONPATH=str(pythonpath), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    return env


def collect(server: FakeLLMServer, script: Script, since: int) -> dict:
    by_key: dict[tuple, list[dict]] = defaultdict(list)
    for req in server.requests[since:]:
        by_key[script.classify(req)].append(req)
    return by_key


def compare(release: dict, ours: dict) -> tuple[dict, list[str]]:
    """Per step: [identical, release requests]; and the first differences found."""
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    notes: list[str] = []
    for key in sorted(set(release) | set(ours)):
        step = key[0] + (f" ({key[2]})" if key[2] else "")
        theirs, mine = release.get(key, []), ours.get(key, [])
        table[step][1] += len(theirs)
        if len(mine) != len(theirs):
            notes.append(f"{step} {key[1]}: release sent {len(theirs)}, ours {len(mine)}")
        for a, b in zip(theirs, mine):
            if a["body_bytes"] == b["body_bytes"]:
                table[step][0] += 1
            elif len(notes) < 12:
                notes.append(f"{step} {key[1]}: {first_difference(a['body'], b['body'])}")
    return table, notes


def first_difference(a: dict, b: dict) -> str:
    if list(a) != list(b):
        return f"fields {list(a)} vs {list(b)}"
    for field in a:
        if json.dumps(a[field]) != json.dumps(b[field]):
            x, y = json.dumps(a[field]), json.dumps(b[field])
            i = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            return f"{field} differs at {i}: release …{x[max(0, i - 60):i + 60]!r}… ours …{y[max(0, i - 60):i + 60]!r}…"
    return "same JSON, other bytes (key order or number format)"


def compare_metrics(release_dir: Path, ours_dir: Path) -> str:
    """The two results.json's released fields, side by side."""
    try:
        theirs = json.loads((release_dir / "results.json").read_text())
        mine = json.loads((ours_dir / "results.json").read_text())
    except (OSError, ValueError) as exc:
        return f"not comparable ({exc})"
    fields = [("inference", k) for k in ("precision", "recall", "f1")] + [("generation", "average_score")]
    pairs = [(f"{block}.{key}", theirs.get(block, {}).get(key), mine.get(block, {}).get(key))
             for block, key in fields]
    same = all(a is not None and b is not None and abs(a - b) < 1e-12 for _, a, b in pairs)
    return ("identical" if same else "DIFFERENT") + " (" + ", ".join(
        f"{name} {a:.4f}/{b:.4f}" if a is not None and b is not None else f"{name} {a}/{b}"
        for name, a, b in pairs) + "; release/ours)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data_dir", default=str(ROOT / "data" / "sample"))
    add_release_arguments(p)
    p.add_argument("--use_matcher", action="store_true", help="also compare PrefMatcher mode")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    p.add_argument("--workers", type=int, nargs="*", default=[],
                   help="also time both harnesses at each of these --n_workers (e.g. 1 8 32)")
    p.add_argument("--copies", type=int, default=8,
                   help="the timed runs evaluate each instance this many times (as new files)")
    p.add_argument("--latency", type=float, default=0.05,
                   help="seconds the server waits before each answer in the timed runs")
    args = p.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="cupid-side-by-side-"))
    data = work / "data"
    data.mkdir()
    instances = {}
    for path in sorted(Path(args.data_dir).glob("*.json")):
        row = json.loads(path.read_text())
        instances[path.stem] = row
        shutil.copy(path, data / path.name)
    if not instances:
        raise SystemExit(f"{args.data_dir}: no instance files")
    modes = [False, True] if args.use_matcher else [False]

    server = FakeLLMServer().start()
    server.models = [EVALUATED, EVALUATOR]
    try:
        release_root, commit = prepare_release(args, work, server.base_url)
        server.responder = script = Script(instances, release_session_logs(release_root, instances))
        print(f"{len(instances)} instances from {args.data_dir}; release {commit[:7]} at {release_root}; "
              f"loopback server {server.base_url}")
        agree, n, notes = check_parsers(release_root, side_env(server, release_root))
        print(f"\nthe release's own parsers vs evaluation/release.py on the documented "
              f"answers: {agree}/{n} agree")
        for note in notes[:10]:
            print(f"  - {note}")
        for use_matcher in modes:
            mode = "PrefMatcher" if use_matcher else "GPT-4o matcher"
            start = len(server.requests)
            seconds = run_release(release_root, server, data, work, use_matcher)
            release = collect(server, script, start)
            n_release = len(server.requests) - start

            start = len(server.requests)
            seconds_ours = run_ours(server, data, work, use_matcher)
            ours = collect(server, script, start)
            n_ours = len(server.requests) - start

            table, notes = compare(release, ours)
            print(f"\n{mode}: the release sent {n_release} requests ({seconds:.1f} s), ours {n_ours} "
                  f"({seconds_ours:.1f} s)")
            print(f"  {'step':32}{'identical':>12}{'%':>8}")
            total = [0, 0]
            for step, (same, n) in table.items():
                total[0] += same
                total[1] += n
                print(f"  {step:32}{f'{same}/{n}':>12}{100 * same / n if n else 0:>7.1f}%")
            print(f"  {'all':32}{f'{total[0]}/{total[1]}':>12}"
                  f"{100 * total[0] / total[1] if total[1] else 0:>7.1f}%")
            for note in notes:
                print(f"  - {note}")
            print("  metrics: " + compare_metrics(work / f"r-release-{use_matcher}" / EVALUATED,
                                                  work / f"r-ours-{use_matcher}" / EVALUATED))
        if args.workers:
            print_speed(args, release_root, server, data, work)
        if server.responder_errors:
            print(f"responder errors: {server.responder_errors[:3]}", file=sys.stderr)
    finally:
        server.stop()
        if args.keep:
            print(f"scratch kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
