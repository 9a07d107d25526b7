"""``python -m evaluation.run`` (or ``synthesis.run``, ``studies.self_enhancement``, ...) inside
a checkout. There the package is imported under its folder's name (``evaluation``), not as
``cupid.evaluation``, and a module of the package, which imports its neighbours relative to
``cupid``, cannot run so: the command runs as the installed package's module instead
(``cupid.evaluation.run``), or, in a checkout that is not installed, says in one line what to
run. Imported by the packages' ``__init__`` as ``utils.checkout``: the checkout's own folder,
found because ``python -m`` puts the working directory first on the path."""
from __future__ import annotations

import importlib.util
import runpy
import sys


def run_installed(package: str, command: str) -> None:
    """Run ``python -m <package>.<module>`` as ``cupid.<package>.<module>``, or stop with one
    line when the harness is not installed; nothing when the package was imported otherwise
    (by a script run from the checkout)."""
    if importlib.util.find_spec("cupid") is None:
        raise SystemExit("error: the harness is not installed: in this checkout run "
                         f"`pip install -r requirements.txt` (or `pip install -e .`), then `{command} --help`")
    argv = getattr(sys, "orig_argv", [])
    target = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else ""
    if target.split(".")[0] != package:
        return
    runpy.run_module(f"cupid.{target}", run_name="__main__", alter_sys=True)
    raise SystemExit(0)
