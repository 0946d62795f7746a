"""Dictation's own model and language, apart from file transcription's: dictation must keep up with speech on
this machine's CPU, a file job need not. Only models already on disk are offered (a download mid-dictation
would stall it); the speed column of Speech models… says which keep up."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLineEdit, QWidget

from app.core.engine.models import CATALOG, installed_models


class DictationModelPicker(QWidget):
    changed = Signal(str, object)  # model name, language code or None (detect)

    def __init__(self, model: str, language: str | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model_combo = QComboBox()
        self.model_combo.setAccessibleName("Dictation model")
        names = [found.name for found in installed_models()]
        for name in [*names, *([model] if model not in names else [])]:
            entry = CATALOG.get(name)
            self.model_combo.addItem(name, name)
            languages = "English only" if entry is None or not entry.multilingual else "multilingual"
            where = "" if name in names else "; not on disk: download it in Speech models…"
            self.model_combo.setItemData(
                self.model_combo.count() - 1, f"{languages}{where}", Qt.ItemDataRole.ToolTipRole
            )
        self.model_combo.setCurrentIndex(max(0, self.model_combo.findData(model)))
        self.model_combo.setToolTip("The model dictation uses (on the CPU); file jobs use Settings' model")
        self.language_edit = QLineEdit(language or "")
        self.language_edit.setAccessibleName("Dictation language")
        self.language_edit.setPlaceholderText("auto")
        self.language_edit.setMaximumWidth(60)
        self.language_edit.setToolTip("A language code (en, de, fr …) for a multilingual model; empty: detect")
        self.model_combo.currentIndexChanged.connect(self._emit)
        self.language_edit.editingFinished.connect(self._emit)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Model:"))
        row.addWidget(self.model_combo)
        row.addWidget(self.language_edit)

    def model(self) -> str:
        return str(self.model_combo.currentData())

    def language(self) -> str | None:
        return self.language_edit.text().strip().lower() or None

    def _emit(self) -> None:
        self.changed.emit(self.model(), self.language())
