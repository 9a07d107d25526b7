"""CUPID data synthesis (§3, Appendix B): personas → context factors → sessions →
checklists → dialogues → instances. Run it as ``cupid-synth`` (or ``python -m
synthesis.run``); from Python, ``from synthesis import synthesize``."""
from evaluation.shadowing import check_own_modules

check_own_modules()


def __getattr__(name: str):
    if name in ("synthesize", "SynthesisResult"):
        from synthesis import api

        return getattr(api, name)
    raise AttributeError(f"module 'synthesis' has no attribute {name!r}")
