"""Prices and context windows of the models the harness knows: the lookup over the
providers' dated tables.

Each provider's module declares one table (``CATALOG = dated_table(...)``) with the date it
was compiled on and the pages it was compiled from. ``price_of(name)`` feeds the cost
estimate (usage.py ``estimate_cost``, ``--dry_run``); ``context_window_of(name)`` feeds the
seam's check that a request fits before it is sent (model.py). A model in no table costs
``None`` (unknown) and is sent unchecked.

Prices are USD per million tokens (input, output, and where a source states them cached input
and cache writes) at the online rate; reasoning and thinking tokens are billed as output by
every provider (they are counted in the completion tokens, see request.py ``Usage``). The context window is the total of prompt
and output tokens the model accepts. Providers change prices: check the sources before
budgeting a large run.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from . import discover_models


class ModelFacts(NamedTuple):
    input_per_mtok: float | None
    output_per_mtok: float | None
    context_window: int | None
    # Prompt tokens read from the provider's prompt cache, and written to it (Anthropic's
    # cache creation); None: no discount known, they are priced as input.
    cached_input_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None


class Price(NamedTuple):
    """USD per million tokens: input, output, cached input and cache writes (None: as input)."""
    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None


@dataclass(frozen=True)
class DatedTable:
    """One provider's prices and context windows, as ``sources`` stated them on ``date``."""
    provider: str
    date: str
    sources: str
    models: dict[str, ModelFacts]


_TABLES: dict[str, DatedTable] = {}


def dated_table(provider: str, *, date: str, sources: str,
                models: dict[str, ModelFacts]) -> DatedTable:
    """Declare ``provider``'s table (its module does, at import)."""
    table = DatedTable(provider, date, sources, dict(models))
    _TABLES[provider] = table
    return table


def tables() -> dict[str, DatedTable]:
    """Every provider's table, by provider."""
    discover_models()
    return dict(_TABLES)


# A dated snapshot (``gpt-5-mini-2025-08-07``, ``claude-sonnet-4-5-20250929``) not listed
# in its table is looked up under its alias, whose price and window the providers keep for
# every snapshot of the same model.
_SNAPSHOT_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


def facts_of(name: str | None) -> ModelFacts | None:
    if not name:
        return None
    known = tables().values()
    for candidate in (name, _SNAPSHOT_SUFFIX.sub("", name)):
        for table in known:
            if candidate in table.models:
                return table.models[candidate]
    return None


def price_of(name: str | None) -> Price | None:
    """The model's Price (input, output, cached input, cache write), or None when unknown."""
    facts = facts_of(name)
    if facts is None or facts.input_per_mtok is None or facts.output_per_mtok is None:
        return None
    return Price(facts.input_per_mtok, facts.output_per_mtok, facts.cached_input_per_mtok,
                 facts.cache_write_per_mtok)


def context_window_of(name: str | None) -> int | None:
    """Prompt plus output tokens the model accepts, or None when unknown."""
    facts = facts_of(name)
    return None if facts is None else facts.context_window
