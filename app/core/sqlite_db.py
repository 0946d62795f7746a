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
    """Whether process ``pid`` exists on this host. Not enough alone to call an owner alive: after a reboot or a
    container restart the pid is soon reused; use :func:`owner_alive` with the start time recorded with it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def process_started_at(pid: int | None = None) -> float | None:
    """When process ``pid`` (default: this one) started, in seconds since the epoch; None when it does not exist.

    Recorded next to a pid, it tells the process that wrote a row from a later process that got the same pid."""
    import psutil

    try:
        return float(psutil.Process(os.getpid() if pid is None else pid).create_time())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except (psutil.AccessDenied, OSError):
        return None


# Start times are read from /proc with a clock-tick (10 ms) resolution and a boot time that may be rounded:
# two readings of one process agree far better than this, a reused pid starts seconds or reboots later.
_START_TOLERANCE_S = 1.0


def owner_alive(pid: int | None, started_at: float | None) -> bool:
    """Whether the process that recorded (``pid``, ``started_at``) is still running on this host.

    A row written before start times were recorded (``started_at`` None) falls back to the pid alone."""
    if pid is None or pid <= 0 or not pid_alive(pid):
        return False
    if started_at is None:
        return True
    now_started = process_started_at(pid)
    if now_started is None:  # exists but unreadable (another user's process): it cannot be ours
        return False
    return abs(now_started - started_at) <= _START_TOLERANCE_S
