"""Settings: model, device, language, speakers, output, and speaker detection (pyannote's one-time download,
with the Hugging Face token kept in the keyring).

The job options' rows are made from their declaration (app/core/queue/options.py): its label, help (the
tooltip), placeholder and choices; an option declared with a label and not placed in :data:`_PAGES` gets a row
of its own at the end of the first page."""

from __future__ import annotations

from collections.abc import ItemsView
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSize
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.core.config.settings import Settings
from app.core.engine.models import CATALOG, installed_models
from app.core.queue.options import OPTIONS, Choice, Flag, Formats, Option, SpeakerCount
from app.core.transcript.formats import FORMATS
from app.gui.queue.safety import ask_first
from app.gui.screen_fit import fitting_size
from app.gui.settings.models_dialog import ModelsDialog, describe_models
from app.gui.settings.speaker_section import SpeakerDetectionSection

AUTOMATIC = "Automatic"
# The most speakers the form offers where the declaration sets no upper limit.
LARGEST_COUNT = 32
# The pages and the order of the job options on them; "speakers" is the row of the three counts.
_SPEAKERS = ("num_speakers", "min_speakers", "max_speakers")
_PAGES = (
    ("Transcription", ("model", "device", "compute_type", "language", "task", "prompt", "hotwords")),
    ("Speakers", ("diarize", "diarizer", "identify", "speakers")),
    ("Output", ("output_dir", "formats")),
    ("Dictation", ()),
)


