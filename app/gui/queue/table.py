"""The queue's table: one row a job, several rows selectable, and which job is selected."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

from app.gui.queue.model import COLUMNS, STATE_COLUMN, ProgressDelegate, QueueModel

# The most of the room beside the short columns that the state may take from the file name.
STATE_SHARE = 0.4


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
        # The short columns fit their contents; the file name takes what is left, elided in the middle (its full
        # path in the tooltip), and the state at most a share of it: a long running state never pushes ETA off the
        # table's edge nor squeezes the name to "…".
        header = self.horizontalHeader()
        for column in range(len(COLUMNS)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(STATE_COLUMN, QHeaderView.ResizeMode.Interactive)
        self.queue_model.dataChanged.connect(self._share_width)
        self.queue_model.modelReset.connect(self._share_width)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._share_width()

    def _share_width(self) -> None:
        header = self.horizontalHeader()
        others = sum(header.sectionSize(column) for column in range(1, len(COLUMNS)) if column != STATE_COLUMN)
        room = self.viewport().width() - others
        title = header.sectionSizeFromContents(STATE_COLUMN).width()
        header.resizeSection(
            STATE_COLUMN, max(title, min(self.sizeHintForColumn(STATE_COLUMN), int(room * STATE_SHARE)))
        )

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
