"""A queue worker's wake-up event that counts the worker's waits: one at the end of every look at the queue, so
a test can wait for the worker to have looked again instead of sleeping."""

from __future__ import annotations

import threading


class CountedWake(threading.Event):
    def __init__(self) -> None:
        super().__init__()
        self.waits = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        return super().wait(timeout)
