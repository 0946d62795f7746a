"""Edit › Restore removed…: the transcripts set aside by removing or re-transcribing a job, and a way back."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.queue.jobs import Job, JobStore
from app.core.queue.trash import Trash, TrashEntry
from app.gui.queue.safety import ask_first


class TrashDialog(QDialog):
    restored = Signal(object)  # the Job the transcript came back as

    def __init__(self, trash: Trash, store: JobStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.trash = trash
        self.store = store
        self.setWindowTitle("Restore removed transcripts")
        self.explanation = QLabel(
            "Transcripts of removed or re-transcribed jobs are kept here. Restoring one adds it back to the queue "
            "as a finished job, with its edits and speaker names."
        )
        self.explanation.setWordWrap(True)
        self.entries_list = QListWidget()
        self.entries_list.itemSelectionChanged.connect(self._selection_changed)
        self.entries_list.itemDoubleClicked.connect(lambda _item: self.restore_selected())
        self.restore_button = QPushButton("Restore")
        self.restore_button.clicked.connect(self.restore_selected)
        self.empty_button = QPushButton("Empty trash…")
        self.empty_button.setToolTip("Delete every transcript here for good (asks first)")
        self.empty_button.clicked.connect(self.empty_trash)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.addButton(self.restore_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.empty_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.explanation)
        layout.addWidget(self.entries_list)
        layout.addWidget(buttons)
        self.resize(520, 320)
        self.reload()

    def reload(self) -> None:
        self.entries_list.clear()
        self.entries_list.setEnabled(True)
        for entry in self.trash.entries():
            item = QListWidgetItem(entry.describe())
            item.setData(Qt.ItemDataRole.UserRole, entry)
            item.setToolTip(str(entry.source))
            self.entries_list.addItem(item)
        if self.entries_list.count():
            self.entries_list.setCurrentRow(0)
        else:
            self.entries_list.addItem(QListWidgetItem("The trash is empty."))
            self.entries_list.setEnabled(False)
        self._selection_changed()
        self.empty_button.setEnabled(self._selected() is not None)

    def _selected(self) -> TrashEntry | None:
        item = self.entries_list.currentItem()
        entry = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        return entry if isinstance(entry, TrashEntry) else None

    def _selection_changed(self) -> None:
        self.restore_button.setEnabled(self._selected() is not None)

    def restore_selected(self) -> Job | None:
        entry = self._selected()
        if entry is None:
            return None
        try:
            job = self.trash.restore(self.store, entry)
        except (OSError, ValueError) as error:
            QMessageBox.warning(self, "Restore", f"{entry.describe()} cannot be restored: {error}")
            return None
        self.restored.emit(job)
        self.reload()
        return job

    def empty_trash(self) -> int:
        """The one place a transcript is deleted for good, and it asks first."""
        count = len(self.trash.entries())
        if not count:
            return 0
        text = f"Delete the {count} transcript(s) in the trash for good? They cannot be restored afterwards."
        if not ask_first(self, "Empty trash", text, "Delete for good"):
            return 0
        emptied = self.trash.empty()
        self.reload()
        return emptied
