"""Context strategies: what the evaluated model is shown of an instance's prior sessions, in
the infer and generate requests. The paper's four settings (§4.1) are strategies; so are the
retrievers of retrieval.py and a user's own class (docs/strategies.md).

A strategy is a small object with ``select(instance)``, returning the prior sessions to show
(shown in the order returned, in the release's session-log layout), or ``render(instance)``,
returning the history text itself (a memory system's notes); with both, ``render`` gives the
text and ``select`` names the sessions it drew on. Optional: ``skip_reason(instance)`` (the
instance is skipped, not failed), and the flags ``summaries`` (Figure 23's summaries of the
selected sessions), ``preference_given`` and ``tasks``. ``--setting`` names one as
``NAME[:key=value,...]``: a built-in name, ``path/file.py:Class``, ``package.module:Class``
or a ``cupid.strategies`` entry point, loaded as the user's models are. Its canonical name
(parameters sorted) names its run directory, so ``recent:k=2`` and ``recent:k=4`` never mix;
a user's strategy's name ends with a hash of what it is (its class, parameters and source
file's content), so two files of one name, or a file before and after an edit, never share a
run.

A strategy is given a view of the instance (strategy_view.py): blind (the current request and
the prior sessions' dialogues) unless it declares ``uses_labels = True``; what it selected or
rendered is then read from the instance's own data, by position.
"""
from __future__ import annotations

import difflib
import hashlib
import inspect
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .memory import Memory
from .retrieval import BM25, Dense, Recent
from .steps.layouts import format_session_log
from .strategy_model import ForecastingModel, counting
from .strategy_view import unchanged, view_of
from ..utils.dataset import Instance, Session
from ..utils.errors import BadInput

TASKS = ("inference", "generation", "both")
ENTRY_POINT_GROUP = "cupid.strategies"


class Default:
    """All the prior sessions (the release's only setting)."""

    def select(self, instance: Instance) -> Sequence[Session]:
        return instance.prior_interactions


class NoHistory:
    """No prior session: the same model without the user's history, the baseline every other
    strategy is measured against."""

    def select(self, instance: Instance) -> Sequence[Session]:
        return ()


class Oracle:
    """Only the sessions whose preference is the current one (it reads the labels)."""
    uses_labels = True

    def select(self, instance: Instance) -> Sequence[Session]:
        keep = set(instance.relevant_positions())
        return [s for i, s in enumerate(instance.prior_interactions, start=1) if i in keep]

    def skip_reason(self, instance: Instance) -> str | None:
        return None if instance.relevant_positions() else "no prior session has the current preference"


class Summary(Default):
    """Figure 23's summary of every session, in place of the sessions."""
    summaries = True


class OraclePreference:
    """Generation given the true preference, no sessions."""
    preference_given = True
    uses_labels = True
    tasks = ("generation",)

    def select(self, instance: Instance) -> Sequence[Session]:
        return ()


BUILT_IN = {"default": Default, "none": NoHistory, "oracle": Oracle, "summary": Summary, "oracle_preference": OraclePreference,
            "recent": Recent, "bm25": BM25, "dense": Dense, "memory": Memory}


@dataclass(frozen=True)
class Shown:
    """What a strategy shows of one instance: the history text, and the sessions it selected
    with their 1-based positions (None when it only renders text); ``rendered``: the text is
    the strategy's own (``render``), not the session log of its sessions."""
    text: str
    sessions: tuple[Session, ...] | None
    positions: tuple[int, ...] | None
    rendered: bool = False
    model_usage: dict | None = None  # an LLM-backed strategy's calls for it (strategy_model.py)


