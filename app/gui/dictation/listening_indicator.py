"""A small floating "Listening" badge, shown while dictation listens for another program (global hotkey, or
text typed into the focused window), so the person knows the microphone is open without Scriba in front.

It must never take the keyboard focus: the text being dictated goes to whichever window has the focus, and a
badge that took it would receive the text itself. Hence a tool window that does not accept focus and is shown
without activation, kept above other windows and out of the task bar.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

MARGIN_PX = 24  # from the screen's bottom edge: clear of most task bars' auto-hide zone


class ListeningIndicator(QWidget):
    def __init__(self) -> None:
        # Parentless: a top-level badge that floats above every program, not a child of Scriba's window.
        super().__init__(
            None,
            Qt.WindowType.Tool
            | Qt.WindowType.FramelessWindowHint
            | Qt.WindowType.WindowStaysOnTopHint
            | Qt.WindowType.WindowDoesNotAcceptFocus,
        )
        self.setObjectName("listeningIndicator")
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setAccessibleName("Scriba is listening")
        self.label = QLabel()
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 6, 12, 6)
        layout.addWidget(self.label)
        self.setStyleSheet(
            "#listeningIndicator { background: rgba(30, 30, 30, 220); border-radius: 8px; }"
            "QLabel { color: white; font-weight: bold; }"
        )
        self.set_text("● Listening")

    def set_text(self, text: str) -> None:
        self.label.setText(text)
        self.adjustSize()

    def show_near_bottom(self) -> None:
        """Show at the bottom centre of the primary screen, without taking the focus."""
        self.adjustSize()
        screen = QGuiApplication.primaryScreen()
        if screen is not None:
            area = screen.availableGeometry()
            self.move(area.center().x() - self.width() // 2, area.bottom() - self.height() - MARGIN_PX)
        self.show()
