"""Loading CUPID instances: from a file, a directory or a hub split (evaluation/hub.py),
validated in full before any LLM call (the schema is utils/dataset.py's). ``download_dataset``
stores a hub split's prepared copy, which ``HF_HUB_OFFLINE=1`` runs read (docs/data.md).
"""
from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any, Iterator

from .hub import HubSplit, load_hub_split, rows_from_hub, sessions_as_records
from ..utils.dataset import DataValidationError, Instance, parse_instance, shape_departures, summarize_departures


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataValidationError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataValidationError(f"{path}: not UTF-8 text (byte {exc.start} in line {line}: "
                                  f"{exc.object[exc.start:exc.start + 4]!r}); save it as UTF-8") from exc


def _rows_from_file(path: Path) -> Iterator[tuple[Any, str]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        # Only "\n" ends a JSON line: str.splitlines would also cut at a U+2028 or U+0085 in a text.
        for number, line in enumerate(_read_text(path).split("\n"), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataValidationError(f"{path}: row {number}: not valid JSON ({exc})") from exc
            yield row, f"{path}: row {number}"
    elif suffix == ".json":
        try:
            data = json.loads(_read_text(path))
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
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(path).to_pylist()
        except OSError as exc:
            raise DataValidationError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
        except Exception as exc:  # pyarrow's ArrowInvalid and kin: not a parquet file
            raise DataValidationError(
                f"{path}: not a readable parquet file ({type(exc).__name__}: {exc})") from exc
        for number, row in enumerate(rows):
            yield sessions_as_records(row), f"{path}: row {number}"
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


class InstanceSource:
    """The instances of a file, directory or hub split, validated in full up front but
    held in memory only while they are evaluated.

    ``validate()`` parses every row once, keeping only the ids (for duplicates), so bad data
    stops a run before any LLM call; iterating then parses the rows again lazily, so a
    run's memory does not grow with the size of the dataset. A hub split is fetched once
    and then read from its memory-mapped copy, so validation and the run see one commit.
    """

    def __init__(self, *, data_path: str | Path | None = None, dataset: str | None = None,
                 split: str = "test", limit: int | None = None, revision: str | None = None):
        self.data_path = Path(data_path) if data_path is not None else None
        self.dataset, self.split, self.limit = dataset, split, limit
        self.revision = revision  # of the hub dataset; None: its main branch
        self.count: int | None = None
        self.total: int | None = None
        self.fingerprint: str | None = None
        self.warnings: list[str] = []     # shape departures, one line each
        self.hub: HubSplit | None = None  # the hub split, once loaded (read once per run)

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
        if self.hub is None:
            self.hub = load_hub_split(self.dataset, self.split, self.revision)
        return rows_from_hub(self.hub, self.name)

    def validate(self) -> int:
        """Parse every row (all of them, even under ``limit``), refuse duplicates, and
        fingerprint the data: ``fingerprint`` is a hash of every instance's content,
        whatever ``limit`` selects, so every part of one data set shares it. Instances whose
        shape departs from the dataset's are named in ``self.warnings``."""
        seen: dict[str, str] = {}
        departures: list[tuple[str, str]] = []
        digest = hashlib.sha256()
        try:
            for row, where in self._rows():
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
        """The data this run came from, for the run's manifest (once validated)."""
        source: dict = ({"path": str(self.data_path.resolve())} if self.data_path is not None
                        else {"dataset": self.dataset, "split": self.split})
        if self.data_path is None and self.revision is not None:
            source["revision"] = self.revision
        if self.hub is not None and self.hub.commit is not None:
            source["commit"] = self.hub.commit
        return {**source, "fingerprint": self.fingerprint, "n_instances": self.total}

    def __iter__(self) -> Iterator[Instance]:
        for row, where in itertools.islice(self._rows(), self.limit):
            yield parse_instance(row, where)

    def __len__(self) -> int:
        return self.count if self.count is not None else self.validate()


def load_instances(*, data_path: str | Path) -> list[Instance]:
    """Load and validate the instances of a file or directory."""
    source = InstanceSource(data_path=data_path)
    source.validate()
    return list(source)


def download_dataset(dataset: str, split: str = "test", revision: str | None = None) -> str:
    """Load a hub split once, so that ``datasets`` stores its prepared copy, and validate
    every row; returns what was stored where. Later runs on the same HF_HOME can then
    read it with ``HF_HUB_OFFLINE=1`` (a machine without internet)."""
    source = InstanceSource(dataset=dataset, split=split, revision=revision)
    source.validate()
    hub = source.hub
    pin = f" (--revision {revision})" if revision else ""
    return (f"{source.name}{pin}: {source.total} instance{'s' * (source.total != 1)}, commit {hub.commit or '(unknown)'}, "
            f"fingerprint {source.fingerprint}, stored in {hub.stored_at}; run offline on this "
            f"HF_HOME with HF_HUB_OFFLINE=1 (add --revision {hub.commit} to pin this copy)")
