"""Stages 1 and 2 (Appendix B.1): persona templates, then persona descriptions.

Templates: a seed description (PersonaHub by default; a file or the bundled list offline)
chosen so that every persona has its own occupation token, plus balanced random traits
from Table 5 (the least-used options so far are preferred).
"""
from __future__ import annotations

import hashlib
import json
import logging
import random
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Sequence

from synthesis.generation import generate_validated
from synthesis.schemas import persona_batch_schema
from synthesis.taxonomy import (
    BUNDLED_SEEDS_FILE,
    Taxonomy,
    format_decision_making_styles,
    format_personal_values,
    format_personality_traits,
    occupation_pattern,
)
from synthesis.validate import validate_persona_batch
from utils.prompts import load_prompt

log = logging.getLogger(__name__)

PERSONAHUB_DATASET = "proj-persona/PersonaHub"
PERSONAHUB_CONFIG = "instruction"
PERSONAHUB_FIELD = "input persona"
SEED_FIELDS = (PERSONAHUB_FIELD, "persona", "description", "seed", "text")
BUNDLED = "bundled"


class SeedSourceError(RuntimeError):
    """The seed descriptions could not be read (an unreadable file, an unreachable hub)."""


# ---------------------------------------------------------------------------------------
# Seed descriptions
# ---------------------------------------------------------------------------------------
def read_seed_file(path: str | Path) -> list[str]:
    """Seeds from .jsonl/.json (objects with an ``input persona``, ``persona`` or
    ``description`` field, or plain strings) or from a text file (one per line)."""
    path = Path(path)
    if not path.is_file():
        raise SeedSourceError(f"{path}: no such persona seed file")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".jsonl":
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    elif path.suffix.lower() == ".json":
        rows = json.loads(text)
        if not isinstance(rows, list):
            raise SeedSourceError(f"{path}: expected a JSON list of seed descriptions")
    else:
        rows = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    seeds = []
    for number, row in enumerate(rows, start=1):
        if isinstance(row, dict):
            row = next((row[k] for k in SEED_FIELDS if isinstance(row.get(k), str)), None)
        if not isinstance(row, str) or not row.strip():
            raise SeedSourceError(f"{path}: entry {number} has no seed description "
                                  f"(fields tried: {', '.join(SEED_FIELDS)})")
        seeds.append(row.strip())
    if not seeds:
        raise SeedSourceError(f"{path}: no seed descriptions")
    return list(dict.fromkeys(seeds))  # drop duplicates, keep order


def load_hub_seeds() -> list[str]:
    """PersonaHub's ``instruction`` config through ``datasets`` (downloads on first use)."""
    try:
        from datasets import load_dataset
    except ImportError as exc:
        raise SeedSourceError("loading PersonaHub needs `pip install datasets`") from exc
    try:
        rows = load_dataset(PERSONAHUB_DATASET, PERSONAHUB_CONFIG, split="train")
        column = rows[PERSONAHUB_FIELD]
    except Exception as exc:  # no network, no such dataset, a changed schema: all say why
        raise SeedSourceError(f"could not load {PERSONAHUB_DATASET} ({PERSONAHUB_CONFIG}): "
                              f"{type(exc).__name__}: {exc}") from exc
    return list(dict.fromkeys(s.strip() for s in column if isinstance(s, str) and s.strip()))


def load_seeds(source: str | None, hub_loader: Callable[[], list[str]] = load_hub_seeds
               ) -> tuple[list[str], str]:
    """Returns (seeds, a label saying which source was used).

    ``source`` None: PersonaHub, falling back to the bundled list with a message when the
    hub cannot be reached; "bundled": the bundled list; anything else: a file path."""
    if source is None:
        log.info("loading seed descriptions from %s (%s) ...", PERSONAHUB_DATASET, PERSONAHUB_CONFIG)
        try:
            seeds = hub_loader()
            return seeds, f"hub:{PERSONAHUB_DATASET}/{PERSONAHUB_CONFIG}"
        except SeedSourceError as exc:
            log.warning("%s. Falling back to the bundled seed list (%s); pass --persona_seeds "
                        "FILE to use your own.", exc, BUNDLED_SEEDS_FILE)
            return read_seed_file(BUNDLED_SEEDS_FILE), f"bundled:{BUNDLED_SEEDS_FILE.name} (hub unreachable)"
    if source == BUNDLED:
        return read_seed_file(BUNDLED_SEEDS_FILE), f"bundled:{BUNDLED_SEEDS_FILE.name}"
    return read_seed_file(source), f"file:{source}"


# ---------------------------------------------------------------------------------------
# Templates
# ---------------------------------------------------------------------------------------
def least_used(options: Sequence[str], counts: Counter, rng: random.Random, k: int = 1,
               exclude: Iterable[str] = ()) -> list[str]:
    """``k`` distinct options, the least used first; ties broken at random."""
    excluded = set(exclude)
    pool = [o for o in options if o not in excluded]
    rng.shuffle(pool)
    pool.sort(key=lambda o: counts[o])  # stable: the shuffle breaks ties
    chosen = pool[:k]
    counts.update(chosen)
    return chosen


