"""A cancellation token checked by the engines between steps."""

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

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise CancelledError()
