"""The CUPID dataset's schema: an instance, its sessions and turns, validation of a row,
and identity. Both pipelines use it: synthesis writes instances in it, evaluation reads them.

Every row is validated before any LLM call; an error names the file, the row and the field.
An instance's identity is (persona_id, instance_type): a persona has three instances, so
persona_id alone is not a key (results keyed by it overwrote each other in the original).
"""
from __future__ import annotations

import hashlib
import json
import re
from .errors import BadInput
from dataclasses import asdict, dataclass, field, fields
from typing import Any

INSTANCE_TYPES = ("consistent", "contrastive", "changing")
ROLES = ("user", "assistant")


class DataValidationError(BadInput):
    """Bad input data; the message names the source, row and field."""


@dataclass(frozen=True)
class Turn:
    role: str
    content: str


@dataclass(frozen=True)
class Session:
    context_factor: str
    contextual_preference: str
    dialogue: tuple[Turn, ...]


@dataclass(frozen=True)
class Instance:
    instance_id: str
    persona_id: str
    instance_type: str
    current_request: str
    current_context_factor: str
    current_contextual_preference: str
    current_checklist: tuple[str, ...]
    prior_interactions: tuple[Session, ...]
    source: str = ""  # "file:row", for messages
    extra: dict = field(default_factory=dict, compare=False)

    def to_row(self) -> dict:
        """The instance in the dataset's schema (what synthesis writes, what we load)."""
        row = {name: getattr(self, name) for name in COLUMNS[:6]}
        row["current_checklist"] = list(self.current_checklist)
        row["prior_interactions"] = [{**asdict(s), "dialogue": [asdict(t) for t in s.dialogue]}
                                     for s in self.prior_interactions]
        return {**row, **self.extra}

    def relevant_positions(self) -> list[int]:
        """1-based positions of the prior sessions whose preference equals the current one
        (the oracle setting's sessions; the paper's Figure 3)."""
        target = self.current_contextual_preference.strip()
        return [i for i, s in enumerate(self.prior_interactions, start=1)
                if s.contextual_preference.strip() == target]

    def fingerprint(self) -> str:
        """A hash of the instance's content (canonical JSON of its row): results computed
        from one instance are never reported for a changed one under the same id."""
        canonical = json.dumps(self.to_row(), sort_keys=True, ensure_ascii=False,
                               separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


# The schema's columns, in order: Instance's fields but the two of our own.
COLUMNS = tuple(f.name for f in fields(Instance) if f.name not in ("source", "extra"))


# ---------------------------------------------------------------------------------------
# Identity
# ---------------------------------------------------------------------------------------
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str, max_length: int = 120) -> str:
    """A file-name-safe form of ``text``: no path separators, no leading dots, no '..'.

    When the text had to change, a short hash of the original is appended, so two
    different ids never map to the same file name.
    """
    cleaned = _UNSAFE.sub("_", text)
    cleaned = re.sub(r"\.{2,}", "_", cleaned).lstrip(".-") or "_"
    if cleaned != text or len(cleaned) > max_length:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
        cleaned = f"{cleaned[:max_length - 9]}-{digest}"
    return cleaned


def make_instance_id(persona_id: str, instance_type: str) -> str:
    return safe_name(f"{persona_id}__{instance_type}")


# ---------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------
def _fail(where: str, field_path: str, problem: str) -> DataValidationError:
    return DataValidationError(f"{where}: field '{field_path}': {problem}")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _unicode(value: str, where: str, field_path: str) -> str:
    """``value``, unless it holds a lone surrogate (JSON's ``"\\ud800"`` escape read alone): not
    text, which no UTF-8 file or request can carry."""
    if not value.isascii():
        found = _SURROGATE.search(value)
        if found:
            raise _fail(where, field_path, f"holds a lone surrogate {found.group()!r} at character "
                                           f"{found.start()}, which is not text; fix the file's escape there")
    return value


