"""The code's layout keeps its promises: the shared utilities import nothing from
evaluation/ and synthesis only its steps (the checklist step both pipelines use) and its data
loader (the validation reads what the evaluation reads), every
shared module imports on its own (no import cycle, whichever is imported first), a step's
stored name is spelled only in its module, the table of steps and the release's reading,
and the model layer's extension point re-exports exactly its names. The import graph, read
as the imports are written (any depth, ``TYPE_CHECKING`` blocks and relative imports included),
has no circle, and its arrows point down the layers: utils, evaluation, synthesis, the studies
that compose both."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


PRODUCT_FOLDERS = ("utils", "evaluation", "synthesis", "inspect_tasks", "studies")
# A module may import its own layer's modules and those of the layers below it.
LAYERS = {"config": 0, "utils": 0, "evaluation": 1, "synthesis": 2, "inspect_tasks": 2, "studies": 3}


def product_modules(root: Path = ROOT) -> dict[str, Path]:
    modules = {"cupid.config": root / "config.py"}
    for folder in PRODUCT_FOLDERS:
        for path in (root / folder).rglob("*.py"):
            parts = ["cupid", *path.relative_to(root).with_suffix("").parts]
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Every product module -> the product modules it imports anywhere in its text."""
    modules = product_modules(root)
    graph = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                wanted = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                    if node.level else node.module
                # ``from package import module`` imports the module, not only the package
                wanted = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                          for alias in node.names]
            else:
                continue
            for target in wanted:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    targets.add(target)
        graph[name] = targets
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def layer(module: str) -> int:
    return LAYERS[module.split(".")[1]]


def test_synthesis_and_utils_import_nothing_from_evaluation_but_its_steps():
    def allowed(source: str, target: str) -> bool:
        if not source.startswith(("cupid.synthesis", "cupid.utils")) or not target.startswith("cupid.evaluation"):
            return True
        # and the data loader: the validation reads whatever the evaluation reads
        return source.startswith("cupid.synthesis") and (target.startswith("cupid.evaluation.steps")
                                                         or target == "cupid.evaluation.data")

    offenders = [f"{source} imports {target}" for source, targets in sorted(import_graph().items())
                 for target in sorted(targets) if not allowed(source, target)]
    assert offenders == []


def test_the_import_graph_has_no_circle():
    assert import_circles(import_graph()) == []


def test_imports_point_down_the_layers():
    upward = [f"{source} imports {target}" for source, targets in sorted(import_graph().items())
              for target in sorted(targets) if layer(target) > layer(source)]
    assert upward == []


