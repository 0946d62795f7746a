"""The global hotkey for the window: the core's X11 listener, with its presses delivered as Qt signals on the
main thread (the listener calls back on its own thread; a queued emission carries the call across)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal

from app.core.desktop.x11_hotkey import X11GlobalHotkey, check_hotkey_support, parse_hotkey


class _Relay(QObject):
    pressed = Signal()
    released = Signal()


class GlobalHotkey(QObject):
    """``pressed``/``released`` on the main thread while another program has the focus. ``start`` raises
    DesktopError with a sentence for the person (no X11, a key another program holds, an unknown key)."""

    pressed = Signal()
    released = Signal()

    def __init__(self, keys: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        check_hotkey_support()
        self.hotkey = parse_hotkey(keys)
        # Parentless and owned here: the listener thread emits on it, and Qt queues to this object's thread.
        self._relay = _Relay()
        self._relay.pressed.connect(self.pressed, Qt.ConnectionType.QueuedConnection)
        self._relay.released.connect(self.released, Qt.ConnectionType.QueuedConnection)
        self._listener = X11GlobalHotkey(self.hotkey, self._relay.pressed.emit, self._relay.released.emit)

    def start(self) -> None:
        self._listener.start()

    def stop(self) -> None:
        self._listener.stop()
