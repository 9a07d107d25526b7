"""Stages 1 and 2 (Appendix B.1): persona templates, then persona descriptions.

Templates: a seed description (PersonaHub by default; a file or the bundled list offline)
drawn for a distinct occupation token, plus balanced random attributes, as the release's
sampler draws them; descriptions: the release's persona prompt, four templates a request.
"""
from __future__ import annotations

import hashlib
import json
import logging
import random
import re
from pathlib import Path
from typing import Iterable, Sequence

from .documents import generate_validated, TEXT, exactly, json_object, line, mapping, text_field
from ..utils.answers import ParseError, as_list, parse_json
from ..utils.models.answer_layout import Json
from .taxonomy import BUNDLED_SEEDS_FILE, Taxonomy, load_occupations
from ..utils.prompts import load_prompt
from ..utils.errors import SetupError

log = logging.getLogger(__name__)

PERSONAHUB_DATASET = "proj-persona/PersonaHub"
PERSONAHUB_CONFIG = "instruction"
PERSONAHUB_FIELD = "input persona"
SEED_FIELDS = (PERSONAHUB_FIELD, "persona", "description", "seed", "text")
BUNDLED = "bundled"
PROMPT = "synthesis/persona_generator"
# As the release sends them (persona_generator.py's constructor).
PARAMS = {"temperature": 0.7, "max_tokens": 4096}
# Persona templates described per request (PersonaGenerator's batch_size).
BATCH_SIZE = 4
# The release seeds its template sampler with 42 (PersonaTemplateSampler.__call__).
SEED = 42


