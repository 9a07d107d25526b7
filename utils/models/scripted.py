"""``--model scripted``: a model for checking a pipeline, not for measuring one. It answers at
once, offline, with no weights: every request that states its answer's layout (answer_layout.py,
followed as the embedded model follows it: a grammar or a JSON schema) is answered with a text
in that layout, which the step's parser reads; a free-text request (a response to the user, a
simulated assistant's reply) with one fixed sentence.

Its answers are deterministic: where the layout leaves a choice (a score, a label, an entry's
label), the choice is drawn from a hash of the request, so that the scores of a run vary and
its aggregation is exercised, and a rerun gives the same numbers. They mean nothing about any
model. Cross-field rules that no layout states (synthesis's contrastive factors naming each
other, sessions following a journey) are beyond it: use it for the evaluation.
"""
from __future__ import annotations

import hashlib
import json
import re
from functools import partial
from typing import Any

from .catalog import ModelFacts, dated_table
from .embedded_grammar import follow
from .model import Model, register_model
from .request import Completion, Request, Usage
from .tokens import estimate_tokens

# Free: it runs in this process and writes its answers itself (catalog.py looks the price up).
CATALOG = dated_table("scripted", date="2026-12-02", sources="free: answers written in this process, no model",
                      models={"scripted": ModelFacts(0.0, 0.0, None)})

FREE_TEXT = "This is the scripted model's answer: it follows the layout asked for and says nothing."
LINE_WORDS = "cripted line of text."  # after an opening "S": "Scripted line of text."
# Texts tried, in order, for a JSON string with a pattern: the first the pattern accepts is used.
PATTERN_CANDIDATES = ("Does the response follow the scripted preference?", "Scripted text.", "Scripted",
                      "A scripted line.", "scripted")


class LayoutError(ValueError):
    """A layout this model cannot write (a grammar construct or pattern it does not know)."""


@register_model
class ScriptedModel(Model):
    model_name = "scripted"
    provider = "scripted"
    supports_json_schema = True
    finish_signals = {"stop": "stop"}

    def constrain(self, request: Request) -> Request:
        return follow(request)  # as the embedded model follows a layout, so its requests are alike

    def complete(self, request: Request) -> Completion:
        chooser = Chooser(request.cache_key(self.name, self.provider))
        if request.answer_grammar:
            text = from_grammar(request.answer_grammar, chooser)
        elif request.json_schema:
            text = json.dumps(from_schema(request.json_schema, chooser), ensure_ascii=False)
        else:
            text = FREE_TEXT
        prompt = request.system_prompt + "".join(m["content"] for m in request.messages)
        return Completion(text=text, usage=Usage(prompt_tokens=estimate_tokens(prompt),
                                                 completion_tokens=estimate_tokens(text)), finish="stop")


class Chooser:
    """Deterministic choices drawn from a request's hash."""

    def __init__(self, seed: str) -> None:
        self.seed, self.count = seed, 0

    def pick(self, n: int) -> int:
        self.count += 1
        digest = hashlib.sha256(f"{self.seed}\0{self.count}".encode("utf-8")).digest()
        return int.from_bytes(digest[:4], "big") % n


