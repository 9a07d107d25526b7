"""How the embedded model follows an answer layout (answer_layout.py): a headed layout becomes a
llama.cpp GBNF grammar (``Request.answer_grammar``), a JSON layout its schema
(``Request.json_schema``, which smollm2.py turns into a grammar). The scripted model follows
layouts the same way. The words inside a layout stay the model's own.

The grammar text is part of the embedded model's cache key, so it is written exactly as the
steps wrote it by hand before layouts existed (tests/utils/models/test_answer_layout.py holds
those texts): rules in the order root, numbers, options, then the line rule after a blank line.
Other models' requests held that text too, never sent; ``unfollowed`` keeps it for their keys.
"""
from __future__ import annotations

import dataclasses
from functools import lru_cache

from .answer_layout import LINE_CHARS, Choice, Headed, Json, Lines, Number
from .request import Request

LINE_RULE = f'line ::= [^\\n#] [^\\n]{{0,{LINE_CHARS - 1}}} "\\n"\n'
# The user simulator's grammar was written whole, without the blank line before its line rule
# that the others got from a shared rule; a layout opening with this header keeps that spelling.
_WRITTEN_WHOLE = "#### Evaluation of AI Assistant's Response\n\n"


def follow(request: Request) -> Request:
    """``request`` held to its layout (``Model.constrain`` of the models that follow layouts)."""
    layout = request.layout
    if isinstance(layout, Json):
        return dataclasses.replace(request, layout=None, json_schema=layout.schema)
    if isinstance(layout, Headed):
        return dataclasses.replace(request, layout=None, answer_grammar=_compiled(layout.followed()))
    return request


def unfollowed(request: Request) -> Request:
    """``request`` for a model that does not follow layouts (``Model.constrain``'s default): the
    layout dropped. A headed layout's grammar stays in ``answer_grammar``, which no such model
    sends, because their cache keys have always held it: answers already cached keep their keys."""
    if isinstance(request.layout, Headed):
        return dataclasses.replace(request, layout=None, answer_grammar=_compiled(request.layout))
    return dataclasses.replace(request, layout=None) if request.layout is not None else request


def grammar(layout: Headed) -> str:
    """The GBNF grammar of a headed layout."""
    root = " ".join(_literal(p) if isinstance(p, str) else _reference(p) for p in layout.parts)
    numbers = [p for p in layout.parts if isinstance(p, Number)]
    choices = [p for p in layout.parts if isinstance(p, Choice)]
    rules = [f"root ::= {root}\n"]
    rules += [f"{n.name} ::= {_number(n)}\n" for n in numbers]
    rules += [f"{c.name} ::= {' | '.join(map(_literal, c.options))}\n" for c in choices]
    if any(isinstance(p, Lines) for p in layout.parts):
        rules.append(LINE_RULE if layout.parts[0] == _WRITTEN_WHOLE else "\n" + LINE_RULE)
    return "".join(rules)



@lru_cache(maxsize=None)
def _compiled(layout: Headed) -> str:
    """``grammar(layout)``, once per layout: every request of a step holds one of a few layouts."""
    return grammar(layout)


def _reference(part: Lines | Choice | Number) -> str:
    if isinstance(part, Lines):
        return " ".join(["line"] + ["line?"] * (part.most - 1))
    return part.name


def _number(number: Number) -> str:
    """Numbers of two digits as literals, highest first, then the one-digit ones as a range:
    ``"10" | [1-9]``."""
    alternatives = [f'"{n}"' for n in range(number.high, max(number.low, 10) - 1, -1)]
    if number.low <= 9:
        alternatives.append(f"[{number.low}-{min(number.high, 9)}]")
    return " | ".join(alternatives)


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
