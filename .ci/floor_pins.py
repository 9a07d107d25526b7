"""Print ``name==floor`` for the dependencies whose oldest allowed release CI tests once
more (the provider SDKs and datasets), read from pyproject.toml so the two never drift."""
import re
import sys
import tomllib
from pathlib import Path

FLOOR_TESTED = ("openai", "anthropic", "together", "google-genai", "datasets")

pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
floors = {}
for requirement in pyproject["project"]["dependencies"]:
    found = re.match(r"^([A-Za-z0-9_.-]+)\s*>=\s*([0-9][^,;\s]*)", requirement)
    if found and found.group(1) in FLOOR_TESTED:
        floors[found.group(1)] = found.group(2)
missing = sorted(set(FLOOR_TESTED) - set(floors))
if missing:
    sys.exit(f"pyproject.toml declares no >= floor for {', '.join(missing)}")
print(" ".join(f"{name}=={version}" for name, version in floors.items()))
