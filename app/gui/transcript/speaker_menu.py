"""A menu of the transcript's speakers, with a field for a new name: who said a paragraph or some words."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLineEdit, QMenu, QWidget, QWidgetAction


class SpeakerMenu(QMenu):
    chosen = Signal(str)  # the speaker picked, or a new name typed

    def __init__(self, parent: QWidget | None = None, title: str = "") -> None:
        super().__init__(parent)
        self.heading = title
        self.new_name = QLineEdit()
        self.new_name.setPlaceholderText("New speaker: type a name, then Enter")
        self.new_name.setToolTip("A name that is not in the list adds a speaker")
        self.new_name.returnPressed.connect(self._typed)
        self._field = QWidgetAction(self)
        self._field.setDefaultWidget(self.new_name)
        self.set_speakers(())

    def set_speakers(self, speakers: tuple[str, ...]) -> None:
        # Not clear(): it would delete the new-name field's action too.
        for action in self.actions():
            self.removeAction(action)
            if action is not self._field:
                action.deleteLater()
        if self.heading:
            self.addSection(self.heading)
        for speaker in speakers:
            action = self.addAction(speaker)
            action.triggered.connect(lambda _=False, name=speaker: self.chosen.emit(name))
        if speakers:
            self.addSeparator()
        self.new_name.clear()
        self.addAction(self._field)

    def speaker_names(self) -> list[str]:
        """The names offered, in order."""
        offered = [action for action in self.actions() if action is not self._field and not action.isSeparator()]
        return [action.text() for action in offered if action.text() and action.text() != self.heading]

    def pick(self, name: str) -> None:
        """Choose ``name`` as a click on its entry would."""
        for action in self.actions():
            if action.text() == name and action is not self._field and not action.isSeparator():
                self.close()
                action.trigger()
                return
        raise KeyError(name)

    def _typed(self) -> None:
        name = self.new_name.text().strip()
        if name:
            self.close()
            self.chosen.emit(name)
