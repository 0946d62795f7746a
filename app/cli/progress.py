"""A job's progress on standard error: a tqdm bar with speed and time left on a terminal, plain lines in a log."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, TextIO

from tqdm import tqdm

# On a terminal the bar redraws in place; a log (stderr piped to a file) gets one line per tenth instead.
BAR_FORMAT = "{desc} {percentage:3.0f}%|{bar}| {stage:<10} {elapsed}<{remaining}{speed}"
LINE_FORMAT = "{desc}: {percentage:3.0f}% {stage}, {elapsed} elapsed, {remaining} left{speed}"
# Where a terminal reports no size (a new pseudo-terminal is 0 x 0 until resized), tqdm would draw nothing at all.
FALLBACK_SIZE = (100, 24)


def _has_size(stream: TextIO) -> bool:
    try:
        size = os.get_terminal_size(stream.fileno())
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is both OSError and ValueError
        return False
    return size.columns > 0 and size.lines > 0


def _speed(fraction: float, rate: float | None, elapsed: float, audio_seconds: float | None) -> str:
    """The speed in audio time (", 2.3x real time") from the job's rate in fractions per second; empty while the
    audio length is unknown."""
    per_second = rate if rate else (fraction / elapsed if elapsed > 0 else 0.0)
    if not audio_seconds or not per_second:
        return ""
    return f", {per_second * audio_seconds:.1f}x real time"


class _JobBar(tqdm):
    """tqdm with the job's stage and its speed in audio time, through ``format_dict`` (tqdm's documented way to
    add fields to ``bar_format``)."""

    stage = ""
    audio_seconds: float | None = None

    @property
    def format_dict(self) -> dict[str, Any]:
        values = dict(super().format_dict)
        values["stage"] = self.stage
        values["speed"] = _speed(values["n"], values["rate"], values["elapsed"], self.audio_seconds)
        return values


class ProgressBar:
    """One job: a bar redrawn in place on a terminal, a line per tenth when ``stream`` is not one, and nothing
    but the final line when disabled (``--quiet``). Updates are objects with ``fraction`` and ``stage``, and the
    audio length as ``audio_seconds`` (the engine) or ``duration`` (the queue's events)."""

    def __init__(
        self, name: str, stream: TextIO, enabled: bool, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.name = name
        self.stream = stream
        self.enabled = enabled
        self.interactive = enabled and stream.isatty()
        self._clock = clock
        self._bar: _JobBar | None = None
        self._started: float | None = None
        self._tenth = -1

    def update(self, progress: object) -> None:
        if not self.enabled:
            return
        fraction = min(1.0, max(0.0, float(getattr(progress, "fraction", 0.0))))
        stage = str(getattr(progress, "stage", "") or "")
        audio = getattr(progress, "audio_seconds", None) or getattr(progress, "duration", None) or None
        if self.interactive:
            bar = self._bar or self._open_bar()
            bar.stage = stage
            bar.audio_seconds = float(audio) if audio else None
            bar.update(fraction - bar.n)
            return
        now = self._clock()
        if self._started is None:
            self._started = now
        tenth = int(fraction * 10)
        if tenth == self._tenth:
            return
        self._tenth = tenth
        elapsed = now - self._started
        line = tqdm.format_meter(
            fraction,
            1.0,
            elapsed,
            prefix=self.name,
            bar_format=LINE_FORMAT,
            stage=stage,
            speed=_speed(fraction, None, elapsed, float(audio) if audio else None),
        )
        self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self, message: str) -> None:
        """Clear the bar and print the job's last line; a later update starts a fresh bar (a job run again)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._started = None
        self._tenth = -1
        self.stream.write(message + "\n")
        self.stream.flush()

    def _open_bar(self) -> _JobBar:
        sized = _has_size(self.stream)
        bar = _JobBar(
            total=1.0,
            desc=f"{self.name[:30]:30}",
            file=self.stream,
            bar_format=BAR_FORMAT,
            leave=False,
            miniters=0,
            mininterval=0.1,
            ncols=None if sized else FALLBACK_SIZE[0],
            nrows=None if sized else FALLBACK_SIZE[1],
            dynamic_ncols=sized,  # follows a resized window
        )
        # tqdm's own tests put their timer here; reset() restarts the clock on it.
        bar._time = self._clock
        bar.reset(total=1.0)
        self._bar = bar
        return bar


class DownloadBar:
    """A download's bytes, as ``progress(done, total)``: a tqdm bar with size, speed and time left on a terminal,
    a line per tenth when ``stream`` is not one. Use it as a context manager: leaving ends the bar's line."""

    def __init__(self, label: str, stream: TextIO, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.stream = stream
        self.interactive = stream.isatty()
        self._clock = clock
        self._bar: tqdm | None = None
        self._started: float | None = None
        self._initial = 0  # what an interrupted download had already: not counted in the speed
        self._tenth = -1

    def __enter__(self) -> DownloadBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __call__(self, done: int, total: int) -> None:
        if self.interactive:
            bar = self._bar or self._open_bar(done, total)
            bar.total = total
            bar.update(done - bar.n)
            return
        now = self._clock()
        if self._started is None:
            self._started, self._initial = now, done
        tenth = done * 10 // total if total else 0
        if tenth == self._tenth:
            return
        self._tenth = tenth
        line = tqdm.format_meter(
            done,
            total or None,
            now - self._started,
            prefix=self.label,
            unit="B",
            unit_scale=True,
            initial=self._initial,
            bar_format="{desc}: {percentage:3.0f}% {n_fmt}B of {total_fmt}B, {rate_fmt}, {remaining} left",
        )
        self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """The finished (or interrupted) bar stays on its line; what is written next starts a new one."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _open_bar(self, done: int, total: int) -> tqdm:
        sized = _has_size(self.stream)
        bar = tqdm(
            total=total,
            initial=done,
            desc=self.label,
            file=self.stream,
            unit="B",
            unit_scale=True,
            miniters=0,
            mininterval=0.2,
            ncols=None if sized else FALLBACK_SIZE[0],
            nrows=None if sized else FALLBACK_SIZE[1],
            dynamic_ncols=sized,
        )
        bar._time = self._clock
        bar.reset(total=total)
        # reset() starts from 0: the bytes an interrupted download already had count as done, not as speed.
        bar.n = bar.last_print_n = done
        self._bar = bar
        return bar
