"""Mutation testing of the modules whose bugs change the benchmark's numbers.

For each module, mutmut makes small deliberate bugs (an operator flipped, a constant
changed, a call dropped) one at a time and runs the module's own test files against each;
a mutant the tests do not notice "survives". Prints made / killed / survived / timeout /
not reached per module and, with --list, every survivor's name and diff line.

    pip install mutmut            # a benchmark-only tool: not a dependency of the project
    python benchmarks/mutation.py --self_check            # shows that a mutant is loaded and killed
    python benchmarks/mutation.py --group new             # the modules of the research layer
    python benchmarks/mutation.py --only evaluation/retrieval.py --list --keep
    python benchmarks/mutation.py --only evaluation/store.py --sample 60

One import name. The package installs as ``cupid`` (pyproject.toml's package-dir maps the
repository's root to it), so the tests import ``cupid.evaluation.retrieval``, never
``evaluation.retrieval``. Each module therefore runs in a scratch directory that holds the
repository as ``src/cupid/``: mutmut names the mutants ``cupid.<module>`` (it strips ``src.``),
copies the tree to ``mutants/src/cupid/`` and puts ``mutants/src`` first on the path, so the
tests' ``import cupid...`` loads the mutated copy before the installed checkout (``cupid`` is a
namespace package: the first portion on the path wins). ``PYTHONPATH`` names the same
directory, so a test's subprocess loads the mutants too. Before a module's mutants run, the
script checks that ``cupid.<module>`` imports from the scratch copy's mutated file (with
mutmut's trampolines in it); a module whose mutants no test reaches is reported, not hidden.
``--self_check`` runs one known mutant (recall 0 instead of undefined in
evaluation/session_recall.py) through the module's tests and fails unless it is killed.

Not run in CI: it is slow (each mutant reruns the tests that reach the mutated function).
One mutmut worker unless --max_children says otherwise. --sample N runs N mutants spread
evenly over the module's list (mutmut's names are sorted, so the sample covers every
function). docs/testing.md has the figures and names every survivor.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "cupid"

# module -> the test files that test it (each mutant runs the tests of these files that
# reach the mutated function).
CORE = {
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
# The research layer (issue 40): strategies, recall, validation, annotation, error types,
# statistics, studies, endings, export. Each against the in-process tests of its own file.
NEW = {
    "evaluation/strategies.py": ["tests/evaluation/test_strategies_units.py"],
    "evaluation/retrieval.py": ["tests/evaluation/test_retrieval.py"],
    "evaluation/session_recall.py": ["tests/evaluation/test_session_recall.py"],
    "synthesis/validation/plan.py": ["tests/synthesis/test_validation_plan.py"],
    "synthesis/validation/files.py": ["tests/synthesis/test_validation_outputs.py"],
    "synthesis/validation/annotation.py": ["tests/synthesis/test_annotation_units.py"],
    "evaluation/steps/error_type.py": ["tests/evaluation/steps/test_error_type.py"],
    "evaluation/report/error_types.py": ["tests/evaluation/report/test_error_type_draw.py"],
    "evaluation/report/statistics.py": ["tests/evaluation/report/test_statistics.py",
                                        "tests/evaluation/report/test_clustered_intervals.py"],
    "evaluation/report/figure10.py": ["tests/evaluation/report/test_figure10.py"],
    "evaluation/report/agreement.py": ["tests/evaluation/report/test_match_agreement.py"],
    "studies/self_enhancement.py": ["tests/studies/test_self_enhancement_units.py"],
    "utils/models/endings.py": ["tests/utils/models/test_endings.py"],
    "evaluation/report/export.py": ["tests/evaluation/report/test_export.py"],
    "utils/csv_file.py": ["tests/utils/test_csv_file.py", "tests/evaluation/report/test_export.py"],
    # What the embedded model is held to, and the grammar text every model's cache key holds.
    "utils/models/embedded_grammar.py": ["tests/utils/models/test_answer_layout.py", "tests/utils/models/test_scripted.py"],
    "utils/models/answer_layout.py": ["tests/utils/models/test_answer_layout.py", "tests/utils/models/test_scripted.py"],
}
MODULES = {**CORE, **NEW}
GROUPS = {"core": list(CORE), "new": list(NEW), "all": list(MODULES)}

# The self-check: a mutant the module's tests must kill, found by the line it writes (recall
# as kept times relevant: 2 for an instance shown one of its two relevant sessions, not 0.5).
SELF_CHECK = ("evaluation/session_recall.py", "tests/evaluation/test_session_recall.py",
              re.compile(r'"recall": kept \* len\(relevant\) if relevant else None'))
SELF_CHECK_PROBE = ("from cupid.evaluation.session_recall import instance_selection as f; "
                    "print(f({'shown': {'positions': [1]}, 'history': {'relevant_positions': [1, 2]}})['recall'])")

SKIPPED = {".git", "mutants", "__pycache__", ".pytest_cache", "node_modules", ".llm_cache"}
RESULT_LINE = re.compile(r"^\s*(\S+): (\S.*)$")
NOT_KILLED = ("survived", "no tests", "suspicious", "skipped", "not checked")


def copy_ignore(directory: str, names: list[str]) -> set[str]:
    """Caches and version control everywhere; run outputs (results*) at the top only."""
    top = Path(directory).resolve() == ROOT
    return {n for n in names if n in SKIPPED or n.endswith(".pyc") or (top and n.startswith("results"))}


def module_name(module: str) -> str:
    return f"{PACKAGE}." + module.removesuffix(".py").replace("/", ".")


def scratch_copy(module: str, tests: list[str], work: Path) -> Path:
    """work/<module>/: the repository as src/cupid/ and mutmut's setup.cfg beside it."""
    target = work / module.replace("/", "_").removesuffix(".py")
    package = target / "src" / PACKAGE
    shutil.copytree(ROOT, package, ignore=copy_ignore)
    # Made now: a directory on PYTHONPATH that does not exist when an interpreter starts is
    # never searched by it (its path entry finder is cached as None).
    (target / "mutants" / "src").mkdir(parents=True)
    top = sorted(p.name for p in package.iterdir() if not p.name.startswith("."))
    (target / "setup.cfg").write_text(
        "[mutmut]\n"
        f"source_paths = src/{PACKAGE}/{module}\n"
        "also_copy =\n" + "".join(f"    src/{PACKAGE}/{name}\n" for name in top) +
        "pytest_add_cli_args =\n    -p\n    no:cacheprovider\n"
        "pytest_add_cli_args_test_selection =\n" + "".join(f"    src/{PACKAGE}/{t}\n" for t in tests))
    return target


