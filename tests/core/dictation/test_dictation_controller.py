"""The dictation controller without Qt, on real parts: espeak-ng speech and a real recording replayed as a
microphone would deliver them, the bundled tiny.en, Silero VAD, the real PortAudio for a microphone that is not
there, and a real X server (Xvfb) with an xterm for the global hotkey and the typing."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from app.core.dictation.controller import (
    ControllerEvent,
    DictationController,
    DictationState,
    Heard,
    InputDevice,
    Listening,
    ModelLoading,
    Problem,
    RunEnded,
    RunStarting,
    SaveError,
)
from app.core.dictation.sources import ArraySource, AudioSource, FileSource, MicrophoneSource
from app.core.dictation.stream import DictationOptions
from app.core.engine.audio import SAMPLE_RATE, decode_audio
from tests import metrics, synth
from tests.real_speech import real_speech_dir
from tests.xserver import focus_of, focused_xterm, press_keys, wait_for_text, xvfb

WAIT_S = 120.0  # a decode on a loaded 2-core machine can take seconds
FIRST = "Please send the quarterly report to the finance team."
SECOND = "The meeting moves to Thursday afternoon."


def spoken(text: str) -> np.ndarray:
    """Half a second of silence, the sentence, then 1.5 s of silence (the end of an utterance is heard)."""
    voice, pitch = synth.VOICES[0]
    silence = np.zeros(SAMPLE_RATE // 2, dtype=np.float32)
    return np.concatenate([silence, synth.speak(text, voice, pitch) * 0.8, silence, silence, silence])


@pytest.fixture(scope="module")
def first(espeak: str) -> np.ndarray:
    return spoken(FIRST)


@pytest.fixture(scope="module")
def second(espeak: str) -> np.ndarray:
    return spoken(SECOND)


class Events:
    """Every event the controller emits, from whichever thread, and a way to wait for one."""

    def __init__(self) -> None:
        self.events: list[ControllerEvent] = []
        self._changed = threading.Condition()

    def __call__(self, event: ControllerEvent) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def wait_for(self, found: Callable[[list[ControllerEvent]], bool], timeout_s: float = WAIT_S) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: found(self.events), timeout_s), self.events

    def of(self, kind: type, run: int | None = None) -> list[ControllerEvent]:
        with self._changed:
            return [e for e in self.events if isinstance(e, kind) and (run is None or getattr(e, "run", None) == run)]

    def heard(self, kind: str, run: int) -> list[str]:
        return [e.event.text for e in self.of(Heard, run) if isinstance(e, Heard) and e.event.type == kind]


def wait_until(condition: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)


def words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


def run_ended(run: int) -> Callable[[list[ControllerEvent]], bool]:
    return lambda events: any(isinstance(e, RunEnded) and e.run == run for e in events)


def replay(samples: np.ndarray, *, realtime: bool = False) -> Callable[[InputDevice], AudioSource]:
    return lambda device: ArraySource(samples, realtime=realtime)


def test_two_runs_load_the_model_once_and_are_kept_as_one_session(
    first: np.ndarray, second: np.ndarray, tmp_path: Path
) -> None:
    events = Events()
    controller = DictationController(DictationOptions(), events, source_factory=replay(first))
    try:
        assert controller.start()
        assert controller.state is DictationState.LOADING
        assert not controller.start()  # one run at a time
        events.wait_for(lambda _: "team" in words(" ".join(events.heard("final", 1))))
        # A source that ran out leaves the run listening until it is stopped.
        assert controller.state is DictationState.RUNNING
        controller.stop()
        assert controller.wait(WAIT_S)
        assert controller.state is DictationState.IDLE

        controller.source_factory = replay(second)
        assert controller.start()
        events.wait_for(lambda _: "afternoon" in words(" ".join(events.heard("final", 2))))
        controller.stop()
        assert controller.wait(WAIT_S)
    finally:
        controller.close(WAIT_S)

    kinds = [type(e) for e in events.events if not isinstance(e, Heard)]
    assert kinds.count(ModelLoading) == 1, kinds  # loaded for the first run, kept for the second
    for run in (1, 2):
        # Each run's life in order: starting, listening, its text, and its end last of all.
        mine = [e for e in events.events if getattr(e, "run", None) == run]
        assert isinstance(mine[0], RunStarting) and isinstance(mine[-1], RunEnded) and mine[-1].listened
        assert any(isinstance(e, Listening) for e in mine)
    assert metrics.wer(FIRST, " ".join(events.heard("final", 1))) <= 0.25
    assert metrics.wer(SECOND, " ".join(events.heard("final", 2))) <= 0.25

    # The session: both runs' audio one after the other, the second run's finals on that clock.
    recording = controller.recording()
    assert len(recording) == len(first) + len(second)
    assert np.array_equal(recording[: len(first)], first)
    offset = len(first) / SAMPLE_RATE
    later = [e for e in controller.finals if "afternoon" in words(e.text)]
    assert later and all(e.start >= offset and all(w.start >= offset for w in e.words) for e in later)

    # Saving into a path that is a file says where and why, and keeps the session for another try.
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the folder should be")
    with pytest.raises(SaveError, match=re.escape(str(blocker))):
        controller.save(blocker, store=None)
    assert not controller.saved and len(controller.recording()) == len(recording)
    saved = controller.save(tmp_path / "kept", store=None)
    text = " ".join(segment.text for segment in saved.transcript.segments)
    assert metrics.wer(f"{FIRST} {SECOND}", text) <= 0.25, text
    assert saved.transcript.duration == pytest.approx((len(first) + len(second)) / SAMPLE_RATE, abs=0.001)


def test_a_missing_microphone_is_a_problem_event_and_the_next_start_works(first: np.ndarray) -> None:
    events = Events()
    # The real microphone source on real PortAudio, asked for a device this machine does not have.
    controller = DictationController(
        DictationOptions(), events, source_factory=lambda device: MicrophoneSource(device), device="no such input"
    )
    try:
        assert controller.start()
        events.wait_for(run_ended(1))
        [problem] = events.of(Problem, 1)
        assert isinstance(problem, Problem) and problem.kind == "microphone" and problem.ended
        assert problem.message.startswith("input device 'no such input' cannot be used"), problem.message
        assert problem.text.startswith("Microphone: input device 'no such input'")
        [ended] = events.of(RunEnded, 1)
        assert isinstance(ended, RunEnded) and not ended.listened
        assert events.events.index(problem) < events.events.index(ended)  # said before the run is over
        assert controller.state is DictationState.IDLE and controller.recording().size == 0

        controller.source_factory = replay(first)  # the microphone is back
        assert controller.start()
        events.wait_for(lambda found: bool(events.of(Listening, 2)))
        controller.stop()
        events.wait_for(run_ended(2))
        assert not events.of(Problem, 2)
    finally:
        controller.close(WAIT_S)


def test_typing_without_a_display_is_refused_in_words_and_nothing_starts(
    first: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE"):
        monkeypatch.delenv(name, raising=False)
    events = Events()
    controller = DictationController(DictationOptions(), events, source_factory=replay(first), output_mode="type")
    try:
        assert not controller.start()
        assert controller.state is DictationState.IDLE
        [problem] = events.of(Problem)
        assert isinstance(problem, Problem) and problem.kind == "desktop" and problem.ended
        assert problem.message == "typing into other programs needs an X11 display (DISPLAY is not set)"
        assert not events.of(RunStarting) and not events.of(ModelLoading)  # nothing loaded, nothing opened
    finally:
        controller.close(WAIT_S)


@pytest.fixture(scope="module")
def x_display() -> Iterator[str]:
    with xvfb() as name:
        yield name


def test_the_hotkey_starts_and_stops_and_only_finals_are_typed(
    x_display: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPLAY", x_display)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.delenv("XDG_SESSION_TYPE", raising=False)
    speech = real_speech_dir() / "mfa_en_spontaneous_a.wav"
    reference = speech.with_suffix(".ref.txt").read_text()
    duration = len(decode_audio(speech).samples) / SAMPLE_RATE
    events = Events()
    # At the speed of speech: partials are shown while the words are said, and none of them may be typed.
    controller = DictationController(
        DictationOptions(),
        events,
        source_factory=lambda device: FileSource(speech, realtime=True, speed=2.0),
        output_mode="type",
    )
    received = tmp_path / "received.txt"
    try:
        assert controller.load()
        controller.set_hotkey("ctrl+alt+d", "toggle")
        with focused_xterm(x_display, received) as window:
            press_keys(x_display, "Control_L", "Alt_L", "d")
            events.wait_for(lambda found: bool(events.of(Listening, 1)))
            # Stopped by the hotkey once the whole recording has been heard (the run keeps listening after it).
            wait_until(lambda: controller.elapsed >= duration)
            assert events.heard("partial", 1), "a replay at the speed of speech shows partials"
            press_keys(x_display, "Control_L", "Alt_L", "d")
            events.wait_for(run_ended(1))
            finals = [text.strip() for text in events.heard("final", 1) if text.strip()]
            expected = " ".join(finals)
            typed = wait_for_text(received, lambda text: len(text) >= len(expected))
            assert focus_of(x_display) == window.id
        # Each final typed once, in order, one space apart; no partial and none of the hotkey's keys.
        assert typed == expected
        assert metrics.wer(reference, typed) <= 0.3, typed
        assert len(events.of(RunStarting)) == 1 and not events.of(Problem)
    finally:
        controller.close(WAIT_S)
    assert controller.hotkey is None  # given back: another program may grab it now
