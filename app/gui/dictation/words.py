"""The dictation panel's switches for spoken commands and numbers, and the person's own words: the replacements
(``heard -> typed``, one a line) and vocabulary (words and names), the config folder's two plain-text files,
edited here as text. A bad replacement line is shown with its number as it is typed (read by the same parser the
dictation uses); Save replaces each file whole, never half-written. The files' problems are shown under the
switches too, since a bad line is skipped when dictating."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.dictation.stream import DictationOptions
from app.core.dictation.vocabulary import (
    ARROW,
    REPLACEMENTS_FILE,
    VOCABULARY_FILE,
    VocabularyError,
    load_replacements,
    load_vocabulary,
    parse_replacements,
)
from app.core.files import write_atomic
from app.core.paths import config_dir

__all__ = ["WordsBar", "WordsDialog"]


class WordsBar(QWidget):
    """ "Spoken punctuation and commands", "Numbers as digits", "Your words…" and the words files' problems."""

    changed = Signal()  # the switches or the files changed: the options of the next Start with them
    switched = Signal(dict)  # {"commands": bool, "numbers": bool} after the person toggled one, to be kept

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.folder: Path | None = None  # where the replacements and vocabulary files are (None: the config folder)
        self.dialog: WordsDialog | None = None
        self.commands_check = QCheckBox("Spoken punctuation and commands")
        self.commands_check.setToolTip('Say "comma", "period", "new line", "scratch that", "undo" (next Start)')
        self.numbers_check = QCheckBox("Numbers as digits")
        self.numbers_check.setToolTip('"twenty five" is typed as 25 (next Start)')
        for check in (self.commands_check, self.numbers_check):
            check.toggled.connect(self._switched)
        self.words_button = QPushButton("Your words…")
        self.words_button.setToolTip(f"Replacements (what is heard {ARROW} what is typed) and words to expect")
        self.words_button.clicked.connect(self.open_words)
        self.problems_label = QLabel("")
        self.problems_label.setAccessibleName("Problems in your words")
        self.problems_label.setTextFormat(Qt.TextFormat.PlainText)
        self.problems_label.setWordWrap(True)
        self.problems_label.hide()
        row = QHBoxLayout()
        for widget in (self.commands_check, self.numbers_check, self.words_button):
            row.addWidget(widget)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.problems_label)

    def set_switches(self, commands: bool, numbers: bool) -> None:
        """As the settings keep them (not said back through ``switched``)."""
        for check, on in ((self.commands_check, commands), (self.numbers_check, numbers)):
            check.blockSignals(True)
            check.setChecked(on)
            check.blockSignals(False)

    def applied(self, options: DictationOptions) -> DictationOptions:
        """``options`` with the switches and the files' replacements and vocabulary, read now; each problem (a
        bad line, with its number) is shown under the switches."""
        folder = self.folder or config_dir()
        try:
            rules, problems = load_replacements(folder / REPLACEMENTS_FILE, missing_ok=True)
        except VocabularyError as error:
            rules, problems = (), [error.words]
        try:
            words = load_vocabulary(folder / VOCABULARY_FILE, missing_ok=True)
        except VocabularyError as error:
            words, problems = (), [*problems, error.words]
        self.problems_label.setText("\n".join(f"Your words: {problem}" for problem in problems))
        self.problems_label.setVisible(bool(problems))
        on = self.commands_check.isChecked(), self.numbers_check.isChecked()
        return dataclasses.replace(options, commands=on[0], numbers=on[1], replacements=rules, vocabulary=words)

    @Slot()
    def _switched(self) -> None:
        self.changed.emit()
        self.switched.emit({"commands": self.commands_check.isChecked(), "numbers": self.numbers_check.isChecked()})

    @Slot()
    def open_words(self) -> WordsDialog:
        """The "Your words…" dialog over the files (one at a time); saving it applies them from the next Start."""
        if self.dialog is None:
            self.dialog = WordsDialog(self.folder or config_dir(), self)
            self.dialog.accepted.connect(self.changed)
            self.dialog.finished.connect(self._closed)
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog

    @Slot()
    def _closed(self) -> None:
        if self.dialog is not None:
            self.dialog.deleteLater()
            self.dialog = None


class WordsDialog(QDialog):
    """Two editors over ``folder``'s replacements and vocabulary files; accepted once both are saved."""

    def __init__(self, folder: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Your words")
        self.replacements_path = folder / REPLACEMENTS_FILE
        self.vocabulary_path = folder / VOCABULARY_FILE
        unreadable: list[str] = []
        self.replacements_edit = self._editor("Replacements", self._read(self.replacements_path, unreadable))
        self.replacements_edit.setPlaceholderText(f"at sign {ARROW} @\ncooper netties {ARROW} Kubernetes")
        self.vocabulary_edit = self._editor("Vocabulary", self._read(self.vocabulary_path, unreadable))
        self.vocabulary_edit.setPlaceholderText("Scriba, Kubernetes\nMaria Núñez")
        self.problems_label = QLabel("")
        self.problems_label.setAccessibleName("Problems in your words")
        self.problems_label.setTextFormat(Qt.TextFormat.PlainText)
        self.problems_label.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"Replacements: what is heard {ARROW} what is typed, one a line (# starts a comment)"))
        layout.addWidget(self.replacements_edit, 2)
        layout.addWidget(QLabel("Vocabulary: words and names the dictation should expect, by commas or lines"))
        layout.addWidget(self.vocabulary_edit, 1)
        layout.addWidget(self.problems_label)
        layout.addWidget(self.buttons)
        self.resize(560, 440)
        # A file that cannot be read is never overwritten from here: what it holds would be lost.
        self._unreadable = unreadable
        self.buttons.button(QDialogButtonBox.StandardButton.Save).setEnabled(not unreadable)
        self.replacements_edit.textChanged.connect(self._check)
        self._check()

    @staticmethod
    def _editor(name: str, text: str) -> QPlainTextEdit:
        editor = QPlainTextEdit(text)
        editor.setAccessibleName(name)
        editor.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        return editor

    @staticmethod
    def _read(path: Path, unreadable: list[str]) -> str:
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""
        except UnicodeDecodeError as error:
            unreadable.append(f"{path} is not UTF-8 text ({error.reason} at byte {error.start}): fix it in an editor")
        except OSError as error:
            unreadable.append(f"{path} cannot be read ({error.strerror})")
        return ""

    def problems(self) -> list[str]:
        """The replacements' bad lines as typed now, each with its line number (those lines are skipped)."""
        return parse_replacements(self.replacements_edit.toPlainText(), "Replacements")[1]

    @Slot()
    def _check(self) -> None:
        self._show([*self._unreadable, *self.problems()])

    def _show(self, lines: list[str]) -> None:
        self.problems_label.setText("\n".join(lines))
        self.problems_label.setVisible(bool(lines))

    @Slot()
    def save(self) -> bool:
        """Write both files (each replaced whole) and close; a failure is said and the dialog stays open."""
        if self._unreadable:
            return False
        for path, editor in (
            (self.replacements_path, self.replacements_edit),
            (self.vocabulary_path, self.vocabulary_edit),
        ):
            try:
                write_atomic(path, editor.toPlainText())
            except OSError as error:
                self._show([f"{path} could not be saved ({error.strerror or error}): that file keeps what it held"])
                return False
        self.accept()
        return True
