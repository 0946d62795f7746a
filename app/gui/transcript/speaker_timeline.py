"""A strip under the transcript's tools: who speaks when over the whole recording, where playback is; click
to play from there."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable

from PySide6.QtCore import QEvent, QRect, QRectF, QSize, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPalette, QPixmap
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.core.transcript.edit import Paragraph
from app.core.transcript.times import clock

STRIP_HEIGHT = 16
MARKER_WIDTH = 2


class SpeakerTimeline(QWidget):
    seek_requested = Signal(float)  # seconds

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.duration = 0.0
        self.paragraphs: list[Paragraph] = []
        self.position: float | None = None
        self._starts: list[float] = []  # each paragraph's start, for finding the turn under the mouse
        self._strip: QPixmap | None = None  # the turns, drawn once per size and set of paragraphs
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
        self._starts = [paragraph.start for paragraph in paragraphs]
        self._strip = None
        self.update()

    def set_position(self, seconds: float | None) -> None:
        """Move the playback mark: only the columns it leaves and enters are painted again (the turns come from
        the strip drawn once), so playing a long meeting costs a few pixels a position update."""
        if seconds == self.position:
            return
        before = self._marker_rect(self.position)
        self.position = seconds
        after = self._marker_rect(seconds)
        for rect in (before, after):
            if rect is not None:
                self.update(rect)

    def _marker_rect(self, seconds: float | None) -> QRect | None:
        if seconds is None:
            return None
        x = self.x_of(seconds) - MARKER_WIDTH / 2
        return QRect(math.floor(x) - 1, 0, MARKER_WIDTH + 3, self.height())

    def x_of(self, seconds: float) -> float:
        return 0.0 if self.duration <= 0 else self.width() * min(1.0, max(0.0, seconds / self.duration))

    def seconds_at(self, x: float) -> float:
        return 0.0 if self.width() <= 0 else self.duration * min(1.0, max(0.0, x / self.width()))

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.StyleChange):
            self._strip = None  # the colours come from the palette

    def _turns(self) -> QPixmap:
        """The speaker turns drawn at this size (made again after a change of size, paragraphs or palette)."""
        ratio = self.devicePixelRatioF()
        size = self.size() * ratio
        if self._strip is not None and self._strip.size() == size:
            return self._strip
        strip = QPixmap(size)
        if strip.isNull():  # no room to draw in (a collapsed splitter)
            return strip
        strip.setDevicePixelRatio(ratio)
        strip.fill(self.palette().color(QPalette.ColorRole.AlternateBase))
        painter = QPainter(strip)
        colours: dict[str | None, QColor] = {}
        for paragraph in self.paragraphs:
            colour = colours.get(paragraph.speaker)
            if colour is None:
                colour = colours[paragraph.speaker] = self._colour_of(paragraph.speaker)
            left, right = self.x_of(paragraph.start), self.x_of(paragraph.end)
            # At least a pixel: a one-word turn in an hour-long recording still shows.
            painter.fillRect(QRectF(left, 2, max(1.0, right - left), self.height() - 4), colour)
        painter.end()
        self._strip = strip
        return strip

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.drawPixmap(0, 0, self._turns())  # clipped to the region being painted
        if self.position is not None:
            painter.fillRect(
                QRectF(self.x_of(self.position) - MARKER_WIDTH / 2, 0, MARKER_WIDTH, self.height()),
                self.palette().color(QPalette.ColorRole.Text),
            )

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        seconds = self.seconds_at(event.position().x())
        index = bisect.bisect_right(self._starts, seconds) - 1  # the last turn that started by then
        speaker = self.paragraphs[index].speaker if index >= 0 and seconds <= self.paragraphs[index].end else None
        self.setToolTip(f"{clock(seconds)}" + (f" · {speaker}" if speaker else "") + " — click to play from here")

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if self.duration > 0:
            self.seek_requested.emit(self.seconds_at(event.position().x()))
