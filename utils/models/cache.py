"""The response cache: finished answers on disk, so a rerun replays instead of paying again."""
from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

from utils.models.request import Completion, Usage

log = logging.getLogger("cupid.models")


class ResponseCache:
    """Completed answers on disk (SQLite), keyed by the full request and the model name.

    A rerun after an interruption then replays finished calls instead of paying for them
    again, also inside a multi-turn dialogue. One connection, guarded by a lock.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # A cache that is not a database (a truncated copy, another file under its name) is
        # moved aside and a fresh one made: it only saves money, it holds no results.
        self.moved_aside: tuple[Path, str] | None = None
        try:
            self._db = self._open()
        except sqlite3.DatabaseError as exc:
            self.moved_aside = (self._move_aside(), str(exc))
            log.warning("%s is not a usable SQLite database (%s); moved to %s and started afresh",
                        self.path, exc, self.moved_aside[0])
            self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # WAL with NORMAL sync survives a killed process (only a power cut may lose the
            # last answers, which are then asked again); FULL would fsync every answer.
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS completions ("
                " key TEXT PRIMARY KEY, text TEXT NOT NULL,"
                " prompt_tokens INTEGER, completion_tokens INTEGER, batch INTEGER DEFAULT 0)"
            )
            columns = {row[1] for row in db.execute("PRAGMA table_info(completions)")}
            if "batch" not in columns:  # a cache written before batch mode existed
                db.execute("ALTER TABLE completions ADD COLUMN batch INTEGER DEFAULT 0")
            db.execute("SELECT count(*) FROM completions WHERE key = ''").fetchone()
            db.commit()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def _move_aside(self) -> Path:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{self.path}{suffix}")
            if source.exists():
                source.replace(Path(f"{target}{suffix}"))
        return target

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._db.execute(
                "SELECT text, prompt_tokens, completion_tokens, batch FROM completions WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None:
            return None
        usage = Usage(row[1], row[2], bool(row[3])) if row[1] is not None else None
        return Completion(text=row[0], usage=usage)

    def put(self, key: str, completion: Completion) -> None:
        usage = completion.usage
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?)",
                (key, completion.text, usage.prompt_tokens if usage else None,
                 usage.completion_tokens if usage else None, int(bool(usage and usage.batch))),
            )
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()
