"""Queue › Transcribe a part…: a queued job's time range (from, to), as `--start/--end` set it on the command
line. The transcript keeps the recording's times, so subtitles and playback line up with the whole file."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLabel, QLineEdit, QVBoxLayout, QWidget

from app.core.queue.jobs import Job, JobOptions
from app.core.transcript.times import clock, parse_time


class TimeRangeDialog(QDialog):
    def __init__(self, job: Job, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Transcribe a part of {job.source.name}")
        self.job = job
        self.start = QLineEdit(clock(job.options.start) if job.options.start is not None else "")
        self.start.setPlaceholderText("the beginning (e.g. 1:30 or 1:02:00)")
        self.end = QLineEdit(clock(job.options.end) if job.options.end is not None else "")
        length = f" ({clock(job.duration)})" if job.duration else ""
        self.end.setPlaceholderText(f"the end{length}")
        self.error = QLabel("")
        self.error.setWordWrap(True)
        self.error.hide()
        form = QFormLayout()
        form.addRow("From", self.start)
        form.addRow("To", self.end)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        self.options: JobOptions | None = None

    def accept(self) -> None:
        try:
            start = parse_time(self.start.text()) if self.start.text().strip() else None
            end = parse_time(self.end.text()) if self.end.text().strip() else None
            if start is not None and end is not None and end <= start:
                raise ValueError(f"the end ({clock(end)}) is not after the start ({clock(start)})")
        except ValueError as error:
            self.error.setText(str(error))
            self.error.show()
            return
        self.options = replace(self.job.options, start=start, end=end)
        super().accept()
