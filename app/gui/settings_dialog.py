"""Settings: model, device, language, speakers, output, and speaker detection (pyannote's one-time download,
with the Hugging Face token kept in the keyring)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core.config.settings import Settings
from app.core.engine.models import CATALOG, installed_models
from app.core.transcript.formats import FORMATS
from app.gui.job_safety import ask_first
from app.gui.models_dialog import ModelsDialog, describe_models
from app.gui.speaker_section import SpeakerDetectionSection

AUTOMATIC = "Automatic"


class SettingsDialog(QDialog):
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

        self.model = QComboBox()
        self.model.setEditable(True)  # a CTranslate2 folder path is accepted too
        self.model.addItem(AUTOMATIC)
        self.model.addItems(list(CATALOG))
        describe_models(self.model, models_cache)
        self.model.setCurrentText(settings.job.model or AUTOMATIC)
        self.manage_models = QPushButton("Models…")
        self.manage_models.setToolTip("what is on disk, sizes, languages and speed; download and remove")
        self.manage_models.clicked.connect(lambda: self.open_models(None))
        self.models_dialog: ModelsDialog | None = None
        model_row = QHBoxLayout()
        model_row.addWidget(self.model, 1)
        model_row.addWidget(self.manage_models)
        self.device = QComboBox()
        self.device.addItems(["auto", "cpu", "cuda"])
        self.device.setCurrentText(settings.job.device)
        self.compute_type = QComboBox()
        self.compute_type.addItems(["auto", "int8", "int8_float16", "float16", "int8_float32", "float32"])
        self.compute_type.setCurrentText(settings.job.compute_type)
        self.language = QLineEdit(settings.job.language or "")
        self.language.setPlaceholderText("detect (or a code: en, de, fr …)")
        self.prompt = QLineEdit(settings.job.prompt or "")
        self.prompt.setPlaceholderText("names and jargon to expect, e.g. Okafor, Scriba, EBITDA")
        self.prompt.setToolTip("Given to the model before the audio: it then spells these as written here")
        self.hotwords = QLineEdit(settings.job.hotwords or "")
        self.hotwords.setPlaceholderText("words to favour")
        self.task = QComboBox()
        self.task.addItem("Transcribe", "transcribe")
        self.task.addItem("Translate into English", "translate")
        self.task.setToolTip("Translation needs a multilingual model (not one ending in .en)")
        self.task.setCurrentIndex(max(0, self.task.findData(settings.job.task)))
        self.diarize = QCheckBox("Label who speaks (diarization)")
        self.diarize.setChecked(settings.job.diarize)
        self.identify = QCheckBox("Name known speakers (Edit › Known speakers…)")
        self.identify.setChecked(settings.job.identify_speakers)
        self.diarizer = QComboBox()
        self.diarizer.addItems(["auto", "pyannote", "embedded"])
        self.diarizer.setCurrentText(settings.job.diarizer)
        self.num_speakers = self._speaker_box(settings.job.num_speakers, "exactly")
        self.min_speakers = self._speaker_box(settings.job.min_speakers, "at least")
        self.max_speakers = self._speaker_box(settings.job.max_speakers, "at most")
        speakers = QHBoxLayout()
        for label, box in (("exactly", self.num_speakers), ("min", self.min_speakers), ("max", self.max_speakers)):
            speakers.addWidget(QLabel(label))
            speakers.addWidget(box)
        self.output_dir = QLineEdit(settings.job.output_dir or "")
        self.output_dir.setPlaceholderText("none: export on request only")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        output = QHBoxLayout()
        output.addWidget(self.output_dir)
        output.addWidget(browse)
        self.watch_folder = QLineEdit(settings.job.watch_folder or "")
        self.watch_folder.setPlaceholderText("none: recordings that appear here are transcribed, exports beside them")
        browse_watch = QPushButton("Browse…")
        browse_watch.clicked.connect(lambda: self._browse_into(self.watch_folder, "Watch folder"))
        watch = QHBoxLayout()
        watch.addWidget(self.watch_folder)
        watch.addWidget(browse_watch)
        self.formats = {fmt: QCheckBox(fmt) for fmt in FORMATS}
        format_row = QGridLayout()  # two rows of five: ten formats in one row would widen the dialog
        for index, (fmt, check) in enumerate(self.formats.items()):
            check.setChecked(fmt in settings.job.formats)
            format_row.addWidget(check, index // 5, index % 5)

        self.speaker_detection = SpeakerDetectionSection(token_stored, settings.job.diarizer, endpoint)
        self.token = self.speaker_detection.token
        self._clear_button = self.speaker_detection.clear_button
        self._clear_button.clicked.connect(self._clear_token)

        form = QFormLayout()
        form.addRow("Model", model_row)
        form.addRow("Device", self.device)
        form.addRow("Compute type", self.compute_type)
        form.addRow("Language", self.language)
        form.addRow("Task", self.task)
        form.addRow("Vocabulary", self.prompt)
        form.addRow("Hotwords", self.hotwords)
        form.addRow("", self.diarize)
        form.addRow("Diarizer", self.diarizer)
        form.addRow("", self.identify)
        form.addRow("Speakers (0: detect)", speakers)
        form.addRow("Export finished jobs to", output)
        form.addRow("Export formats", format_row)
        form.addRow("Watch folder", watch)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.speaker_detection)
        layout.addWidget(buttons)

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

    @staticmethod
    def _speaker_box(value: int | None, what: str) -> QSpinBox:
        box = QSpinBox()
        box.setRange(0, 32)
        box.setSpecialValueText("auto")
        box.setToolTip(f"{what} this many speakers (auto: let the diarizer decide)")
        box.setValue(value or 0)
        return box

    def _browse(self) -> None:
        self._browse_into(self.output_dir, "Export finished transcripts to")

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

    def result_settings(self) -> Settings:
        model = self.model.currentText().strip()
        formats = tuple(fmt for fmt, box in self.formats.items() if box.isChecked()) or self._settings.job.formats
        return self._settings.with_job(
            model=None if model in ("", AUTOMATIC) else model,
            device=self.device.currentText(),
            compute_type=self.compute_type.currentText(),
            language=self.language.text().strip() or None,
            diarize=self.diarize.isChecked(),
            diarizer=self.diarizer.currentText(),
            identify_speakers=self.identify.isChecked(),
            num_speakers=self.num_speakers.value() or None,
            min_speakers=self.min_speakers.value() or None,
            max_speakers=self.max_speakers.value() or None,
            output_dir=self.output_dir.text().strip() or None,
            formats=formats,
            prompt=self.prompt.text().strip() or None,
            hotwords=self.hotwords.text().strip() or None,
            task=self.task.currentData(),
            watch_folder=self.watch_folder.text().strip() or None,
        )
