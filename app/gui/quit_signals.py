"""Ctrl-C and SIGTERM close the window as File › Quit does."""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Iterator

from PySide6.QtCore import QSocketNotifier, QTimer
from PySide6.QtWidgets import QApplication, QMainWindow


@contextlib.contextmanager
def closed_by_signals(signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """Ctrl-C in the terminal that started the window, and SIGTERM (`kill`, a logout), close the main window as
    File > Quit does: the running job goes back to the queue, the settings are saved, the program exits 0.

    Python runs a signal's handler only when the interpreter next runs, which inside Qt's event loop may be
    late or never (Ctrl-C ended as a KeyboardInterrupt traceback in whatever slot ran next, and the window
    stayed): the signal's number is written to a socket that a QSocketNotifier watches, which wakes the loop at
    once. Main thread only, with the QApplication made; the previous handlers are back on the way out."""
    receiver, sender = socket.socketpair()
    receiver.setblocking(False)
    sender.setblocking(False)
    previous_fd = signal.set_wakeup_fd(sender.fileno(), warn_on_full_buffer=False)
    previous = {signum: signal.getsignal(signum) for signum in signals}

    def close_windows() -> None:
        modal = QApplication.activeModalWidget()
        if modal is not None and modal.close():
            # A dialog's own event loop returns first; the window is closed from the main loop after it.
            QTimer.singleShot(0, close_windows)
            return
        windows = [w for w in QApplication.topLevelWidgets() if isinstance(w, QMainWindow) and w.isVisible()]
        for window in windows:
            window.close()
        if not windows:
            QApplication.quit()  # no window yet, or already closed: end the event loop all the same

    def on_signal(signum: int, frame: object) -> None:
        QTimer.singleShot(0, close_windows)  # from the event loop, never in the middle of what it interrupted

    def drain() -> None:
        with contextlib.suppress(OSError):
            receiver.recv(64)

    notifier = QSocketNotifier(receiver.fileno(), QSocketNotifier.Type.Read)
    notifier.activated.connect(drain)  # running any Python code runs the handler
    for signum in signals:
        signal.signal(signum, on_signal)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(previous_fd)
        notifier.setEnabled(False)
        receiver.close()
        sender.close()
