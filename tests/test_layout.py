"""The code's layout keeps its promises: synthesis and the shared utilities import nothing
from evaluation/, every shared module imports on its own (no import cycle, whichever is
imported first), and the model layer's extension point re-exports exactly its names."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_synthesis_and_utils_import_nothing_from_evaluation():
    offenders = [f"{path.relative_to(ROOT)} imports {name}"
                 for folder in ("synthesis", "utils") for path in sorted((ROOT / folder).rglob("*.py"))
                 for name in sorted(imported_modules(path))
                 if name == "evaluation" or name.startswith("evaluation.")]
    assert offenders == []


SHARED_MODULES = ["utils.models.registry", "utils.models.model", "utils.models.errors",
                  "utils.models.request", "utils.models.retry", "utils.models.usage",
                  "utils.models.cache", "utils.models.asking", "utils.benchmark.step_runner",
                  "utils.benchmark.decomposer", "utils.benchmark.answers.reading",
                  "utils.benchmark.answers.ours", "utils.benchmark.dataset",
                  "utils.benchmark.answers.release", "evaluation.run"]


@pytest.mark.parametrize("module", SHARED_MODULES)
def test_each_module_imports_first_in_a_fresh_interpreter(module):
    result = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_the_extension_point_re_exports_its_names_from_their_homes():
    import evaluation.models.model as old_path
    from utils.models import cache, errors, model, registry, request

    homes = {"Model": model, "register_model": registry, "register_provider": registry,
             "Completion": request, "Message": request, "Request": request, "Usage": request,
             "ModelError": errors, "ModelConfigurationError": errors,
             "TransientModelError": errors, "PermanentModelError": errors,
             "ResponseCache": cache}
    assert sorted(model.__all__) == sorted(homes)
    for name, home in homes.items():
        assert getattr(model, name) is getattr(home, name), name
        assert getattr(old_path, name) is getattr(home, name), name
