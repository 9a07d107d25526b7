"""The `examples` text kept beside a synthesis prompt in its YAML file."""
from __future__ import annotations

import functools

import yaml

import config


@functools.lru_cache(maxsize=None)
def load_examples(name: str) -> str:
    path = config.PROMPTS_DIR / f"{name}.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    examples = data.get("examples") if isinstance(data, dict) else None
    if not isinstance(examples, str) or not examples.strip():
        raise ValueError(f"{path}: no 'examples' text")
    return examples.strip()