# -- a JSON schema's instance ---------------------------------------------------------------
def from_schema(schema: dict, chooser: Chooser, position: int = 1) -> Any:
    """An instance of ``schema``; an integer inside an array item is the item's position."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][chooser.pick(len(schema["enum"]))]
    kind = schema.get("type")
    if kind == "object":
        return {name: from_schema(sub, chooser, position) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        low = schema.get("minItems", 1)
        count = max(low, min(schema.get("maxItems", low), 2))
        items = schema.get("items", {})
        if "prefixItems" in schema:
            return [from_schema(s, chooser, i) for i, s in enumerate(schema["prefixItems"], start=1)]
        return [from_schema(items, chooser, i) for i in range(1, count + 1)]
    if kind == "integer":
        return position
    if kind == "number":
        return float(position)
    if kind == "boolean":
        return True
    if kind == "string":
        return string_for(schema)
    if "anyOf" in schema or "oneOf" in schema:
        options = schema.get("anyOf") or schema.get("oneOf")
        return from_schema(options[0], chooser, position)
    return None


def string_for(schema: dict) -> str:
    pattern = schema.get("pattern")
    limit = schema.get("maxLength")
    if pattern is None:
        text = "Scripted text."
        return text[:limit] if limit else text
    for text in PATTERN_CANDIDATES:
        if re.search(pattern, text) and (limit is None or len(text) <= limit):
            return text
    raise LayoutError(f"the scripted model has no text for the pattern {pattern!r}")


# -- a GBNF grammar's sentence ----------------------------------------------------------------
TOKEN = re.compile(r'\s*(?:(?P<literal>"(?:\\.|[^"\\])*")|(?P<cls>\[(?:\\.|[^\]\\])*\])|(?P<name>[A-Za-z_][\w-]*)'
                   r'|(?P<bar>\|)|(?P<open>\()|(?P<close>\))|(?P<quant>\{\d+(?:,\d*)?\}|[?*+]))')
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "]": "]", "[": "[", "-": "-", "^": "^"}


def from_grammar(grammar: str, chooser: Chooser) -> str:
    rules: dict[str, str] = {}
    for line in grammar.splitlines():
        if "::=" in line:
            name, body = line.split("::=", 1)
            rules[name.strip()] = body.strip()
    if "root" not in rules:
        raise LayoutError("the answer grammar has no root rule")
    return Sentence(rules, chooser).rule("root", depth=0)


class Sentence:
    def __init__(self, rules: dict[str, str], chooser: Chooser) -> None:
        self.rules, self.chooser = rules, chooser

    def rule(self, name: str, depth: int) -> str:
        if depth > 20 or name not in self.rules:
            raise LayoutError(f"the answer grammar's rule {name!r} is unknown or recursive")
        tokens = [m for m in TOKEN.finditer(self.rules[name])]
        alternatives = split_alternatives(tokens)
        return self.sequence(alternatives[self.chooser.pick(len(alternatives))], depth)

    def sequence(self, tokens: list, depth: int) -> str:
        out, i = [], 0
        while i < len(tokens):
            token = tokens[i]
            if token["open"]:
                close = matching_close(tokens, i)
                inner = split_alternatives(tokens[i + 1:close])
                produce = lambda inner=inner: self.sequence(inner[self.chooser.pick(len(inner))], depth)  # noqa: E731
                i = close
            elif token["literal"]:
                produce = lambda text=unescape(token["literal"][1:-1]): text  # noqa: E731
            elif token["cls"]:
                produce = partial(CharClass(token["cls"][1:-1]).char, self.chooser)
            elif token["name"]:
                produce = lambda name=token["name"]: self.rule(name, depth + 1)  # noqa: E731
            else:
                raise LayoutError(f"unexpected {token.group().strip()!r} in the answer grammar")
            quant = tokens[i + 1]["quant"] if i + 1 < len(tokens) and tokens[i + 1]["quant"] else None
            low, high = bounds(quant)
            if token["cls"] and high > low:  # a run of characters: a few words, not one letter
                out.append(CharClass(token["cls"][1:-1]).run(low, min(high, low + len(LINE_WORDS))))
            else:
                out.extend(produce() for _ in range(low))
            i += 2 if quant else 1
        return "".join(out)


def split_alternatives(tokens: list) -> list[list]:
    groups, current, level = [], [], 0
    for token in tokens:
        if token["open"]:
            level += 1
        elif token["close"]:
            level -= 1
        if token["bar"] and level == 0:
            groups.append(current)
            current = []
        else:
            current.append(token)
    groups.append(current)
    return groups


def matching_close(tokens: list, start: int) -> int:
    level = 0
    for i in range(start, len(tokens)):
        level += bool(tokens[i]["open"]) - bool(tokens[i]["close"])
        if level == 0:
            return i
    raise LayoutError("an unclosed group in the answer grammar")


def bounds(quant: str | None) -> tuple[int, int]:
    """How many times to write a quantified item: the least its quantifier allows (an optional
    item is left out), and the most for a run of characters."""
    if quant is None:
        return 1, 1
    if quant in ("?", "*"):
        return 0, 0
    if quant == "+":
        return 1, 1
    low, _, high = quant[1:-1].partition(",")
    return int(low), int(high) if high else int(low) + len(LINE_WORDS)


def unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: ESCAPES.get(m.group(1), m.group(1)), text)


class CharClass:
    def __init__(self, body: str) -> None:
        self.negated = body.startswith("^")
        body = body[1:] if self.negated else body
        chars, ranges, i = set(), [], 0
        items = [unescape(c) for c in re.findall(r"\\.|.", body)]
        while i < len(items):
            if i + 2 < len(items) and items[i + 1] == "-":
                ranges.append((items[i], items[i + 2]))
                i += 3
            else:
                chars.add(items[i])
                i += 1
        self.chars, self.ranges = chars, ranges

    def allows(self, char: str) -> bool:
        inside = char in self.chars or any(a <= char <= b for a, b in self.ranges)
        return inside != self.negated

    def char(self, chooser: Chooser | None = None) -> str:
        """A listed class (``[1-9]``): one of its characters, drawn; an excluding one (``[^\n#]``):
        the first allowed of "S", the line's words, the digits."""
        allowed = list(dict.fromkeys(c for c in "S" + LINE_WORDS + "0123456789" if self.allows(c)))
        if not self.negated:
            allowed = sorted(self.chars) + [chr(c) for a, b in self.ranges for c in range(ord(a), ord(b) + 1)]
        if not allowed:
            raise LayoutError("a character class the scripted model cannot fill")
        return allowed[chooser.pick(len(allowed))] if chooser is not None and not self.negated else allowed[0]

    def run(self, low: int, high: int) -> str:
        text = "".join(c for c in LINE_WORDS if self.allows(c))[:high]
        return text if len(text) >= low else text + self.char() * (low - len(text))