class SeedSourceError(SetupError):
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
    # Only "\n" ends a line: str.splitlines would also cut at a U+2028 or U+0085 inside a seed.
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if path.suffix.lower() == ".jsonl":
        rows = []
        for number, line in enumerate(lines, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise SeedSourceError(f"{path}: line {number} is not valid JSON ({exc.msg})") from None
    elif path.suffix.lower() == ".json":
        rows = json.loads(text)
        if not isinstance(rows, list):
            raise SeedSourceError(f"{path}: expected a JSON list of seed descriptions")
    else:
        rows = [line for line in lines if line.strip() and not line.startswith("#")]
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
    # As the release reads them: in order, unstripped (its draws index this list).
    return [s for s in column if isinstance(s, str) and s.strip()]


def load_seeds(source: str | None) -> tuple[list[str], str]:
    """Returns (seeds, a label saying which source was used).

    ``source`` None: PersonaHub, falling back to the bundled list with a message when the
    hub cannot be reached; "bundled": the bundled list; anything else: a file path."""
    if source is None:
        log.info("loading seed descriptions from %s (%s) ...", PERSONAHUB_DATASET, PERSONAHUB_CONFIG)
        try:
            seeds = load_hub_seeds()
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
# The draws below follow the release's sampler (kixlab/CUPID@a8560ca,
# synthesis/modules/persona_template_sampler.py) call for call, so that the same seed list
# and the same random seed give the same templates: occupation tokens sampled among those
# with an unused matching seed, a random matching seed for each, then each attribute drawn
# among the least-selected half of its options. The release seeds Python's global random
# with 42; we use a private ``random.Random(seed)``, which draws the same numbers.
def seeds_by_token(seeds: Sequence[str], tokens: Sequence[str], used: Iterable[str]) -> dict[str, list[str]]:
    """Unused seeds holding each token (a substring match, as in the release)."""
    used = set(used)
    found: dict[str, list[str]] = {token: [] for token in tokens}
    for seed in seeds:
        if seed in used:
            continue
        for token in tokens:
            if token in seed:
                found[token].append(seed)
    return found


def sample_seeds(seeds: Sequence[str], tokens: Sequence[str], n: int, used: list[str],
                 rng: random.Random) -> list[tuple[str, str]]:
    """``n`` (token, seed) pairs: rounds of distinct tokens, each with a random unused seed,
    until ``n`` are drawn. A seed that holds two drawn tokens can be drawn twice in one round,
    as in the release."""
    drawn: list[tuple[str, str]] = []
    used = list(used)
    while len(drawn) < n:
        found = seeds_by_token(seeds, tokens, used)
        available = [token for token, matches in found.items() if matches]
        if not available:
            raise SeedSourceError(f"only {len(drawn)} unused seed descriptions hold one of the "
                                  f"{len(tokens)} occupation tokens; {n} personas were asked for")
        round_ = [(token, rng.choice(found[token]))
                  for token in rng.sample(available, min(n - len(drawn), len(available)))]
        drawn += round_
        used += [seed for _, seed in round_]
    return drawn


class AttributeSampler:
    """Each attribute's options drawn among the least-selected half so far (counts kept
    for the life of the sampler, as in the release)."""

    def __init__(self, taxonomy: Taxonomy) -> None:
        self.attributes = taxonomy.persona_attributes
        self.counts = {a.name: [0] * len(a.options) for a in self.attributes}

    def draw(self, rng: random.Random) -> dict:
        template: dict = {}
        for attribute in self.attributes:
            counts = self.counts[attribute.name]
            order = sorted(range(len(attribute.options)), key=lambda i: counts[i])  # stable
            pool = [attribute.options[i] for i in order[:(len(order) + 1) // 2]]  # the least-selected half
            chosen: list[str] = []
            while len(chosen) < attribute.n_choices:
                value = rng.choice(pool)
                trait = " ".join(value.split(" ")[1:])
                if attribute.has_levels and any(trait in earlier for earlier in chosen):
                    continue  # one level per trait
                chosen.append(value)
                pool.remove(value)
                counts[attribute.options.index(value)] += 1
            template[attribute.name] = chosen[0] if attribute.n_choices == 1 else chosen
        return template


def persona_id_for(index: int, seed_description: str) -> str:
    digest = hashlib.sha256(seed_description.encode("utf-8")).hexdigest()[:6]
    return f"persona_{index:04d}_{digest}"


def make_templates(seeds: Sequence[str], n: int, occupations: Sequence[str], taxonomy: Taxonomy,
                   seed: int, existing: Sequence[dict] = ()) -> list[dict]:
    """``n`` templates in all: ``existing`` ones kept, new ones drawn afresh with
    ``random.Random(seed)`` among the seeds they have not used (as the release reseeds and
    excludes used seeds when it adds personas). A new template's ``template_id`` counts from
    0 within its draw, as the release's ``id`` does."""
    templates = list(existing[:n])
    missing = n - len(templates)
    if missing <= 0:
        return templates
    rng = random.Random(seed)
    drawn = sample_seeds(seeds, occupations, missing, [t["seed_description"] for t in templates], rng)
    attributes = AttributeSampler(taxonomy)
    for template_id, (token, seed_description) in enumerate(drawn):
        template = {"persona_id": persona_id_for(len(templates), seed_description),
                    "template_id": template_id, "seed_description": seed_description,
                    "occupation_token": token}
        template.update(attributes.draw(rng))
        templates.append(template)
    return templates


def add_templates(document: dict, seeds: Sequence[str], source: str, n: int, taxonomy: Taxonomy,
                  seed: int) -> tuple[dict, list[dict]]:
    """personas.json's document with templates added up to ``n`` (``make_templates``), each
    waiting for its description, and the seed source named; and the new templates."""
    existing = document["personas"]
    templates = make_templates(seeds, n, load_occupations(), taxonomy, seed, existing=existing)
    new = [dict(t, description=None, occupation=None) for t in templates[len(existing):]]
    sources = [s for s in (document.get("seed_source"), source) if s]
    return {"seed_source": " + ".join(dict.fromkeys(sources)), "personas": existing + new}, new


# ---------------------------------------------------------------------------------------
# Descriptions (Figure 13)
# ---------------------------------------------------------------------------------------
RELEASE_TEMPLATE_KEYS = ("career_level", "personality_traits", "personal_values",
                         "decision_making_styles")


def format_template(number: int, template: dict) -> str:
    """One line of the batch, as the release writes it: the number, then the template as a
    Python dict (``str(dict)``: id, seed, then the attributes)."""
    shown = {"id": template["template_id"], "seed": template["seed_description"]}
    shown.update({key: template[key] for key in RELEASE_TEMPLATE_KEYS})
    return f"{number}. {shown}"


def description_batches(todo: list[dict], size: int,
                         planned: dict[str, tuple[str, ...]]) -> list[list[dict]]:
    """The personas to describe, ``size`` a request. ``planned`` (persona id -> the ids of
    its batch) keeps each persona in the batch it was first planned in, so that planning it
    again (batch mode's next pass) sends the same request."""
    new = [p["persona_id"] for p in todo if p["persona_id"] not in planned]
    for i in range(0, len(new), size):
        planned.update(dict.fromkeys(new[i:i + size], tuple(new[i:i + size])))
    by_id = {p["persona_id"]: p for p in todo}
    batches = dict.fromkeys(planned[pid] for pid in by_id)
    return [[by_id[pid] for pid in batch if pid in by_id] for batch in batches]


def record_descriptions(batch: Sequence[dict], answer) -> None:
    """Each template of a described batch takes its description and occupation, how many
    answers the batch took, and which batch it was described in (its first persona's id)."""
    for persona, described in zip(batch, answer.value):
        persona["description"] = described["description"]
        persona["occupation"] = described["occupation"]
        persona["description_attempts"] = answer.attempts
        persona["description_batch"] = batch[0]["persona_id"]


def describe_personas(model, templates: Sequence[dict], taxonomy: Taxonomy, *, max_attempts: int,
                      first_variant: int = 0, previous: tuple[str, str] | None = None):
    """One batch: Figure 13 → a validated description per template, in order.
    Returns an ``Answer`` whose value is the list of {description, occupation}."""
    system, user = load_prompt(PROMPT).render(
        seed_descriptions="\n".join(format_template(i, t) for i, t in enumerate(templates, start=1)))
    return generate_validated(model, system, user,
                              lambda raw: validate_persona_batch(raw, len(templates)),
                              max_attempts=max_attempts, first_variant=first_variant,
                              previous=previous, json_schema=persona_batch_schema(len(templates)),
                              layout=Json(persona_batch_schema(len(templates), embedded=True)),
                              params=PARAMS)


# Figure 13 asks for a six-sentence description: six sentence ends or more (., ! or ?
# followed by a space, or at the end), on one line. The bound is loose on purpose ("Dr. Ruiz"
# counts as an end, "3.5" does not), so that a capable model under guided decoding is barely
# held back while a small one cannot stop after its first sentence. A sentence holds at most
# 400 characters: a converter reads nothing of a patterned string but its pattern, and
# without that bound SmolLM2 wrote one sentence until max_tokens, for minutes. Quotes and
# backslashes are left out because converters differ on whether a pattern applies to the
# JSON text or to the decoded string. (The validator, for unconstrained models, asks for
# three sentences or more.)
_PLAIN = r'[^.!?"\\\x00-\x1f]'
_SENTENCE = rf'({_PLAIN}|[.!?]{_PLAIN.replace("[^", "[^ ")}){{1,400}}[.!?]'
SIX_SENTENCES = rf'^({_SENTENCE} ){{5,}}{_SENTENCE}$'
# The embedded model's: exactly six sentences of at most 120 characters (it repeats one
# sentence for as long as the pattern lets it).
_SHORT_SENTENCE = _SENTENCE.replace("{1,400}", "{1,120}")
EMBEDDED_SIX_SENTENCES = rf'^({_SHORT_SENTENCE} ){{5}}{_SHORT_SENTENCE}$'


def persona_batch_schema(n_personas: int, embedded: bool = False) -> dict:
    """Figure 13: one {description, occupation} per persona template, in order."""
    persona = json_object({"description": {"type": "string",
                                           "pattern": EMBEDDED_SIX_SENTENCES if embedded else SIX_SENTENCES},
                           "occupation": line(60) if embedded else TEXT})
    return json_object({"personas": exactly(n_personas, persona)})


def validate_persona_batch(raw: str, n_expected: int) -> list[dict]:
    items = as_list(parse_json(raw), "personas", ("personas", "persona_descriptions"))
    if len(items) != n_expected:
        raise ParseError(f"expected {n_expected} persona descriptions, got {len(items)}")
    out = []
    for i, item in enumerate(items, start=1):
        where = f"persona {i}"
        item = mapping(item, where)
        description = text_field(item, "description", where)
        occupation = text_field(item, "occupation", where)
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", description) if s.strip()]
        if len(sentences) < 3:
            raise ParseError(f"{where}: the description should have six sentences, "
                             f"got {len(sentences)}")
        out.append({"description": description, "occupation": occupation})
    return out
