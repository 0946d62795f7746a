"""The three dictation modes driven by a global hotkey on a real X server (Xvfb): the hotkey's keys are pressed,
held and released through XTest while a real xterm has the focus, real speech (espeak-ng) is replayed at the
speed of speech as the capture source, and what the xterm received is read back from its side.

- hold: listening while the key is held; the release ends the utterance at once (no pause was heard) and the
  final is typed then.
- toggle: a press starts, the next press stops; what was said is typed.
- continuous: listening without a key; voice detection cuts the utterances (typed as they end); the hotkey
  pauses and resumes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from app.core.dictation.controller import (
    ControllerEvent,
    DictationController,
    DictationState,
    Heard,
    Listening,
    RunEnded,
    RunEvent,
    RunStarting,
    Stopping,
)
from app.core.dictation.modes import DictationMode
from app.core.dictation.sources import AudioSource, FileSource
from app.core.dictation.stream import DictationOptions
from app.core.engine.audio import SAMPLE_RATE
from tests import metrics, synth
from tests.xserver import focus_of, focused_xterm, press_keys, release_keys, wait_for_text, xvfb

HOTKEY = ("Control_L", "Alt_L", "d")
FIRST = "Please send the quarterly report to the finance team."
SECOND = "The meeting moves to Thursday afternoon."
WAIT_S = 120.0  # a decode of a few seconds of speech on a loaded 2-core machine


@pytest.fixture(scope="module")
def x_display() -> Iterator[str]:
    with xvfb() as name:
        yield name


@pytest.fixture(scope="module")
def one_sentence(tmp_path_factory: pytest.TempPathFactory, espeak: str) -> Path:
    """A sentence that ends with the file: no pause after it, so only the key's release can end it."""
    voice, pitch = synth.VOICES[0]
    speech = synth.speak(FIRST, voice, pitch) * 0.8
    samples = np.concatenate([np.zeros(int(0.3 * SAMPLE_RATE), dtype=np.float32), speech])
    return synth.write_wav(tmp_path_factory.mktemp("modes") / "held.wav", samples)


@pytest.fixture(scope="module")
def two_sentences(tmp_path_factory: pytest.TempPathFactory, espeak: str) -> Path:
    samples, _ = synth.conversation([(0, FIRST), (1, SECOND)], pause=1.2)
    return synth.write_wav(tmp_path_factory.mktemp("modes") / "two.wav", samples)


