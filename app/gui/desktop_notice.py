"""A notification outside the window: a tray balloon where the desktop has a tray, else notify-send."""

from __future__ import annotations

import shutil
import subprocess

from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QSystemTrayIcon, QWidget


class DesktopNotifier:
    def __init__(self, owner: QWidget) -> None:
        self._owner = owner
        self._tray: QSystemTrayIcon | None = None  # made on first use: an idle tray icon is clutter

    def show(self, title: str, body: str, icon: QIcon) -> None:
        if QSystemTrayIcon.isSystemTrayAvailable():
            if self._tray is None:
                self._tray = QSystemTrayIcon(icon, self._owner)
                self._tray.show()
            self._tray.showMessage(title, body, QSystemTrayIcon.MessageIcon.Information, 8000)
        elif shutil.which("notify-send"):
            subprocess.Popen(
                ["notify-send", "--app-name=Scriba", title, body],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
