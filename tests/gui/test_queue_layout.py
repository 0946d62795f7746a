"""The queue's progress bars and the window's layout on a small screen."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

from app.core.queue.worker import JobEvent
from app.gui.queue.model import PROGRESS_COLUMN

STATE_COLUMN = 2


def test_progress_bars_fill_from_the_left_and_the_stage_is_named(open_window, qtbot, sample_dir: Path) -> None:  # type: ignore[no-untyped-def]
    window = open_window(start_worker=False)
    (job,) = window.add_paths([sample_dir / "sample.wav"])
    # What the worker reports while the built-in diarizer runs (the long stage after transcribing).
    window.model.apply_progress(JobEvent("progress", job.id, job.source, 0.5, "diarize", 30.0, 8.0, 4.0))
    assert window.model.data(window.model.index(0, STATE_COLUMN)) == "running — finding speakers"
    window.model.apply_progress(JobEvent("progress", job.id, job.source, 0.2, "transcribe", 30.0, 8.0, 9.0))
    assert window.model.data(window.model.index(0, STATE_COLUMN)) == "running — transcribing"

    window.model.apply_progress(JobEvent("progress", job.id, job.source, 0.5, "diarize", 30.0, 8.0, 4.0))
    window.table.setRowHeight(0, 40)
    rect = window.table.visualRect(window.model.index(0, PROGRESS_COLUMN))
    qtbot.waitUntil(lambda: not window.table.viewport().grab(rect).isNull(), timeout=3000)
    image = window.table.viewport().grab(rect).toImage()

    def filled(x: float, y: float) -> bool:
        """Whether the bar's chunk (the palette's highlight, a strong colour) is drawn there; the style shades
        it, so the test is its saturation rather than one exact colour."""
        colour = QColor(image.pixel(QPoint(int(image.width() * x), int(image.height() * y))))
        return colour.hsvSaturation() > 100

    # Half done: the left of the bar is filled over its whole height, the right is not (a bar that fills from
    # the bottom up has its top half empty on the left, and its bottom half filled on the right).
    assert filled(0.12, 0.3) and filled(0.12, 0.7)
    assert not filled(0.88, 0.3) and not filled(0.88, 0.7)


def test_the_window_fits_800x600_with_room_for_the_transcript(open_window, qtbot) -> None:  # type: ignore[no-untyped-def]
    window = open_window(start_worker=False)
    window.resize(800, 600)
    qtbot.waitUntil(lambda: window.height() == 600, timeout=3000)
    assert window.width() == 800  # the widgets' minimum sizes let the window be that small
    assert window.gpu_dock.isVisible() and window.gpu_dock.height() <= 0.3 * window.height()
    editor = window.transcript_view.editor
    assert editor.height() >= 0.45 * window.height()
    assert editor.viewport().width() >= 250  # room for words beside the margin
    assert window.table.height() >= 0.4 * window.height()


def test_tab_leaves_the_queue_and_the_transcript(open_window, qtbot, sample_dir: Path) -> None:  # type: ignore[no-untyped-def]
    window = open_window(start_worker=False)
    window.add_paths([sample_dir / "sample.wav", sample_dir / "sample.rttm"])
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=3000)
    window.table.setFocus()
    qtbot.waitUntil(window.table.hasFocus, timeout=3000)
    qtbot.keyClick(window.table, Qt.Key.Key_Tab)
    assert not window.table.hasFocus()  # not the next cell of the queue
    editor = window.transcript_view.editor
    editor.setEnabled(True)
    editor.setFocus()
    qtbot.waitUntil(editor.hasFocus, timeout=3000)
    qtbot.keyClick(editor, Qt.Key.Key_Tab)
    assert not editor.hasFocus() and "\t" not in editor.toPlainText()


def test_state_colours_are_readable_on_a_dark_theme(open_window, qtbot, sample_dir: Path) -> None:  # type: ignore[no-untyped-def]
    window = open_window(start_worker=False)
    window.add_paths([sample_dir / "sample.wav"])
    window.model.apply_progress(JobEvent("progress", window.model.jobs[0].id, None, 0.1, "decode", 30.0, None, None))
    index = window.model.index(0, STATE_COLUMN)
    light = QApplication.palette()
    assert index.data(Qt.ItemDataRole.ForegroundRole).lightness() < 128
    dark = QPalette(light)
    dark.setColor(QPalette.ColorRole.Base, QColor("#202020"))
    QApplication.setPalette(dark)
    try:
        assert index.data(Qt.ItemDataRole.ForegroundRole).lightness() > 128
    finally:
        QApplication.setPalette(light)
