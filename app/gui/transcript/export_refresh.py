"""Edits reach the files already exported: a job exported automatically (an output folder in Settings) has
those files written again from the edited transcript, a moment after the editing stops."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, QTimer, Signal

from app.core.queue.exports import refresh_exports
from app.core.queue.jobs import JobNotFoundError, JobStateError, JobStore

log = logging.getLogger(__name__)

# Typing reads a paragraph back on every move to another one: the files are written once it has settled.
SETTLE_MS = 1500


class ExportRefresher(QObject):
    refreshed = Signal(str)  # what was written, for the status bar

    def __init__(self, store: JobStore, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self._pending: set[int] = set()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SETTLE_MS)
        self._timer.timeout.connect(self.flush)

    def schedule(self, job_id: int) -> None:
        self._pending.add(job_id)
        self._timer.start()

    def flush(self) -> None:
        """Write every pending job's exports now (also before the window closes)."""
        self._timer.stop()
        pending, self._pending = self._pending, set()
        for job_id in sorted(pending):
            self._refresh(job_id)

    def _refresh(self, job_id: int) -> None:
        try:
            saved = refresh_exports(self.store, job_id)
        except (JobNotFoundError, JobStateError, OSError, ValueError) as error:
            log.warning("exports of job %s not refreshed: %s", job_id, error)
            return
        if saved is not None:
            self.refreshed.emit(saved.summary())
