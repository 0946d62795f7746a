"""The sheet that opens when recordings are dropped or added: their language, speakers, quality (the model) and the
part to transcribe, for these files only. Enter (or Add) keeps the defaults from Settings; "Don't ask again" adds
files straight away from then on (Settings brings the sheet back).

Its fields are the job options' (app/core/queue/options.py): their kinds give the choices and ranges, their help
the tooltips; what the sheet returns is the Settings defaults with the fields changed here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QLocale
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core.config.settings import Settings
from app.core.engine.models import installed_models
from app.core.engine.recommend import Recommendation
from app.core.queue.jobs import JobOptions, media_files
from app.core.queue.options import MOST_SPEAKERS, OPTION, Language, Moment, SpeakerCount
from app.core.transcript.times import clock

# How the speakers are asked for: the sheet's words, and the job options each one sets.
SPEAKER_MODES = (
    ("detect", "Detect how many"),
    ("exact", "Exactly"),
    ("range", "Between"),
    ("none", "One voice, no speaker labels"),
)


def _tip(name: str) -> str:
    help_text = OPTION[name].help
    return help_text[:1].upper() + help_text[1:]


def language_name(code: str) -> str:
    """ "German (de)": Qt's name for an ISO code, the code alone where Qt has none."""
    language = QLocale(code).language()
    if language == QLocale.Language.C:
        return code
    return f"{QLocale.languageToString(language)} ({code})"


