"""At start, end any rented machine an earlier run left behind, on a thread, and tell the window what it found."""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.cloud.offload.controller import sweep_at_start, sweep_is_due
from app.gui.main_thread import deliver_on_main_thread, run_off_main_thread


class OrphanSweep(QObject):
    """The teardown ledger's open entries, and any machine a provider still lists although the ledger says it is
    gone (:func:`app.cloud.offload.controller.sweep_at_start`, the same sweep as `scriba offload run`'s).

    Runs on a thread, and only where a ledger exists (something was offloaded from this data folder once): then
    it reads the keyring and asks every provider that has a key for its list of Scriba's machines.
    """

    message = Signal(str)  # one per machine found, checked or ended
    done = Signal(int)  # entries still open afterwards; -1 when the sweep failed

    def __init__(self, data_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.data_dir = data_dir
        self.worker: threading.Thread | None = None

    def start(self) -> bool:
        """False when there is no ledger at all (nothing was ever offloaded from this data folder)."""
        if not sweep_is_due(self.data_dir):
            return False
        notify = deliver_on_main_thread(self.message.emit)
        data_dir = self.data_dir
        self.worker = run_off_main_thread(
            lambda: sweep_at_start(data_dir, notify),  # never raises: a failure is told through notify, and -1
            self.done.emit,
            name="offload-orphan-sweep",
            daemon=True,  # an unfinished sweep is simply done again at the next start
        )
        return True
