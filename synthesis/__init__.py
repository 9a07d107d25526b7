"""CUPID data synthesis (§3, Appendix B): personas → context factors → sessions →
checklists → dialogues → instances. Run it as ``cupid-synth`` (or ``python -m
synthesis.run``); from Python, ``from cupid.synthesis import synthesize``."""


def __getattr__(name: str):
    if name in ("synthesize", "SynthesisResult"):
        from cupid.synthesis import api

        return getattr(api, name)
    raise AttributeError(f"module 'cupid.synthesis' has no attribute {name!r}")
