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
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from app.core.errors import ScribaError


class NewerFileError(ScribaError, RuntimeError):
    """A queue or ledger file written by a newer Scriba: refused rather than misread."""


T = TypeVar("T", bound="SqliteDatabase")


class SqliteDatabase:
    def __init__(
        self,
        path: Path,
        schema: str,
        schema_version: int,
        what: str,
        upgrades: Mapping[int, str] | None = None,
        check: bool = False,
    ) -> None:
        """Open (or create) ``path`` with ``schema`` (statements separated by ``;``); ``what`` names it in errors.

        ``upgrades[n]``: the statements that bring a file of schema ``n - 1`` to ``n`` (``ALTER TABLE … ADD
        COLUMN``); run in order on an older file, never on a new one (``schema`` creates it complete). ``check``:
        verify every page first and raise ``sqlite3.DatabaseError`` for a damaged file (see :func:`is_corruption`)."""
        self.path = path
        self._lock = threading.RLock()
        # Autocommit mode; transactions are explicit (see _transaction).
        self._db = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=30000")
        if check:
            # Before anything is written: a damaged file is then set aside exactly as it was found. Every page is
            # read (milliseconds for a queue of thousands of jobs), so a damaged page fails now, not later in the
            # middle of some command.
            (verdict,) = self._db.execute("PRAGMA quick_check").fetchone()
            if verdict != "ok":
                raise sqlite3.DatabaseError(f"database disk image is malformed ({verdict})")
        with self._transaction():
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > schema_version:
                raise NewerFileError(
                    f"{path} was written by a newer Scriba ({what} schema {version}); update Scriba to open it"
                )
            if version:  # 0: a new file, which the schema creates at the current version
                for step in range(version + 1, schema_version + 1):
                    for statement in filter(str.strip, (upgrades or {}).get(step, "").split(";")):
                        self._db.execute(statement)
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


def is_corruption(error: BaseException) -> bool:
    """Whether an sqlite3 error means the file itself is damaged (not a database, a malformed page), as opposed
    to a busy lock, a full disk or a read-only folder, which are passing or fixable and must never make Scriba
    set the file aside."""
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
    if isinstance(error, sqlite3.OperationalError):  # locked, disk full, unable to open, I/O error
        return False
    text = str(error).lower()
    return "malformed" in text or "not a database" in text


def move_aside(path: Path, reason: str = "corrupt") -> Path:
    """Rename a damaged database (and its -wal and -shm files) to ``<name>.<reason>-<UTC time>``: kept for the
    user or a bug report, never deleted. Returns the new path of the main file."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.{reason}-{stamp}")
    number = 2
    while target.exists():
        target = path.with_name(f"{path.name}.{reason}-{stamp}-{number}")
        number += 1
    for suffix in ("-wal", "-shm"):
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            os.replace(companion, target.with_name(target.name + suffix))
    os.replace(path, target)
    return target


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
