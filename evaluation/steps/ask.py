"""A step's request before it is sent (``Ask``), and the compact record of what was sent,
which ``rebuild_request`` turns back into the exact request.

A record names its prompt file and version, the values that filled it (a long value the
instance or the prompt file already holds, the session log or the matcher's few-shot block,
is named by reference with its hash instead of copied), the hashes of the rendered texts and
the generation parameters: about 1 KB a step instead of the ~30 KB a session log weighs.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable

from ... import config
from ...utils.models.reask import Answer, ask_until_usable
from ...utils.answers import ParseError
from ...utils.models.answer_layout import Layout
from .layouts import few_shot_block
from ...utils.prompts import load_prompt

# What a value given by reference stands for.
SESSION_LOG = "session_log"          # the instance's session log as the run showed it
PROMPT_EXAMPLES = "prompt_examples"  # the matcher's few-shot block, from its prompt file


@dataclass(frozen=True)
class Ask:
    """One step's request: the prompt file, the values that fill it, how its answer is read,
    and the answer's layout (utils/models/answer_layout.py), which a model may follow (the
    embedded model does; the benchmark's models answer unconstrained, as the release's did)."""
    prompt: str                                          # a file under prompts/
    values: dict
    parse: Callable[[str], dict]                         # raises ParseError on an unusable answer
    refs: dict = field(default_factory=dict)             # value name -> SESSION_LOG / PROMPT_EXAMPLES
    layout: Layout | None = None
    max_tokens: int | None = None                        # the step's own limit (the decomposer's)

    def answer(self, model, *, first_variant: int = 0) -> Answer:
        """Ask ``model`` until the answer parses (``config.MAX_PARSE_RETRIES`` re-asks of the
        identical request, as the release would send it again); ``Answer.sent`` records
        what was sent. ``first_variant`` > 0 continues after attempts an earlier run
        recorded, so a rerun gets fresh answers instead of the cached unusable ones. Raises
        ``UnusableAnswer`` or ``ModelCallFailed`` (each carrying the ``Answer`` so far)."""
        system_prompt, user_prompt = self.render()
        options = {} if self.max_tokens is None else {"max_tokens": self.max_tokens}
        return ask_until_usable(
            model, system_prompt, [{"role": "user", "content": user_prompt}], self.parse,
            tries=config.MAX_PARSE_RETRIES + 1, invalid=(ParseError,), first_variant=first_variant,
            record=self.record(system_prompt, user_prompt, model.temperature, model.max_tokens),
            layout=self.layout, **options)

    def render(self) -> tuple[str, str]:
        """The system prompt and the user message."""
        return load_prompt(self.prompt).render(**self.values)

    def record(self, system_prompt: str, user_prompt: str, temperature: object,
               max_tokens: object) -> dict:
        """What was sent, compactly (see the module's docstring)."""
        prompt = load_prompt(self.prompt)
        values = {name: ({"ref": self.refs[name], "sha256": text_sha256(str(value))}
                         if name in self.refs else value) for name, value in self.values.items()}
        return {"prompt": prompt.name, "prompt_version": prompt.version, "values": values,
                "system_sha256": text_sha256(system_prompt), "user_sha256": text_sha256(user_prompt),
                "temperature": temperature,
                "max_tokens": self.max_tokens if self.max_tokens is not None else max_tokens}


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def rebuild_request(sent: dict, session_log: str | None = None) -> dict:
    """The request a step record describes: ``{"system_prompt", "messages", "temperature",
    "max_tokens"}``. ``session_log`` is the instance's log as the run showed it. Raises
    ValueError when the prompt file or a referenced value is not the one the run used."""
    prompt = load_prompt(sent["prompt"])
    if prompt.version != sent["prompt_version"]:
        raise ValueError(f"{sent['prompt']}: the prompt file changed since this step ran "
                         f"(version {sent['prompt_version']} then, {prompt.version} now)")
    values = {}
    for name, value in sent["values"].items():
        if isinstance(value, dict) and "ref" in value:
            if value["ref"] == SESSION_LOG:
                if session_log is None:
                    raise ValueError(f"{sent['prompt']}: needs the instance's session log")
                value_text = session_log
            elif value["ref"] == PROMPT_EXAMPLES:
                value_text = few_shot_block()
            else:
                raise ValueError(f"{sent['prompt']}: unknown reference {value['ref']!r}")
            if text_sha256(value_text) != value["sha256"]:
                raise ValueError(f"{sent['prompt']}: {name} is not the text this step was sent")
            values[name] = value_text
        else:
            values[name] = value
    system_prompt, user_prompt = prompt.render(**values)
    if text_sha256(system_prompt) != sent["system_sha256"] or text_sha256(user_prompt) != sent["user_sha256"]:
        raise ValueError(f"{sent['prompt']}: the rebuilt request differs from the one sent")
    return {"system_prompt": system_prompt,
            "messages": [{"role": "user", "content": user_prompt}],
            "temperature": sent["temperature"], "max_tokens": sent["max_tokens"]}