@dataclass(frozen=True)
class Strategy:
    """A strategy under its canonical name (``recent:k=2``): ``impl`` is the built-in's or the
    user's object (the one with ``select`` or ``render``); ``spec`` loads a user's code again
    from any directory (recorded in run.json); ``identity`` is what a user's strategy is (its
    class, parameters and source's hash; None for a built-in), whose hash ends its name."""
    name: str
    impl: Any
    spec: str | None = None
    identity: dict | None = field(default=None, compare=False)  # its hash ends the name, which compares
    # A user's strategy's selection per instance (by fingerprint): called once per process.
    _kept: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def summaries(self) -> bool:
        return bool(getattr(self.impl, "summaries", False))

    @property
    def preference_given(self) -> bool:
        return bool(getattr(self.impl, "preference_given", False))

    @property
    def uses_labels(self) -> bool:
        """Whether the strategy reads the instance's labels (declared with ``uses_labels =
        True``, as the oracle does; the true preference given is one too)."""
        return bool(getattr(self.impl, "uses_labels", False)) or self.preference_given

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(getattr(self.impl, "tasks", TASKS))

    @property
    def uses_model(self) -> bool:
        """Whether the strategy asks an LLM (``uses_model = True``): the harness gives it one
        as ``strategy.model`` (strategy_model.py)."""
        return bool(getattr(self.impl, "uses_model", False))

    def give_model(self, model: Any) -> None:
        """The LLM the strategy asks (a ``StrategyModel``), given before it is called."""
        try:
            self.impl.model = model
        except AttributeError as exc:
            raise BadInput(f"setting {self.name}: uses_model is set but its model cannot be given to it "
                           f"({exc})") from None

    def view(self, instance: Instance) -> Any:
        """What the strategy is given of ``instance`` (strategy_view.py)."""
        return view_of(instance, self.name, self.uses_labels)

    def skip_reason(self, instance: Instance) -> str | None:
        """Why the strategy does not apply to an instance (it is skipped, not failed)."""
        reason = getattr(self.impl, "skip_reason", None)
        if not callable(reason):
            return None
        fingerprint = instance.fingerprint()
        found = reason(self.view(instance))
        unchanged(instance, fingerprint, self.name)
        return found

    def shown(self, instance: Instance) -> Shown:
        """What the strategy shows of ``instance``: the sessions it selected, read from the
        instance by position, or the text it rendered."""
        fingerprint = instance.fingerprint()
        model = getattr(self.impl, "model", None) if self.uses_model else None
        if self.uses_model and model is None:
            raise RuntimeError(f"setting {self.name}: uses_model is set but no model was given to it")
        # What the strategy returned is kept per instance, unless its answers were stand-ins.
        keep = self.identity is not None and not isinstance(model, ForecastingModel)
        kept = self._kept.get(fingerprint) if keep else None
        if kept is not None:
            return self.recorded_shown(instance, *kept)
        view = self.view(instance)
        select, render = (getattr(self.impl, name, None) for name in ("select", "render"))
        positions = text = None
        with counting() as spent:
            if callable(select):
                positions = self._positions(instance, view, tuple(select(view)))
            if callable(render):
                text = render(view)
                if not isinstance(text, str):
                    raise TypeError(f"setting {self.name}: render() returned a {type(text).__name__}, not a str")
        unchanged(instance, fingerprint, self.name)
        usage = dict(spent) if self.uses_model else None
        if keep:
            self._kept[fingerprint] = (positions, text, usage)
        return self.recorded_shown(instance, positions, text, usage)

    @staticmethod
    def recorded_shown(instance: Instance, positions: Sequence[int] | None, text: str | None,
                       model_usage: dict | None = None) -> Shown:
        """What is shown of the given 1-based positions (None: the strategy named none) and
        rendered text (None: the session log of those sessions), from the instance's data."""
        sessions = None if positions is None else tuple(instance.prior_interactions[p - 1] for p in positions)
        rendered = text is not None
        if text is None:
            text = format_session_log(sessions or ())
        return Shown(text, sessions, None if positions is None else tuple(positions), rendered, model_usage)

    def _positions(self, instance: Instance, view: Any, sessions: tuple) -> tuple[int, ...]:
        prior = view.prior_interactions
        by_identity = {id(s): i for i, s in enumerate(prior, start=1)}
        positions = []
        for session in sessions:
            position = by_identity.get(id(session)) or next(
                (i for i, s in enumerate(prior, start=1) if s == session), None)
            if position is None:
                raise ValueError(f"setting {self.name}: select() returned a {type(session).__name__} that is not "
                                 f"one of instance {instance.instance_id}'s prior sessions; return sessions "
                                 f"of instance.prior_interactions, or write render() for text of your own")
            positions.append(position)
        return tuple(positions)


def strategy_named(value: Any) -> Strategy:
    """The strategy ``--setting`` names (``NAME[:key=value,...]``), or a strategy object
    (``evaluate(setting=MyStrategy())``: named by its ``name`` attribute, else its class).
    A user's strategy's name ends with ``@`` and its identity's hash. BadInput names what is
    wrong."""
    if isinstance(value, Strategy):
        return value
    if not isinstance(value, str):
        kind = type(value)
        name = getattr(value, "name", None) or (kind.__qualname__ if kind.__module__ == "__main__"
                                                else f"{kind.__module__}:{kind.__qualname__}")
        strategy = _checked(value, str(name))
        identity = strategy_identity(kind, _simple_attributes(value))
        return Strategy(f"{name}@{identity['hash']}", strategy, identity=identity)
    text = value.strip()
    head, params = _split_parameters(text)
    suffix = ":" + ",".join(f"{k}={v}" for k, v in sorted(params.items())) if params else ""
    spec = None
    if head in BUILT_IN:
        found, name = BUILT_IN[head], head
    else:
        from ..utils.models.registry import is_code_spec, load_code_attribute, portable_spec

        if is_code_spec(head):
            try:
                found = load_code_attribute(head, BadInput)
            except BadInput as exc:
                raise BadInput(f"setting {exc}") from None
            target, _, attr = head.rpartition(":")
            name, spec = f"{target.rsplit('/', 1)[-1]}:{attr}", portable_spec(head) + suffix
        else:
            found, name = _entry_point(head), head
    strategy = found
    if isinstance(found, type) or (callable(found) and not _is_strategy(found)):
        try:
            strategy = found(**params)
        except (TypeError, ValueError) as exc:
            raise BadInput(f"setting {text}: {exc}") from None
    elif params:
        raise BadInput(f"setting {text}: {head} is an object, not a class: it takes no parameters")
    strategy = _checked(strategy, text)
    if head in BUILT_IN:
        return Strategy(name + suffix, strategy, spec)
    made = isinstance(found, type) or callable(found) and not _is_strategy(found)
    identity = strategy_identity(found if made else type(found), params if made else _simple_attributes(found))
    return Strategy(f"{name}{suffix}@{identity['hash']}", strategy, spec, identity)


