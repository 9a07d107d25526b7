"""What models the harness knows, for ``cupid-eval --list-models``: each provider prefix with
the bare names it claims, its batch API, its reasoning option, the families its rules know and
its dated catalog of prices and context windows; the models registered by name; installed
plugins' entry points. All of it is read from the providers' own declarations (model.py's
hooks, catalog.py's tables), so a new provider lists itself."""
from __future__ import annotations

import sys
import textwrap

from .catalog import ModelFacts, tables
from .model import Model
from .registry import ENTRY_POINT_GROUP, _entry_points, registered_models
from .registry import _PROVIDERS, discover_models


def _provider_label(cls: type[Model]) -> str:
    """What the provider is, and the environment variables it reads."""
    label = getattr(cls, "provider_label", "") or _description(cls)
    url_env, key_env = getattr(cls, "url_env", ""), getattr(cls, "api_key_env", "")
    where = [f"server NAME@URL or {url_env}"] if url_env else []
    if key_env:
        where.append(f"key {key_env}" + (" if it asks for one" if url_env else ""))
    return f"{label} ({'; '.join(where)})" if where else label


def _description(cls: type[Model]) -> str:
    """The first line of the class's own docstring, else of its module's."""
    doc = cls.__dict__.get("__doc__") or sys.modules[cls.__module__].__doc__ or ""
    return doc.strip().splitlines()[0].rstrip(".") if doc.strip() else cls.__name__


def _example(prefix: str, cls: type[Model], catalog: dict[str, ModelFacts]) -> str:
    if getattr(cls, "url_env", None):  # a served model: NAME@URL
        return f"{prefix}:NAME@http://localhost:8000/v1"
    priced = [name for name, facts in catalog.items() if facts.input_per_mtok is not None]
    name = next(iter(priced or catalog), "NAME")
    return name if cls.name_guess(name) else f"{prefix}:{name}"


def _price(facts: ModelFacts) -> str:
    if facts.input_per_mtok is None or facts.output_per_mtok is None:
        return "unpriced"
    return "/".join(f"{x:.3f}".removesuffix("0") for x in (facts.input_per_mtok, facts.output_per_mtok))


def _wrapped(text: str, indent: str, hang: str | None = None) -> list[str]:
    return textwrap.wrap(text, 80, initial_indent=indent,
                         subsequent_indent=hang if hang is not None else indent + "  ",
                         break_on_hyphens=False, break_long_words=False)


def model_listing() -> str:
    """The table ``--list-models`` prints, at most 80 columns wide: one entry per provider
    class (with every prefix it is addressed by), in prefix order."""
    discover_models()
    prefixes: dict[type[Model], list[str]] = {}
    for prefix, cls in sorted(_PROVIDERS.items()):
        prefixes.setdefault(cls, []).append(prefix)
    lines = ["Providers: --model PREFIX:NAME, or a bare name its provider claims"]
    for cls, names in prefixes.items():
        table = tables().get(cls.provider)
        catalog = dict(table.models) if table is not None else {}
        example = _example(cls.provider if cls.provider in names else names[0], cls, catalog)
        lines.append("")
        lines += _wrapped(f"{', '.join(p + ':' for p in names)}  {_provider_label(cls)}", "")
        lines += _wrapped(f"bare names: {cls.bare_names or 'none (prefix needed)'}; batch API: "
                          f"{'no' if cls.batch_adapter is Model.batch_adapter else 'yes'}; reasoning "
                          f"option: {', '.join(cls.reasoning_options) or 'none'}; e.g. {example}", "  ")
        if cls.families:
            lines.append("  families:")
            name_width = max(len(name) for name, _ in cls.families)
            for name, reasoning in cls.families:
                lines += _wrapped(f"{name.ljust(name_width)}  {reasoning}", "    ",
                                  " " * (6 + name_width))
        if catalog:
            lines.append(f"  catalog of {table.date} (USD per 1M tokens in/out, context):")
            rows = [(name, cls.family_of(name), _price(facts),
                     "?" if facts.context_window is None else f"{round(facts.context_window / 1000):,}K")
                    for name, facts in catalog.items()]
            widths = [max(len(row[i]) for row in rows) for i in range(4)]
            lines += [f"    {a.ljust(widths[0])}  {b.ljust(widths[1])}  {c.rjust(widths[2])}  "
                      f"{d.rjust(widths[3])}" for a, b, c, d in rows]
    lines += ["", "Registered models: --model NAME"]
    registered = sorted(registered_models().items())
    width = max((len(name) for name, _ in registered), default=0)
    for name, cls in registered:
        lines += _wrapped(f"{name.ljust(width)}  {cls.provider}: {_description(cls)}", "  ",
                          " " * (4 + width))
    if not registered:
        lines.append("  none")
    plugins = _entry_points()
    lines += ["", f"Installed plugins (entry points of the {ENTRY_POINT_GROUP} group):"
                  + ("" if plugins else " none")]
    lines += [f"  {name} = {ep.value}" for name, ep in sorted(plugins.items())]
    return "\n".join(lines)
