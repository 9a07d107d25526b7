"""What a context strategy is given of an instance (docs/strategies.md): a view made afresh
from the instance's data for each call, never the instance the run scores.

A strategy is blind unless it declares otherwise: it sees what the evaluated model is shown,
the current request and the prior sessions' dialogues in order (``BlindInstance``). Reading
anything else (the current preference, its checklist, a session's context factor or
preference, the instance's id or type) raises ``LabelHidden``, one line naming the strategy
and the field. A strategy with ``uses_labels = True`` is given a copy of the whole instance
instead, and its runs are marked as using labels (run.json, results.json, the report).
Whatever a strategy does to what it was given stays there: the chains read the instance's
own data, and ``unchanged`` checks after every call that the instance is as it was.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from ..utils.dataset import Instance, Turn

# What a blind strategy may not read: the instance's labels and what names them.
HIDDEN_INSTANCE_FIELDS = ("instance_id", "persona_id", "instance_type", "current_context_factor",
                          "current_contextual_preference", "current_checklist", "source", "extra",
                          "relevant_positions", "fingerprint", "to_row")
HIDDEN_SESSION_FIELDS = ("context_factor", "contextual_preference")


class LabelHidden(AttributeError):
    """A blind strategy read a field the evaluated model is not shown."""


def _hidden(strategy: str, where: str, name: str) -> LabelHidden:
    return LabelHidden(f"setting {strategy}: read {where}.{name}, which the evaluated model is not shown (a "
                       f"strategy is given the current request and the prior sessions' dialogues); declare "
                       f"uses_labels = True on the strategy to read labels, and its results are marked as "
                       f"using labels")


@dataclass(frozen=True)
class BlindSession:
    """A prior session as the evaluated model sees it: its dialogue alone."""
    dialogue: tuple[Turn, ...]
    _strategy: str = field(default="", repr=False, compare=False)
    _where: str = field(default="instance.prior_interactions[?]", repr=False, compare=False)

    def __getattr__(self, name: str) -> Any:
        if name in HIDDEN_SESSION_FIELDS:
            raise _hidden(object.__getattribute__(self, "_strategy"), object.__getattribute__(self, "_where"), name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")


@dataclass(frozen=True)
class BlindInstance:
    """An instance as the evaluated model sees it: the current request and the prior
    sessions' dialogues, in order."""
    current_request: str
    prior_interactions: tuple[BlindSession, ...]
    _strategy: str = field(default="", repr=False, compare=False)

    def __getattr__(self, name: str) -> Any:
        if name in HIDDEN_INSTANCE_FIELDS:
            raise _hidden(object.__getattribute__(self, "_strategy"), "instance", name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")


def view_of(instance: Instance, strategy: str, uses_labels: bool) -> Any:
    """What a strategy named ``strategy`` is given of ``instance``: a copy of it all when it
    declares it uses labels, else the blind view. Made afresh (new objects throughout) so
    that nothing done to it reaches the instance."""
    if uses_labels:
        return copy.deepcopy(instance)
    sessions = tuple(BlindSession(tuple(Turn(t.role, t.content) for t in s.dialogue), strategy,
                                  f"instance.prior_interactions[{i}]")
                     for i, s in enumerate(instance.prior_interactions))
    return BlindInstance(instance.current_request, sessions, strategy)


def unchanged(instance: Instance, fingerprint: str, strategy: str) -> None:
    """Raise when the instance's data no longer has ``fingerprint``: a strategy reached past
    its view and changed what is scored (the instance then fails, nothing is scored)."""
    if instance.fingerprint() != fingerprint:
        raise RuntimeError(f"setting {strategy}: instance {instance.instance_id}'s data changed while the strategy "
                           f"ran (it reached past what it was given); nothing of the instance is scored")
