"""Prompt templates live in prompts/ as YAML with ``system_prompt`` and ``user_prompt``.

Templates hold literal JSON braces, so ``str.format`` cannot fill them; ``Prompt.render``
replaces only ``{name}`` placeholders that the template declares under ``variables``.
A file reproduced from the released harness says ``template: format``: its prompts are
Python format strings, filled with ``str.format`` as the release fills them (``{{`` and
``}}`` are literal braces).
"""
from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass

import yaml

import config

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Prompt:
    name: str
    system_prompt: str
    user_prompt: str
    variables: tuple[str, ...]
    source: str
    version: str  # content hash, stored with results so prompt changes are never mixed
    style: str = "placeholders"  # or "format" (``template: format``)

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


@functools.lru_cache(maxsize=None)
def load_prompt(name: str) -> Prompt:
    """Load ``prompts/<name>.yaml``, e.g. ``load_prompt("evaluation/infer_preference")``."""
    path = config.PROMPTS_DIR / f"{name}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no prompt template {path}")
    text = path.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping with system_prompt and user_prompt")
    for field in ("system_prompt", "user_prompt"):
        if not isinstance(data.get(field), str):
            raise ValueError(f"{path}: field {field!r} must be a string")
    style = data.get("template", "placeholders")
    if style not in ("placeholders", "format"):
        raise ValueError(f"{path}: template must be placeholders or format, got {style!r}")
    variables = tuple(data.get("variables") or ())
    for field in ("system_prompt", "user_prompt"):
        text_of_field = data[field].replace("{{", "").replace("}}", "") if style == "format" else data[field]
        for found in _PLACEHOLDER.findall(text_of_field):
            if found not in variables and found.islower() and found.replace("_", "").isalpha():
                # A lower-case {word} that is not declared is most likely a forgotten variable.
                raise ValueError(f"{path}: placeholder {{{found}}} in {field} is not listed "
                                 f"under 'variables'")
    return Prompt(name=name, system_prompt=data["system_prompt"], user_prompt=data["user_prompt"],
                  variables=variables, source=str(data.get("source", "")),
                  version=hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], style=style)