def _strings_unicode(value: Any, where: str, field_path: str) -> None:
    """Every text inside ``value`` (the row's columns of its own: keys too) by ``_unicode``."""
    if isinstance(value, str):
        _unicode(value, where, field_path)
    elif isinstance(value, dict):
        for key, item in value.items():
            _strings_unicode(str(key), where, field_path)
            _strings_unicode(item, where, f"{field_path}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _strings_unicode(item, where, f"{field_path}[{i}]")


def _text(row: dict, key: str, where: str, prefix: str = "") -> str:
    value = row.get(key)
    if value is None:
        raise _fail(where, prefix + key, "missing")
    if not isinstance(value, str):
        raise _fail(where, prefix + key, f"expected a string, got {type(value).__name__}")
    if not value.strip():
        raise _fail(where, prefix + key, "empty")
    return _unicode(value, where, prefix + key)


def _list(value: Any, where: str, field_path: str) -> list:
    """A non-empty list (Parquet and datasets may hand back tuples or numpy arrays)."""
    if value is None:
        raise _fail(where, field_path, "missing")
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise _fail(where, field_path, f"expected a list, got {type(value).__name__}")
    items = list(value)
    if not items:
        raise _fail(where, field_path, "empty")
    return items


def parse_instance(row: Any, where: str) -> Instance:
    """Validate one row of the dataset's schema and build an Instance."""
    if not isinstance(row, dict):
        raise DataValidationError(f"{where}: expected an object, got {type(row).__name__}")
    persona_id = row.get("persona_id")
    if isinstance(persona_id, int) and not isinstance(persona_id, bool):
        persona_id = str(persona_id)
        row = {**row, "persona_id": persona_id}
    persona_id = _text(row, "persona_id", where)
    instance_type = _text(row, "instance_type", where)
    if instance_type not in INSTANCE_TYPES:
        raise _fail(where, "instance_type", f"must be one of {', '.join(INSTANCE_TYPES)}, "
                                            f"got {instance_type!r}")
    request = _text(row, "current_request", where)
    factor = _text(row, "current_context_factor", where)
    preference = _text(row, "current_contextual_preference", where)
    checklist = _list(row.get("current_checklist"), where, "current_checklist")
    for i, item in enumerate(checklist):
        if not isinstance(item, str) or not item.strip():
            raise _fail(where, f"current_checklist[{i}]", "expected a non-empty string")
        _unicode(item, where, f"current_checklist[{i}]")
    sessions_raw = _list(row.get("prior_interactions"), where, "prior_interactions")
    sessions = []
    for s, session in enumerate(sessions_raw):
        prefix = f"prior_interactions[{s}]."
        if not isinstance(session, dict):
            raise _fail(where, f"prior_interactions[{s}]", "expected an object")
        dialogue_raw = _list(session.get("dialogue"), where, prefix + "dialogue")
        turns = []
        for t, turn in enumerate(dialogue_raw):
            tprefix = f"{prefix}dialogue[{t}]."
            if not isinstance(turn, dict):
                raise _fail(where, f"{prefix}dialogue[{t}]", "expected an object")
            role = _text(turn, "role", where, tprefix)
            if role not in ROLES:
                raise _fail(where, tprefix + "role", f"must be 'user' or 'assistant', got {role!r}")
            content = turn.get("content")
            if not isinstance(content, str):
                raise _fail(where, tprefix + "content",
                            "missing" if content is None else
                            f"expected a string, got {type(content).__name__}")
            turns.append(Turn(role, _unicode(content, where, tprefix + "content")))
        sessions.append(Session(
            context_factor=_text(session, "context_factor", where, prefix),
            contextual_preference=_text(session, "contextual_preference", where, prefix),
            dialogue=tuple(turns),
        ))
    explicit_id = row.get("instance_id")
    if explicit_id is not None and not isinstance(explicit_id, str):
        raise _fail(where, "instance_id", "expected a string")
    extra = {k: v for k, v in row.items() if k not in COLUMNS and _jsonable(v)}
    _unicode(explicit_id or "", where, "instance_id")
    for key, value in extra.items():
        _unicode(key, where, "(a column's name)")
        _strings_unicode(value, where, key)
    instance_id = safe_name(explicit_id) if explicit_id else make_instance_id(persona_id, instance_type)
    return Instance(
        instance_id=instance_id,
        persona_id=persona_id,
        instance_type=instance_type,
        current_request=request,
        current_context_factor=factor,
        current_contextual_preference=preference,
        current_checklist=tuple(checklist),
        prior_interactions=tuple(sessions),
        source=where,
        extra=extra,
    )


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


# ---------------------------------------------------------------------------------------
# Shape: what every instance of kixlab/CUPID looks like (paper §3.1, Appendix B.5)
# ---------------------------------------------------------------------------------------
DATASET_PRIOR_SESSIONS = 8


def shape_departures(instance: Instance) -> list[str]:
    """How a valid instance departs from the dataset's shape (empty when it does not).
    Such an instance is still evaluated: synthesis with other settings makes them on
    purpose. Only the run's user is told, since the paper's numbers assume this shape."""
    problems = []
    n = len(instance.prior_interactions)
    if n != DATASET_PRIOR_SESSIONS:
        problems.append(f"{n} prior sessions, not {DATASET_PRIOR_SESSIONS}")
    for s, session in enumerate(instance.prior_interactions):
        if session.dialogue[0].role != "user":
            problems.append(f"session {s + 1} opens with the assistant, not the user")
            break
    return problems


def summarize_departures(departures: list[tuple[str, str]], max_ids: int = 10) -> list[str]:
    """One line per kind of departure, naming the instances (the first ``max_ids``)."""
    by_problem: dict[str, list[str]] = {}
    for instance_id, problem in departures:
        by_problem.setdefault(problem, []).append(instance_id)
    lines = []
    for problem, ids in by_problem.items():
        more = f" and {len(ids) - max_ids} more" if len(ids) > max_ids else ""
        lines.append(f"{len(ids)} instance(s) with {problem}: {', '.join(ids[:max_ids])}{more}")
    return lines
