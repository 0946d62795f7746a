"""A cancellation token checked by the engines between steps: the one way Scriba asks work to stop (a job, a
download, an offload and its remote run, a dictation, the queue worker)."""

from __future__ import annotations

import threading

from app.core.errors import CancelledError


class CancelToken:
    """Set from any thread; engines call :meth:`raise_if_cancelled` between segments and batches."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until cancelled or ``timeout_s`` has passed; whether it was cancelled (for a thread whose only
        work is to wait for the stop)."""
        return self._event.wait(timeout_s)

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise CancelledError()
