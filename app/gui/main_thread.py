"""Work off the main thread, results on it: the one way the window hears from its other threads.

Qt widgets may be touched only on the main thread. :func:`deliver_on_main_thread` gives another thread a plain
callable; each call becomes a queued signal emission, so the slot runs later, on the main thread, in the order
of the calls. :func:`run_off_main_thread` runs a function on a Python thread and delivers its result or its
exception that way. Core and cloud code stays free of Qt: it reports through the callables it is given.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import shiboken6
from PySide6.QtCore import QObject, Qt, Signal

log = logging.getLogger(__name__)
T = TypeVar("T")


class _Delivery(QObject):
    """Created on the main thread and parentless, so it lives there; an emission from another thread is queued."""

    call = Signal(object)


# Deliveries with calls still queued, and how many: a delivery must outlive its queued calls (a thread that ends
# right after its last call would otherwise take the object, and the call with it), yet never be parented to a
# widget (a thread emitting on an object deleted with its widget would fail in the middle of its work).
_in_flight: dict[_Delivery, int] = {}
_in_flight_lock = threading.Lock()


def deliver_on_main_thread(slot: Callable[[T], None]) -> Callable[[T], None]:
    """A callable for any thread: ``deliver(value)`` runs ``slot(value)`` on the main thread, later, in the order
    of the calls.

    Call this on the main thread. When ``slot`` is a method of a QObject that is deleted meanwhile, Qt drops the
    delivery (as it does for any connection); a call after the application itself was torn down is dropped too.
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("deliver_on_main_thread must be called on the main thread")
    delivery = _Delivery()

    def release(_value: object) -> None:  # connected after the slot, so it runs after it
        with _in_flight_lock:
            _in_flight[delivery] -= 1
            if not _in_flight[delivery]:
                del _in_flight[delivery]

    # Queued even when called from the main thread itself: a slot never runs inside the code that reported.
    delivery.call.connect(slot, Qt.ConnectionType.QueuedConnection)
    delivery.call.connect(release, Qt.ConnectionType.QueuedConnection)

    def deliver(value: T) -> None:
        with _in_flight_lock:
            _in_flight[delivery] = _in_flight.get(delivery, 0) + 1
        try:
            delivery.call.emit(value)
        except RuntimeError:
            # The application is gone (the window closed while this thread worked): nobody is left to tell.
            if shiboken6.isValid(delivery):
                raise
            with _in_flight_lock:
                _in_flight.pop(delivery, None)
            log.debug("a result for a closed window was dropped: %r", value)

    return deliver


def run_off_main_thread(
    work: Callable[[], T],
    on_result: Callable[[T], None],
    on_error: Callable[[Exception], None] | None = None,
    *,
    name: str,
    daemon: bool = True,
) -> threading.Thread:
    """Run ``work()`` on a new thread; ``on_result(value)`` or ``on_error(exception)`` then runs on the main
    thread. Without ``on_error`` an exception is logged and goes to the thread's excepthook (the crash dialog)."""
    deliver_result: Callable[[Any], None] = deliver_on_main_thread(on_result)
    deliver_error = deliver_on_main_thread(on_error) if on_error is not None else None

    def target() -> None:
        try:
            value = work()
        except Exception as error:
            if deliver_error is None:
                raise
            log.info("%s ended with %s: %s", name, type(error).__name__, error)
            deliver_error(error)
            return
        deliver_result(value)

    thread = threading.Thread(target=target, name=name, daemon=daemon)
    thread.start()
    return thread
