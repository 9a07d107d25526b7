"""A hub split of the dataset: loaded through ``datasets.load_dataset`` (which keeps a prepared
copy per commit, read offline with ``HF_HUB_OFFLINE=1``), its API probed first so that an
unreachable or failing hub is one line naming what it answered, within a bounded time
(docs/data.md). evaluation/data.py reads its rows as it reads files.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..utils.dataset import DataValidationError

HUB_COLUMNS = ("persona_id", "instance_type", "current_request", "current_context_factor",
               "current_contextual_preference", "current_checklist", "prior_interactions")


def hub_offline() -> bool:
    """Whether the hub libraries run offline (``HF_DATASETS_OFFLINE`` wins when set, as in
    ``datasets``)."""
    value = os.environ.get("HF_DATASETS_OFFLINE", os.environ.get("HF_HUB_OFFLINE", ""))
    return value.lower() in ("1", "true", "yes", "on")


@dataclass
class HubSplit:
    """A hub split as ``datasets`` prepared it: its rows (memory-mapped Arrow, fetched once),
    the commit of the dataset's repository they came from, and where the copy is stored."""
    rows: Any
    commit: str | None
    stored_at: Path | None


def load_hub_split(dataset: str, split: str, revision: str | None = None) -> HubSplit:
    """The split through ``datasets.load_dataset``; ``revision`` (a commit, tag or branch of
    the dataset's repository) pins the data, None takes the hub's main branch as it is
    today. Offline (``HF_HUB_OFFLINE=1``) it is the copy prepared by an earlier load."""
    from datasets import load_dataset

    _check_hub_answers(dataset, split, revision)
    quiet = [logging.getLogger(n) for n in ("huggingface_hub", "datasets", "fsspec")]
    levels = [logger.level for logger in quiet]
    for logger in quiet:  # their retry warnings would bury the one line that matters
        logger.setLevel(logging.ERROR)
    try:
        with _still_loading(f"{dataset}[{split}]"):
            rows = load_dataset(dataset, split=split, revision=revision)
    except Exception as exc:  # the hub libraries raise many types; each is a setup error
        raise DataValidationError(f"{dataset}[{split}]: {_hub_error(exc, dataset, split, revision)}") from exc
    finally:
        for logger, level in zip(quiet, levels):
            logger.setLevel(level)
    # datasets prepares a copy per commit, in <cache>/<name>/<config>/<version>/<commit>/.
    stored_at = Path(rows.cache_files[0]["filename"]).parent if rows.cache_files else None
    commit = stored_at.name if stored_at and re.fullmatch(r"[0-9a-f]{40}", stored_at.name) else None
    if hub_offline():
        _check_offline_revision(dataset, split, revision, commit)
    missing = [column for column in HUB_COLUMNS if column not in rows.column_names]
    if missing:
        raise DataValidationError(
            f"{dataset}[{split}]: not in CUPID's schema: no column {', '.join(missing)} (its columns: "
            f"{', '.join(rows.column_names)}; evaluation reads {', '.join(HUB_COLUMNS)})")
    # Arrow rows, not datasets' decoding of its features: the same reading as a parquet file's.
    return HubSplit(rows.with_format("arrow"), commit, stored_at)


def _check_offline_revision(dataset: str, split: str, revision: str | None, commit: str | None) -> None:
    """Offline, ``datasets`` reads the copy it prepared last, whatever revision is asked: a
    run must not read another commit than the one it names (None: main as last downloaded)."""
    asked = revision or "main"
    wanted = asked if re.fullmatch(r"[0-9a-f]{7,40}", asked) else None
    if wanted is None:  # a branch or tag: the commit it named when last downloaded
        from huggingface_hub import try_to_load_from_cache
        card = try_to_load_from_cache(dataset, "README.md", revision=asked, repo_type="dataset")
        wanted = Path(card).parent.name if isinstance(card, str) else None
        if wanted is None and revision is None:
            return  # nothing is known of main here: the stored copy is the data
    if commit is not None and wanted is not None and commit.startswith(wanted):
        return
    named = "the main branch" if revision is None else f"--revision {revision}"
    was = f" (commit {wanted})" if wanted and wanted != asked else ""
    raise DataValidationError(
        f"{dataset}[{split}]: offline (HF_HUB_OFFLINE) the stored copy is commit {commit or '(unknown)'}, "
        f"not {named}{was}; pass --revision {commit} to run on it, or load {asked} once with the "
        f"hub reachable (--download_only), then run offline")


