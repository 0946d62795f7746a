"""One job at a time per queue, across processes: the lock file beside the queue."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import TextIO


class QueueLock:
    """An exclusive lock file beside the queue. The kernel drops it when its process dies (even kill -9)."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / "worker.lock"
        self._handle: TextIO | None = None

    def acquire(self) -> bool:
        if self._handle is not None:
            return True
        handle = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            return False
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._handle = handle
        return True

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def holder(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8").strip()
        except OSError:
            return ""
