"""What an answer looks like, said in terms any model's room can follow: the layout a step or a
synthesis stage declares with its request (``Model.generate(..., layout=...)``).

A step knows its answer's layout because its parser reads it. Whether and how a model follows
a layout is the model's own business (``Model.constrain``): the benchmark's models answer
unconstrained, as in the paper; the embedded model turns a layout into what llama.cpp follows
(embedded_grammar.py), so that a 135M model keeps the layout and reaches the scored part.

- ``Headed``: literal headers in order with, between them, 1..N free ``Lines`` or one of a
  few literal options (``Choice``, ``Number``).
- ``Json``: the JSON schema the answer holds to.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Union

# A free line holds at most this many characters and does not start with "#" (it cannot open
# a header), so a small model's line ends and the next header comes.
LINE_CHARS = 401


@dataclass(frozen=True)
class Lines:
    """One to ``most`` free lines."""
    most: int


@dataclass(frozen=True)
class Choice:
    """One of ``options``, written as given; ``name`` says what it is ("label", "status")."""
    name: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class Number:
    """A whole number from ``low`` to ``high``; ``name`` says what it is ("score")."""
    name: str
    low: int
    high: int


Part = Union[str, Lines, Choice, Number]  # a str is a literal header (with its newlines)


@dataclass(frozen=True)
class Headed:
    """Literal headers with free lines or a choice between them. ``held``: choices a model that
    follows the layout is held to, narrower than what the answer may say (the parser still
    reads every option): the user simulator's END once its dialogue has begun."""
    parts: tuple[Part, ...]
    held: tuple[Choice, ...] = ()

    def holding(self, choice: Choice) -> "Headed":
        return dataclasses.replace(self, held=self.held + (choice,))

    def followed(self) -> "Headed":
        """The layout a following model is held to: each held choice in place of its namesake."""
        held = {choice.name: choice for choice in self.held}
        return Headed(tuple(held.get(p.name, p) if isinstance(p, Choice) else p for p in self.parts))


@dataclass(frozen=True)
class Json:
    """A JSON answer holding to ``schema``."""
    schema: dict


Layout = Union[Headed, Json]

SCORE = Number("score", 1, 10)  # the judge's and the user simulator's 1-10 score
