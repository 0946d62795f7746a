"""A cancellation token checked by the engines between steps: the one way Scriba asks work to stop (a job, a
download, an offload and its remote run, a dictation, the queue worker)."""

from __future__ import annotations

import threading
import time

from app.core.errors import CancelledError


class CancelToken:
    """Set from any thread; engines call :meth:`raise_if_cancelled` between segments and batches."""

    def __init__(self, parent: CancelToken | None = None) -> None:
        self._event = threading.Event()
        self._parent = parent

    def cancel(self) -> None:
        self._event.set()

    def linked(self) -> CancelToken:
        """A token cancelled with this one, and also on its own: stops one part of a job (work running beside the
        rest, which must end when the rest fails) without cancelling the job."""
        return CancelToken(self)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set() or (self._parent is not None and self._parent.cancelled)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until cancelled or ``timeout_s`` has passed; whether it was cancelled (for a thread whose only
        work is to wait for the stop)."""
        if self._parent is None:
            return self._event.wait(timeout_s)
        # A parent's cancel does not set this token's event: look at both, a tenth of a second at a time.
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self.cancelled:
            left = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            if left <= 0:
                return False
            self._event.wait(left)
        return True

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise CancelledError()
