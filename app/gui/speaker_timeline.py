"""A strip under the transcript's tools: who speaks when over the whole recording, where playback is; click
to play from there."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QRectF, QSize, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.core.transcript.edit import Paragraph
from app.core.transcript.times import clock

STRIP_HEIGHT = 16


class SpeakerTimeline(QWidget):
    seek_requested = Signal(float)  # seconds

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.duration = 0.0
        self.paragraphs: list[Paragraph] = []
        self.position: float | None = None
        self._colour_of: Callable[[str | None], QColor] = lambda _speaker: QColor()
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMouseTracking(True)
        self.setToolTip("Who speaks when; click to play from there")

    def sizeHint(self) -> QSize:
        return QSize(200, STRIP_HEIGHT)

    def minimumSizeHint(self) -> QSize:
        return QSize(40, STRIP_HEIGHT)

    def set_paragraphs(
        self, duration: float, paragraphs: list[Paragraph], colour_of: Callable[[str | None], QColor]
    ) -> None:
        self.duration, self.paragraphs, self._colour_of = duration, paragraphs, colour_of
        self.update()

    def set_position(self, seconds: float | None) -> None:
        self.position = seconds
        self.update()

    def x_of(self, seconds: float) -> float:
        return 0.0 if self.duration <= 0 else self.width() * min(1.0, max(0.0, seconds / self.duration))

    def seconds_at(self, x: float) -> float:
        return 0.0 if self.width() <= 0 else self.duration * min(1.0, max(0.0, x / self.width()))

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        palette = self.palette()
        painter.fillRect(self.rect(), palette.color(QPalette.ColorRole.AlternateBase))
        for paragraph in self.paragraphs:
            left, right = self.x_of(paragraph.start), self.x_of(paragraph.end)
            # At least a pixel: a one-word turn in an hour-long recording still shows.
            painter.fillRect(
                QRectF(left, 2, max(1.0, right - left), self.height() - 4), self._colour_of(paragraph.speaker)
            )
        if self.position is not None:
            painter.fillRect(
                QRectF(self.x_of(self.position) - 1, 0, 2, self.height()), palette.color(QPalette.ColorRole.Text)
            )

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        seconds = self.seconds_at(event.position().x())
        speaker = next((p.speaker for p in self.paragraphs if p.start <= seconds <= p.end), None)
        self.setToolTip(f"{clock(seconds)}" + (f" · {speaker}" if speaker else "") + " — click to play from here")

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if self.duration > 0:
            self.seek_requested.emit(self.seconds_at(event.position().x()))
