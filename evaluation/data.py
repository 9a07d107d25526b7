"""Loading CUPID instances: from a file, a directory or a hub split, validated in full
before any LLM call (the schema is utils/dataset.py's).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

from cupid.utils.dataset import DataValidationError, Instance, parse_instance, shape_departures, summarize_departures


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


def _rows_from_hub(dataset: str, split: str, revision: str | None = None) -> Iterator[tuple[Any, str]]:
    """The split's rows; ``revision`` (a commit, tag or branch of the dataset's repository)
    pins the data, None takes the hub's main branch as it is today."""
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
        rows = load_dataset(dataset, split=split, revision=revision)
    except Exception as exc:  # the hub library raises many types; each is a setup error
        raise DataValidationError(f"{dataset}[{split}]: {_hub_error(exc, dataset, split, revision)}") from exc
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


def _hub_error(exc: BaseException, dataset: str, split: str, revision: str | None = None) -> str:
    """One line for why the hub could not give the split."""
    text = " ".join(str(exc).split())
    name = type(exc).__name__
    if revision is not None and ("RevisionNotFound" in name or "revision" in text.lower()):
        return f"no revision {revision!r} of the dataset ({text[:200]}); pass another --revision"
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
                 split: str = "test", limit: int | None = None, revision: str | None = None):
        if data_path is None and dataset is None:
            raise ValueError("give a data path or a dataset name")
        self.data_path = Path(data_path) if data_path is not None else None
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.dataset, self.split, self.limit = dataset, split, limit
        self.revision = revision  # of the hub dataset; None: its main branch
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
        return _rows_from_hub(self.dataset, self.split, self.revision)

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
        if self.data_path is None and self.revision is not None:
            source["revision"] = self.revision
        return {**source, "fingerprint": self.fingerprint, "n_instances": self.total}

    def __iter__(self) -> Iterator[Instance]:
        return self._parsed(self.limit)

    def __len__(self) -> int:
        return self.count if self.count is not None else self.validate()


def load_instances(*, data_path: str | Path | None = None, dataset: str | None = None,
                   split: str = "test", limit: int | None = None,
                   revision: str | None = None) -> list[Instance]:
    """Load and validate instances from a file or directory, or else from the hub."""
    source = InstanceSource(data_path=data_path, dataset=dataset, split=split, limit=limit,
                            revision=revision)
    source.validate()
    return list(source)