def sessions_as_records(row: Any) -> Any:
    """Arrow data written with a ``Sequence`` of a dict (datasets < 4) stores the sessions, and
    each session's turns, as a dict of equal-length lists; the schema is a list of dicts."""
    def records(value: Any) -> Any:
        if isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()) \
                and len({len(v) for v in value.values()}) == 1:
            return [dict(zip(value, items)) for items in zip(*value.values())]
        return value
    if not isinstance(row, dict) or "prior_interactions" not in row:
        return row
    sessions = records(row["prior_interactions"])
    if isinstance(sessions, list):
        sessions = [{**s, "dialogue": records(s.get("dialogue"))} if isinstance(s, dict) else s
                    for s in sessions]
    return {**row, "prior_interactions": sessions}


def rows_from_hub(hub: HubSplit, name: str) -> Iterator[tuple[Any, str]]:
    number = 0
    for batch in hub.rows.iter(batch_size=256):
        for row in batch.to_pylist():
            yield sessions_as_records(row), f"{name}: row {number}"
            number += 1


PROBE_TIMEOUT = 10.0   # seconds the hub has to answer the probe of the dataset's API
STILL_LOADING_EVERY = 30.0


def hub_endpoint() -> str:
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")  # as the environment has it now


def _check_hub_answers(dataset: str, split: str, revision: str | None) -> None:
    """One short request for the dataset's page of the hub's API, unless the hub is switched
    off: an unreachable hub, one failing on its side (HTTP 5xx), one answering what is not
    its JSON, or one that accepts the connection and never answers, is named at once, with
    what it answered, instead of after the hub libraries' minutes of retries. Its refusals
    (4xx: no such dataset, revision, access) are left to ``datasets`` to name."""
    if hub_offline():
        return
    from huggingface_hub import get_token

    endpoint = hub_endpoint()
    url = (f"{endpoint}/api/datasets/{urllib.parse.quote(dataset, safe='/')}/revision/"
           f"{urllib.parse.quote(revision or 'main', safe='')}")
    token = get_token()
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    where = f"{dataset}[{split}]: the Hugging Face hub at {endpoint}"
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT) as response:
            body = response.read(4_000_000)
    except urllib.error.HTTPError as exc:
        if exc.code < 500:
            return  # a refusal: datasets names it (not found, gated, no such revision)
        raise DataValidationError(
            f"{where} answered HTTP {exc.code} ({exc.reason}) when asked for the dataset; the hub is failing on its "
            f"side: try again later, pass --data_dir with local files, or set HF_HUB_OFFLINE=1 to use a copy "
            f"already downloaded") from exc
    except (TimeoutError, socket.timeout) as exc:
        raise DataValidationError(f"{where} accepted the connection but sent no answer within {PROBE_TIMEOUT:g} s "
                                  f"when asked for the dataset; {_NO_HUB}") from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, (TimeoutError, socket.timeout)):
            raise DataValidationError(f"{where} sent no answer within {PROBE_TIMEOUT:g} s when asked for the "
                                      f"dataset; {_NO_HUB}") from exc
        raise DataValidationError(f"{where} is unreachable ({reason}); {_NO_HUB}") from exc
    try:
        json.loads(body)
    except ValueError:
        raise DataValidationError(
            f"{where} answered HTTP 200 with what is not the hub's JSON ({len(body)} bytes starting "
            f"{body[:24]!r}) when asked for the dataset; is HF_ENDPOINT a Hugging Face hub? {_NO_HUB}") from None


_NO_HUB = ("connect, pass --data_dir with local files (e.g. data/sample), or set HF_HUB_OFFLINE=1 to use a copy "
           "already downloaded")


