"""Models from the user's own code, without editing the package: ``path/to/file.py:Class``,
``package.module:Class`` (the module's @register_model classes register too), and models
that an installed plugin declares in the ``cupid.models`` entry-point group."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cupid_responder import write_two_instance_data
from cupid.utils.models import registry
from cupid.utils.models.call_errors import UnknownModelError
from cupid.utils.models.model import Model
from cupid.utils.models.registry import is_code_spec, resolve_model
from repo_paths import ROOT, SUPPORT


USER_MODEL = textwrap.dedent('''
    from cupid.utils.models.model import Model, register_model
    from cupid_responder import CupidResponder, two_instance_plans

    ANSWERS = CupidResponder(two_instance_plans())


    class MyModel(Model):
        """Answers every step as the scripted plan says (tests/support/cupid_responder.py)."""

        def __call__(self, system_prompt, user_prompt):
            return ANSWERS({"messages": [{"role": "user", "content": user_prompt}]})


    @register_model
    class MyRegisteredJudge(MyModel):
        model_name = "my-registered-judge-%(tag)s"
''')


@pytest.fixture
def scratch_registry():
    """Registrations made by a test vanish after it."""
    registry.discover_models()
    saved = dict(registry._REGISTRY)
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)


def write_user_model(directory: Path, tag: str) -> Path:
    path = directory / "my_model.py"
    path.write_text(USER_MODEL % {"tag": tag})
    return path


def test_code_specs_are_told_from_hosted_names():
    assert is_code_spec("./my_model.py:MyModel") and is_code_spec("my_model.py:MyModel")
    assert is_code_spec("my_pkg.my_module:MyModel") and is_code_spec("models:Mine")
    # A Bedrock id, a Together org/name and a prefixed server are not user code.
    assert not is_code_spec("anthropic.claude-3-5-sonnet-20241022-v2:0")
    assert not is_code_spec("meta-llama/Llama-3-8b")
    assert not is_code_spec("gpt-4o")
    assert not is_code_spec("my_model.py:")


def test_a_file_spec_loads_the_class_and_registers_its_neighbours(tmp_path, scratch_registry):
    path = write_user_model(tmp_path, "file")
    model = resolve_model(f"{path}:MyModel", role="evaluated", timeout=7)
    assert type(model).__name__ == "MyModel" and model.name == "MyModel"
    assert model.timeout == 7
    # Importing the file registered its @register_model class by name.
    judge = resolve_model("my-registered-judge-file")
    assert judge.name == "my-registered-judge-file"
    # The same file again is the same module (no double registration, one class).
    again = resolve_model(f"{path}:MyModel")
    assert type(again) is type(model)


def test_a_module_spec_is_found_in_the_working_directory(tmp_path, monkeypatch, scratch_registry):
    package = tmp_path / "my_pkg_wd"
    package.mkdir()
    (package / "__init__.py").write_text("")
    write_user_model(package, "module")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    model = resolve_model("my_pkg_wd.my_model:MyModel")
    assert type(model).__name__ == "MyModel"
    assert sys.path[-1] == str(tmp_path)  # appended, so it shadows nothing of ours
    assert resolve_model("my-registered-judge-module").name == "my-registered-judge-module"


@pytest.mark.parametrize("spec, message", [
    ("missing_file.py:Model", "no such file"),
    ("{dir}/my_model.py:Nope", "has no Nope"),
    ("{dir}/my_model.py:ANSWERS", "is not a subclass"),
    ("{dir}/broken.py:Model", "importing"),
    ("no_such_package_xyz.mod:Model", "importing no_such_package_xyz.mod failed"),
])
def test_bad_code_specs_are_one_line_errors(tmp_path, spec, message, scratch_registry):
    write_user_model(tmp_path, "errors")
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom at import')\n")
    with pytest.raises(UnknownModelError, match=message) as caught:
        resolve_model(spec.format(dir=tmp_path))
    assert "\n" not in str(caught.value)


def test_a_model_instance_is_used_as_it_is(scratch_registry):
    class Notebook(Model):
        def __call__(self, system_prompt, user_prompt):
            return "ok"

    mine = Notebook("notebook-model", temperature=0.3)
    assert resolve_model(mine, role="evaluated") is mine
    assert mine.temperature == 0.3
    tuned = resolve_model(Notebook("tuned"), overrides={"temperature": 0.2})
    assert tuned.label == "tuned[temperature=0.2]"


def test_an_installed_plugins_entry_point_is_found_by_name(tmp_path, monkeypatch, scratch_registry):
    site = tmp_path / "site"
    (site / "cupid_plugin_example").mkdir(parents=True)
    (site / "cupid_plugin_example" / "__init__.py").write_text(textwrap.dedent('''
        from cupid.utils.models.model import Model

        class PluginModel(Model):
            def __call__(self, system_prompt, user_prompt):
                return "from the plugin"
    '''))
    info = site / "cupid_plugin_example-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cupid-plugin-example\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[cupid.models]\nplugin-model = cupid_plugin_example:PluginModel\n")
    monkeypatch.syspath_prepend(str(site))
    model = resolve_model("plugin-model", role="evaluated")
    assert type(model).__name__ == "PluginModel"
    assert model.name == "plugin-model"
    assert model.chat("", [{"role": "user", "content": "q"}]) == "from the plugin"
    with pytest.raises(UnknownModelError, match="plugin-model"):  # listed among the known
        resolve_model("no-such-model-anywhere")


def test_a_user_model_file_runs_from_the_users_directory(tmp_path):
    """From a directory with its own config.py and utils/ (as research directories have),
    the console script (run as pip's generated script runs it: its bin directory first on
    sys.path) evaluates ./my_model.py:MyModel judged by a module spec's class."""
    work = tmp_path / "research"
    (work / "utils").mkdir(parents=True)
    (work / "config.py").write_text("DEFAULT_EVALUATOR = 'theirs'\n")
    (work / "utils" / "__init__.py").write_text("")
    (work / "utils" / "io.py").write_text("def read(): return 'theirs'\n")
    write_user_model(work, "subprocess")
    (work / "judges").mkdir()
    (work / "judges" / "__init__.py").write_text("")
    (work / "judges" / "scripted.py").write_text(
        "from my_model import MyModel\n\n\nclass Judge(MyModel):\n    pass\n")
    write_two_instance_data(work / "data.jsonl")
    installed = os.environ.get("CUPID_INSTALLED_BIN")  # .ci/run: the installed package's script
    if installed:
        command = [str(Path(installed) / "cupid-eval")]
        env = {**os.environ, "PYTHONPATH": str(SUPPORT)}
    else:
        script = tmp_path / "bin" / "cupid-eval"
        script.parent.mkdir()
        script.write_text("import sys\nfrom cupid.evaluation.run import console as cupid_eval\n"
                          "if __name__ == '__main__':\n    sys.exit(cupid_eval())\n")
        command = [sys.executable, str(script)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(SUPPORT)])}
    proc = subprocess.run(
        [*command, "--model", "./my_model.py:MyModel",
         "--evaluator", "judges.scripted:Judge", "--data", "data.jsonl", "--n_workers", "2"],
        cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads((work / "results" / "MyModel" / "results.json").read_text())
    assert results["inference"]["precision"] == pytest.approx(0.5)
    assert results["inference"]["recall"] == pytest.approx(0.6)
    assert results["settings"]["evaluator"] == "Judge"
    assert results["counts"]["evaluated"] == 2 and results["counts"]["failed"] == 0


def test_a_sweep_file_names_user_models(tmp_path, monkeypatch, scratch_registry):
    from cupid.evaluation import run as run_module

    write_user_model(tmp_path, "sweep")
    write_two_instance_data(tmp_path / "data.jsonl")
    (tmp_path / "sweep.yaml").write_text(
        "evaluator: ./my_model.py:MyModel\n"
        "runs:\n  - {model: ./my_model.py:MyModel}\n  - {model: my-registered-judge-sweep}\n")
    monkeypatch.chdir(tmp_path)
    code = run_module.main(["--sweep", "sweep.yaml", "--data", "data.jsonl", "--results_dir", "res"])
    assert code == 0
    for name in ("MyModel", "my-registered-judge-sweep"):
        results = json.loads((tmp_path / "res" / name / "results.json").read_text())
        assert results["inference"]["precision"] == pytest.approx(0.5), name
