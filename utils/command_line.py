"""Command-line helpers shared by the entry points: flag types that reject bad values as
flag errors (exit 2, one line), and the ``key=value,...`` generation parameters."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, NoReturn


def program_name(module_form: str) -> str:
    """How --help and flag errors name the program: the console script's name when it is
    the one running (``cupid-eval``), else ``module_form`` (``python -m evaluation.run``)."""
    invoked = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return invoked if invoked.startswith("cupid-") else module_form


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _number(kind: type, text: str, check: Callable[[float], bool], need: str):
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected {need}, got {text!r}") from None
    if not check(value):
        raise argparse.ArgumentTypeError(f"expected {need}, got {text}")
    return value


def positive_int(text: str) -> int:
    return _number(int, text, lambda v: v >= 1, "a whole number of at least 1")


def non_negative_int(text: str) -> int:
    return _number(int, text, lambda v: v >= 0, "a whole number of at least 0")


def positive_float(text: str) -> float:
    return _number(float, text, lambda v: v > 0 and v != float("inf"), "a number above 0")


def _temperature(text: str) -> float:
    return _number(float, text, lambda v: 0 <= v <= 2, "a temperature between 0 and 2")


# OpenAI's reasoning efforts (openai-python, src/openai/types/shared/reasoning_effort.py:
# ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]); which
# of them a model takes is the adapter's rule (utils/models/openai_models.py).
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


def _reasoning_effort(text: str) -> str:
    if text not in REASONING_EFFORTS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(REASONING_EFFORTS)}, got {text!r}")
    return text


def _thinking_budget(text: str) -> int:
    # -1 is Gemini's "dynamic" budget; each provider's adapter checks its own range.
    return _number(int, text, lambda v: v >= -1, "a whole number of tokens (-1: dynamic, Gemini)")


# Generation parameters a user may set per role (the Request fields the adapters translate;
# utils/models/registry.py OVERRIDABLE), each with its parser. The reasoning options are
# then checked against the model's provider and family (Model.validate_overrides).
GENERATION_PARAMS: dict[str, Callable[[str], object]] = {
    "temperature": _temperature,
    "max_tokens": positive_int,
    "seed": non_negative_int,
    "reasoning_effort": _reasoning_effort,   # OpenAI reasoning models
    "thinking_budget": _thinking_budget,     # Anthropic and Google thinking models
}


def generation_params(text: str) -> dict:
    """``temperature=0.2,max_tokens=1024`` -> {"temperature": 0.2, "max_tokens": 1024}.
    Only the parameters of GENERATION_PARAMS are accepted."""
    params: dict = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise argparse.ArgumentTypeError(f"expected key=value pairs separated by commas, got {part!r}")
        if key not in GENERATION_PARAMS:
            raise argparse.ArgumentTypeError(
                f"unknown parameter {key!r}; use {', '.join(sorted(GENERATION_PARAMS))}")
        try:
            params[key] = GENERATION_PARAMS[key](value.strip())
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{key}: {exc}") from None
    if not params:
        raise argparse.ArgumentTypeError("expected at least one key=value pair")
    return params


def namespace_from_kwargs(parser: argparse.ArgumentParser, kwargs: dict,
                          base: list[str] | None = None) -> argparse.Namespace:
    """The Namespace a command line would give, from Python keyword arguments named as the
    flags' destinations (``n_workers=4``, ``model_args={"temperature": 0.2}``). Each value
    goes through its flag's own type and choices, so the Python API refuses exactly what the
    command line refuses, but as a ``ValueError`` naming the argument instead of an exit."""
    args = parser.parse_args(base or [])
    actions = {a.dest: a for a in parser._actions if a.dest != "help"}
    for name, value in kwargs.items():
        action = actions.get(name)
        if action is None:
            known = ", ".join(sorted(actions))
            raise ValueError(f"{name}: no such argument (known: {known})")
        setattr(args, name, _checked_value(name, action, value))
    return args


def _checked_value(name: str, action: argparse.Action, value):
    if value is None:
        return None
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        if not isinstance(value, bool):
            raise ValueError(f"{name}: expected True or False, got {value!r}")
        return value
    if isinstance(action, argparse._AppendAction):
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, (list, tuple)):
            raise ValueError(f"{name}: expected a string or a list of strings, got {value!r}")
        return [_converted(name, action, v) for v in values]
    return _converted(name, action, value)


def _converted(name: str, action: argparse.Action, value):
    if isinstance(value, bool) and action.type is not None:
        raise ValueError(f"{name}: expected a value, got {value!r}")
    if action.type is generation_params and isinstance(value, dict):
        value = ",".join(f"{k}={v}" for k, v in value.items())
    if action.type is not None:
        if not isinstance(value, (str, int, float)):
            raise ValueError(f"{name}: expected a {getattr(action.type, '__name__', 'value')}, got {value!r}")
        try:
            value = action.type(str(value))
        except (argparse.ArgumentTypeError, TypeError, ValueError) as exc:
            raise ValueError(f"{name}: {exc}") from None
    elif not isinstance(value, str):
        raise ValueError(f"{name}: expected a string, got {value!r}")
    if action.choices is not None and value not in action.choices:
        raise ValueError(f"{name}: expected one of {', '.join(map(str, action.choices))}, got {value!r}")
    return value