@contextlib.contextmanager
def _still_loading(name: str):
    """A line every STILL_LOADING_EVERY seconds while the hub libraries load ``name``: they
    retry a silent hub for minutes, and a run must not hang with nothing said."""
    started, done = time.monotonic(), threading.Event()

    def say() -> None:
        while not done.wait(STILL_LOADING_EVERY):
            logging.getLogger("cupid.data").warning(
                "%s: still loading from the hub at %s (%.0f s so far: it has not answered, or is slow); "
                "Ctrl-C stops, --data_dir reads local files", name, hub_endpoint(), time.monotonic() - started)

    watcher = threading.Thread(target=say, name="cupid-hub-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()


def _hub_status(causes: list[BaseException]) -> int | None:
    """The HTTP status the hub answered, from the first error in the chain that carries one."""
    for cause in causes:
        status = getattr(getattr(cause, "response", None), "status_code", None)
        if isinstance(status, int):
            return status
    return None


def _clip(text: str, limit: int = 200) -> str:
    """``text`` on one line, cut at a word's end (never in a word) when longer than ``limit``."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"


def _hub_error(exc: BaseException, dataset: str, split: str, revision: str | None = None) -> str:
    """One line for why the hub could not give the split, and what to do."""
    causes, cause = [], exc
    while cause is not None and len(causes) < 100:  # the retries of one request chain a dozen each
        causes.append(cause)
        cause = cause.__cause__ or cause.__context__
    names = {type(c).__name__ for c in causes}
    text = " ".join(str(exc).split())
    name = type(exc).__name__
    if "OfflineModeIsEnabled" in text or "OfflineModeIsEnabled" in names:
        from datasets import config
        return (f"offline (HF_HUB_OFFLINE) and no copy of it is stored in {config.HF_DATASETS_CACHE}; "
                f"load it once with the hub reachable and the same HF_HOME (--download_only), "
                f"or pass --data_dir with local files")
    if "RevisionNotFoundError" in names or text.startswith("Revision "):
        return f"no revision {revision!r} of the dataset on the hub; pass a commit, tag or branch it has as --revision"
    if "gated" in text.lower():
        if "authenticated" in text:
            return ("gated on the hub and no token was sent: accept its conditions on the dataset's "
                    "page, then log in (`hf auth login`) or set HF_TOKEN")
        return "gated on the hub and this token has not been granted access: ask for it on the dataset's page"
    status = _hub_status(causes)
    if status is not None and status >= 500:
        return (f"the Hugging Face hub at {hub_endpoint()} answered HTTP {status} while the split was loaded; it is "
                f"failing on its side: try again later, or pass --data_dir with local files")
    if "DatasetNotFound" in name or "doesn't exist on the Hub" in text or "RepositoryNotFound" in name:
        return "no such dataset on the Hugging Face hub (or it is private); pass --dataset, or --data_dir for local files"
    if "split" in text.lower() and isinstance(exc, (ValueError, KeyError)):
        return f"no split {split!r} ({_clip(text)}); pass --split"
    # A body begun and cut (httpx: "peer closed connection without sending complete message body
    # (received 100 bytes, ...)"), not a connection closed before any answer.
    cut = any(marker in str(c) for c in causes for marker in ("complete message body", "Consistency check failed")) \
        or "IncompleteRead" in names
    broken = names & {"ConnectError", "RemoteProtocolError", "ReadError", "TimeoutException", "ReadTimeout",
                      "ConnectTimeout", "ConnectionError", "ConnectionRefusedError", "ConnectionResetError"}
    if cut:
        return (f"the hub stopped answering during the download ({', '.join(sorted(broken)) or name}); "
                f"nothing was kept as data: run again to resume it, or pass --data_dir with local files")
    if broken:
        return (f"the Hugging Face hub at {hub_endpoint()} stopped answering before the split was loaded "
                f"({', '.join(sorted(broken))}); nothing was kept as data: run again, or pass --data_dir with "
                f"local files")
    # The hub libraries' own words, without the local path they tried first (the name read as a directory).
    text = re.sub(r"Couldn't find any data file at \S+?\. ", "", text)
    return f"cannot be loaded ({name}: {_clip(text)})"
