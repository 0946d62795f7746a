"""Sizes that fit the screen a window opens on."""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

# Of the screen's free area: room left for the window's frame and title bar, which the free area does not count.
SCREEN_SHARE = 0.9


def fitting_size(wanted: QSize, near: QWidget | None) -> QSize:
    """``wanted``, made smaller where the screen of ``near`` (or the primary screen) has less room."""
    screen = (near.screen() if near is not None else None) or QGuiApplication.primaryScreen()
    room = screen.availableGeometry().size() * SCREEN_SHARE
    return wanted.boundedTo(room)
