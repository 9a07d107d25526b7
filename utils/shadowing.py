"""Refuse, at once and in one line, to run with another project's top-level modules in
place of ours.

The harness installs the release's top-level layout (``config``, ``utils``, ``evaluation``,
``synthesis``, with ``prompts/`` and ``data/``). Under ``python -m evaluation.run`` the working
directory comes first on ``sys.path``, so a research directory's own ``config.py`` or
``utils/`` would be imported instead of ours and fail deep inside with a traceback. The
console scripts (``cupid-eval``, ``cupid-synth``, ``cupid-report``) start with their own
bin directory first, so they are not affected unless ``PYTHONPATH`` names such a directory.
The shipped ``prompts/`` and ``data/`` are read by path from ``config.ROOT``, never
imported, so a ``prompts/`` or ``data/`` of the user's cannot take their place and is not
checked. Only the standard library is imported here, and ``evaluation/__init__.py`` and
``synthesis/__init__.py`` load this file by its path (``load_guard``), since ``utils``
itself may be the module that is shadowed.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The top-level modules the harness imports (prompts/ and data/ are files read by path).
OWN_MODULES = ("config", "utils", "evaluation", "synthesis")
CONSOLE_SCRIPTS = {"evaluation.run": "cupid-eval", "synthesis.run": "cupid-synth",
                   "evaluation.report": "cupid-report"}


class ShadowedModuleError(ImportError):
    """Another project's module of the same name is found before the harness's own."""


def _location(name: str) -> Path | None:
    """Where ``name`` is imported from: its file, or its package's directory."""
    module = sys.modules.get(name)
    if module is not None:
        spec = getattr(module, "__spec__", None)
    else:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
    if spec is None:
        return None
    if spec.submodule_search_locations:  # a package: its directory
        locations = list(spec.submodule_search_locations)
        return Path(locations[0]) if locations else None
    return Path(spec.origin) if spec.origin else None


def shadowing_module() -> tuple[str, Path] | None:
    """The first of our top-level modules that resolves outside this installation, with
    where it resolves; None when every one is ours."""
    for name in OWN_MODULES:
        where = _location(name)
        if where is None:
            continue
        expected = ROOT / ("config.py" if name == "config" else name)
        try:
            if os.path.samefile(where, expected):
                continue
        except OSError:
            pass
        return name, where
    return None


def check_own_modules() -> None:
    """Stop (as a program) or raise ``ShadowedModuleError`` (as a library) when one of
    our top-level modules would be imported from another project."""
    found = shadowing_module()
    if found is None:
        return
    name, where = found
    shown = os.path.relpath(where) if not os.path.relpath(where).startswith("..") else str(where)
    # While runpy imports the package of a ``-m`` module, sys.argv[0] is "-m".
    as_module = sys.argv[:1] == ["-m"]
    as_script = Path(sys.argv[0]).name.startswith("cupid-") if sys.argv and sys.argv[0] else False
    if as_module:
        advice = ("run the console script instead (cupid-eval, cupid-synth or cupid-report, "
                  "the same program), or run from another directory")
    elif as_script:
        advice = "remove that directory from PYTHONPATH, or run from another directory"
    else:
        advice = ("import the harness from another working directory, or take that directory "
                  "off sys.path, or use the console scripts")
    message = (f"error: {shown} shadows the CUPID harness's own `{name}` module "
               f"(installed at {ROOT}); {advice}")
    if as_module or as_script:
        print(message, file=sys.stderr)
        raise SystemExit(2)
    raise ShadowedModuleError(message)
