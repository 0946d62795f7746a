"""Dictation's own model and language, apart from file transcription's: dictation must keep up with speech on
this machine's CPU, a file job need not. Only models already on disk are offered (a download mid-dictation
would stall it); the speed column of Speech models… says which keep up. *Finals:* a bigger model for the final
text only (the partials stay with the dictation model); the session goes back to the dictation model by itself
when this machine cannot keep up with it."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLineEdit, QWidget

from app.core.engine.models import CATALOG, installed_models


class DictationModelPicker(QWidget):
    changed = Signal(str, object, object)  # model name, language code or None (detect), finals model or None

    def __init__(
        self, model: str, language: str | None, final_model: str | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        names = [found.name for found in installed_models()]
        self.model_combo = QComboBox()
        self.model_combo.setAccessibleName("Dictation model")
        _offer(self.model_combo, names, model)
        self.model_combo.setToolTip("The model dictation uses (on the CPU); file jobs use Settings' model")
        self.final_combo = QComboBox()
        self.final_combo.setAccessibleName("Finals model")
        self.final_combo.addItem("same", None)
        self.final_combo.setItemData(0, "The dictation model decodes the final text too", Qt.ItemDataRole.ToolTipRole)
        _offer(self.final_combo, names, final_model)
        self.final_combo.setToolTip(
            "A bigger model for the final text only; back to the dictation model if this machine cannot keep up"
        )
        self.language_edit = QLineEdit(language or "")
        self.language_edit.setAccessibleName("Dictation language")
        self.language_edit.setPlaceholderText("auto")
        self.language_edit.setMaximumWidth(60)
        self.language_edit.setToolTip("A language code (en, de, fr …) for a multilingual model; empty: detect")
        self.model_combo.currentIndexChanged.connect(self._emit)
        self.final_combo.currentIndexChanged.connect(self._emit)
        self.language_edit.editingFinished.connect(self._emit)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Model:"))
        row.addWidget(self.model_combo)
        row.addWidget(QLabel("Finals:"))
        row.addWidget(self.final_combo)
        row.addWidget(self.language_edit)

    def model(self) -> str:
        return str(self.model_combo.currentData())

    def final_model(self) -> str | None:
        chosen = self.final_combo.currentData()
        return None if chosen is None else str(chosen)

    def language(self) -> str | None:
        return self.language_edit.text().strip().lower() or None

    def _emit(self) -> None:
        self.changed.emit(self.model(), self.language(), self.final_model())


def _offer(combo: QComboBox, on_disk: list[str], current: str | None) -> None:
    """The models on disk (and ``current`` if it is not), each with a tooltip; ``current`` selected."""
    for name in [*on_disk, *([current] if current and current not in on_disk else [])]:
        entry = CATALOG.get(name)
        combo.addItem(name, name)
        languages = "English only" if entry is None or not entry.multilingual else "multilingual"
        where = "" if name in on_disk else "; not on disk: download it in Speech models…"
        combo.setItemData(combo.count() - 1, f"{languages}{where}", Qt.ItemDataRole.ToolTipRole)
    combo.setCurrentIndex(max(0, combo.findData(current)))