class AddOptionsSheet(QDialog):
    """The options of ``files`` about to be queued, starting from ``defaults`` (the Settings' job options).
    ``recommendation``: the first-run page's advice, when it was made (its fast / balanced / accurate choices)."""

    def __init__(
        self,
        files: list[Path],
        defaults: JobOptions,
        recommendation: Recommendation | None = None,
        parent: QWidget | None = None,
        cache: Path | None = None,
    ) -> None:
        super().__init__(parent)
        self.files = files
        self.defaults = defaults
        named = ", ".join(path.name for path in files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        self.setWindowTitle(f"Add {len(files)} recording{'s' if len(files) != 1 else ''}")
        heading = QLabel(f"How should Scriba transcribe {named}?")
        heading.setWordWrap(True)

        language_kind = OPTION["language"].kind
        assert isinstance(language_kind, Language)
        self.language = QComboBox()
        self.language.addItem("Detect the language", "")
        for code in language_kind.codes():
            self.language.addItem(language_name(code), code)
        self.language.setCurrentIndex(max(0, self.language.findData(defaults.language or "")))
        self.language.setToolTip(_tip("language"))

        self.speaker_mode = QComboBox()
        for mode, words in SPEAKER_MODES:
            self.speaker_mode.addItem(words, mode)
        self.exact = self._count("num_speakers", defaults.num_speakers or 2)
        self.least = self._count("min_speakers", defaults.min_speakers or 2)
        self.most = self._count("max_speakers", defaults.max_speakers or 4)
        self._and = QLabel("and")
        speakers = QHBoxLayout()
        speakers.addWidget(self.speaker_mode, 1)
        for widget in (self.exact, self.least, self._and, self.most):
            speakers.addWidget(widget)
        self.speaker_mode.currentIndexChanged.connect(self._show_counts)
        self.speaker_mode.setCurrentIndex(self.speaker_mode.findData(self._mode_of(defaults)))
        self._show_counts()

        self.quality = self._quality_box(defaults.model, recommendation, cache)
        self.quality.setToolTip(_tip("model"))

        self.start = QLineEdit(clock(defaults.start) if defaults.start is not None else "")
        self.start.setPlaceholderText("the beginning")
        self.start.setToolTip(_tip("start"))
        self.end = QLineEdit(clock(defaults.end) if defaults.end is not None else "")
        self.end.setPlaceholderText("the end")
        self.end.setToolTip(_tip("end"))
        part = QHBoxLayout()
        for words, field in (("from", self.start), ("to", self.end)):
            part.addWidget(QLabel(words))
            part.addWidget(field, 1)

        self.error = QLabel("")
        self.error.setWordWrap(True)
        self.error.hide()
        self.dont_ask = QCheckBox("Don't ask again: add files with the defaults (Settings can bring this back)")

        form = QFormLayout()
        form.addRow(OPTION["language"].label or "Language", self.language)
        form.addRow("Speakers", speakers)
        form.addRow("Quality", self.quality)
        form.addRow("Part of each recording" if len(files) > 1 else "Part of the recording", part)
        buttons = QDialogButtonBox()
        self.add_button = buttons.addButton("Add", QDialogButtonBox.ButtonRole.AcceptRole)
        self.add_button.setDefault(True)
        buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(heading)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(self.dont_ask)
        layout.addWidget(buttons)
        self.chosen: JobOptions | None = None

    def _count(self, name: str, value: int) -> QSpinBox:
        kind = OPTION[name].kind
        assert isinstance(kind, SpeakerCount)
        spin = QSpinBox()
        # An upper bound past what the diarizer tells apart means nothing more than that bound.
        spin.setRange(1, kind.most or MOST_SPEAKERS)
        spin.setValue(min(value, spin.maximum()))
        spin.setToolTip(_tip(name))
        return spin

    @staticmethod
    def _mode_of(options: JobOptions) -> str:
        if not options.diarize:
            return "none"
        if options.num_speakers is not None:
            return "exact"
        return "range" if options.min_speakers is not None or options.max_speakers is not None else "detect"

    def _show_counts(self) -> None:
        mode = self.speaker_mode.currentData()
        self.exact.setVisible(mode == "exact")
        for widget in (self.least, self._and, self.most):
            widget.setVisible(mode == "range")

    def _quality_box(self, model: str | None, advice: Recommendation | None, cache: Path | None) -> QComboBox:
        """As in Settings first; then the first-run page's fast / balanced / accurate choices (those not on disk
        shown, not offered: a job would wait for a download); then every model on disk."""
        box = QComboBox()
        box.addItem(f"As in Settings ({model or 'the best model on this computer'})", model or "")
        on_disk = [found.name for found in installed_models(cache)]
        recommended = advice.best.model if advice is not None else None
        items = box.model()
        assert isinstance(items, QStandardItemModel)
        for choice in advice.choices if advice is not None else ():
            mark = ", recommended" if choice.model == recommended else ""
            where = "" if choice.model in on_disk else f" (not downloaded: Settings › Models, {choice.size_mb:,} MB)"
            box.addItem(f"{choice.tier.capitalize()}: {choice.model}, {choice.short_time()}{mark}{where}", choice.model)
            items.item(box.count() - 1).setEnabled(choice.model in on_disk)
        for name in on_disk:
            box.addItem(f"{name} (on disk{', recommended' if name == recommended else ''})", name)
        return box

    def options(self) -> JobOptions:
        """The job options these files get (``ValueError`` in words when a field is not one)."""
        mode = self.speaker_mode.currentData()
        least = self.least.value() if mode == "range" else None
        most = self.most.value() if mode == "range" else None
        if least is not None and most is not None and least > most:
            raise ValueError(f"at least {least} speakers and at most {most}: the first number must be the smaller")
        start, end = self._time("start", self.start), self._time("end", self.end)
        if start is not None and end is not None and end <= start:
            raise ValueError(f"the end ({clock(end)}) is not after the start ({clock(start)})")
        values: dict[str, Any] = {
            "language": self.language.currentData() or None,
            "model": self.quality.currentData() or None,
            "diarize": mode != "none",
            "num_speakers": self.exact.value() if mode == "exact" else None,
            "min_speakers": least,
            "max_speakers": most,
            "start": start,
            "end": end,
        }
        return replace(self.defaults, **values)

    @staticmethod
    def _time(name: str, field: QLineEdit) -> float | None:
        kind = OPTION[name].kind
        assert isinstance(kind, Moment)
        text = field.text().strip()
        if not text:
            return None
        try:
            return float(kind.parse(text))
        except ValueError as error:
            words = "start" if name == "start" else "end"
            raise ValueError(f"the {words} of the part: {error}") from None

    def accept(self) -> None:
        try:
            self.chosen = self.options()
        except ValueError as error:
            self.error.setText(str(error)[:1].upper() + str(error)[1:])
            self.error.show()
            return
        super().accept()


def ask_options(
    parent: QWidget,
    paths: list[Path],
    settings: Settings,
    recommendation: Recommendation | None,
    add: Callable[[list[Path], JobOptions | None], object],
    remember: Callable[[dict[str, object]], None],
) -> AddOptionsSheet | None:
    """Files dropped or chosen: the sheet first (window-modal), then ``add`` with what it chose; straight to ``add``
    with the defaults when the user said not to ask, or when there is no recording among ``paths`` (``add`` says
    so). ``remember`` keeps "Don't ask again" in the window's settings."""
    files = media_files(paths)
    if not files or not settings.window.ask_options_on_add:
        add(paths, None)
        return None
    sheet = AddOptionsSheet(files, settings.job_options(), recommendation, parent)

    def added() -> None:
        if sheet.dont_ask.isChecked():
            remember({"ask_options_on_add": False})
        add(paths, sheet.chosen)

    sheet.accepted.connect(added)
    sheet.open()
    return sheet
