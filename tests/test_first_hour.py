"""The first hour's rough edges: the progress log off a terminal, the rate of a rerun with
nothing to do, the override directory docs/models.md shows, synthesis --help, .gitignore,
and the embedded model's summary saying what its numbers are."""
from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest

from cupid.evaluation.console import print_summary
from cupid.evaluation.store import run_dir_for
from cupid.utils.progress import ProgressLog

ROOT = Path(__file__).resolve().parents[1]


def test_no_eta_until_the_first_wave_of_concurrent_instances_finished():
    now = [0.0]
    out = io.StringIO()
    progress = ProgressLog(6, 1, "m", out=out, clock=lambda: now[0], workers=4)
    # Four instances run at once and take ~3 min each: the first finishes after 170 s.
    for t in (170, 175, 180, 185, 340, 345):
        now[0] = t
        progress.add(failed=False)
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("ETA after the first 4 finish")
    assert "ETA after the first 4 finish" in lines[2]
    # After the first wave: 4 in 185 s is 1.3/min, 2 left -> ETA 0:01:32, not 5 x 170 s.
    assert lines[3].endswith("1.3/min, elapsed 0:03:05, ETA 0:01:32")


def test_a_rerun_with_nothing_to_do_prints_no_rate():
    now = [0.0]
    out = io.StringIO()
    progress = ProgressLog(6, 1, "m", out=out, clock=lambda: now[0], workers=4)
    for _ in range(6):
        now[0] += 0.0001
        progress.add(failed=False, found_done=True)
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("progress m: 6/6 instances (100%), 0 failed, 6 found done")
    assert "/min" not in last and last.endswith("nothing left to run")


def test_the_rate_counts_only_instances_run_now():
    now = [0.0]
    out = io.StringIO()
    progress = ProgressLog(4, 4, "m", out=out, clock=lambda: now[0])
    for found in (True, True, False, False):
        now[0] += 30.0 if not found else 0.0
        progress.add(failed=False, found_done=found)
    assert "2 found done, 2.0/min" in out.getvalue()


def test_a_heartbeat_line_shows_a_slow_run_is_alive():
    out = io.StringIO()
    progress = ProgressLog(10, 100, "m", out=out, heartbeat_s=0.2)
    time.sleep(0.7)
    progress.close()
    lines = out.getvalue().splitlines()
    assert lines and lines[0].startswith("progress m: 0/10 instances (0%), 0 failed, elapsed")
    n = len(lines)
    time.sleep(0.3)
    assert len(out.getvalue().splitlines()) == n  # closed: no more lines, thread gone
    assert not progress._heartbeat.is_alive()


def test_documented_override_directory_is_what_is_written():
    page = (ROOT / "docs" / "models.md").read_text()
    found = re.search(r"labelled `([^`]+)` and written to\s+`results/([^`]+)/`", page)
    assert found, "docs/models.md no longer shows an override run's directory"
    label, directory = found.groups()
    assert run_dir_for("results", label, "default") == Path("results") / directory


def test_synthesis_help_explains_the_size_flags(capsys):
    from cupid.synthesis.run import build_parser

    text = build_parser().format_help()
    for flag, default in (("--n_personas", 4), ("--n_factors", 8), ("--n_sessions", 13)):
        block = text[text.index(f"  {flag}"):]
        block = block[:block.index("\n  --", 3)]
        assert f"(default: {default})" in " ".join(block.split()), flag


def test_the_documented_synthesis_directories_are_ignored():
    ignored = (ROOT / ".gitignore").read_text().split()
    directories = set()
    for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        directories |= set(re.findall(r"(?:cupid-synth|synthesis\.run) [^\n`]*--output_dir ([\w./-]+)",
                                      page.read_text()))
    assert "synthetic_data_offline" in directories  # the offline command is still documented
    for directory in sorted(directories):
        assert f"{directory}/" in ignored, directory


def summary_of(model: str, evaluator: str) -> str:
    results = {"settings": {"model": model, "setting": "default", "task": ["inference"],
                            "scorer": evaluator, "evaluator": evaluator, "wall_time_s": 1.0},
               "by_instance_type": {}, "counts": {"instances": 0, "evaluated": 0, "failed": 0,
                                                  "skipped": 0, "failures_by_step": {}},
               "usage": {"this_invocation": {}}}
    out = io.StringIO()
    print_summary(results, Path("results.json"), out=out)
    return out.getvalue()


@pytest.mark.parametrize("model, evaluator, shown", [
    ("smollm2-135m", "smollm2-135m", True), ("gpt-4o-mini", "smollm2-135m", True),
    ("smollm2-135m[temperature=0.2]", "gpt-4o-2024-11-20", True),
    ("gpt-4o-mini", "gpt-4o-2024-11-20", False)])
def test_the_embedded_models_summary_says_its_numbers_mean_nothing(model, evaluator, shown):
    text = summary_of(model, evaluator)
    assert ("mean nothing about the benchmark" in text) is shown


def readme_commands() -> list[str]:
    """The README's command lines (an indented line beginning with a console script), with their
    continuations joined and their comments cut."""
    lines, commands = (ROOT / "README.md").read_text().splitlines(), []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("    cupid-"):
            command = line.strip()
            while command.endswith("\\"):
                i += 1
                command = command[:-1].strip() + " " + lines[i].strip()
            commands.append(command.split("  #")[0].strip())
        i += 1
    return commands


# Commands the test cannot run as printed, and why: each is a placeholder or needs what no
# machine here has (a key for a command without a dry run, or data a synthesis makes first).
NOT_RUN = {
    "cupid-eval --model M --data_dir synthetic_data": "M is a placeholder for the model to evaluate",
    "cupid-synth-report synthetic_data": "synthetic_data is what the README's synthesis makes",
    "cupid-report results --error_types": "the classifier is GPT-4o and cupid-report has no dry run",
}


@pytest.mark.slow
def test_the_readmes_commands_run_as_printed_from_another_directory(tmp_path):
    """Each command of the README, from a directory that is not the checkout (with its own
    evaluation/ package, as a research directory may have): those that would call a hosted model
    as a dry run (no key here), the hub's data as the paper's shape (no network here), the rest
    as they are; README's my_model.py written as it shows it."""
    import os
    import subprocess
    import sys

    commands = readme_commands()
    assert len(commands) >= 10
    here = tmp_path / "research"
    (here / "evaluation").mkdir(parents=True)
    (here / "evaluation" / "__init__.py").write_text("")
    readme = (ROOT / "README.md").read_text()
    model_file = readme.split("    # my_model.py\n", 1)[1].split("\n\n    cupid-", 1)[0]
    (here / "my_model.py").write_text("\n".join(line[4:] for line in model_file.splitlines()) + "\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TOGETHER_API_KEY", "GOOGLE_API_KEY"):
        env.pop(key, None)
    ran = []
    for command in commands:
        if command in NOT_RUN:
            continue
        argv = command.split()
        hosted = any(name in command for name in ("gpt-", "claude-", "my_model.py"))
        if hosted and argv[0] in ("cupid-eval", "cupid-synth"):
            argv.append("--dry_run")
        result = subprocess.run(argv, cwd=here, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"{command}\n{result.stdout[-1500:]}\n{result.stderr[-1500:]}"
        ran.append(command)
    assert len(ran) == len(commands) - len(NOT_RUN)
    assert (here / "results" / "scripted" / "results.json").exists() and (here / "samples.jsonl").exists()
