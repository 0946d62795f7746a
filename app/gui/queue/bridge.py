"""The queue worker in a background thread, its events delivered to the Qt main thread as signals."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal

from app.core.queue.engine_process import EngineProcess
from app.core.queue.jobs import JobStore
from app.core.queue.worker import JobEvent, QueueWorker


class WorkerBridge(QObject):
    """Owns a :class:`QueueWorker` running in a Python thread; the main thread only receives signals.

    The worker thread itself does little (it waits on the inference process's pipe and writes progress to
    SQLite); inference runs in a child process, so the event loop never waits on it.
    """

    # JobEvent, queued to the main thread (the emitter lives in another thread). Not named `event`: that would
    # hide QObject.event(), the virtual through which Qt delivers every event to this object.
    job_event = Signal(object)
    stopped = Signal()

    def __init__(self, store: JobStore, engine: EngineProcess | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        # The worker gets its own connection: the window's reads never wait behind the worker's commits
        # (WAL lets a reader run during a write), and the window's poll sees the worker's changes.
        self._store = JobStore(store.directory, recover=False)
        self.worker = QueueWorker(self._store, engine=engine, on_event=self.job_event.emit)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self._run, name="scriba-queue-worker", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.worker.run(until_empty=False)
        finally:
            self.stopped.emit()

    def wake(self) -> None:
        self.worker.wake()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the worker; a running job goes back to the queue. Waits for the thread to end."""
        self.worker.stop()
        if self._thread is not None:
            self._thread.join(timeout)
        if not self.running:
            self._store.close()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def engine_pid(self) -> int | None:
        return self.worker.engine.pid


__all__ = ["JobEvent", "WorkerBridge"]


class BatchTally:
    """How the jobs since the queue was last idle ended, for the one notification when it is idle again."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def count(self, event: JobEvent) -> None:
        if event.kind in ("done", "failed", "cancelled"):
            self._counts[event.kind] = self._counts.get(event.kind, 0) + 1

    def finish(self) -> str | None:
        """The sentence, "2 done, 1 failed" (and starts counting again); None when no job ended since the last one."""
        if not self._counts:
            return None
        done, failed, cancelled = (self._counts.get(kind, 0) for kind in ("done", "failed", "cancelled"))
        self._counts = {}
        return ", ".join(
            [f"{done} done"]
            + ([f"{failed} failed"] if failed else [])
            + ([f"{cancelled} cancelled"] if cancelled else [])
        )
