"""The console scripts (cupid-eval, cupid-synth, cupid-report) and the one-line stop when a
research directory's own config.py, utils/, data/ or prompts/ would replace the harness's
modules. Every case runs in a subprocess from a temporary directory; PYTHONPATH names this
checkout so its code is the one imported. The console scripts are run the way pip's
generated script runs them (a file whose directory comes first on sys.path, calling the
entry-point function). With CUPID_INSTALLED_BIN set to the bin directory of a venv where
the package is installed (not editable), as .ci/run does, the same tests run the installed
scripts and the installed package instead, with this checkout off PYTHONPATH."""
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
           "cupid-report": "evaluation.report"}


INSTALLED_BIN = os.environ.get("CUPID_INSTALLED_BIN")


def env(*extra: str) -> dict:
    """PYTHONPATH: this checkout (unless the installed package is under test), then ``extra``."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*([] if INSTALLED_BIN else [str(ROOT)]), *extra])}


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
def test_python_m_from_a_shadowing_directory_stops_with_one_line(research_dir, module):
    proc = run(["-m", module, "--help"], research_dir, env())
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "config.py" in lines[0] and "cupid-eval" in lines[0] and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_a_shadowing_utils_package_is_named(tmp_path):
    work = tmp_path / "w"
    (work / "utils").mkdir(parents=True)
    (work / "utils" / "__init__.py").write_text("")
    (work / "utils" / "io.py").write_text("")
    proc = run(["-m", "evaluation.run", "--help"], work, env())
    assert proc.returncode == 2
    assert f"utils shadows" in proc.stderr and "`utils`" in proc.stderr


def test_data_and_prompts_directories_do_not_stop_it(tmp_path):
    # The shipped prompts/ and data/ are read by path from config.ROOT, never imported, so
    # the user's own (even as packages) take nothing's place.
    work = tmp_path / "w"
    for name in ("data", "prompts"):
        (work / name).mkdir(parents=True)
        (work / name / "__init__.py").write_text("")
        (work / name / "rows.jsonl").write_text("{}\n")
    proc = run(["-m", "evaluation.run", "--help"], work, env())
    assert proc.returncode == 0, proc.stderr
    assert "usage: python -m evaluation.run" in proc.stdout


def test_imported_as_a_library_it_raises_an_import_error(research_dir):
    code = ("try:\n    import evaluation\nexcept ImportError as exc:\n"
            "    print(type(exc).__name__, exc)\nelse:\n    print('imported')\n")
    proc = run(["-c", code], research_dir, env())
    assert proc.stdout.startswith("ShadowedModuleError error: config.py shadows"), proc.stdout + proc.stderr


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_console_scripts_work_from_a_shadowing_directory(research_dir, scripts, name):
    proc = run([str(scripts / name), "--help"], research_dir, env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: {name} ")


def test_console_script_with_the_directory_on_pythonpath_stops_with_one_line(research_dir, scripts):
    # PYTHONPATH=. comes before site-packages, where an installed harness lives.
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(research_dir), *([] if INSTALLED_BIN else [str(ROOT)])])}
    proc = run([str(scripts / "cupid-eval"), "--help"], research_dir, environment)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "config.py" in proc.stderr and "PYTHONPATH" in proc.stderr


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
    code = ("import sys, evaluation, synthesis\n"
            "heavy = [m for m in ('numpy', 'openai', 'datasets', 'evaluation.run', 'config') "
            "if m in sys.modules]\nprint(heavy)\n")
    proc = run(["-c", code], tmp_path, env())
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr
