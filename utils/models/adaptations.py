"""What a run learns about a model's parameters: the provider refused one (an HTTP 400
naming it, e.g. OpenAI's ``unsupported_parameter`` for ``max_tokens``), the request is sent
again at once without it (or renamed), and every later request to that model in the run
is sent the same way.

Adapters say what a refusal means (``Model.parameter_adaptation``) and apply what was
learned when they build a request; the seam (model.py) records each adaptation here once
per model, prints it once, and resends. A model's first request is sent alone (the others
wait for it), so that concurrent calls do not each pay for the same refusal. Runs record
``snapshot()`` in run.json; each step records the adaptations its request was sent with.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Iterator

from .. import events
from .call_errors import RunCancelled
from .retry import CANCEL, status_code



@dataclass(frozen=True)
class Adaptation:
    parameter: str                 # the request field refused: "temperature", "max_tokens"
    renamed_to: str | None = None  # sent under this name instead; None: not sent at all
    error: str = ""                # the provider's words (error code or message)


def refused_temperature(exc: BaseException, overrides: dict, message: str) -> Adaptation | None:
    """The Adaptation a 400 saying the model does not take ``temperature`` (in ``message``:
    Anthropic's and Google's wordings; a model that accepts only its default) calls for: the
    temperature is then not sent. Not a temperature the user chose, and not a thinking
    refusal: a thinking budget is the user's or the paper's choice."""
    lowered = message.lower()
    if status_code(exc) != 400 or "temperature" in overrides or "temperature" not in lowered \
            or "thinking" in lowered:
        return None
    if any(word in lowered for word in ("not supported", "unsupported", "deprecated", "not allowed",
                                        "cannot both be specified")):
        return Adaptation("temperature", None, " ".join(message.split())[:160])
    return None


class AdaptationRegistry:
    """Adaptations per (provider, model name), shared by every thread of the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._learned: dict[tuple, list[Adaptation]] = {}
        self._gates: dict[tuple, threading.Lock] = {}
        self._opened: set[tuple] = set()

    def learned(self, key: tuple) -> tuple[Adaptation, ...]:
        with self._lock:
            return tuple(self._learned.get(key, ()))

    def learn(self, key: tuple, adaptation: Adaptation) -> None:
        """Record an adaptation and print it, unless this parameter was already adapted for
        the model (by another call, concurrently)."""
        with self._lock:
            known = self._learned.setdefault(key, [])
            if any(a.parameter == adaptation.parameter for a in known):
                return
            known.append(adaptation)
        done = (f"sent as {adaptation.renamed_to}" if adaptation.renamed_to
                else "not sent (the model's default is used)")
        events.note(f"note: {key[-1]}: the provider refused {adaptation.parameter} "
                    f"({adaptation.error}); {adaptation.parameter} {done} for the rest of the run")

    def snapshot(self) -> dict[str, list[dict]]:
        """{model name: [adaptation records]} for run.json."""
        with self._lock:
            return {key[-1]: [asdict(a) for a in items]
                    for key, items in self._learned.items() if items}

    @contextmanager
    def first_call(self, key: tuple) -> Iterator[None]:
        """Hold every call to ``key`` but the first until the first has been answered (or
        has failed), so that a refusal is paid for once, not once per worker."""
        if key in self._opened:
            yield
            return
        with self._lock:
            gate = self._gates.setdefault(key, threading.Lock())
        while not gate.acquire(timeout=0.2):
            if CANCEL.is_set():
                raise RunCancelled(f"{key[-1]}: the run is stopping")
        if key in self._opened:
            gate.release()
            yield
            return
        try:
            yield
        finally:
            self._opened.add(key)
            gate.release()

    def reset(self) -> None:
        """Forget what was learned (tests; a new run in the same process keeps it)."""
        with self._lock:
            self._learned.clear()
            self._gates.clear()
            self._opened.clear()


ADAPTATIONS = AdaptationRegistry()
