"""CUPID instances: loading from the hub or local files, validation, identity.

Every row is validated before any LLM call; an error names the file, the row and the field.
An instance's identity is (persona_id, instance_type): a persona has three instances, so
persona_id alone is not a key (results keyed by it overwrote each other in the original).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

INSTANCE_TYPES = ("consistent", "contrastive", "changing")
ROLES = ("user", "assistant")


class DataValidationError(ValueError):
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
        row = {
            "instance_id": self.instance_id,
            "persona_id": self.persona_id,
            "instance_type": self.instance_type,
            "current_request": self.current_request,
            "current_context_factor": self.current_context_factor,
            "current_contextual_preference": self.current_contextual_preference,
            "current_checklist": list(self.current_checklist),
            "prior_interactions": [
                {"context_factor": s.context_factor,
                 "contextual_preference": s.contextual_preference,
                 "dialogue": [{"role": t.role, "content": t.content} for t in s.dialogue]}
                for s in self.prior_interactions
            ],
        }
        row.update(self.extra)
        return row

    def fingerprint(self) -> str:
        """A hash of the instance's content (canonical JSON of its row): results computed
        from one instance are never reported for a changed one under the same id."""
        canonical = json.dumps(self.to_row(), sort_keys=True, ensure_ascii=False,
                               separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


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


def _text(row: dict, key: str, where: str, prefix: str = "") -> str:
    if key not in row or row[key] is None:
        raise _fail(where, prefix + key, "missing")
    value = row[key]
    if not isinstance(value, str):
        raise _fail(where, prefix + key, f"expected a string, got {type(value).__name__}")
    if not value.strip():
        raise _fail(where, prefix + key, "empty")
    return value


def _list(value: Any, where: str, field_path: str) -> list:
    # Parquet and datasets may hand back tuples or numpy arrays for list columns.
    if value is None:
        raise _fail(where, field_path, "missing")
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise _fail(where, field_path, f"expected a list, got {type(value).__name__}")
    return list(value)


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
    if not checklist:
        raise _fail(where, "current_checklist", "empty")
    for i, item in enumerate(checklist):
        if not isinstance(item, str) or not item.strip():
            raise _fail(where, f"current_checklist[{i}]", "expected a non-empty string")
    sessions_raw = _list(row.get("prior_interactions"), where, "prior_interactions")
    if not sessions_raw:
        raise _fail(where, "prior_interactions", "empty")
    sessions = []
    for s, session in enumerate(sessions_raw):
        prefix = f"prior_interactions[{s}]."
        if not isinstance(session, dict):
            raise _fail(where, f"prior_interactions[{s}]", "expected an object")
        dialogue_raw = _list(session.get("dialogue"), where, prefix + "dialogue")
        if not dialogue_raw:
            raise _fail(where, prefix + "dialogue", "empty")
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
            turns.append(Turn(role, content))
        sessions.append(Session(
            context_factor=_text(session, "context_factor", where, prefix),
            contextual_preference=_text(session, "contextual_preference", where, prefix),
            dialogue=tuple(turns),
        ))
    known = {"instance_id", "persona_id", "instance_type", "current_request",
             "current_context_factor", "current_contextual_preference", "current_checklist",
             "prior_interactions"}
    explicit_id = row.get("instance_id")
    if explicit_id is not None and not isinstance(explicit_id, str):
        raise _fail(where, "instance_id", "expected a string")
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
        extra={k: v for k, v in row.items() if k not in known and _jsonable(v)},
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


# ---------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------
def _undecodable(path: Path, exc: UnicodeDecodeError, data: bytes | None = None) -> DataValidationError:
    where = ""
    if data is not None:
        line = data.count(b"\n", 0, exc.start) + 1
        where = f" in line {line}"
    return DataValidationError(f"{path}: not UTF-8 text (byte {exc.start}{where}: "
                               f"{exc.object[exc.start:exc.start + 4]!r}); save it as UTF-8")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DataValidationError(f"{path}: cannot be read ({exc.strerror or exc})") from exc


def _rows_from_file(path: Path) -> Iterator[tuple[Any, str]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        data = _read_bytes(path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _undecodable(path, exc, data) from exc
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataValidationError(f"{path}: row {number}: not valid JSON ({exc})") from exc
            yield row, f"{path}: row {number}"
    elif suffix == ".json":
        raw = _read_bytes(path)
        try:
            data = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise _undecodable(path, exc, raw) from exc
        except json.JSONDecodeError as exc:
            raise DataValidationError(f"{path}: not valid JSON ({exc})") from exc
        if isinstance(data, dict) and "instances" in data and isinstance(data["instances"], list):
            data = data["instances"]
        if isinstance(data, list):
            for number, row in enumerate(data):
                yield row, f"{path}: row {number}"
        else:
            yield data, f"{path}"
    elif suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:  # pragma: no cover - pyarrow is a requirement
            raise DataValidationError(f"{path}: reading parquet needs pyarrow") from exc
        try:
            rows = pq.read_table(path).to_pylist()
        except OSError as exc:
            raise DataValidationError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
        except Exception as exc:  # pyarrow's ArrowInvalid and kin: not a parquet file
            raise DataValidationError(
                f"{path}: not a readable parquet file ({type(exc).__name__}: {exc})") from exc
        for number, row in enumerate(rows):
            yield row, f"{path}: row {number}"
    else:
        raise DataValidationError(f"{path}: unsupported file type (use .jsonl, .json or .parquet)")


def _rows_from_dir(directory: Path) -> Iterator[tuple[Any, str]]:
    # The synthesis pipeline writes its instances to <output_dir>/instances/.
    if (directory / "instances").is_dir():
        directory = directory / "instances"
    files = sorted(p for p in directory.iterdir()
                   if p.is_file() and p.suffix.lower() in (".json", ".jsonl", ".parquet")
                   and not p.name.startswith("."))
    if not files:
        raise DataValidationError(f"{directory}: no .json, .jsonl or .parquet files")
    for path in files:
        yield from _rows_from_file(path)


def _rows_from_hub(dataset: str, split: str) -> Iterator[tuple[Any, str]]:
    try:
        from datasets import load_dataset
    except ImportError as exc:  # pragma: no cover - datasets is a requirement
        raise DataValidationError("loading from the Hugging Face hub needs `pip install datasets`") from exc
    _check_hub_reachable(dataset, split)
    quiet = [logging.getLogger(n) for n in ("huggingface_hub", "datasets", "fsspec")]
    levels = [logger.level for logger in quiet]
    for logger in quiet:  # their retry warnings would bury the one line that matters
        logger.setLevel(logging.ERROR)
    try:
        rows = load_dataset(dataset, split=split)
    except Exception as exc:  # the hub library raises many types; each is a setup error
        raise DataValidationError(f"{dataset}[{split}]: {_hub_error(exc, dataset, split)}") from exc
    finally:
        for logger, level in zip(quiet, levels):
            logger.setLevel(level)
    for number, row in enumerate(rows):
        yield row, f"{dataset}[{split}]: row {number}"


def _check_hub_reachable(dataset: str, split: str) -> None:
    """One short request to the hub, unless it is switched off: an unreachable hub is named
    at once instead of after the hub library's own minute of retries."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes") or \
            os.environ.get("HF_DATASETS_OFFLINE", "").lower() in ("1", "true", "yes"):
        return
    try:
        from huggingface_hub import constants
        endpoint = constants.ENDPOINT
    except ImportError:  # pragma: no cover - datasets depends on huggingface_hub
        return
    try:
        with urllib.request.urlopen(endpoint, timeout=10):
            pass
    except urllib.error.HTTPError:
        return  # it answered
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DataValidationError(
            f"{dataset}[{split}]: the Hugging Face hub at {endpoint} is unreachable ({reason}); "
            f"connect, pass --data_dir with local files (e.g. data/sample), or set "
            f"HF_HUB_OFFLINE=1 to use a copy already downloaded") from exc