def environment(target: Path) -> dict[str, str]:
    """mutmut's environment: the mutated tree first on the path of every process the tests start."""
    env = dict(os.environ)
    mutated = str(target / "mutants" / "src")
    env["PYTHONPATH"] = mutated + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def mutmut(target: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=target, capture_output=True, text=True,
                          env=environment(target))


def results(target: Path) -> dict[str, str]:
    done = mutmut(target, "results", "--all", "true")
    return {m.group(1): m.group(2).strip() for m in map(RESULT_LINE.match, done.stdout.splitlines()) if m}


def diff_of(target: Path, name: str) -> str:
    return mutmut(target, "show", name).stdout


def changed_line(diff: str) -> str:
    """The mutant's new line(s), for the survivors' list."""
    return " | ".join(line[1:].strip() for line in diff.splitlines()
                      if line.startswith("+") and not line.startswith("+++"))[:160]


def loaded_from(target: Path, module: str, mutant: str = "") -> dict:
    """Where a fresh interpreter, set up as mutmut sets up the tests, imports the module from,
    and whether that file is mutmut's mutated one."""
    code = ("import importlib, json, sys\n"
            f"sys.path.insert(0, {str(target / 'mutants' / 'src')!r})\n"
            f"m = importlib.import_module({module_name(module)!r})\n"
            "text = open(m.__file__, encoding='utf-8').read()\n"
            "print(json.dumps({'file': m.__file__, 'trampolines': 'mutmut generated' in text}))\n")
    env = environment(target)
    env["MUTANT_UNDER_TEST"] = mutant
    done = subprocess.run([sys.executable, "-c", code], cwd=target / "mutants", capture_output=True, text=True,
                          env=env)
    if done.returncode != 0:
        raise SystemExit(f"{module}: cannot import {module_name(module)} in the scratch copy: {done.stderr[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_loaded(target: Path, module: str) -> None:
    where = loaded_from(target, module)
    expected = (target / "mutants" / "src" / PACKAGE / module).resolve()
    if Path(where["file"]).resolve() != expected or not where["trampolines"]:
        raise SystemExit(f"{module}: the tests would import {where['file']}, not the mutated {expected}: its mutants "
                         f"would never be loaded")


def generate(target: Path) -> list[str]:
    """Generate the mutants (and the test mapping) without running any: an empty selection
    that matches no name. Returns every mutant's name."""
    mutmut(target, "run", "--max-children", "1", "no-such-mutant")
    return sorted(results(target))


def run_module(module: str, tests: list[str], work: Path, sample: int | None,
               max_children: int) -> tuple[dict[str, str], float, Path]:
    missing = [t for t in tests if not (ROOT / t).is_file()]
    if missing:
        raise SystemExit(f"{module}: test files not found: {', '.join(missing)}")
    target = scratch_copy(module, tests, work)
    started = time.perf_counter()
    names = generate(target)
    if not names:
        raise SystemExit(f"{module}: mutmut made no mutant (see {target})")
    check_loaded(target, module)
    if sample and len(names) > sample:
        step = len(names) / sample
        names = [names[int(i * step)] for i in range(sample)]
    done = mutmut(target, "run", "--max-children", str(max_children), *names)
    if done.returncode != 0:
        print(f"{module}: mutmut exited {done.returncode}: {(done.stdout + done.stderr)[-1500:]}", file=sys.stderr)
    chosen = set(names)
    found = {name: status for name, status in results(target).items() if name in chosen}
    return found, time.perf_counter() - started, target


def mutant_functions(target: Path, module: str) -> dict[str, str]:
    """Each mutant's function and each original's (``..._orig``), as mutmut wrote them into
    the mutated file, by mangled name."""
    text = (target / "mutants" / "src" / PACKAGE / module).read_text(encoding="utf-8")
    starts = [(m.start(), m.group(1)) for m in
              re.finditer(r"^[ \t]*(?:async[ \t]+)?def (x\S+?__mutmut_(?:\d+|orig))\(", text, re.M)]
    return {name: text[start:end] for (start, name), (end, _) in zip(starts, starts[1:] + [(len(text), "")])}


def find_mutant(target: Path, module: str, pattern: re.Pattern) -> str | None:
    """The first mutant whose function, as mutmut wrote it into the mutated file, matches."""
    for name, body in mutant_functions(target, module).items():
        if not name.endswith("_orig") and pattern.search(body):
            return f"{module_name(module)}.{name}"
    return None


def changed_lines(target: Path, module: str) -> dict[str, str]:
    """Each mutant's changed line(s) against its original function (as ``mutmut show``
    prints them, without a process per mutant)."""
    import difflib

    functions = mutant_functions(target, module)
    out = {}
    for name, body in functions.items():
        if name.endswith("_orig"):
            continue
        original = functions.get(name.rpartition("__mutmut_")[0] + "__mutmut_orig", "")
        new = [line for line in difflib.ndiff(original.splitlines()[1:], body.splitlines()[1:])
               if line.startswith("+ ")]
        out[f"{module_name(module)}.{name}"] = " | ".join(line[2:].strip() for line in new)[:160]
    return out


def self_check(work: Path, max_children: int) -> int:
    """A known mutant is loaded by the tests (the module imports from the mutated file and the
    mutant changes what it returns) and killed by them."""
    module, test, pattern = SELF_CHECK
    target = scratch_copy(module, [test], work)
    generate(target)
    check_loaded(target, module)
    chosen = find_mutant(target, module, pattern)
    if chosen is None:
        print(f"self-check: no mutant of {module} matches {pattern.pattern!r}", file=sys.stderr)
        return 1
    outputs = {}
    for label, mutant in (("original", ""), ("mutant", chosen)):
        env = environment(target)
        env["MUTANT_UNDER_TEST"] = mutant
        done = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(target / 'mutants' / 'src')!r}); "
                               + SELF_CHECK_PROBE], cwd=target / "mutants", capture_output=True, text=True, env=env)
        outputs[label] = done.stdout.strip() or done.stderr.strip()[-200:]
    where = loaded_from(target, module, chosen)
    done = mutmut(target, "run", "--max-children", str(max_children), chosen)
    status = results(target).get(chosen)
    print(f"self-check: {chosen}\n  mutated line: {changed_line(diff_of(target, chosen))}\n"
          f"  {module_name(module)} imported from {where['file']} (mutmut's trampolines in it: {where['trampolines']})\n"
          f"  recall of an instance shown one of its two relevant sessions: {outputs['original']} (original), "
          f"{outputs['mutant']} (this mutant)\n  mutmut's verdict with {test}: {status}")
    ok = status == "killed" and outputs["original"] == "0.5" and outputs["mutant"] == "2"
    print("self-check passed" if ok else "self-check FAILED" + (
        "" if done.returncode == 0 else ": " + (done.stdout + done.stderr)[-800:]), file=sys.stderr)
    return 0 if ok else 1


