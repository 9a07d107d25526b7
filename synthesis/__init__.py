"""CUPID data synthesis (§3, Appendix B): personas → context factors → sessions →
checklists → dialogues → instances. Run it as ``cupid-synth`` (or ``python -m
synthesis.run``); from Python, ``from cupid.synthesis import synthesize``. The validation of
§3.2: ``cupid-validate``, ``from cupid.synthesis import validate``."""

if __name__ == "synthesis":  # ``python -m synthesis.…`` inside a checkout (utils/checkout.py)
    from utils.checkout import run_installed

    run_installed(__name__, "cupid-synth")

import importlib


_ENGINES = {"synthesize": "api", "SynthesisResult": "api", "validate": "validation.engine", "ValidationResult": "validation.engine"}


def __getattr__(name: str):
    if name in _ENGINES:
        return getattr(importlib.import_module(f"cupid.synthesis.{_ENGINES[name]}"), name)
    raise AttributeError(f"module 'cupid.synthesis' has no attribute {name!r}")
