"""SpeechQueueHold driven by a real dictation (tiny.en, Silero VAD) replaying two stretches of a real reading at
the speed of speech: the queue is held from speech to ``linger_s`` after the finals, once per pause longer than
that, and one hold spans a shorter pause."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from app.core.dictation.controller import ControllerEvent, DictationController, RunEnded, Speaking
from app.core.dictation.queue_hold import SpeechQueueHold
from app.core.dictation.sources import ArraySource
from app.core.dictation.stream import DictationOptions
from app.core.engine.audio import SAMPLE_RATE, decode_audio
from tests.real_speech import real_speech_dir

WAIT_S = 120.0


@pytest.fixture(scope="module")
def reading() -> np.ndarray:
    return decode_audio(real_speech_dir() / "mfa_en_spontaneous_a.wav").samples


def two_utterances(reading: np.ndarray, pause_s: float) -> np.ndarray:
    """Two 3-second stretches of unbroken speech from the reading, ``pause_s`` of silence between them."""

    def silence(seconds: float) -> np.ndarray:
        return np.zeros(int(seconds * SAMPLE_RATE), dtype=np.float32)

    first, second = reading[: 3 * SAMPLE_RATE], reading[15 * SAMPLE_RATE : 18 * SAMPLE_RATE]
    return np.concatenate([silence(0.5), first, silence(pause_s), second, silence(1.5)])


def dictate(audio: np.ndarray, linger_s: float) -> list[str]:
    """In the order they came: the Speaking events ("speech"/"quiet") of one dictation run over ``audio`` and the
    hold's calls ("hold"/"release", the release from the linger's own thread)."""
    log: list[str] = []
    lock = threading.Lock()

    def note(what: str) -> None:
        with lock:
            log.append(what)

    ended = threading.Event()
    policy = SpeechQueueHold(lambda: note("hold"), lambda: note("release"), linger_s=linger_s)

    def listener(event: ControllerEvent) -> None:
        if isinstance(event, Speaking):
            note("speech" if event.active else "quiet")
            policy.speaking(event.active)
        elif isinstance(event, RunEnded):
            policy.run_ended()
            ended.set()

    controller = DictationController(
        DictationOptions(),
        listener,
        source_factory=lambda device: ArraySource(audio, realtime=True),
        stop_at_end=True,
    )
    try:
        assert controller.start()
        assert ended.wait(WAIT_S)
    finally:
        controller.close(WAIT_S)
        policy.close()
    return log


def test_a_pause_longer_than_the_linger_releases_between_utterances(reading: np.ndarray) -> None:
    log = dictate(two_utterances(reading, pause_s=4.0), linger_s=0.3)
    assert log == ["speech", "hold", "quiet", "release", "speech", "hold", "quiet", "release"]


def test_a_pause_shorter_than_the_linger_keeps_one_hold(reading: np.ndarray) -> None:
    log = dictate(two_utterances(reading, pause_s=1.5), linger_s=2.5)
    # Two utterances heard (the second longer than the linger), one hold over both, released at the run's end.
    # "quiet" comes about 0.6 s into the pause, so the next "speech" is about 0.9 s later: a 2.5 s linger leaves
    # a loaded machine 1.6 s of lateness.
    assert log == ["speech", "hold", "quiet", "speech", "quiet", "release"]


def test_release_comes_after_the_linger_and_close_releases_at_once() -> None:
    """The policy alone, with its own timer thread: speech again within the linger cancels the release."""
    released = threading.Event()
    calls: list[str] = []

    def release() -> None:
        calls.append("release")
        released.set()

    policy = SpeechQueueHold(lambda: calls.append("hold"), release, linger_s=0.2)
    policy.speaking(True)
    policy.speaking(True)
    assert calls == ["hold"] and policy.held
    policy.speaking(False)
    assert released.wait(10)
    assert calls == ["hold", "release"] and not policy.held
    policy.speaking(True)
    policy.close()
    assert calls == ["hold", "release", "hold", "release"]
    policy.speaking(True)  # closed: never holds again
    assert calls == ["hold", "release", "hold", "release"]