def strategy_identity(code: Any, parameters: dict) -> dict:
    """What a user's strategy is: its class (or factory), its parameters and the hash of its
    source file's content (as imported), with a short hash of the three that ends its name."""
    module = sys.modules.get(getattr(code, "__module__", None) or "")
    digest = getattr(module, "__cupid_source_sha256__", None)
    if digest is None:
        try:
            digest = hashlib.sha256(Path(inspect.getsourcefile(code) or "").read_bytes()).hexdigest()
        except (OSError, TypeError):
            try:  # a class defined where no file holds it: its own source, if Python kept it
                digest = hashlib.sha256(inspect.getsource(code).encode("utf-8")).hexdigest()
            except (OSError, TypeError):
                digest = None
    identity = {"class": getattr(code, "__qualname__", type(code).__qualname__),
                "parameters": {k: parameters[k] for k in sorted(parameters)}, "source_sha256": digest}
    canonical = json.dumps(identity, sort_keys=True, ensure_ascii=False, default=repr)
    return {"hash": hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:10], **identity}


def _simple_attributes(strategy: Any) -> dict:
    """A strategy object's parameters, as far as they can be told: its public attributes that
    are numbers, strings, booleans or None (not ``model``, which the harness gives it)."""
    simple = (str, int, float, bool, type(None))
    return {k: v for k, v in sorted(getattr(strategy, "__dict__", {}).items())
            if not k.startswith("_") and k != "model" and isinstance(v, simple)}


def _is_strategy(found: Any) -> bool:
    return any(callable(getattr(found, name, None)) for name in ("select", "render"))


def _checked(strategy: Any, text: str) -> Any:
    if not _is_strategy(strategy):
        raise BadInput(f"setting {text}: a strategy needs select(instance) or render(instance); "
                       f"{type(strategy).__name__} has neither")
    return strategy


def _split_parameters(text: str) -> tuple[str, dict]:
    """``recent:k=2`` -> ("recent", {"k": 2}); numbers and true/false are typed."""
    head, sep, tail = text.rpartition(":")
    if sep and "=" not in tail and head in BUILT_IN:
        raise BadInput(f"setting {text}: expected key=value parameters after {head}:, e.g. {head}:k=2")
    if not sep or "=" not in tail:
        return text, {}
    params = {}
    for item in tail.split(","):
        key, eq, raw = (part.strip() for part in item.partition("="))
        if not eq or not key.isidentifier():
            raise BadInput(f"setting {text}: expected key=value parameters after the name, got {item!r}")
        if key in params:
            raise BadInput(f"setting {text}: parameter {key} is given twice; give each parameter once")
        params[key] = _typed(raw)
    return head, params


def _typed(raw: str) -> Any:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def _entry_point(name: str) -> Any:
    from ..utils.models.registry import _entry_points

    found = _entry_points(ENTRY_POINT_GROUP).get(name)
    if found is None:
        near = difflib.get_close_matches(name, [*BUILT_IN, *_entry_points(ENTRY_POINT_GROUP)], n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise BadInput(f"setting: unknown {name!r}{hint}. Built in: {', '.join(BUILT_IN)} (recent, bm25 and dense "
                       f"take k=N); your own: path/file.py:Class or package.module:Class; installed "
                       f"{ENTRY_POINT_GROUP} entry points: {', '.join(sorted(_entry_points(ENTRY_POINT_GROUP))) or 'none'}")
    try:
        return found.load()
    except Exception as exc:
        raise BadInput(f"setting {name}: the entry point {found.value} failed to load: "
                       f"{type(exc).__name__}: {exc}") from exc


# The paper's four strategies (its settings, §4.1), in the paper's order (the report's order too).
PAPER_STRATEGIES = {name: strategy_named(name) for name in ("default", "oracle", "summary", "oracle_preference")}
