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
