"""The persona attributes and occupation tokens of the release's sampler, and the
taxonomies of Table 7 that the validators check answers against.

They are data (synthesis/data/), read once on first use; nothing is read at import.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

DATA_DIR = Path(__file__).resolve().parent / "data"
BUNDLED_SEEDS_FILE = DATA_DIR / "persona_seeds.jsonl"


@dataclass(frozen=True)
class PersonaAttribute:
    """One attribute of a persona template: ``n_choices`` of ``options`` (each option
    already joined with its level, "High Extroversion", when the attribute has levels)."""
    name: str
    n_choices: int
    options: tuple[str, ...]
    has_levels: bool


@dataclass(frozen=True)
class Taxonomy:
    persona_attributes: tuple[PersonaAttribute, ...]
    factor_types: tuple[str, ...]
    preference_types: dict[str, tuple[str, ...]]  # category -> types
    task_types: tuple[str, ...]

    @property
    def all_preference_types(self) -> tuple[str, ...]:
        return tuple(t for types in self.preference_types.values() for t in types)


@functools.lru_cache(maxsize=None)
def load_taxonomy() -> Taxonomy:
    data = yaml.safe_load((DATA_DIR / "taxonomy.yaml").read_text(encoding="utf-8"))
    attributes = []
    for name, spec in data["persona_attributes"].items():
        levels = spec.get("levels")
        options = ([f"{level} {option}" for option in spec["options"] for level in levels]
                   if levels else list(spec["options"]))
        attributes.append(PersonaAttribute(name=name, n_choices=int(spec.get("n_choices", 1)),
                                           options=tuple(options), has_levels=bool(levels)))
    return Taxonomy(
        persona_attributes=tuple(attributes),
        factor_types=tuple(data["context_factor_types"]),
        preference_types={k: tuple(v) for k, v in data["preference_types"].items()},
        task_types=tuple(data["task_types"]),
    )


@functools.lru_cache(maxsize=None)
def load_occupations() -> tuple[str, ...]:
    path = DATA_DIR / "occupations.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    tokens = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"{path}: duplicate occupation tokens")
    return tuple(tokens)


# ---------------------------------------------------------------------------------------
# Canonical spelling of a type an LLM wrote ("writing and editing" -> "Writing & editing")
# ---------------------------------------------------------------------------------------
def _norm_type(text: str) -> str:
    text = text.lower().replace("&", " and ")
    return re.sub(r"[^a-z0-9]+", " ", text).strip()


def canonical_type(value: object, allowed: tuple[str, ...]) -> str | None:
    """The entry of ``allowed`` that ``value`` names (case, '&'/'and', punctuation ignored),
    or None. A factor type may also be named by one of its halves ("Person" for
    "Person/Group"), and a preference type may carry its category ("Style: Tone")."""
    if not isinstance(value, str) or not value.strip():
        return None
    wanted = _norm_type(value)
    candidates = {wanted}
    if ":" in value:
        candidates.add(_norm_type(value.split(":", 1)[1]))
    for option in allowed:
        names = {_norm_type(option)} | {_norm_type(part) for part in option.split("/")}
        if candidates & names:
            return option
    return None
