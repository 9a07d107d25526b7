"""CUPID data synthesis (§3, Appendix B): personas → context factors → sessions →
checklists → dialogues → instances. Run it as ``cupid-synth`` (or ``python -m
synthesis.run``); from Python, ``from synthesis import synthesize``."""
import runpy as _runpy
from pathlib import Path as _Path

# utils/shadowing.py run by its path: ``utils`` may itself be the module another project shadows.
_runpy.run_path(str(_Path(__file__).resolve().parent.parent / "utils" / "shadowing.py"),
                run_name="_cupid_shadowing")["check_own_modules"]()


def __getattr__(name: str):
    if name in ("synthesize", "SynthesisResult"):
        from synthesis import api

        return getattr(api, name)
    raise AttributeError(f"module 'synthesis' has no attribute {name!r}")