class Recorder:
    """The controller's events as they come, and a wait on a condition over them."""

    def __init__(self) -> None:
        self.events: list[ControllerEvent] = []
        self._changed = threading.Condition()

    def __call__(self, event: ControllerEvent) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def wait_for(self, condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not condition():
                left = deadline - time.monotonic()
                assert left > 0, f"{what} did not happen; events: {self.names()}"
                self._changed.wait(min(left, 0.1))  # conditions on the controller's clock change without an event

    def count(self, kind: type, run: int | None = None) -> int:
        return sum(
            1
            for e in list(self.events)
            if isinstance(e, kind) and isinstance(e, RunEvent) and (run is None or e.run == run)
        )

    def finals(self, run: int | None = None) -> list[str]:
        heard = [e for e in list(self.events) if isinstance(e, Heard) and (run is None or e.run == run)]
        return [e.event.text.strip() for e in heard if e.event.type == "final" and e.event.text.strip()]

    def pauses(self, run: int) -> int:
        """Finals the voice detector ended with a pause."""
        return sum(
            1
            for e in list(self.events)
            if isinstance(e, Heard) and e.run == run and e.event.type == "final" and e.event.at_pause
        )

    def names(self) -> list[str]:
        """The run's life as the test reads it: the events that change the listening state, in order."""
        names = {RunStarting: "starting", Listening: "listening", Stopping: "stopping", RunEnded: "ended"}
        out = []
        for event in list(self.events):
            name = names.get(type(event))
            if name is not None and isinstance(event, RunEvent):
                out.append(f"{name}{event.run}")
            elif isinstance(event, Heard) and event.event.type == "final" and event.event.text.strip():
                out.append(f"final{event.run}")
        return out


@contextmanager
def dictating(
    x_display: str, speech: Path, mode: DictationMode, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[DictationController, Recorder]]:
    """The controller as `scriba dictate --type --hotkey ctrl+alt+d --mode MODE` runs it, with the speech replayed
    at the speed of speech each time the capture opens."""
    monkeypatch.setenv("DISPLAY", x_display)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.delenv("XDG_SESSION_TYPE", raising=False)
    recorder = Recorder()

    def replayed(_device: object) -> AudioSource:
        return FileSource(speech, realtime=True)

    controller = DictationController(
        DictationOptions(), recorder, source_factory=replayed, output_mode="type", keep_output=True
    )
    try:
        assert controller.prepare_output()
        controller.set_hotkey("ctrl+alt+d", mode)
        assert controller.load()
        yield controller, recorder
    finally:
        controller.close(WAIT_S)


def _duration(path: Path) -> float:
    return FileSource(path, realtime=False).duration


def _heard_all(controller: DictationController, speech: Path) -> Callable[[], bool]:
    """The whole file has reached the capture (the run's clock has passed its end)."""
    duration = _duration(speech)
    return lambda: controller.elapsed - controller.recorded_seconds >= duration - 0.001  # a sum of floats


def test_hold_mode_listens_while_the_key_is_held_and_types_when_it_is_released(
    x_display: str, one_sentence: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    received = tmp_path / "received.txt"
    with (
        focused_xterm(x_display, received) as window,
        dictating(x_display, one_sentence, "hold", monkeypatch) as (
            controller,
            events,
        ),
    ):
        assert controller.state is DictationState.IDLE  # nothing listens before the key
        press_keys(x_display, *HOTKEY, release=False)
        events.wait_for(lambda: events.count(Listening) == 1, "listening on the press")
        assert controller.state is DictationState.RUNNING
        events.wait_for(_heard_all(controller, one_sentence), "the sentence reaching the capture")
        # Still held: the sentence ended with the file and no pause was heard, so the utterance is open (words the
        # decodes agree on may be final already); nothing is typed while the key is down.
        assert controller.state is DictationState.RUNNING
        assert events.pauses(run=1) == 0 and received.read_text() == ""
        release_keys(x_display, *HOTKEY)
        events.wait_for(lambda: events.count(RunEnded) == 1, "the run ending on the release")
        assert controller.state is DictationState.IDLE and events.pauses(run=1) == 1  # the release ended it
        finals = events.finals()
        expected = " ".join(finals)
        typed = wait_for_text(received, lambda text: len(text) >= len(expected))
        assert focus_of(x_display) == window.id
    names = events.names()
    assert names[:2] == ["starting1", "listening1"] and names[-1] == "ended1" and names.count("stopping1") == 1
    last_final = len(names) - 1 - names[::-1].index("final1")
    assert last_final > names.index("stopping1")  # the sentence's end was made final after the release
    assert finals and typed == expected  # the hotkey's "d" was taken by the grab, not typed
    assert metrics.wer(FIRST, typed) <= 0.25, typed


def test_toggle_mode_starts_on_a_press_and_stops_on_the_next(
    x_display: str, two_sentences: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    received = tmp_path / "received.txt"
    with (
        focused_xterm(x_display, received),
        dictating(x_display, two_sentences, "toggle", monkeypatch) as (
            controller,
            events,
        ),
    ):
        press_keys(x_display, *HOTKEY)  # pressed and let go: listening goes on
        events.wait_for(lambda: events.count(Listening) == 1, "listening on the first press")
        events.wait_for(_heard_all(controller, two_sentences), "both sentences reaching the capture")
        assert controller.state is DictationState.RUNNING and events.count(Stopping) == 0
        press_keys(x_display, *HOTKEY)
        events.wait_for(lambda: events.count(RunEnded) == 1, "the run ending on the second press")
        assert controller.state is DictationState.IDLE
        expected = " ".join(events.finals())
        typed = wait_for_text(received, lambda text: len(text) >= len(expected))
    names = events.names()
    assert names[:2] == ["starting1", "listening1"] and names[-1] == "ended1" and names.count("stopping1") == 1
    assert typed == expected
    assert metrics.wer(f"{FIRST} {SECOND}", typed) <= 0.25, typed


def test_continuous_mode_listens_without_a_key_cuts_at_pauses_and_the_hotkey_pauses_and_resumes(
    x_display: str, two_sentences: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    received = tmp_path / "received.txt"
    with (
        focused_xterm(x_display, received),
        dictating(x_display, two_sentences, "continuous", monkeypatch) as (
            controller,
            events,
        ),
    ):
        assert controller.begin()  # no key pressed
        events.wait_for(lambda: events.count(Listening, run=1) == 1, "listening from the start")
        # Voice detection ends each sentence at the pause after it (finals marked at_pause): both are final and
        # typed while listening goes on, no key pressed.
        events.wait_for(lambda: events.pauses(run=1) >= 2, "both sentences ended by their pauses")
        assert controller.state is DictationState.RUNNING and events.count(Stopping) == 0
        so_far = " ".join(events.finals(run=1))
        typed_while_listening = wait_for_text(received, lambda text: len(text) >= len(so_far))
        assert typed_while_listening.startswith(so_far)
        assert metrics.wer(f"{FIRST} {SECOND}", so_far) <= 0.25, so_far

        press_keys(x_display, *HOTKEY)  # pause
        events.wait_for(lambda: events.count(RunEnded, run=1) == 1, "the pause")
        assert controller.state is DictationState.IDLE and events.count(RunStarting) == 1
        press_keys(x_display, *HOTKEY)  # resume: the capture opens again (the file replays from its start)
        events.wait_for(lambda: events.count(Listening, run=2) == 1, "listening again on the second press")
        events.wait_for(lambda: len(events.finals(run=2)) >= 1, "a final after resuming")
        press_keys(x_display, *HOTKEY)  # pause again
        events.wait_for(lambda: events.count(RunEnded, run=2) == 1, "the second pause")
        expected = " ".join(events.finals())
        typed = wait_for_text(received, lambda text: len(text) >= len(expected))
    names = events.names()
    assert names[:2] == ["starting1", "listening1"] and names.index("stopping1") > names.index("final1")
    assert names[-1] == "ended2" and names.count("listening2") == 1
    assert typed == expected
