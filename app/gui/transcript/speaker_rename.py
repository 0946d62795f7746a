"""Rename a speaker where their name is: a small field over the name in the transcript's margin."""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt, Signal
from PySide6.QtGui import QFocusEvent, QKeyEvent
from PySide6.QtWidgets import QLineEdit, QWidget

# Wide enough for a full name even where the margin shows "SPEAKER_0…".
MIN_WIDTH = 200


class InlineRename(QLineEdit):
    """Enter renames, Esc (or clicking elsewhere) leaves the name as it was."""

    renamed = Signal(str, str)  # old name, new name

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.old = ""
        self.setToolTip("New name for this speaker in every paragraph and export (Enter: rename, Esc: cancel)")
        self.setAccessibleName("Speaker name")
        self.returnPressed.connect(self._accept)
        self.hide()

    def start(self, old: str, over: QRect) -> None:
        """Show the field over ``over`` (the name, in the parent's coordinates), the name selected."""
        self.old = old
        self.setText(old)
        height = max(self.sizeHint().height(), over.height() + 6)
        self.setGeometry(over.left() - 3, over.center().y() - height // 2, max(MIN_WIDTH, over.width() + 40), height)
        self.show()
        self.raise_()
        self.setFocus(Qt.FocusReason.MouseFocusReason)
        self.selectAll()

    def _accept(self) -> None:
        new = self.text().strip()
        self.hide()
        if new and new != self.old:
            self.renamed.emit(self.old, new)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.hide()
            return
        super().keyPressEvent(event)

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        self.hide()  # a click elsewhere is not a rename: only Enter is
