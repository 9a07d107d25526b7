"""Prompt templates live in prompts/ as YAML with ``system_prompt`` and ``user_prompt``.

Two template styles:

* ``template: format`` (the files reproduced from the released harness): the prompts are
  Python format strings, as the release fills them with ``str.format``: ``{name}`` is a
  variable, ``{{`` and ``}}`` stand for literal braces.
* the default (``template: placeholders``, the files written for this project): the
  templates hold literal JSON braces, so ``Prompt.render`` replaces only the ``{name}``
  placeholders that the file declares under ``variables`` and leaves every other brace.

Either way a file declares its ``variables`` and cites its ``source``; any other top-level
key (e.g. the matcher's few-shot ``examples``) is data kept in ``Prompt.data``.
"""
from __future__ import annotations

import functools
import hashlib
import re
import string
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import yaml

from .. import config

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
STYLES = ("placeholders", "format")
_KEYS = {"source", "template", "variables", "system_prompt", "user_prompt"}


@dataclass(frozen=True)
class Prompt:
    name: str
    system_prompt: str
    user_prompt: str
    variables: tuple[str, ...]
    source: str
    version: str  # content hash, stored with results so prompt changes are never mixed
    style: str = "placeholders"
    data: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def render(self, **values: object) -> tuple[str, str]:
        missing = [v for v in self.variables if v not in values]
        if missing:
            raise KeyError(f"prompt {self.name!r} needs {', '.join(missing)}")
        unknown = [k for k in values if k not in self.variables]
        if unknown:
            raise KeyError(f"prompt {self.name!r} has no variable {', '.join(unknown)}")
        if self.style == "format":
            return self.system_prompt.format(**values), self.user_prompt.format(**values)

        def fill(template: str) -> str:
            return _PLACEHOLDER.sub(
                lambda m: str(values[m.group(1)]) if m.group(1) in self.variables else m.group(0),
                template)

        return fill(self.system_prompt), fill(self.user_prompt)


def format_fields(template: str) -> list[str]:
    """The variable names of a Python format string (raises ValueError on a stray brace)."""
    names = []
    for _, name, spec, conversion in string.Formatter().parse(template):
        if name is None:
            continue
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or spec or conversion:
            raise ValueError(f"field {{{name}}} is not a plain variable name")
        names.append(name)
    return names


@functools.lru_cache(maxsize=None)
def load_prompt(name: str) -> Prompt:
    """Load ``prompts/<name>.yaml``, e.g. ``load_prompt("evaluation/preference_inferrer")``."""
    path = config.PROMPTS_DIR / f"{name}.yaml"
    text = path.read_text(encoding="utf-8")  # FileNotFoundError names a missing one
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping with system_prompt and user_prompt")
    for key in ("system_prompt", "user_prompt"):
        if not isinstance(data.get(key), str):
            raise ValueError(f"{path}: field {key!r} must be a string")
    style = data.get("template", "placeholders")
    if style not in STYLES:
        raise ValueError(f"{path}: template must be one of {', '.join(STYLES)}, got {style!r}")
    variables = tuple(data.get("variables") or ())
    for key in ("system_prompt", "user_prompt"):
        if style == "format":
            try:
                used = format_fields(data[key])
            except ValueError as exc:
                raise ValueError(f"{path}: {key} is not a valid format string ({exc})") from exc
            undeclared = [n for n in used if n not in variables]
            if undeclared:
                raise ValueError(f"{path}: field {{{undeclared[0]}}} in {key} is not listed "
                                 f"under 'variables'")
            continue
        for found in _PLACEHOLDER.findall(data[key]):
            if found not in variables and found.islower() and found.replace("_", "").isalpha():
                # A lower-case {word} that is not declared is most likely a forgotten variable.
                raise ValueError(f"{path}: placeholder {{{found}}} in {key} is not listed "
                                 f"under 'variables'")
    return Prompt(name=name, system_prompt=data["system_prompt"], user_prompt=data["user_prompt"],
                  variables=variables, source=str(data.get("source", "")),
                  version=hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], style=style,
                  data=MappingProxyType({k: v for k, v in data.items() if k not in _KEYS}))
