"""The start/stop tones: played by a dictation run through the real PortAudio -> ALSA -> PulseAudio output path
into a private PulseAudio server's null sink, and read back from the sink's monitor with parec; a device that
cannot play is said once and the sounds go quiet."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from app.core.dictation.sounds import ListeningSounds
from tests.pulse import SINK, missing_tools, pulse_loopback

ROOT = Path(__file__).resolve().parents[3]
RATE = 16_000  # the null sink's rate (tests/pulse.py)

# A dictation run with the sounds on: the tones come from the controller's Listening and Stopping.
RUN = textwrap.dedent(
    """
    import json, sys, threading
    from app.core.dictation.controller import DictationController, Listening, RunEnded
    from app.core.dictation.sounds import ListeningSounds
    from app.core.dictation.sources import ArraySource
    from app.core.dictation.stream import DictationOptions
    import numpy as np

    seen = threading.Condition()
    events = []

    def listener(event):
        with seen:
            events.append(type(event).__name__)
            seen.notify_all()

    silence = np.zeros(16000 * 3, dtype=np.float32)
    controller = DictationController(DictationOptions(), listener, source_factory=lambda _d: ArraySource(silence))
    sounds = controller.sounds = ListeningSounds()
    controller.start()
    with seen:
        assert seen.wait_for(lambda: "Listening" in events, timeout=120), events
    controller.stop()
    assert controller.wait(120)
    controller.close(60)
    print(json.dumps({"played": sounds.played, "failed": sounds.failed, "events": events}))
    """
)


def _notes(samples: np.ndarray) -> list[int]:
    """The pitches heard, in order, each once: the dominant frequency of each loud 25 ms window, rounded to
    10 Hz; a pitch counts only where it holds for two windows in a row (a lone window across a note's edge or an
    output underrun's click reads as some other pitch), and consecutive repeats collapse."""
    window, hop = 400, 200
    pitches: list[int | None] = []
    for start in range(0, len(samples) - window, hop):
        piece = samples[start : start + window]
        if np.max(np.abs(piece)) < 0.05:
            pitches.append(None)
            continue
        spectrum = np.abs(np.fft.rfft(piece * np.hanning(window), n=8 * window))
        pitches.append(int(round(np.argmax(spectrum) * RATE / (8 * window) / 10) * 10))
    heard: list[int] = []
    for before, pitch in itertools.pairwise(pitches):
        if pitch is None or before is None or abs(before - pitch) > 40:
            continue
        if not heard or abs(heard[-1] - pitch) > 40:
            heard.append(pitch)
    return heard


def test_a_run_sounds_a_rising_tone_when_it_listens_and_a_falling_one_when_it_stops(tmp_path: Path) -> None:
    missing = missing_tools() + [tool for tool in ("parec",) if not shutil.which(tool)]
    assert not missing, f"{', '.join(missing)} missing: run `make test` (it installs the Debian packages)"
    recorded = tmp_path / "monitor.f32"
    with pulse_loopback(tmp_path / "pulse") as pulse:
        env = {**os.environ, **pulse, "PYTHONPATH": str(ROOT)}
        with recorded.open("wb") as sink:
            recorder = subprocess.Popen(
                ["parec", "-d", f"{SINK}.monitor", "--format=float32le", f"--rate={RATE}", "--channels=1"],
                env=env,
                stdout=sink,
            )
            try:
                deadline = time.monotonic() + 30
                while recorded.stat().st_size == 0:  # the monitor delivers (silence) once the recording is on
                    assert time.monotonic() < deadline and recorder.poll() is None, "parec recorded nothing"
                    time.sleep(0.05)
                run = subprocess.run(
                    [sys.executable, "-c", RUN], env=env, capture_output=True, text=True, timeout=300, check=False
                )
                assert run.returncode == 0, run.stderr[-3000:]
                # The monitor lags the output a little: read until both cues are in, or 30 s have passed.
                deadline = time.monotonic() + 30
                while True:
                    notes = _notes(np.fromfile(recorded, dtype="<f4"))
                    if len(notes) >= 3 or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
            finally:
                recorder.terminate()
                recorder.wait(timeout=10)
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["failed"] is None and result["played"] == ["start", "stop"], result
    # Rising 660 -> 880 Hz when listening begins, falling 880 -> 660 Hz when it stops (the two 880s are one).
    assert len(notes) == 3, notes
    low, high, low_again = notes
    assert abs(low - 660) <= 20 and abs(high - 880) <= 20 and abs(low_again - 660) <= 20, notes


def test_an_output_that_cannot_play_is_said_once_and_the_sounds_go_quiet() -> None:
    said: list[str] = []
    sounds = ListeningSounds(device="no such loudspeaker", on_error=said.append)
    sounds.play("start")
    sounds.play("stop")
    sounds.close()
    sounds.play("start")  # after the failure: nothing is queued any more
    assert sounds.played == []
    assert len(said) == 1 and said[0].startswith("the start/stop sound is off: ") and "no such loudspeaker" in said[0]
    assert sounds.failed == said[0]


@pytest.mark.unit
def test_the_cues_are_short_enough_for_the_voice_detector_to_ignore() -> None:
    from app.core.dictation.sounds import cue_samples

    for cue in ("start", "stop"):
        samples = cue_samples(cue, 48_000)
        assert len(samples) / 48_000 < 0.15 and np.max(np.abs(samples)) <= 0.25
