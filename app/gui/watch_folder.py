"""The window's watch folder (Settings > Watch folder): a look at the folder every few seconds, on the main
thread (a directory listing), through the core's :class:`~app.core.queue.watch.WatchFolder`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from app.core.queue.jobs import JobOptions, JobStore
from app.core.queue.watch import WatchFolder

INTERVAL_MS = 3000


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
        if self.watch is None:
            return
        self.watch.options = self._options()
        added = self.watch.scan()
        if added:
            self.queued.emit(added)

    def stop(self) -> None:
        self._timer.stop()
