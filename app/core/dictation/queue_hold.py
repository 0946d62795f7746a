"""Dictation holds the file queue while the person speaks.

On a 2-core machine a queue job's decoding (another process) slows dictation's decodes. The job is held
(QueueWorker.hold: its process stopped) from the moment speech begins until ``linger_s`` after the utterance's
finals are out; speech again within ``linger_s`` keeps the one hold (no stop/go between sentences).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

# How long the hold outlasts an utterance's finals: a person pausing between sentences keeps it.
LINGER_SECONDS = 1.0


class SpeechQueueHold:
    """Calls ``hold`` once when speech begins and ``release`` once ``linger_s`` after it ended (or at once when
    the run ends, or on :meth:`close`). Thread-safe; ``hold``/``release`` are called outside its lock, in order."""

    def __init__(self, hold: Callable[[], None], release: Callable[[], None], linger_s: float = LINGER_SECONDS) -> None:
        if linger_s < 0:
            raise ValueError("linger_s must not be negative")
        self._hold = hold
        self._release = release
        self.linger_s = linger_s
        self._lock = threading.Lock()
        # One call at a time, in the order decided: a release decided before a hold is never made after it.
        self._calls = threading.Lock()
        self._held = False
        self._timer: threading.Timer | None = None
        self._closed = False

    @property
    def held(self) -> bool:
        return self._held

    def speaking(self, active: bool) -> None:
        """Speech began (True) or an utterance ended with its finals out (False): a controller's Speaking."""
        if active:
            self.speech_started()
        else:
            self.speech_ended()

    def speech_started(self) -> None:
        with self._calls:
            with self._lock:
                self._cancel_timer()
                if self._held or self._closed:
                    return
                self._held = True
            self._call(self._hold)

    def speech_ended(self) -> None:
        """Release after ``linger_s`` unless speech begins again before."""
        with self._lock:
            if not self._held or self._closed:
                return
            self._cancel_timer()
            timer = self._timer = threading.Timer(self.linger_s, self._linger_over)
            timer.daemon = True
            timer.name = "queue-hold-linger"
        timer.start()

    def run_ended(self) -> None:
        """The dictation run is over: release now (no linger)."""
        with self._calls:
            with self._lock:
                self._cancel_timer()
                if not self._held:
                    return
                self._held = False
            self._call(self._release)

    def close(self) -> None:
        """Release now, and never hold again."""
        with self._lock:
            self._closed = True
        self.run_ended()

    def _linger_over(self) -> None:
        with self._calls:
            with self._lock:
                if threading.current_thread() is not self._timer or not self._held:
                    return  # cancelled (speech began again) after the timer had fired
                self._timer = None
                self._held = False
            self._call(self._release)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    @staticmethod
    def _call(action: Callable[[], None]) -> None:
        try:
            action()
        except Exception:  # the queue may be gone (the window closing): dictation goes on
            log.exception("holding or releasing the queue failed")
