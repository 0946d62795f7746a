"""File › Export… (and the Export… button): the selected job's transcript written to a folder, in the formats
ticked, with what the formats people read show besides the words (timestamps, speaker names, paragraphs).

The sheet stays open after an export and says which files were written where, and which file there was kept
because it was changed by hand (the new one then takes another name: app/core/transcript/save.py decides). The
folder, formats and options it was last used with come back the next time, after a restart too: the window
keeps them in its settings (``remember``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.config.settings import Settings
from app.core.queue.exports import export_job
from app.core.queue.jobs import JobState, JobStateError, JobStore
from app.core.transcript.formats import FORMATS, STYLED, ExportStyle, filename
from app.core.transcript.save import describe_write_error

# What each format is for, in the words of someone choosing one.
FORMAT_WORDS = {
    "txt": "plain text",
    "srt": "subtitles (SubRip)",
    "vtt": "subtitles for the web (WebVTT)",
    "json": "everything, for programs",
    "md": "Markdown",
    "csv": "spreadsheet (CSV)",
    "tsv": "spreadsheet (tab-separated)",
    "html": "web page",
    "docx": "Word document",
    "qda": "MAXQDA, ATLAS.ti, NVivo",
}
# The options of ExportStyle, in the sheet's words.
STYLE_WORDS = {
    "timestamps": "Timestamps",
    "speakers": "Speaker names",
    "paragraphs": "Paragraphs (a speaker's sentences joined; off: one per segment)",
}


class ExportSheet(QDialog):
    """Export job ``job_id`` of ``store``; starts from ``settings``' last export (``only``: these formats ticked,
    File › Export as). ``exported`` carries the sentence for the status bar, ``remember`` the choices to keep."""

    exported = Signal(str)
    remember = Signal(dict)

    def __init__(
        self,
        store: JobStore,
        job_id: int,
        settings: Settings,
        parent: QWidget | None = None,
        only: tuple[str, ...] | None = None,
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.job_id = job_id
        job = store.get(job_id)
        self.stem = job.source.stem
        self.setWindowTitle(f"Export {job.source.name}")
        last = settings.window
        chosen = only or last.export_formats or settings.job.formats

        self.format_boxes: dict[str, QCheckBox] = {}
        format_grid = QGridLayout()
        for index, fmt in enumerate(FORMATS):
            box = QCheckBox(f"{fmt}: {FORMAT_WORDS.get(fmt, fmt)}")
            box.setChecked(fmt in chosen)
            box.setToolTip(f"writes {filename(self.stem, fmt)}")
            box.toggled.connect(self._update)
            self.format_boxes[fmt] = box
            format_grid.addWidget(box, index // 2, index % 2)
        formats = QGroupBox("Formats")
        formats.setLayout(format_grid)

        style = {"timestamps": last.export_timestamps, "speakers": last.export_speakers}
        style["paragraphs"] = last.export_paragraphs
        self.style_boxes: dict[str, QCheckBox] = {}
        style_column = QVBoxLayout()
        for name, words in STYLE_WORDS.items():
            box = QCheckBox(words)
            box.setChecked(style[name])
            box.setToolTip(f"in {', '.join(STYLED[name])}; the other formats are written whole")
            self.style_boxes[name] = box
            style_column.addWidget(box)
        options = QGroupBox("Show")
        options.setLayout(style_column)

        start = last.export_folder or settings.job.output_dir or str(job.source.parent)
        self.folder = QLineEdit(start)
        self.folder.textChanged.connect(self._update)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        folder_row = QHBoxLayout()
        folder_row.addWidget(QLabel("Folder"))
        folder_row.addWidget(self.folder, 1)
        folder_row.addWidget(browse)

        self.report = QLabel("")
        self.report.setWordWrap(True)
        self.report.hide()
        buttons = QDialogButtonBox()
        self.export_button = buttons.addButton("Export", QDialogButtonBox.ButtonRole.ApplyRole)
        self.export_button.setDefault(True)
        self.export_button.clicked.connect(self.export)
        self.close_button = buttons.addButton(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(formats)
        layout.addWidget(options)
        layout.addLayout(folder_row)
        layout.addWidget(self.report)
        layout.addWidget(buttons)
        self._update()

    def chosen_formats(self) -> tuple[str, ...]:
        return tuple(fmt for fmt, box in self.format_boxes.items() if box.isChecked())

    def export_style(self) -> ExportStyle:
        return ExportStyle(**{name: box.isChecked() for name, box in self.style_boxes.items()})

    def _update(self) -> None:
        self.export_button.setEnabled(bool(self.chosen_formats()) and bool(self.folder.text().strip()))
        self.export_button.setToolTip("" if self.chosen_formats() else "tick at least one format")

    def _browse(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Export to", self.folder.text())
        if folder:
            self.folder.setText(folder)

    def _say(self, text: str) -> None:
        self.report.setText(text)
        self.report.show()

    def export(self) -> None:
        """Write the files; say what was written (and what was kept, or failed) here and to the window."""
        formats = self.chosen_formats()
        folder = Path(self.folder.text().strip()).expanduser()
        if not formats or not str(folder):
            return
        if not folder.is_absolute():  # relative to wherever Scriba was started: never what was meant
            self._say(
                f"Give the folder's full path (such as {Path.home() / 'Transcripts'}), or choose it with Browse…."
            )
            return
        style = self.export_style()
        self.remember.emit(
            {
                "export_folder": str(folder),
                "export_formats": formats,
                **{f"export_{name}": getattr(style, name) for name in STYLE_WORDS},
            }
        )
        try:
            saved = export_job(self.store, self.job_id, folder, formats, style)
        except (OSError, ValueError, JobStateError) as error:
            self._say(f"Nothing was exported to {folder}: {error}")
            return
        lines = []
        if saved.result.written:
            names = ", ".join(path.name for path in saved.result.written)
            lines.append(f"Wrote {names} to {saved.result.directory}.")
        if saved.kept_note is not None:
            lines.append(saved.kept_note[:1].upper() + saved.kept_note[1:] + ".")
        failures = saved.result.failures.items()
        lines += [f"{fmt} was not written: {describe_write_error(error)}." for fmt, error in failures]
        self._say("\n".join(lines))
        summary = saved.summary()
        self.exported.emit(summary[:1].upper() + summary[1:])


def open_export_sheet(
    parent: QWidget,
    store: JobStore,
    job_id: int | None,
    settings: Settings,
    formats: object,
    remember: Callable[[dict[str, object]], None],
    say: Callable[[str, int], None],
) -> ExportSheet | None:
    """The sheet for job ``job_id`` when it is finished (window-modal); ``formats``: a tuple from File › Export as
    (that one ticked), anything else (a click's checked flag) the last export's. ``say``: the status bar."""
    if job_id is None or store.get(job_id).state is not JobState.DONE:
        say("Select a finished job to export.", 5000)
        return None
    sheet = ExportSheet(store, job_id, settings, parent, formats if isinstance(formats, tuple) else None)
    sheet.remember.connect(remember)
    sheet.exported.connect(lambda said: say(said, 15000))
    sheet.open()
    return sheet
