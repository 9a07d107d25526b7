"""What the engines tell their user while they run: notes ("3 of 6 instances already done"),
warnings and progress lines. They are records of the ``cupid.events`` logger, so the engines
(``evaluate()``, the batch runner, the cache, the model layer) print nothing themselves:

- by default a record is one line on the current ``sys.stderr`` (warnings begin "warning: "),
  which is what the commands show;
- ``routed(on_event)`` hands each one to a caller's callback instead, as an ``Event``
  (``evaluate(..., on_event=events.append)``), and adds the run's log file as a second reader;
- a caller may also replace the logger's handlers as with any logger.

The logger does not propagate: a notebook's ``logging.basicConfig`` would otherwise print each
event a second time.
"""
from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from .redact import RedactingFormatter, redact

EVENTS = logging.getLogger("cupid.events")
KIND = "cupid_event_kind"


@dataclass(frozen=True)
class Event:
    """``kind`` is "note", "warning" or "progress"; ``message`` has no "warning: " prefix."""

    kind: str
    message: str


def note(message: str) -> None:
    EVENTS.info(message, extra={KIND: "note"})


def warning(message: str) -> None:
    EVENTS.warning(message, extra={KIND: "warning"})


def progress(line: str) -> None:
    EVENTS.info(line, extra={KIND: "progress"})


def event_of(record: logging.LogRecord) -> Event:
    kind = getattr(record, KIND, None) or ("warning" if record.levelno >= logging.WARNING else "note")
    return Event(kind, redact(record.getMessage()))


class LineFormatter(RedactingFormatter):
    """An event as the commands print it: the message, after "warning: " for a warning."""

    def format(self, record: logging.LogRecord) -> str:
        event = event_of(record)
        return f"warning: {event.message}" if event.kind == "warning" else event.message


class CurrentStderr(logging.StreamHandler):
    """A handler that writes to whatever ``sys.stderr`` is when a record comes (a test's
    capture, a notebook's redirected stream), as ``print(..., file=sys.stderr)`` does."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(LineFormatter())

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ assigns one; stderr is read per record
        pass


class CallbackHandler(logging.Handler):
    def __init__(self, callback: Callable[[Event], object]) -> None:
        super().__init__()
        self.callback = callback

    def emit(self, record: logging.LogRecord) -> None:
        self.callback(event_of(record))


DEFAULT_HANDLER = CurrentStderr()
EVENTS.addHandler(DEFAULT_HANDLER)
EVENTS.setLevel(logging.INFO)
EVENTS.propagate = False


@contextmanager
def routed(on_event: Callable[[Event], object] | None = None,
           log_handler: logging.Handler | None = None) -> Iterator[None]:
    """For one run: events to ``on_event`` instead of the default line on stderr (when given),
    and also to ``log_handler`` (the run's log file); the logger's handlers put back after."""
    saved = list(EVENTS.handlers)
    try:
        if on_event is not None:
            EVENTS.handlers[:] = [h for h in EVENTS.handlers if h is not DEFAULT_HANDLER] + [CallbackHandler(on_event)]
        if log_handler is not None:
            EVENTS.addHandler(log_handler)
        yield
    finally:
        EVENTS.handlers[:] = saved