def _hub_error(exc: BaseException, dataset: str, split: str) -> str:
    """One line for why the hub could not give the split."""
    text = " ".join(str(exc).split())
    name = type(exc).__name__
    if "split" in text.lower() and isinstance(exc, (ValueError, KeyError)):
        return f"no split {split!r} ({text[:200]}); pass --split"
    if "DatasetNotFound" in name or "doesn't exist on the Hub" in text or "RepositoryNotFound" in name:
        return "no such dataset on the Hugging Face hub (or it is private); pass --dataset, or --data_dir for local files"
    if any(word in (name + text).lower() for word in ("connection", "offline", "timeout", "resolve", "unreachable")):
        return ("the Hugging Face hub is unreachable and the dataset is not cached "
                f"({name}); connect, or pass --data_dir with local files (e.g. data/sample)")
    return f"cannot be loaded ({name}: {text[:200]})"


class InstanceSource:
    """The instances of a file, directory or hub split, validated in full up front but
    held in memory only while they are evaluated.

    ``validate()`` parses every row once, keeping only the ids (for duplicates), so bad data
    stops a run before any LLM call; iterating then parses the rows again lazily, so a
    run's memory does not grow with the size of the dataset.
    """

    def __init__(self, *, data_path: str | Path | None = None, dataset: str | None = None,
                 split: str = "test", limit: int | None = None):
        if data_path is None and dataset is None:
            raise ValueError("give a data path or a dataset name")
        self.data_path = Path(data_path) if data_path is not None else None
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.dataset, self.split, self.limit = dataset, split, limit
        self.count: int | None = None
        self.total: int | None = None
        self.fingerprint: str | None = None
        self.warnings: list[str] = []     # shape departures, one line each

    @property
    def name(self) -> str:
        return str(self.data_path) if self.data_path is not None else f"{self.dataset}[{self.split}]"

    def _rows(self) -> Iterator[tuple[Any, str]]:
        if self.data_path is not None:
            if not self.data_path.exists():
                raise DataValidationError(f"{self.data_path}: no such file or directory")
            if self.data_path.is_dir():
                return _rows_from_dir(self.data_path)
            return _rows_from_file(self.data_path)
        return _rows_from_hub(self.dataset, self.split)

    def _parsed(self, limit: int | None = None) -> Iterator[Instance]:
        for n, (row, where) in enumerate(self._rows()):
            if limit is not None and n >= limit:
                return
            yield parse_instance(row, where)

    def validate(self) -> int:
        """Parse every row (all of them, even under ``limit``), refuse duplicates, and
        fingerprint the data: ``fingerprint`` is a hash of every instance's content,
        whatever ``limit`` selects, so every part of one data set shares it. Instances whose
        shape departs from the dataset's are named in ``self.warnings``."""
        seen: dict[str, str] = {}
        departures: list[tuple[str, str]] = []
        digest = hashlib.sha256()
        try:
            rows = self._rows()
            for row, where in rows:
                instance = parse_instance(row, where)
                if instance.instance_id in seen:
                    raise DataValidationError(
                        f"{instance.source}: instance ({instance.persona_id!r}, {instance.instance_type!r}) "
                        f"duplicates {seen[instance.instance_id]}")
                seen[instance.instance_id] = instance.source
                departures += [(instance.instance_id, problem) for problem in shape_departures(instance)]
                digest.update(f"{instance.instance_id}\0{instance.fingerprint()}\n".encode("utf-8"))
        except RecursionError as exc:
            raise DataValidationError(f"{self.name}: nested too deeply to be an instance") from exc
        if not seen:
            raise DataValidationError(f"{self.name}: no instances")
        self.total = len(seen)
        self.fingerprint = digest.hexdigest()[:32]
        self.warnings = summarize_departures(departures)
        self.count = len(seen) if self.limit is None else min(self.limit, len(seen))
        return self.count

    def describe(self) -> dict:
        """The data this run came from, for the run's manifest."""
        if self.count is None:
            self.validate()
        source: dict = ({"path": str(self.data_path.resolve())} if self.data_path is not None
                        else {"dataset": self.dataset, "split": self.split})
        return {**source, "fingerprint": self.fingerprint, "n_instances": self.total}

    def __iter__(self) -> Iterator[Instance]:
        return self._parsed(self.limit)

    def __len__(self) -> int:
        return self.count if self.count is not None else self.validate()


