"""Short tones when listening starts and stops, for a person whose eyes are on another program.

The tones are made here (no file to ship or lose) and played through PortAudio's output device on a thread of
their own: ``play`` only queues, so a slow or missing sound device never holds up the hotkey, the capture or the
typing. A device that cannot play is said once (``on_error``) and the sounds are off from then on.
"""

from __future__ import annotations

import importlib
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

log = logging.getLogger(__name__)

Cue = Literal["start", "stop"]

TONE_S = 0.05  # each of the two notes: together well under the voice detector's shortest speech (0.15 s)
GAP_S = 0.01
FADE_S = 0.005  # a click-free start and end
TAIL_S = 0.15
# Rising for "listening", falling for "stopped": told apart without looking.
NOTES_HZ: dict[Cue, tuple[float, float]] = {"start": (660.0, 880.0), "stop": (880.0, 660.0)}
DEFAULT_RATE = 48_000

_END = object()


def cue_samples(cue: Cue, rate: int = DEFAULT_RATE, volume: float = 0.2) -> np.ndarray:
    """The cue's two notes, mono float32 at ``rate``."""
    tone = int(TONE_S * rate)
    fade = max(1, int(FADE_S * rate))
    envelope = np.ones(tone, dtype=np.float32)
    envelope[:fade] = np.linspace(0.0, 1.0, fade, dtype=np.float32)
    envelope[-fade:] = np.linspace(1.0, 0.0, fade, dtype=np.float32)
    t = np.arange(tone, dtype=np.float32) / rate
    first, second = (np.sin(2 * np.pi * hz * t).astype(np.float32) * envelope * volume for hz in NOTES_HZ[cue])
    return np.concatenate([first, np.zeros(int(GAP_S * rate), dtype=np.float32), second])


class ListeningSounds:
    """``play("start")`` / ``play("stop")`` from any thread; they sound in order on ``device`` (None: the
    system's default output)."""

    def __init__(
        self,
        device: int | str | None = None,
        *,
        volume: float = 0.2,
        on_error: Callable[[str], None] | None = None,
        sounddevice: Any = None,
    ) -> None:
        self.device = device
        self.volume = volume
        self.on_error = on_error
        self.failed: str | None = None  # why the sounds went off
        self.played: list[Cue] = []  # the cues that reached the device, in order
        self._sounddevice = sounddevice
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="listening-sounds", daemon=True)
        self._thread.start()

    def play(self, cue: Cue) -> None:
        if self.failed is None:
            self._queue.put(cue)

    def close(self) -> None:
        """Play what is queued, then stop."""
        if self._thread.is_alive():
            self._queue.put(_END)
            self._thread.join()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if self.failed is not None:
                continue
            cue: Cue = "start" if item == "start" else "stop"
            try:
                self._play(cue)
            except Exception as error:  # PortAudio's own error type, or no sounddevice: said once, then quiet
                log.warning("the listening sound could not be played", exc_info=True)
                self.failed = f"the start/stop sound is off: {error or type(error).__name__}"
                if self.on_error is not None:
                    self.on_error(self.failed)
            else:
                self.played.append(cue)

    def _play(self, cue: Cue) -> None:
        sd = self._sounddevice
        if sd is None:
            sd = self._sounddevice = importlib.import_module("sounddevice")
        rate = int(sd.query_devices(self.device, "output")["default_samplerate"]) or DEFAULT_RATE
        with sd.OutputStream(samplerate=rate, channels=1, dtype="float32", device=self.device) as stream:
            # Silence after the notes: a sound server can drop the last buffer of a stream that closes at once.
            tail = np.zeros(int(TAIL_S * rate), dtype=np.float32)
            stream.write(np.concatenate([cue_samples(cue, rate, self.volume), tail]))
