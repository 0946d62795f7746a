"""The window's watch folder (Settings > Watch folder): a look at the folder every few seconds through the core's
:class:`~app.core.queue.watch.WatchFolder`, off the main thread: a network share that stalls would otherwise
freeze the window for as long as its listing takes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from app.core.queue.jobs import Job, JobOptions, JobStore
from app.core.queue.watch import WatchFolder
from app.gui.main_thread import run_off_main_thread

INTERVAL_MS = 3000
log = logging.getLogger(__name__)


class FolderWatcher(QObject):
    queued = Signal(list)  # the Jobs just added

    def __init__(self, store: JobStore, options: Callable[[], JobOptions], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self._options = options  # the settings' job options at the time of each look
        self.watch: WatchFolder | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(INTERVAL_MS)
        self._timer.timeout.connect(self.look)
        self._looking = False

    def set_folder(self, folder: str | None) -> None:
        """Watch ``folder`` (None or empty: nothing). The same folder again keeps what was already seen."""
        path = Path(folder).expanduser().absolute() if folder else None
        if self.watch is not None and self.watch.folder == path:
            return
        self.watch = WatchFolder(path, self._options(), self._store) if path is not None else None
        if self.watch is None:
            self._timer.stop()
        else:
            self._timer.start()
            self.look()

    def look(self) -> None:
        """Start a look at the folder, unless one is still under way (a slow share): it is not queued up."""
        if self.watch is None or self._looking:
            return
        self._looking = True
        self.watch.options = self._options()
        run_off_main_thread(self.watch.scan, self._looked, self._failed, name="watch folder")

    def _looked(self, added: list[Job]) -> None:
        self._looking = False
        if added:
            self.queued.emit(added)  # even from a folder no longer watched: they are queued jobs all the same

    def _failed(self, error: Exception) -> None:
        self._looking = False
        log.warning("watch folder: %s: %s", type(error).__name__, error)

    @property
    def looking(self) -> bool:
        return self._looking

    def stop(self) -> None:
        self._timer.stop()
