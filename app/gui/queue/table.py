"""The queue's table: one row a job, several rows selectable, and which job is selected."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

from app.gui.queue.model import COLUMNS, ProgressDelegate, QueueModel


class QueueTable(QTableView):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.queue_model = QueueModel()
        self.setModel(self.queue_model)
        self.setItemDelegate(ProgressDelegate(self))
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        # Several rows at once: "Offload to cloud…" sends the selected queued jobs together; the other job
        # actions act on the current row.
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.verticalHeader().setVisible(False)
        self.setTabKeyNavigation(False)  # Tab moves on to the next control, as everywhere else
        self.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in range(1, len(COLUMNS)):
            self.horizontalHeader().setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)

    def selected_job_id(self) -> int | None:
        """The current row's job."""
        index = self.selectionModel().currentIndex()
        if not index.isValid():
            return None
        job = self.queue_model.job_at(index.row())
        return job.id if job else None

    def selected_job_ids(self) -> list[int]:
        """Every selected row's job, in queue order; the current row's when no row is selected."""
        rows = sorted({index.row() for index in self.selectionModel().selectedRows()})
        ids = [job.id for job in (self.queue_model.job_at(row) for row in rows) if job is not None]
        current = self.selected_job_id()
        return ids or ([current] if current is not None else [])

    def select_job(self, job_id: int) -> None:
        row = self.queue_model.row_of(job_id)
        if row is not None and self.selectionModel().currentIndex().row() != row:
            self.selectRow(row)
