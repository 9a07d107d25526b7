"""Secrets never reach disk or the console: every key the process knows is replaced by a
placeholder in errors, raw answers and log lines before they are stored or printed.

Known keys are the values of environment variables named ``*_API_KEY``, ``*_TOKEN`` or
``*_SECRET`` and the passwords of URLs in any environment variable (read at each call, so a
key exported after import counts), and any key or password a model was given in code
(``register_secret``). A server that echoes the key in a 401 message, or a model that
repeats it, then leaves ``[redacted]`` instead.

A URL's password is masked wherever a URL is written (``http://user:***@host/v1``), however
short it is: ``mask_url_passwords``, part of ``redact``.
"""
from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any
from urllib.parse import unquote, urlsplit

PLACEHOLDER = "[redacted]"
_SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET")
# Placeholder keys that local servers accept; replacing them would only mangle text.
_NOT_SECRETS = {"EMPTY", "none", "None", "null", "dummy"}
_MIN_LENGTH = 6

_lock = threading.Lock()
_registered: set[str] = set()


def register_secret(value: str | None) -> None:
    """Redact ``value`` from now on (a key passed to a model in code, not via the env)."""
    if _is_secret(value):
        with _lock:
            _registered.add(value)


# The user and password of a URL (``scheme://user:password@host``): the password runs to the
# netloc's last "@" (an unencoded "@" in it is read as urllib reads it).
_URL_PASSWORD = re.compile(r"(?<=://)([^\s/:@]*):[^\s/]*@")


def mask_url_passwords(text: str) -> str:
    """``text`` with the password of every URL in it replaced: ``http://user:***@host``."""
    return _URL_PASSWORD.sub(r"\1:***@", text) if "@" in text else text


def url_password(url: str) -> str | None:
    """The password of ``url`` as sent (percent-decoded), or None."""
    try:
        password = urlsplit(url.strip()).password
    except ValueError:
        return None
    return unquote(password) if password else None


def _is_secret(value: str | None) -> bool:
    return bool(value) and len(value) >= _MIN_LENGTH and value not in _NOT_SECRETS


def known_secrets() -> tuple[str, ...]:
    values = {v for k, v in os.environ.items()
              if k.upper().endswith(_SECRET_SUFFIXES) and _is_secret(v)}
    for value in os.environ.values():
        if "://" in value and "@" in value:
            for url in value.split(","):  # a server farm: URL1,URL2
                password = url_password(url)
                if _is_secret(password):
                    values |= {password, urlsplit(url.strip()).password}
    with _lock:
        values |= _registered
    # Longest first, so a key that contains another is replaced whole.
    return tuple(sorted(values, key=lambda v: (-len(v), v)))


def redact(value: Any) -> Any:
    """``value`` with every known key replaced; strings, lists, tuples and dicts (values)
    are walked, anything else is returned as it is. (``re`` caches the compiled pattern.)"""
    secrets = known_secrets()
    return _walk(value, re.compile("|".join(map(re.escape, secrets))) if secrets else None)


def _walk(value: Any, pattern: re.Pattern | None) -> Any:
    if isinstance(value, str):
        value = mask_url_passwords(value)
        return pattern.sub(PLACEHOLDER, value) if pattern is not None else value
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
