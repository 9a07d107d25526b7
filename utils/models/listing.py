"""What models the harness knows, for ``cupid-eval --list-models`` and the README: each
provider prefix with the bare names it claims, its batch API, its reasoning option, the
families its rules know and its dated catalog of prices and context windows; the models
registered by name; installed plugins' entry points. All of it is read from the providers'
own declarations (model.py's hooks, catalog.py's tables), so a new provider lists itself."""
from __future__ import annotations

import sys
import textwrap

from cupid.utils.models.catalog import ModelFacts, tables
from cupid.utils.models.model import Model
from cupid.utils.models.registry import ENTRY_POINT_GROUP, _entry_points, registered_models
from cupid.utils.models.registry import _PROVIDERS, discover_models

WIDTH = 80


def provider_facts() -> list[dict]:
    """One entry per provider class (with every prefix it is addressed by), in prefix order."""
    discover_models()
    catalogs = tables()
    prefixes: dict[type[Model], list[str]] = {}
    for prefix, cls in sorted(_PROVIDERS.items()):
        prefixes.setdefault(cls, []).append(prefix)
    out = []
    for cls, names in prefixes.items():
        table = catalogs.get(cls.provider)
        models = dict(table.models) if table is not None else {}
        prefix = cls.provider if cls.provider in names else names[0]
        out.append({
            "prefixes": names, "class": cls, "label": _provider_label(cls),
            "bare_names": cls.bare_names, "batch": cls.batch_adapter is not Model.batch_adapter,
            "reasoning": ", ".join(cls.reasoning_options), "families": cls.families,
            "catalog_date": table.date if table is not None else None, "catalog": models,
            "example": _example(prefix, cls, models),
        })
    return out


def _provider_label(cls: type[Model]) -> str:
    """What the provider is, and the environment variables it reads."""
    label = getattr(cls, "provider_label", "") or _description(cls)
    url_env, key_env = getattr(cls, "url_env", ""), getattr(cls, "api_key_env", "") or \
        getattr(cls, "key_env", "")
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
    return "/".join(_dollars(x) for x in (facts.input_per_mtok, facts.output_per_mtok))


def _dollars(value: float) -> str:
    text = f"{value:.3f}"
    return text[:-1] if text.endswith("0") else text


def _window(tokens: int | None) -> str:
    return "?" if tokens is None else f"{round(tokens / 1000):,}K"


def _wrapped(text: str, indent: str, hang: str | None = None) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent,
                         subsequent_indent=hang if hang is not None else indent + "  ",
                         break_on_hyphens=False, break_long_words=False)


def _columns(rows: list[tuple[str, ...]], indent: str, right: set[int]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [(indent + "  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                                for i, (cell, w) in enumerate(zip(row, widths)))).rstrip()
            for row in rows]


def model_listing() -> str:
    """The table ``--list-models`` prints, at most 80 columns wide."""
    lines = ["Providers: --model PREFIX:NAME, or a bare name its provider claims"]
    for entry in provider_facts():
        lines.append("")
        lines += _wrapped(f"{', '.join(p + ':' for p in entry['prefixes'])}  {entry['label']}", "")
        lines += _wrapped(f"bare names: {entry['bare_names'] or 'none (prefix needed)'}; batch API: "
                          f"{'yes' if entry['batch'] else 'no'}; reasoning option: "
                          f"{entry['reasoning'] or 'none'}; e.g. {entry['example']}", "  ")
        if entry["families"]:
            lines.append("  families:")
            name_width = max(len(name) for name, _ in entry["families"])
            for name, reasoning in entry["families"]:
                lines += _wrapped(f"{name.ljust(name_width)}  {reasoning}", "    ",
                                  " " * (6 + name_width))
        if entry["catalog"]:
            cls = entry["class"]
            lines.append(f"  catalog of {entry['catalog_date']} (USD per 1M tokens in/out, context):")
            rows = [(name, cls.family_of(name), _price(facts), _window(facts.context_window))
                    for name, facts in entry["catalog"].items()]
            lines += _columns(rows, "    ", right={2, 3})
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


def model_table_markdown() -> str:
    """The README's table of providers and model families, from the same declarations."""
    rows = ["| prefix | bare names | example | batch API | family | reasoning option |",
            "|---|---|---|---|---|---|"]
    for entry in provider_facts():
        cls, catalog = entry["class"], entry["catalog"]
        families = entry["families"] or (("", entry["reasoning"] or "none"),)
        for i, (family, reasoning) in enumerate(families):
            members = sorted((name for name in catalog if cls.family_of(name) == family),
                             key=lambda name: catalog[name].input_per_mtok is None)  # priced first
            example = entry["example"] if not family else (members[0] if members else "")
            rows.append("| " + " | ".join([
                ", ".join(f"`{p}:`" for p in entry["prefixes"]) if i == 0 else "",
                entry["bare_names"] if i == 0 else "", f"`{example}`" if example else "",
                ("yes" if entry["batch"] else "no") if i == 0 else "", family, reasoning]) + " |")
    for name, cls in sorted(registered_models().items()):
        rows.append(f"| (registered) |  | `{name}` | no | {cls.provider}: {_description(cls)} | none |")
    return "\n".join(rows)