def trait_counts(templates: Iterable[dict]) -> dict[str, Counter]:
    counts = {name: Counter() for name in ("career_level", "personality_trait", "personality_level",
                                           "personal_value", "decision_making_style")}
    for t in templates:
        counts["career_level"][t["career_level"]] += 1
        for trait in t["personality_traits"]:
            counts["personality_trait"][trait["trait"]] += 1
            counts["personality_level"][f"{trait['trait']}:{trait['level']}"] += 1
        counts["personal_value"].update(t["personal_values"])
        counts["decision_making_style"][t["decision_making_style"]] += 1
    return counts


def sample_traits(taxonomy: Taxonomy, counts: dict[str, Counter], rng: random.Random) -> dict:
    traits = []
    for trait in least_used(taxonomy.personality_traits, counts["personality_trait"], rng, k=2):
        levels = [f"{trait}:{level}" for level in taxonomy.personality_levels]
        level = least_used(levels, counts["personality_level"], rng)[0].split(":", 1)[1]
        traits.append({"trait": trait, "level": level})
    return {
        "career_level": least_used(taxonomy.career_levels, counts["career_level"], rng)[0],
        "personality_traits": traits,
        "personal_values": least_used(taxonomy.personal_values, counts["personal_value"], rng, k=2),
        "decision_making_style": least_used(taxonomy.decision_making_styles,
                                            counts["decision_making_style"], rng)[0],
    }


def persona_id_for(index: int, seed_description: str) -> str:
    digest = hashlib.sha256(seed_description.encode("utf-8")).hexdigest()[:6]
    return f"persona_{index:04d}_{digest}"


def make_templates(seeds: Sequence[str], n: int, occupations: Sequence[str], taxonomy: Taxonomy,
                   rng: random.Random, existing: Sequence[dict] = ()) -> list[dict]:
    """``n`` templates in all: ``existing`` ones kept, new ones added.

    Each new persona gets an occupation token no other persona has and a seed description
    holding that token (B.1: sample k distinct tokens, then a random description for each).
    Only when every token with a matching unused seed is taken are tokens reused."""
    templates = list(existing[:n])
    used_tokens = {t["occupation_token"] for t in templates}
    used_seeds = {t["seed_description"] for t in templates}
    counts = trait_counts(templates)
    matches: dict[str, list[str]] = {}
    for token in occupations:
        pattern = occupation_pattern(token)
        found = [s for s in seeds if pattern.search(s)]
        if found:
            matches[token] = found
    if not matches:
        raise SeedSourceError("no seed description mentions any of the occupation tokens")
    while len(templates) < n:
        candidates = [t for t in matches if t not in used_tokens
                      and any(s not in used_seeds for s in matches[t])]
        if not candidates:  # every token used once: allow repeats, still no repeated seed
            candidates = [t for t in matches if any(s not in used_seeds for s in matches[t])]
            if not candidates:
                raise SeedSourceError(f"only {len(templates)} distinct seed descriptions match "
                                      f"an occupation token; {n} personas were asked for")
            log.warning("more personas than distinct occupation tokens with seeds: reusing tokens")
        token = rng.choice(sorted(candidates))
        seed = rng.choice([s for s in matches[token] if s not in used_seeds])
        used_tokens.add(token)
        used_seeds.add(seed)
        template = {"persona_id": persona_id_for(len(templates), seed), "seed_description": seed,
                    "occupation_token": token}
        template.update(sample_traits(taxonomy, counts, rng))
        templates.append(template)
    return templates


# ---------------------------------------------------------------------------------------
# Descriptions (Figure 13)
# ---------------------------------------------------------------------------------------
def format_template(number: int, template: dict) -> str:
    traits = ", ".join(f"{t['level']} {t['trait']}" for t in template["personality_traits"])
    return "\n".join([
        f"### Persona {number}",
        f"- Basic Description: {template['seed_description']}",
        f"- Occupation: {template['occupation_token']}",
        f"- Career Level: {template['career_level']}",
        f"- Personality Traits: {traits}",
        f"- Personal Values: {', '.join(template['personal_values'])}",
        f"- Decision-Making Style: {template['decision_making_style']}",
    ])


def describe_personas(model, templates: Sequence[dict], taxonomy: Taxonomy, *, max_attempts: int,
                      first_variant: int = 0, previous: tuple[str, str] | None = None):
    """One batch: Figure 13 → a validated description per template, in order.
    Returns a ``Generated`` whose value is the list of {description, occupation}."""
    prompt = load_prompt("synthesis/persona_descriptions")
    system, user = prompt.render(
        personality_traits_list=format_personality_traits(taxonomy),
        personal_values_list=format_personal_values(taxonomy),
        decision_making_style_list=format_decision_making_styles(taxonomy),
        seed_personas="\n\n".join(format_template(i, t) for i, t in enumerate(templates, start=1)),
    )
    return generate_validated(model, system, user,
                              lambda raw: validate_persona_batch(raw, len(templates)),
                              max_attempts=max_attempts, first_variant=first_variant,
                              previous=previous, json_schema=persona_batch_schema(len(templates)))
