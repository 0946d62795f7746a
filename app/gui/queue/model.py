"""The queue as a table model, and a delegate that draws the progress column as a progress bar."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QApplication, QStyle, QStyledItemDelegate, QStyleOptionProgressBar, QStyleOptionViewItem

from app.core.queue.jobs import Job, JobState
from app.core.queue.worker import JobEvent
from app.core.transcript.times import clock
from app.gui.theme import is_dark

COLUMNS = ("File", "Duration", "State", "Progress", "Speed", "ETA")
PROGRESS_COLUMN = COLUMNS.index("Progress")
STATE_COLUMN = COLUMNS.index("State")

_STATE_COLOURS = {
    JobState.DONE: QColor("#2e7d32"),
    JobState.FAILED: QColor("#c62828"),
    JobState.CANCELLED: QColor("#757575"),
    JobState.RUNNING: QColor("#1565c0"),
}
# The same meanings, light enough to read on a dark theme's base.
_DARK_THEME_STATE_COLOURS = {
    JobState.DONE: QColor("#81c784"),
    JobState.FAILED: QColor("#ef9a9a"),
    JobState.CANCELLED: QColor("#bdbdbd"),
    JobState.RUNNING: QColor("#90caf9"),
}
# Done, but part of the recording is not in the transcript (a file damaged part-way): not a plain success.
PARTIAL_COLOUR = QColor("#e65100")
DARK_THEME_PARTIAL_COLOUR = QColor("#ffb74d")


def state_colour(job: Job) -> QColor | None:
    """The state column's colour for the palette in use (light or dark theme)."""
    dark_theme = is_dark()
    if job.partial:
        return DARK_THEME_PARTIAL_COLOUR if dark_theme else PARTIAL_COLOUR
    return (_DARK_THEME_STATE_COLOURS if dark_theme else _STATE_COLOURS).get(job.state)


AnyIndex = QModelIndex | QPersistentModelIndex

# The engine's stage names (app.core.engine.pipeline) as a person reads them in the queue.
STAGE_NAMES = {
    "decode": "decoding",
    "transcribe": "transcribing",
    "diarize": "finding speakers",
    "merge": "putting it together",
}


def stage_text(stage: str) -> str:
    return STAGE_NAMES.get(stage, stage)


class QueueModel(QAbstractTableModel):
    def __init__(self) -> None:
        super().__init__()
        self.jobs: list[Job] = []

    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008 (Qt's names)
        return 0 if parent.isValid() else len(self.jobs)

    def columnCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        job = self.jobs[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if column == 0:
                return job.source.name
            if column == 1:
                return "" if job.duration is None else clock(job.duration)
            if column == 2:
                if job.partial:
                    return "done — partial"
                if job.state is JobState.RUNNING and job.cancel_requested:
                    return "running (cancelling)"
                if job.state is JobState.RUNNING and job.stage:
                    return f"running — {stage_text(job.stage)}"  # which step the time goes to
                return job.state.value
            if column == PROGRESS_COLUMN:
                return f"{job.progress:.0%}"
            if column == 4:
                return f"{job.speed:.1f}x" if job.speed else ""
            if column == 5:
                return clock(job.eta) if job.state is JobState.RUNNING and job.eta is not None else ""
        if role == Qt.ItemDataRole.UserRole:
            return job.progress if column == PROGRESS_COLUMN else job.id
        if role == Qt.ItemDataRole.ToolTipRole:
            lines = [str(job.source), f"job {job.id}: {job.status}"]
            lines.extend(warning for warning in job.warnings if warning not in lines[1])
            if job.error:
                lines.append(job.error)
            if job.note:
                lines.append(job.note)
            return "\n".join(lines)
        if role == Qt.ItemDataRole.ForegroundRole and column == 2:
            return state_colour(job)
        return None

    def row_of(self, job_id: int) -> int | None:
        for row, job in enumerate(self.jobs):
            if job.id == job_id:
                return row
        return None

    def job_at(self, row: int) -> Job | None:
        return self.jobs[row] if 0 <= row < len(self.jobs) else None

    def set_jobs(self, jobs: list[Job]) -> None:
        """Replace the contents; rows that kept their job are updated in place (selection survives)."""
        if [job.id for job in jobs] == [job.id for job in self.jobs]:
            changed = [row for row, (old, new) in enumerate(zip(self.jobs, jobs, strict=True)) if old != new]
            self.jobs = jobs
            for row in changed:
                self.dataChanged.emit(self.index(row, 0), self.index(row, len(COLUMNS) - 1))
            return
        self.beginResetModel()
        self.jobs = jobs
        self.endResetModel()

    def apply_progress(self, event: JobEvent) -> None:
        """A progress event changes one row in memory; the store is read again only when a job ends."""
        if event.job_id is None:
            return
        row = self.row_of(event.job_id)
        if row is None:
            return
        job = self.jobs[row]
        self.jobs[row] = replace(
            job,
            state=JobState.RUNNING,
            progress=event.fraction,
            stage=event.stage,
            duration=event.duration if event.duration else job.duration,
            speed=event.speed,
            eta=event.eta,
        )
        self.dataChanged.emit(self.index(row, 1), self.index(row, len(COLUMNS) - 1))


class ProgressDelegate(QStyledItemDelegate):
    def initStyleOption(self, option: QStyleOptionViewItem, index: AnyIndex) -> None:
        super().initStyleOption(option, index)
        if index.column() == 0:
            # A file name keeps its start and its end ("2026-03-14 quarterly…recording).wav"), which tell files apart.
            option.textElideMode = Qt.TextElideMode.ElideMiddle

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: AnyIndex) -> None:
        if index.column() != PROGRESS_COLUMN:
            super().paint(painter, option, index)
            return
        bar = QStyleOptionProgressBar()
        bar.rect = option.rect.adjusted(2, 3, -2, -3)
        bar.minimum = 0
        bar.maximum = 1000
        bar.progress = int(1000 * float(index.data(Qt.ItemDataRole.UserRole) or 0.0))
        bar.text = str(index.data(Qt.ItemDataRole.DisplayRole))
        bar.textVisible = True
        # Without State_Horizontal, Qt 6 styles draw the bar as a vertical one (filling from the bottom up).
        bar.state = option.state | QStyle.StateFlag.State_Horizontal
        style = option.widget.style() if option.widget else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ProgressBar, bar, painter)