def test_the_graph_reader_sees_circles_and_upward_arrows_however_they_are_written(tmp_path):
    for folder in PRODUCT_FOLDERS:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "config.py").write_text("")
    (tmp_path / "evaluation" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cupid.evaluation.b import B\n")
    (tmp_path / "evaluation" / "b.py").write_text("def f():\n    from . import a\n")
    (tmp_path / "evaluation" / "c.py").write_text("from ..synthesis import stage\n")
    (tmp_path / "synthesis" / "stage.py").write_text("import cupid.utils\n")
    graph = import_graph(tmp_path)
    assert import_circles(graph) == [["cupid.evaluation.a", "cupid.evaluation.b"]]
    assert graph["cupid.evaluation.c"] == {"cupid.synthesis.stage"}
    assert layer("cupid.evaluation.c") < layer("cupid.synthesis.stage")



# The two halves' entry points and package files do the same job each, so they share a name;
# any other two product modules doing different jobs are told apart by their file names.
SAME_JOB_NAMES = {"__init__.py", "__main__.py", "api.py", "run.py", "dry_run.py", "pipeline.py"}
# A renamed module's old name that the docs gave users, kept as one import line for their scripts.
OLD_NAMES = {"evaluation/samples.py"}


def shared_file_names(root: Path = ROOT) -> dict[str, list[str]]:
    """File names that two or more product modules share, outside ``SAME_JOB_NAMES``."""
    homes: dict[str, list[str]] = {}
    for path in product_modules(root).values():
        if str(path.relative_to(root)) not in OLD_NAMES:
            homes.setdefault(path.name, []).append(str(path.relative_to(root)))
    return {name: sorted(paths) for name, paths in sorted(homes.items())
            if len(paths) > 1 and name not in SAME_JOB_NAMES}


def test_no_two_product_modules_share_a_file_name_but_the_same_job_ones():
    assert shared_file_names() == {}


def test_the_file_name_check_sees_a_planted_duplicate(tmp_path):
    for folder in PRODUCT_FOLDERS:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
        (tmp_path / folder / "run.py").write_text("")
    (tmp_path / "config.py").write_text("")
    (tmp_path / "evaluation" / "report").mkdir()
    (tmp_path / "evaluation" / "metrics.py").write_text("")
    (tmp_path / "evaluation" / "report" / "metrics.py").write_text("")
    (tmp_path / "evaluation" / "samples.py").write_text("")  # an old name kept: not counted
    (tmp_path / "inspect_tasks" / "samples.py").write_text("")
    (tmp_path / "inspect_tasks" / "config.py").write_text("")
    assert shared_file_names(tmp_path) == {
        "config.py": ["config.py", "inspect_tasks/config.py"],
        "metrics.py": ["evaluation/metrics.py", "evaluation/report/metrics.py"]}

SHARED_MODULES = ["cupid.utils.models.registry", "cupid.utils.models.model", "cupid.utils.models.call_errors",
                  "cupid.utils.models.request", "cupid.utils.models.retry", "cupid.utils.models.usage",
                  "cupid.utils.models.cache", "cupid.utils.models.reask", "cupid.utils.answers",
                  "cupid.utils.dataset", "cupid.utils.errors", "cupid.evaluation.steps",
                  "cupid.evaluation.steps.decompose", "cupid.evaluation.release", "cupid.evaluation.api",
                  "cupid.evaluation.run", "cupid.synthesis.api"]


def used_as_keys(tree: ast.AST) -> set[str]:
    """The strings a module reads data by: subscripts, dict keys, ``.get()``'s key, comparisons."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            found.append(node.slice)
        elif isinstance(node, ast.Dict):
            found += [key for key in node.keys if key is not None]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            found += node.args[:1]
        elif isinstance(node, ast.Compare):
            found += [node.left, *node.comparators]
            found += [e for c in node.comparators if isinstance(c, (ast.Tuple, ast.List, ast.Set)) for e in c.elts]
    return {n.value for n in found if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_a_steps_stored_name_is_spelled_in_its_module_the_table_and_the_releases_reading_only():
    """Adding a step is one module and one row: no other product file reads a step by name."""
    from cupid.evaluation.steps import STEPS

    homes = {ROOT / "evaluation" / "steps" / "__init__.py", ROOT / "evaluation" / "release.py"}
    offenders = []
    for path in sorted(ROOT.glob("**/*.py")):
        if path.relative_to(ROOT).parts[0] not in ("evaluation", "synthesis", "utils") or path in homes:
            continue
        keys = used_as_keys(ast.parse(path.read_text(encoding="utf-8")))
        offenders += [f"{path.relative_to(ROOT)}: {s.name!r}" for s in STEPS if s.name in keys
                      and path.name != f"{s.module.__name__.rsplit('.', 1)[1]}.py"]
    assert offenders == []


def step_names_read_by(script: str) -> set[str]:
    """The step names a page script reads as a property (``steps.infer``, ``es["judge"]``)."""
    import re

    from cupid.evaluation.steps import STEPS

    return {s.name for s in STEPS if re.search(rf"\.{s.name}\b|\[[\"']{s.name}[\"']\]", script)}


def test_the_report_page_reads_the_steps_by_the_names_the_report_gives_it():
    script = (ROOT / "evaluation" / "report" / "templates" / "report.js").read_text(encoding="utf-8")
    assert step_names_read_by(script) == set()
    assert step_names_read_by('out(steps.infer) || es["match_recall"]') == {"infer", "match_recall"}


@pytest.mark.parametrize("module", SHARED_MODULES)
def test_each_module_imports_first_in_a_fresh_interpreter(module):
    result = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_the_extension_point_re_exports_its_names_from_their_homes():
    import cupid.utils.models as package
    from cupid.utils.models import cache, call_errors, model, registry, request

    homes = {"Model": model, "register_model": registry, "register_provider": registry,
             "Completion": request, "Message": request, "Request": request, "Usage": request,
             "ModelError": call_errors, "ModelConfigurationError": call_errors,
             "TransientModelError": call_errors, "PermanentModelError": call_errors,
             "ResponseCache": cache}
    assert sorted(model.__all__) == sorted(homes)
    for name, home in homes.items():
        assert getattr(model, name) is getattr(home, name), name
        assert getattr(package, name) is getattr(home, name), name


# ---------------------------------------------------------------------------------------
# tests/ mirrors the packages
# ---------------------------------------------------------------------------------------
TESTS = ROOT / "tests"
NOT_MIRRORS = {"support", "golden", "artifacts", "__pycache__"}


def test_the_product_is_imported_from_the_repository_not_from_a_test_folder():
    from cupid import config
    import cupid.evaluation
    import cupid.evaluation.report
    import cupid.synthesis
    import cupid.utils
    import cupid.utils.models

    import cupid
    for module in (config, cupid.evaluation, cupid.evaluation.report, cupid.synthesis,
                   cupid.utils, cupid.utils.models):
        path = Path(module.__file__).resolve()
        assert TESTS not in path.parents and path.is_relative_to(ROOT), (module.__name__, path)


def test_no_support_module_is_named_like_a_product_module():
    """tests/support/ is on sys.path, ahead of site-packages: a name there hides any other."""
    product = {path.stem for path in ROOT.glob("*.py")} | {
        path.name for path in ROOT.iterdir() if (path / "__init__.py").exists() or path.name in ("data", "prompts")}
    support = {path.stem for path in (TESTS / "support").glob("*.py")}
    assert support and product >= {"config", "evaluation", "synthesis", "utils"}
    assert support & product == set()


def test_every_test_folder_is_a_package_mirroring_a_product_folder():
    folders = [path for path in TESTS.rglob("*") if path.is_dir()
               and not NOT_MIRRORS & set(path.relative_to(TESTS).parts)]
    assert folders
    for folder in folders:
        assert (folder / "__init__.py").exists(), f"{folder.relative_to(ROOT)} lacks __init__.py"
        mirrored = ROOT / folder.relative_to(TESTS)
        assert mirrored.is_dir(), f"{folder.relative_to(ROOT)} mirrors no folder of the product"
    assert (TESTS / "__init__.py").exists()


def absolute_package_imports(path: Path) -> list[int]:
    """The lines of ``path`` that import the package by its installed name (``cupid.…``)."""
    return sorted(node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                  if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "cupid"
                  or isinstance(node, ast.Import) and any(a.name.split(".")[0] == "cupid" for a in node.names))


def test_the_package_imports_itself_relatively_so_that_tools_follow_its_imports_to_its_files():
    """``from ..utils.io import x`` leads an editor or a linter to utils/io.py beside it;
    ``cupid.utils.io`` names a folder that exists only in an installed copy."""
    offenders = [f"{path.relative_to(ROOT)}:{line}" for path in product_modules().values()
                 for line in absolute_package_imports(path)]
    assert offenders == []


def test_the_relative_import_check_sees_an_absolute_one(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("from .io import a\nif True:\n    from cupid.utils import io\nimport cupid.config as c\n")
    assert absolute_package_imports(planted) == [3, 4]


def test_python_m_inside_the_checkout_runs_the_installed_command(tmp_path):
    """``python -m evaluation.run`` in the checkout (the release's command line) runs the
    installed package's module, every relative import included."""
    result = subprocess.run([sys.executable, "-m", "evaluation.run", "--model", "scripted", "--evaluator", "scripted",
                             "--data_dir", "data/sample", "--limit", "1", "--task", "both",
                             "--results_dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(list(tmp_path.rglob("results.json"))) == 1


@pytest.mark.parametrize("command", ["evaluation.run", "synthesis.run", "studies.self_enhancement"])
def test_an_uninstalled_checkout_says_in_one_line_what_to_run(command):
    """``python -m evaluation.run`` from a checkout whose package is not installed (``-S``: no
    site-packages, so no installed ``cupid``): one line naming the install, no traceback."""
    result = subprocess.run([sys.executable, "-S", "-m", command, "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "is not installed" in result.stderr and "pip install -r requirements.txt" in result.stderr


# The modules whose job is to print for a command (its output, its summary, its errors). Every
# other module is an engine, a step or a store: what it has to say is an event (utils/events.py).
PRINTING_MODULES = {
    "cupid.evaluation.console", "cupid.evaluation.run", "cupid.evaluation.dry_run", "cupid.evaluation.match_agreement",
    "cupid.evaluation.report.command", "cupid.studies.self_enhancement", "cupid.synthesis.run", "cupid.synthesis.report",
    "cupid.synthesis.validation.cli", "cupid.utils.command_line", "cupid.utils.forecast",
    "cupid.utils.io",  # the log file's own handler, when the log cannot be written: no event can carry that
}


def print_calls(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
               for node in ast.walk(tree))


def test_only_the_commands_print():
    printing = {name for name, path in product_modules().items() if print_calls(path)}
    assert printing - PRINTING_MODULES == set(), "an engine prints: emit an event (utils/events.py) instead"
    assert PRINTING_MODULES - printing == set(), "a module listed as printing no longer prints: drop it"


def test_no_product_file_holds_two_jobs_past_400_lines():
    """Past about 400 lines a file holds two jobs (the house's rule): split it by job."""
    long = {name: n for name, path in product_modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}


def test_every_folder_of_code_or_prompts_ships_in_the_package():
    """An installed copy holds what the checkout holds: each folder with a module or a prompt is a
    package pyproject.toml lists, with its data files declared (a folder left out works in an
    editable install and fails after ``pip install .``)."""
    import tomllib

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, data = set(setuptools["packages"]), setuptools["package-data"]
    folders = {path.parent for folder in (*PRODUCT_FOLDERS, "prompts") for pattern in ("*.py", "*.yaml")
               for path in (ROOT / folder).rglob(pattern) if "__pycache__" not in path.parts}
    missing = []
    for folder in sorted(folders):
        name = ".".join(["cupid", *folder.relative_to(ROOT).parts])
        parent = name.rpartition(".")[0]
        if name not in listed and f"{folder.name}/*" in data.get(parent, []):
            continue  # a data folder its package ships whole
        if name not in listed:
            missing.append(f"{name} (not in packages)")
        elif any(folder.glob("*.yaml")) and not any(p.endswith(".yaml") for p in data.get(name, [])):
            missing.append(f"{name} (its .yaml files not in package-data)")
    assert missing == []
