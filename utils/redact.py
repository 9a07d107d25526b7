"""Secrets never reach disk or the console: every key the process knows is replaced by a
placeholder in errors, raw answers and log lines before they are stored or printed.

Known keys are the values of environment variables named ``*_API_KEY``, ``*_TOKEN`` or
``*_SECRET`` (read at each call, so a key exported after import counts) and any key a model
was given in code (``register_secret``). A server that echoes the key in a 401 message, or
a model that repeats it, then leaves ``[redacted]`` instead.
"""
from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any

PLACEHOLDER = "[redacted]"
_SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET")
# Placeholder keys that local servers accept; replacing them would only mangle text.
_NOT_SECRETS = {"EMPTY", "none", "None", "null", "dummy"}
_MIN_LENGTH = 6

_lock = threading.Lock()
_registered: set[str] = set()
_pattern_cache: tuple[tuple[str, ...], re.Pattern | None] = ((), None)


def register_secret(value: str | None) -> None:
    """Redact ``value`` from now on (a key passed to a model in code, not via the env)."""
    if value and len(value) >= _MIN_LENGTH and value not in _NOT_SECRETS:
        with _lock:
            _registered.add(value)


def known_secrets() -> tuple[str, ...]:
    values = {v for k, v in os.environ.items()
              if k.upper().endswith(_SECRET_SUFFIXES) and v and len(v) >= _MIN_LENGTH
              and v not in _NOT_SECRETS}
    with _lock:
        values |= _registered
    # Longest first, so a key that contains another is replaced whole.
    return tuple(sorted(values, key=lambda v: (-len(v), v)))


def _pattern() -> re.Pattern | None:
    global _pattern_cache
    secrets = known_secrets()
    cached_for, pattern = _pattern_cache
    if secrets != cached_for:
        pattern = re.compile("|".join(re.escape(s) for s in secrets)) if secrets else None
        _pattern_cache = (secrets, pattern)
    return pattern


def redact(value: Any) -> Any:
    """``value`` with every known key replaced; strings, lists, tuples and dicts (values)
    are walked, anything else is returned as it is."""
    pattern = _pattern()
    if pattern is None:
        return value
    return _walk(value, pattern)


def _walk(value: Any, pattern: re.Pattern) -> Any:
    if isinstance(value, str):
        return pattern.sub(PLACEHOLDER, value)
    if isinstance(value, list):
        return [_walk(v, pattern) for v in value]
    if isinstance(value, tuple):
        return tuple(_walk(v, pattern) for v in value)
    if isinstance(value, dict):
        return {k: _walk(v, pattern) for k, v in value.items()}
    return value


class RedactingFormatter(logging.Formatter):
    """A log formatter whose whole output (message, traceback) is redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))
