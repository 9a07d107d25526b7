"""The taxonomies of the synthesis pipeline (Tables 5 and 7) and the occupation tokens.

They are data (synthesis/data/), read once on first use; nothing is read at import.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

DATA_DIR = Path(__file__).resolve().parent / "data"
TAXONOMY_FILE = DATA_DIR / "taxonomy.yaml"
OCCUPATIONS_FILE = DATA_DIR / "occupations.txt"
BUNDLED_SEEDS_FILE = DATA_DIR / "persona_seeds.jsonl"


@dataclass(frozen=True)
class Taxonomy:
    career_levels: tuple[str, ...]
    personality_traits: tuple[str, ...]
    personality_levels: tuple[str, ...]
    personal_values: tuple[str, ...]
    decision_making_styles: tuple[str, ...]
    factor_types: tuple[str, ...]
    preference_types: dict[str, tuple[str, ...]]  # category -> types
    task_types: tuple[str, ...]

    @property
    def all_preference_types(self) -> tuple[str, ...]:
        return tuple(t for types in self.preference_types.values() for t in types)


@functools.lru_cache(maxsize=None)
def load_taxonomy(path: str | Path = TAXONOMY_FILE) -> Taxonomy:
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    traits = data["persona_traits"]
    return Taxonomy(
        career_levels=tuple(traits["career_level"]),
        personality_traits=tuple(traits["personality_traits"]),
        personality_levels=tuple(traits["personality_levels"]),
        personal_values=tuple(traits["personal_values"]),
        decision_making_styles=tuple(traits["decision_making_style"]),
        factor_types=tuple(data["context_factor_types"]),
        preference_types={k: tuple(v) for k, v in data["preference_types"].items()},
        task_types=tuple(data["task_types"]),
    )


@functools.lru_cache(maxsize=None)
def load_occupations(path: str | Path = OCCUPATIONS_FILE) -> tuple[str, ...]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    tokens = [line.strip().lower() for line in lines if line.strip() and not line.startswith("#")]
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"{path}: duplicate occupation tokens")
    return tuple(tokens)


def occupation_pattern(token: str) -> re.Pattern:
    """A seed matches an occupation token when it holds the word or its plural."""
    return re.compile(rf"\b{re.escape(token)}(?:s|es)?\b", re.IGNORECASE)


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


# ---------------------------------------------------------------------------------------
# The lists as they appear in the prompts
# ---------------------------------------------------------------------------------------
def format_task_types(taxonomy: Taxonomy) -> str:
    return "\n".join(f"- {t}" for t in taxonomy.task_types)


def format_factor_types(taxonomy: Taxonomy) -> str:
    return "\n".join(f"- {t}" for t in taxonomy.factor_types)


def format_preference_types(taxonomy: Taxonomy) -> str:
    return "\n".join(f"- {category}: {', '.join(types)}"
                     for category, types in taxonomy.preference_types.items())


def format_personality_traits(taxonomy: Taxonomy) -> str:
    levels = "/".join(taxonomy.personality_levels)
    return "\n".join(f"- {t} ({levels})" for t in taxonomy.personality_traits)


def format_personal_values(taxonomy: Taxonomy) -> str:
    return "\n".join(f"- {v}" for v in taxonomy.personal_values)


def format_decision_making_styles(taxonomy: Taxonomy) -> str:
    return "\n".join(f"- {s}" for s in taxonomy.decision_making_styles)
