"""The offload dialogs the window opened: each non-modal, kept until it is closed with no run going."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from app.core.config.settings import OffloadPreferences
from app.core.queue.jobs import JobStore
from app.gui.offload.dialog import OffloadDialog


class OffloadLauncher(QObject):
    """Opens an :class:`OffloadDialog` for chosen queued jobs; what a dialog asks to remember and how its run
    ended come out of :attr:`remember` and :attr:`ended`, whichever dialog said it."""

    remember = Signal(dict)  # the choices to keep for next time (OffloadPreferences' fields)
    ended = Signal(str)  # how a run ended, in words

    def __init__(self, store: JobStore, parent: QWidget) -> None:
        super().__init__(parent)
        self._store = store
        self._parent = parent
        self.dialogs: list[OffloadDialog] = []

    def open(self, job_ids: list[int], preferences: OffloadPreferences) -> OffloadDialog:
        dialog = OffloadDialog(self._store, job_ids, preferences=preferences, parent=self._parent)
        dialog.remember.connect(self.remember)
        dialog.offload_ended.connect(self.ended)
        dialog.finished.connect(lambda _result: self._forget(dialog))
        self.dialogs.append(dialog)
        dialog.show()
        return dialog

    def _forget(self, dialog: OffloadDialog) -> None:
        if dialog in self.dialogs and not dialog.running:
            self.dialogs.remove(dialog)
            dialog.deleteLater()

    def shutdown(self) -> None:
        """Each run is cancelled; its thread tears the remote down before the program exits."""
        for dialog in self.dialogs:
            dialog.shutdown()