def load_instances(*, data_path: str | Path | None = None, dataset: str | None = None,
                   split: str = "test", limit: int | None = None) -> list[Instance]:
    """Load and validate instances from a file or directory, or else from the hub."""
    source = InstanceSource(data_path=data_path, dataset=dataset, split=split, limit=limit)
    source.validate()
    return list(source)


# ---------------------------------------------------------------------------------------
# Session log and checklist layouts: the released harness's (kixlab/CUPID at a8560ca,
# utils/formatting.py and the matcher and judge modules), character for character, since
# the prompts were written for them and the published numbers were measured with them.
# ---------------------------------------------------------------------------------------
def format_session_log(sessions: Iterable[Session]) -> str:
    """Sessions numbered from 1, oldest first, each message under a ``#### User`` or
    ``#### AI Assistant`` heading, a ``---`` line after each session::

        ### Session 1

        #### User

        ...

        #### AI Assistant

        ...

        ---

        ### Session 2
    """
    parts = []
    for number, session in enumerate(sessions, start=1):
        parts.append(f"### Session {number}\n\n")
        for turn in session.dialogue:
            speaker = "User" if turn.role == "user" else "AI Assistant"
            parts.append(f"#### {speaker}\n\n{turn.content}\n\n")
        parts.append("---\n\n")
    return "".join(parts).strip()  # the log ends with the last "---"


def format_checklist(checklist: Iterable[str]) -> str:
    """Numbered entries, one a line (``1. entry``): the matcher's layout."""
    return "\n".join(f"{i}. {item}" for i, item in enumerate(checklist, start=1))


def format_checklist_bullets(checklist: Iterable[str]) -> str:
    """``- entry`` lines: the judge's layout."""
    return "\n".join(f"- {item}" for item in checklist)


def relevant_positions(instance: Instance) -> list[int]:
    """1-based positions of prior sessions whose preference equals the current one
    (the paper's Figure 3 and the oracle setting)."""
    target = instance.current_contextual_preference.strip()
    return [i for i, s in enumerate(instance.prior_interactions, start=1)
            if s.contextual_preference.strip() == target]


def approx_tokens(text: str) -> int:
    """A tokenizer-free length estimate (about 4 characters per token for English)."""
    return max(1, round(len(text) / 4))
