"""The console scripts (cupid-eval, cupid-synth, cupid-report) and the one import name: a
research directory's own config.py, utils/ and evaluation/ stay its own, ours are cupid.*.
Every case runs in a subprocess from a temporary directory. The console scripts are run the way pip's
generated script runs them (a file whose directory comes first on sys.path, calling the
entry-point function). With CUPID_INSTALLED_BIN set to the bin directory of a venv where
the package is installed (not editable), as .ci/run does, the same tests run the installed
scripts and the installed package instead."""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib import import_module
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {"cupid-eval": "evaluation.run", "cupid-synth": "synthesis.run",
           "cupid-report": "evaluation.report", "cupid-synth-report": "synthesis.report",
           "cupid-self-enhancement": "studies.self_enhancement", "cupid-match-agreement": "evaluation.match_agreement",
           "cupid-validate": "synthesis.validation.cli"}


INSTALLED_BIN = os.environ.get("CUPID_INSTALLED_BIN")


def env(*extra: str) -> dict:
    """The environment with ``extra`` on PYTHONPATH; ``cupid`` is the installed project (the
    checkout's editable install, or the installed package under test)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(extra)}


@pytest.fixture
def research_dir(tmp_path):
    """A directory as researchers have them: their own config.py and utils/io.py."""
    work = tmp_path / "research"
    (work / "utils").mkdir(parents=True)
    (work / "config.py").write_text("SEED = 1\n")
    (work / "utils" / "__init__.py").write_text("")
    (work / "utils" / "io.py").write_text("def load(): pass\n")
    return work


@pytest.fixture
def scripts(tmp_path):
    """Scripts as pip generates them for [project.scripts] (or the installed ones)."""
    if INSTALLED_BIN:
        return Path(INSTALLED_BIN)
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(table) == set(SCRIPTS)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, target in table.items():
        module, func = target.split(":")
        (bin_dir / name).write_text(f"import sys\nfrom {module} import {func}\n"
                                    f"if __name__ == '__main__':\n    sys.exit({func}())\n")
    return bin_dir


def run(args, cwd, environment):
    if INSTALLED_BIN and Path(args[0]).parent == Path(INSTALLED_BIN):
        return subprocess.run(args, cwd=cwd, env=environment, capture_output=True, text=True, timeout=120)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=environment, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("module", sorted(SCRIPTS.values()))
def test_python_m_cupid_runs_from_a_research_directory(research_dir, module):
    proc = run(["-m", f"cupid.{module}", "--help"], research_dir, env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: ")


def test_a_notebook_in_a_research_directory_keeps_its_own_modules(research_dir):
    """The notebook's own config, utils and evaluation stay its own; ours are cupid.*."""
    (research_dir / "evaluation").mkdir()
    (research_dir / "evaluation" / "__init__.py").write_text("MINE = True\n")
    code = ("import config, utils.io, evaluation\n"
            "from cupid.evaluation import evaluate\n"
            "from cupid import config as ours\n"
            "from cupid.utils.models import Model, register_model\n"
            "import cupid.evaluation.api\n"
            "print(config.SEED, evaluation.MINE, callable(evaluate), ours is not config, "
            "callable(utils.io.load))\n")
    proc = run(["-c", code], research_dir, env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "True", "True", "True", "True"]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_console_scripts_work_from_a_research_directory(research_dir, scripts, name):
    proc = run([str(scripts / name), "--help"], research_dir, env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: {name} ")


def test_console_script_flag_errors_name_the_script(tmp_path, scripts):
    proc = run([str(scripts / "cupid-eval"), "--model", "x", "--limit", "0"], tmp_path, env())
    assert proc.returncode == 2
    assert proc.stderr.startswith("cupid-eval: error: argument --limit")


def test_entry_points_are_callables():
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for target in table.values():
        module, func = target.split(":")
        assert callable(getattr(import_module(module), func))


def test_importing_the_packages_stays_cheap(tmp_path):
    code = ("import sys, cupid.evaluation, cupid.synthesis\n"
            "heavy = [m for m in ('numpy', 'openai', 'datasets', 'cupid.evaluation.run', 'cupid.config') "
            "if m in sys.modules]\nprint(heavy)\n")
    proc = run(["-c", code], tmp_path, env())
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr
