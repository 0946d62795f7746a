"""Work off the main thread, results on it: the helper every window part uses to hear from its threads."""

from __future__ import annotations

import threading
from typing import Any

from app.gui.main_thread import deliver_on_main_thread, run_off_main_thread

WAIT_MS = 30_000  # a bound for a thread that must report, not a latency


def test_a_result_and_an_error_arrive_on_the_main_thread(qtbot: Any) -> None:
    arrived: list[tuple[object, bool]] = []

    def on_result(value: int) -> None:
        arrived.append((value, threading.current_thread() is threading.main_thread()))

    def on_error(error: Exception) -> None:
        arrived.append((error, threading.current_thread() is threading.main_thread()))

    worker = run_off_main_thread(lambda: 6 * 7, on_result, on_error, name="test-result")
    qtbot.waitUntil(lambda: len(arrived) == 1, timeout=WAIT_MS)
    assert arrived == [(42, True)] and worker.name == "test-result"

    def fail() -> int:
        raise ValueError("the file is gone")

    run_off_main_thread(fail, on_result, on_error, name="test-error")
    qtbot.waitUntil(lambda: len(arrived) == 2, timeout=WAIT_MS)
    error, on_main = arrived[1]
    assert isinstance(error, ValueError) and str(error) == "the file is gone" and on_main


def test_deliveries_from_a_thread_keep_their_order_and_never_run_inside_the_caller(qtbot: Any) -> None:
    seen: list[tuple[int, bool]] = []
    deliver = deliver_on_main_thread(
        lambda value: seen.append((value, threading.current_thread() is threading.main_thread()))
    )
    deliver(0)
    assert seen == [], "queued even from the main thread: the slot runs after the caller returns"
    sender = threading.Thread(target=lambda: [deliver(value) for value in range(1, 50)])
    sender.start()
    sender.join()
    qtbot.waitUntil(lambda: len(seen) == 50, timeout=WAIT_MS)
    assert seen == [(value, True) for value in range(50)]


def test_it_must_be_set_up_on_the_main_thread() -> None:
    failures: list[BaseException] = []

    def set_up_elsewhere() -> None:
        try:
            deliver_on_main_thread(print)
        except RuntimeError as error:
            failures.append(error)

    other = threading.Thread(target=set_up_elsewhere)
    other.start()
    other.join()
    assert len(failures) == 1 and "main thread" in str(failures[0])
