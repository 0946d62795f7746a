"""The global hotkey for the window: the core's X11 listener, with its presses delivered as Qt signals on the
main thread (the listener calls back on its own thread; a queued emission carries the call across)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.core.desktop.x11_hotkey import X11GlobalHotkey, check_hotkey_support, parse_hotkey
from app.gui.main_thread import deliver_on_main_thread


class GlobalHotkey(QObject):
    """``pressed``/``released`` on the main thread while another program has the focus. ``start`` raises
    DesktopError with a sentence for the person (no X11, a key another program holds, an unknown key)."""

    pressed = Signal()
    released = Signal()

    def __init__(self, keys: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        check_hotkey_support()
        self.hotkey = parse_hotkey(keys)
        # The listener calls back on its own thread; these carry each call to the main thread, in order.
        press = deliver_on_main_thread(self._on_press)
        release = deliver_on_main_thread(self._on_release)
        self._listener = X11GlobalHotkey(self.hotkey, lambda: press(None), lambda: release(None))

    def _on_press(self, _nothing: None) -> None:
        self.pressed.emit()

    def _on_release(self, _nothing: None) -> None:
        self.released.emit()

    def start(self) -> None:
        self._listener.start()

    def stop(self) -> None:
        self._listener.stop()
