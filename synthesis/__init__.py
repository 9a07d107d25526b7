"""CUPID data synthesis (§3, Appendix B): personas → context factors → sessions →
checklists → dialogues → instances. Run it as ``cupid-synth`` (or ``python -m
synthesis.run``); from Python, ``from cupid.synthesis import synthesize``. The validation of
§3.2: ``cupid-validate``, ``from cupid.synthesis import validate``."""


def __getattr__(name: str):
    if name in ("synthesize", "SynthesisResult"):
        from cupid.synthesis import api

        return getattr(api, name)
    if name in ("validate", "ValidationResult"):
        from cupid.synthesis import validation

        return getattr(validation, name)
    raise AttributeError(f"module 'cupid.synthesis' has no attribute {name!r}")
