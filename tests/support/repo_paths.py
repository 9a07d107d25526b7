"""Where things are, for every test: the repository's root and the tests' own folders."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
SUPPORT = TESTS / "support"
GOLDEN_DIR = TESTS / "golden"
ARTIFACTS = TESTS / "artifacts"  # screenshots of the browser tests (ignored by git)
SAMPLE_DATA = ROOT / "data" / "sample"
