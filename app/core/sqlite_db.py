"""What the job queue and the cloud ledger share: one SQLite file that several threads and processes use safely.

WAL lets readers go on while a writer commits; ``synchronous=FULL`` makes a commit survive a power cut (a job
marked done, a launch recorded just before the provider was called); every multi-statement change takes the
write lock up front with ``BEGIN IMMEDIATE``, so two processes never interleave one; the schema is versioned
and a file from a newer Scriba is refused instead of being misread.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

T = TypeVar("T", bound="SqliteDatabase")


class SqliteDatabase:
    def __init__(self, path: Path, schema: str, schema_version: int, what: str) -> None:
        """Open (or create) ``path`` with ``schema`` (statements separated by ``;``); ``what`` names it in errors."""
        self.path = path
        self._lock = threading.RLock()
        # Autocommit mode; transactions are explicit (see _transaction).
        self._db = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=30000")
        with self._transaction():
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > schema_version:
                raise RuntimeError(
                    f"{path} was written by a newer Scriba ({what} schema {version}); update Scriba to open it"
                )
            for statement in filter(str.strip, schema.split(";")):
                self._db.execute(statement)
            self._db.execute(f"PRAGMA user_version = {schema_version}")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host: how a store tells a crashed owner from a live one."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True