def markdown(report: dict[str, dict]) -> str:
    """The figures as a table (caught = killed + timeout) and every mutant not caught, by module."""
    lines = ["| Module | Made | Caught | Survived | Not reached | Caught % |", "|---|---|---|---|---|---|"]
    for module, r in report.items():
        lines.append(f"| `{module}` | {r['made']} | {r['caught']} | {r['survived']} | {r['no_tests']} | "
                     f"{100 * r['caught'] / r['made'] if r['made'] else 0:.1f} |")
    made, caught = sum(r["made"] for r in report.values()), sum(r["caught"] for r in report.values())
    lines.append(f"| **all** | **{made}** | **{caught}** | **{sum(r['survived'] for r in report.values())}** | "
                 f"**{sum(r['no_tests'] for r in report.values())}** | **{100 * caught / made if made else 0:.1f}** |")
    lines.append("")
    for module, r in report.items():
        if r["survivors"]:
            lines.append(f"`{module}`:")
            lines.append("")
            for name, s in r["survivors"].items():
                short = name.rpartition(".")[2].replace("\u01c1", ".")
                lines.append(f"- `{short}` ({s['status']}): `{s['line']}`")
            lines.append("")
    return "\n".join(lines)


def write_reports(args: argparse.Namespace, report: dict[str, dict]) -> None:
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    if args.markdown:
        Path(args.markdown).write_text(markdown(report), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", help="a module path (repeatable)")
    p.add_argument("--group", choices=sorted(GROUPS), help="core: the evaluation's modules; new: the research "
                   "layer's (issue 40); all (the default without --only)")
    p.add_argument("--sample", type=int, help="run at most this many mutants per module")
    p.add_argument("--max_children", type=int, default=1)
    p.add_argument("--list", action="store_true", help="print every mutant not killed, with its changed line")
    p.add_argument("--keep", action="store_true", help="keep the scratch copies")
    p.add_argument("--self_check", action="store_true", help="run the self-check only")
    p.add_argument("--json", help="also write the per-module figures and the survivors to this file")
    p.add_argument("--markdown", help="also write them as docs/testing.md's table and survivors' list")
    args = p.parse_args(argv)
    modules = (args.only or []) + (GROUPS[args.group] if args.group else [])
    modules = list(dict.fromkeys(modules or GROUPS["all"]))
    unknown = [m for m in modules if m not in MODULES]
    if unknown:
        p.error(f"--only: not a configured module: {', '.join(unknown)} (have: {', '.join(MODULES)})")
    try:
        import mutmut as _  # noqa: F401
    except ImportError:
        p.error("mutmut is not installed: pip install mutmut")

    work = Path(tempfile.mkdtemp(prefix="cupid-mutation-"))
    try:
        if args.self_check:
            return self_check(work, args.max_children)
        print(f"{'module':42}{'made':>6}{'killed':>8}{'survived':>10}{'timeout':>9}{'no test':>9}{'other':>7}"
              f"{'killed%':>9}{'seconds':>9}", flush=True)
        report: dict[str, dict] = {}
        for module in modules:
            found, seconds, target = run_module(module, MODULES[module], work, args.sample, args.max_children)
            counts = Counter(found.values())
            caught = counts["killed"] + counts["timeout"] + counts["caught by type check"]
            other = len(found) - caught - counts["survived"] - counts["no tests"]
            share = 100 * caught / len(found) if found else 0.0
            print(f"{module:42}{len(found):>6}{counts['killed']:>8}{counts['survived']:>10}{counts['timeout']:>9}"
                  f"{counts['no tests']:>9}{other:>7}{share:>8.1f}%{seconds:>9.0f}", flush=True)
            survivors = {n: s for n, s in found.items() if s in NOT_KILLED}
            lines = changed_lines(target, module) if survivors else {}
            report[module] = {"made": len(found), "killed": counts["killed"], "timeout": counts["timeout"],
                              "caught": caught, "survived": counts["survived"], "no_tests": counts["no tests"],
                              "other": other, "seconds": round(seconds),
                              "survivors": {n: {"status": s, "line": lines.get(n) or changed_line(diff_of(target, n))}
                                            for n, s in sorted(survivors.items())}}
            if not args.keep:
                shutil.rmtree(target, ignore_errors=True)
            write_reports(args, report)  # after each module: a long run's figures so far
        made = sum(r["made"] for r in report.values())
        caught = sum(r["caught"] for r in report.values())
        print(f"{'total':42}{made:>6}{'':>8}{'':>10}{'':>9}{'':>9}{'':>7}"
              f"{(100 * caught / made if made else 0):>8.1f}%", flush=True)
        if args.list:
            for module, r in report.items():
                for name, s in r["survivors"].items():
                    print(f"{s['status']:9} {name}\n          {s['line']}")
        write_reports(args, report)
    finally:
        if args.keep:
            print(f"scratch copies kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