class FormatBoxes(QWidget):
    """The export formats' check boxes, two rows of five (ten in one row would widen the dialog); indexed by
    format like a dict."""

    def __init__(self, chosen: tuple[str, ...]) -> None:
        super().__init__()
        self.boxes = {fmt: QCheckBox(fmt) for fmt in FORMATS}
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        for index, (fmt, check) in enumerate(self.boxes.items()):
            check.setChecked(fmt in chosen)
            grid.addWidget(check, index // 5, index % 5)

    def __getitem__(self, fmt: str) -> QCheckBox:
        return self.boxes[fmt]

    def items(self) -> ItemsView[str, QCheckBox]:
        return self.boxes.items()

    def chosen(self) -> tuple[str, ...]:
        return tuple(fmt for fmt, box in self.boxes.items() if box.isChecked())


class SettingsDialog(QDialog):
    # Each job option the form shows: its widget in ``fields``, and the dialog's attribute of its name.
    model: QComboBox
    output_dir: QLineEdit
    formats: FormatBoxes

    def __init__(
        self,
        settings: Settings,
        token_stored: bool,
        parent: QWidget | None = None,
        endpoint: str | None = None,
        models_cache: Path | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Scriba settings")
        self._settings = settings
        self._models_cache = models_cache
        self._endpoint = endpoint
        self.token_cleared = False
        self.download_failure: tuple[str, str] | None = None  # a model chosen here that did not arrive, and why

        self.fields: dict[str, QWidget] = {}
        for option in OPTIONS:
            if option.label is not None:
                widget = self._field(option, getattr(settings.job, option.name))
                if option.help:
                    widget.setToolTip(option.help[:1].upper() + option.help[1:])
                self.fields[option.name] = widget
                setattr(self, option.name, widget)
        self.manage_models = QPushButton("Models…")
        self.manage_models.setToolTip("what is on disk, sizes, languages and speed; download and remove")
        self.manage_models.clicked.connect(lambda: self.open_models(None))
        self.models_dialog: ModelsDialog | None = None
        self.watch_folder = QLineEdit(settings.job.watch_folder or "")
        self.watch_folder.setPlaceholderText("none: recordings that appear here are transcribed, exports beside them")

        self.speaker_detection = SpeakerDetectionSection(token_stored, settings.job.diarizer, endpoint)
        self.token = self.speaker_detection.token
        self._clear_button = self.speaker_detection.clear_button
        self._clear_button.clicked.connect(self._clear_token)

        labels = {option.name: option.label or option.name for option in OPTIONS}
        forms = {title: QFormLayout() for title, _names in _PAGES}
        page_of = {name: title for title, names in _PAGES for name in names}
        placed = {*page_of, *_SPEAKERS}
        for name in [*page_of, *(name for name in self.fields if name not in placed)]:
            form = forms[page_of.get(name, _PAGES[0][0])]
            if name == "speakers":
                speakers = QHBoxLayout()
                for count in _SPEAKERS:
                    speakers.addWidget(QLabel(labels[count]))
                    speakers.addWidget(self.fields[count])
                speakers.addStretch(1)
                form.addRow("Speakers (0: detect)", speakers)
            elif name == "model":
                model_row = QHBoxLayout()
                model_row.addWidget(self.model, 1)
                model_row.addWidget(self.manage_models)
                form.addRow(labels[name], model_row)
            elif name == "output_dir":
                form.addRow(labels[name], self._with_browse(self.output_dir, "Export finished transcripts to"))
            elif isinstance(self.fields[name], QCheckBox):
                form.addRow("", self.fields[name])  # a check box says what it is itself
            else:
                form.addRow(labels[name], self.fields[name])
        forms["Output"].addRow("Watch folder", self._with_browse(self.watch_folder, "Watch folder"))
        # The way back after the add-files sheet's "Don't ask again".
        self.ask_on_add = QCheckBox("Ask for language, speakers, quality and part when files are added")
        self.ask_on_add.setChecked(settings.window.ask_options_on_add)
        forms[_PAGES[0][0]].addRow("", self.ask_on_add)
        self.pause_queue = QCheckBox("Pause the file queue while I speak")
        self.pause_queue.setToolTip(
            "A file being transcribed slows dictation down on a busy computer: it waits while you speak, then goes on"
        )
        self.pause_queue.setChecked(settings.dictation.pause_queue)
        forms["Dictation"].addRow("", self.pause_queue)

        # Pages, each in a scroll area: on a small screen a page scrolls instead of squeezing its rows (the speaker
        # detection steps alone are most of a 720 px screen's height).
        self.page_list = QListWidget()
        self.pages = QStackedWidget()
        contents: list[QWidget] = []
        for title, _names in _PAGES:
            page = QWidget()
            column = QVBoxLayout(page)
            column.addLayout(forms[title])
            if title == "Speakers":
                column.addWidget(self.speaker_detection)
            column.addStretch(1)
            scroll = QScrollArea()
            scroll.setObjectName(title)
            scroll.setWidget(page)
            scroll.setWidgetResizable(True)
            scroll.setFrameShape(QFrame.Shape.NoFrame)
            self.pages.addWidget(scroll)
            contents.append(page)
            self.page_list.addItem(title)
        self.page_list.currentRowChanged.connect(self.pages.setCurrentIndex)
        self.page_list.setCurrentRow(0)
        self.page_list.setFixedWidth(self.page_list.sizeHintForColumn(0) + 4 * self.page_list.frameWidth() + 16)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        body = QHBoxLayout()
        body.addWidget(self.page_list)
        body.addWidget(self.pages, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(body, 1)
        layout.addWidget(buttons)
        self.resize(self._opening_size(contents, parent))

    def show_page(self, title: str) -> None:
        """Bring the page of that title to the front, as a click on it in the list does."""
        self.page_list.setCurrentRow([name for name, _fields in _PAGES].index(title))

    def _opening_size(self, contents: list[QWidget], parent: QWidget | None) -> QSize:
        """Large enough that no page scrolls where the screen allows, and never larger than the screen."""
        hints = [page.sizeHint() for page in contents]
        # The list, the margins, a scroll bar's width and the button row around the largest page.
        wanted = QSize(
            self.page_list.width() + max(hint.width() for hint in hints) + 60, max(hint.height() for hint in hints) + 80
        )
        return fitting_size(wanted, parent)

    def open_models(self, download: str | None) -> ModelsDialog:
        """Open the model manager (window-modal, so Settings waits for it); with ``download``, start that one."""
        chosen = self.model.currentText().strip()
        self.models_dialog = ModelsDialog(
            self, select=download or chosen, cache=self._models_cache, endpoint=self._endpoint
        )
        if download is not None:
            self.models_dialog.download(download)
        self.models_dialog.open()
        return self.models_dialog

    def accept(self) -> None:
        """A catalog model that is not on disk is offered for download here, not found missing when a job runs;
        one that does not arrive is never kept: the model that worked stays, and ``download_failure`` says why."""
        name = self.model.currentText().strip()
        if name in CATALOG and not self._on_disk(name):
            text = (
                f"{name} is not on this computer yet ({CATALOG[name].size_mb:,} MB to download). "
                "Download it now? Jobs need it before they can run."
            )
            if ask_first(self, "Model not downloaded", text, "Download"):
                self.open_models(name).finished.connect(lambda _result: self._after_download(name))
            return
        super().accept()

    def _on_disk(self, name: str) -> bool:
        return any(model.name == name for model in installed_models(self._models_cache))

    def _after_download(self, name: str) -> None:
        if not self._on_disk(name):
            outcome = self.models_dialog.outcome if self.models_dialog else ""
            self.download_failure = (name, outcome or f"The download of {name} did not finish.")
            self.model.setCurrentText(self._working_model() or AUTOMATIC)
        super().accept()

    def _working_model(self) -> str | None:
        """The model these settings had, when it is there to use (None: the best on disk)."""
        from app.core.engine.models import resolve_model
        from app.core.errors import ModelError

        try:
            resolve_model(self._settings.job.model, self._models_cache)
        except ModelError:
            return None
        return self._settings.job.model

    def set_recommended(self, name: str | None) -> None:
        """Mark the model recommended for this computer in the model list."""
        describe_models(self.model, self._models_cache, name)

    def done(self, result: int) -> None:
        self.speaker_detection.cancel()  # a download in progress stops with the dialog; it resumes next time
        super().done(result)

    def _field(self, option: Option, value: Any) -> QWidget:
        """The widget that shows one job option, by its kind."""
        kind = option.kind
        if option.name == "model":
            return self._model_box(value)
        if isinstance(kind, Flag):
            check = QCheckBox(option.label)
            check.setChecked(bool(value))
            return check
        if isinstance(kind, Choice) or kind.suggestions:
            values = kind.values if isinstance(kind, Choice) else kind.suggestions
            labels = (kind.labels if isinstance(kind, Choice) else ()) or values
            box = QComboBox()
            for label, choice in zip(labels, values, strict=True):
                box.addItem(label, choice)
            if box.findData(value) < 0 and not isinstance(kind, Choice):
                box.addItem(str(value), value)  # one typed on the command line or in the file is kept
            box.setCurrentIndex(max(0, box.findData(value)))
            return box
        if isinstance(kind, SpeakerCount):
            spin = QSpinBox()
            spin.setRange(0, kind.most or LARGEST_COUNT)
            spin.setSpecialValueText("auto")
            spin.setValue(value or 0)
            return spin
        if isinstance(kind, Formats):
            return FormatBoxes(value)
        line = QLineEdit(value or "")
        line.setPlaceholderText(option.placeholder)
        return line

    def _model_box(self, value: str | None) -> QComboBox:
        box = QComboBox()
        box.setEditable(True)  # a CTranslate2 folder path is accepted too
        box.addItem(AUTOMATIC)
        box.addItems(list(CATALOG))
        describe_models(box, self._models_cache)
        box.setCurrentText(value or AUTOMATIC)
        return box

    def _value(self, name: str) -> Any:
        """What the form holds for one job option (None: unset)."""
        widget = self.fields[name]
        if name == "model":
            model = self.model.currentText().strip()
            return None if model in ("", AUTOMATIC) else model
        if isinstance(widget, FormatBoxes):
            return widget.chosen() or self._settings.job.formats  # none ticked: keep what was set
        if isinstance(widget, QCheckBox):
            return widget.isChecked()
        if isinstance(widget, QComboBox):
            return widget.currentData()
        if isinstance(widget, QSpinBox):
            return widget.value() or None
        if isinstance(widget, QLineEdit):
            return widget.text().strip() or None
        raise TypeError(f"no reading of a {type(widget).__name__} for {name}")

    def _with_browse(self, field: QLineEdit, title: str) -> QHBoxLayout:
        browse = QPushButton("Browse…")
        browse.clicked.connect(lambda: self._browse_into(field, title))
        row = QHBoxLayout()
        row.addWidget(field)
        row.addWidget(browse)
        return row

    def _browse_into(self, field: QLineEdit, title: str) -> None:
        folder = QFileDialog.getExistingDirectory(self, title, field.text())
        if folder:
            field.setText(folder)

    def _clear_token(self) -> None:
        self.token_cleared = True
        self.token.clear()
        self.token.setPlaceholderText("the token will be removed when you press OK")
        self._clear_button.setEnabled(False)

    def new_token(self) -> str | None:
        """The token typed in this dialog (None: keep what is stored)."""
        return self.token.text().strip() or None

    def result_settings(self, current: Settings | None = None) -> Settings:
        """What this dialog shows, set over ``current`` (the settings now; default: those it opened with), so
        that a preference changed elsewhere while it was open (the dictation panel's) is not set back."""
        return (
            (current or self._settings)
            .with_job(
                **{name: self._value(name) for name in self.fields},
                watch_folder=self.watch_folder.text().strip() or None,
            )
            .with_window(ask_options_on_add=self.ask_on_add.isChecked())
            .with_dictation(pause_queue=self.pause_queue.isChecked())
        )
