"""Command-line helpers shared by the entry points: flag types that reject bad values as
flag errors (exit 2, one line), the ``key=value,...`` generation parameters, and how a
command reports what stopped it."""
from __future__ import annotations

import argparse
import functools
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


def print_error(exc: BaseException) -> int:
    """What stopped a command, on stderr, and its exit status: an ``Interrupted``'s message,
    else ``error:`` and the CupidError's message and notes, keys redacted."""
    from .errors import Interrupted
    from .redact import redact

    if isinstance(exc, Interrupted):
        print(f"\n{exc.message}", file=sys.stderr)
    else:
        print(redact("\n".join([f"error: {exc}", *getattr(exc, "__notes__", ())])), file=sys.stderr, flush=True)
    return exc.exit_code


def run_console(main: Callable[[], int]) -> NoReturn:
    """A console script: exits with ``main()``'s status, or a signal's when stopped before
    the run set its own handlers."""
    from .stop_signals import stop_status

    try:
        sys.exit(main())
    except KeyboardInterrupt as exc:
        sys.exit(stop_status(exc))


def _number(kind: type, check: Callable[[float], bool], need: str, text: str):
    """``text`` as a ``kind`` for which ``check`` holds, else a flag error saying ``need``."""
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected {need}, got {text!r}") from None
    if not check(value):
        raise argparse.ArgumentTypeError(f"expected {need}, got {text}")
    return value


positive_int = functools.partial(_number, int, lambda v: v >= 1, "a whole number of at least 1")
non_negative_int = functools.partial(_number, int, lambda v: v >= 0, "a whole number of at least 0")
positive_float = functools.partial(_number, float, lambda v: v > 0 and v != float("inf"), "a number above 0")
_temperature = functools.partial(_number, float, lambda v: 0 <= v <= 2, "a temperature between 0 and 2")
# -1 is Gemini's "dynamic" budget; each provider's adapter checks its own range.
_thinking_budget = functools.partial(_number, int, lambda v: v >= -1, "a whole number of tokens (-1: dynamic, Gemini)")


def known_reasoning_efforts() -> tuple[str, ...]:
    """The reasoning efforts the installed openai SDK names (src/openai/types/shared/
    reasoning_effort.py: ``ReasoningEffort``; openai-python 2.45 added "max"). Which of them a
    model takes is the adapter's rule (utils/models/openai_models.py)."""
    import typing

    from openai.types.shared.reasoning_effort import ReasoningEffort

    return tuple(arg for literal in typing.get_args(ReasoningEffort) for arg in typing.get_args(literal))


def _reasoning_effort(text: str) -> str:
    """A word; one the SDK does not name yet is passed on, with a warning, for the provider
    to judge (a newer model may take a newer effort)."""
    if not text.replace("-", "").replace("_", "").isalnum():
        raise argparse.ArgumentTypeError(f"expected an effort word such as low or high, got {text!r}")
    known = known_reasoning_efforts()
    if text not in known:
        print(f"warning: reasoning_effort={text} is not one the openai SDK names ({', '.join(known)}); "
              f"it is sent as given, for the provider to accept or refuse", file=sys.stderr, flush=True)
    return text


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
