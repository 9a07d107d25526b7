"""Mutation testing of the modules whose bugs change the benchmark's numbers.

For each module, mutmut makes small deliberate bugs (an operator flipped, a constant
changed, a call dropped) one at a time and runs the module's own test files against each;
a mutant the tests do not notice "survives". Prints killed / survived / timeout per module
and, with --list, the surviving mutants' names (``mutmut show NAME`` inside the kept
scratch copy prints the diff).

    pip install mutmut            # a benchmark-only tool: not a dependency of the project
    python benchmarks/mutation.py                         # every module, in full
    python benchmarks/mutation.py --only utils/models/retry.py --list --keep
    python benchmarks/mutation.py --only evaluation/store.py --sample 60

Not run in CI: it is slow (each mutant reruns the module's tests). Each module runs in a
scratch copy of the repository (mutmut rewrites the source it mutates), with one worker
unless --max_children says otherwise. --sample N runs N mutants spread evenly over the
module's list (mutmut's names are sorted, so the sample covers every function).
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# module -> the test files that test it (each mutant runs the tests of these files that
# reach the mutated function).
MODULES = {
    "evaluation/metrics.py": [
        "tests/evaluation/test_metrics.py",
        "tests/evaluation/report/test_analysis.py",
    ],
    "evaluation/aggregate.py": [
        "tests/evaluation/test_metrics.py",
        "tests/evaluation/test_run_safety.py",
        "tests/evaluation/report/test_report.py",
        "tests/evaluation/test_sweep.py",
        "tests/evaluation/test_run.py",
    ],
    **{f"evaluation/steps/{step}.py": [
        "tests/evaluation/steps/test_parsing.py",
        "tests/evaluation/steps/test_score_parsing.py",
        "tests/evaluation/test_release_parsing.py",
        "tests/evaluation/test_release_view.py",
        "tests/evaluation/test_stored_values.py",
    ] for step in ("infer", "decompose", "match", "judge")},
    "utils/answers.py": [
        "tests/utils/test_answers.py",
        "tests/evaluation/steps/test_parsing.py",
        "tests/evaluation/test_release_parsing.py",
    ],
    "evaluation/release.py": [
        "tests/evaluation/test_release_parsing.py",
        "tests/evaluation/test_release_view.py",
        "tests/utils/test_answers.py",
        "tests/evaluation/steps/test_parsing.py",
    ],
    "utils/models/request.py": [
        "tests/utils/models/test_request_validation.py",
        "tests/utils/models/test_cache_key_format.py",
        "tests/utils/models/test_cache.py",
        "tests/utils/models/test_model_layer.py",
    ],
    "utils/models/retry.py": [
        "tests/utils/models/test_retry.py",
        "tests/utils/models/test_model_layer.py",
    ],
    "utils/models/usage.py": [
        "tests/utils/models/test_retry.py",
        "tests/utils/models/test_model_layer.py",
    ],
    "evaluation/store.py": [
        "tests/evaluation/test_store_resume.py",
        "tests/evaluation/test_run_safety.py",
        "tests/evaluation/test_run.py",
    ],
    "utils/models/pacing.py": [
        "tests/utils/models/test_pacing_accounting.py",
        "tests/utils/models/test_pacing.py",
    ],
    "utils/models/rate_limit_headers.py": [
        "tests/utils/models/test_pacing_accounting.py",
        "tests/utils/models/test_pacing.py",
    ],
}
SKIPPED = {".git", "mutants", "__pycache__", ".pytest_cache", "node_modules"}


def copy_ignore(directory: str, names: list[str]) -> set[str]:
    """Caches and version control everywhere; run outputs (results*) at the top only."""
    top = Path(directory).resolve() == ROOT
    return {n for n in names if n in SKIPPED or n.endswith(".pyc") or (top and n.startswith("results"))}


RESULT_LINE = re.compile(r"^\s*(\S+): (\S.*)$")


def scratch_copy(module: str, tests: list[str], work: Path) -> Path:
    target = work / module.replace("/", "_")
    shutil.copytree(ROOT, target, ignore=copy_ignore)
    top = sorted(p.name for p in target.iterdir()
                 if not p.name.startswith(".") and p.name not in ("tests", "setup.cfg"))
    (target / "setup.cfg").write_text(
        "[mutmut]\n"
        f"source_paths = {module}\n"
        "also_copy =\n" + "".join(f"    {name}\n" for name in top) +
        "pytest_add_cli_args = -p no:cacheprovider -q\n"
        "pytest_add_cli_args_test_selection =\n" + "".join(f"    {t}\n" for t in tests))
    return target


def mutant_names(target: Path) -> list[str]:
    """Every mutant of the module (mutmut lists them once it has generated them)."""
    done = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"],
                          cwd=target, capture_output=True, text=True)
    return [m.group(1) for m in map(RESULT_LINE.match, done.stdout.splitlines()) if m]


def results(target: Path) -> dict[str, str]:
    done = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"],
                          cwd=target, capture_output=True, text=True)
    return {m.group(1): m.group(2).strip() for m in map(RESULT_LINE.match, done.stdout.splitlines()) if m}


def run_module(module: str, tests: list[str], work: Path, sample: int | None,
               max_children: int) -> tuple[dict[str, str], float]:
    missing = [t for t in tests if not (ROOT / t).is_file()]
    if missing:
        raise SystemExit(f"{module}: test files not found: {', '.join(missing)}")
    target = scratch_copy(module, tests, work)
    started = time.perf_counter()
    cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children)]
    if sample:
        # Generate the mutants (and the test mapping) without running them: an empty
        # selection that matches no name.
        subprocess.run(cmd + ["no-such-mutant"], cwd=target, capture_output=True, text=True)
        names = mutant_names(target)
        if len(names) > sample:
            step = len(names) / sample
            names = [names[int(i * step)] for i in range(sample)]
        chosen = names
        done = subprocess.run(cmd + chosen, cwd=target, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{module}: mutmut exited {done.returncode}: {(done.stdout + done.stderr)[-1500:]}",
                  file=sys.stderr)
        found = {name: status for name, status in results(target).items() if name in set(chosen)}
    else:
        done = subprocess.run(cmd, cwd=target, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{module}: mutmut exited {done.returncode}: {(done.stdout + done.stderr)[-1500:]}",
                  file=sys.stderr)
        found = results(target)
    return found, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", help="a module path (repeatable); default: all")
    p.add_argument("--sample", type=int, help="run at most this many mutants per module")
    p.add_argument("--max_children", type=int, default=1)
    p.add_argument("--list", action="store_true", help="print the surviving mutants' names")
    p.add_argument("--keep", action="store_true", help="keep the scratch copies")
    args = p.parse_args(argv)
    modules = args.only or list(MODULES)
    unknown = [m for m in modules if m not in MODULES]
    if unknown:
        p.error(f"--only: not a configured module: {', '.join(unknown)} (have: {', '.join(MODULES)})")
    try:
        import mutmut  # noqa: F401
    except ImportError:
        p.error("mutmut is not installed: pip install mutmut")

    work = Path(tempfile.mkdtemp(prefix="cupid-mutation-"))
    print(f"{'module':34}{'mutants':>8}{'killed':>8}{'survived':>10}{'timeout':>9}{'other':>7}{'seconds':>9}")
    survivors: dict[str, list[str]] = {}
    try:
        for module in modules:
            found, seconds = run_module(module, MODULES[module], work, args.sample, args.max_children)
            counts = Counter(found.values())
            other = len(found) - counts["killed"] - counts["survived"] - counts["timeout"]
            print(f"{module:34}{len(found):>8}{counts['killed']:>8}{counts['survived']:>10}"
                  f"{counts['timeout']:>9}{other:>7}{seconds:>9.0f}", flush=True)
            survivors[module] = sorted(n for n, s in found.items() if s == "survived")
            if other:
                print(f"    other statuses: {dict(c for c in counts.items() if c[0] not in ('killed', 'survived', 'timeout'))}")
        if args.list:
            for module, names in survivors.items():
                for name in names:
                    print(f"survived  {module}  {name}")
    finally:
        if args.keep:
            print(f"scratch copies kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
