"""Dictation's voice activity and committing of words at their edges, which mutation testing found unpinned. No
Whisper model: the words are written here, the speech is espeak-ng's, the VAD the Silero model faster-whisper
ships."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.dictation.decoding import StreamingVad, common_prefix, join_words, strip_committed, strip_context
from app.core.transcript.document import Word
from tests import synth

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers


def words(*spec: tuple[str, float, float]) -> list[Word]:
    return [Word(start, end, text, 1.0) for text, start, end in spec]


def test_words_are_joined_as_spoken_without_outer_spaces() -> None:
    assert join_words(words((" Hello", 0.0, 0.4), (" world. ", 0.4, 0.9))) == "Hello world."
    assert join_words([]) == ""


def test_agreement_ignores_case_and_punctuation_but_not_apostrophes() -> None:
    assert common_prefix(words((" Don't,", 0.0, 0.3), (" go", 0.3, 0.5)), words((" don't", 0.0, 0.3))) == 1
    assert common_prefix(words((" don't", 0.0, 0.3)), words((" dont", 0.0, 0.3))) == 0


def test_a_committed_words_repeat_is_dropped_from_where_the_last_committed_word_ended() -> None:
    committed = words((" Thanks", 0.0, 0.3), (" for", 0.3, 0.5), (" joining", 0.5, 2.0))
    # The model changed an early word ("four"): what starts before 1.9 s (0.1 s before "joining" ended) is
    # dropped, here "joyning" heard again at 0.6-1.9 s; a word starting exactly at 1.9 s is dropped too.
    changed = words((" Thanks", 0.0, 0.3), (" four", 0.3, 0.5), (" joyning", 0.6, 1.9), (" the", 1.9, 2.1))
    assert [w.word for w in strip_committed([*changed, *words((" call", 2.1, 2.5))], committed)] == [" call"]


def test_a_repeat_of_the_committed_tail_longer_than_five_words_is_not_taken_for_one() -> None:
    texts = ["one", "two", "three", "four", "five", "six"]
    committed = words(*((f" {t}", float(i), i + 1.0) for i, t in enumerate(texts)))
    # Heard again after the boundary, all six: only a repeat of 1 to 5 words is dropped (as whisper_streaming).
    again = words(*((f" {t}", 10.0 + i, 11.0 + i) for i, t in enumerate([*texts, "seven"])))
    assert [w.word for w in strip_committed([words((" On", 0.0, 1.0))[0], *again], committed)] == [
        " one",
        " two",
        " three",
        " four",
        " five",
        " six",
        " seven",
    ]
    # The last five alone are.
    five = words(*((f" {t}", 10.0 + i, 11.0 + i) for i, t in enumerate([*texts[1:], "seven"])))
    assert [w.word for w in strip_committed([words((" On", 0.0, 1.0))[0], *five], committed)] == [" seven"]


@pytest.fixture(scope="module")
def spoken(espeak: str) -> np.ndarray:
    return synth.speak("Please send the report before the meeting on Friday.", "en-us", 50)


def test_a_fresh_vad_has_heard_nothing() -> None:
    vad = StreamingVad()
    assert (vad.position, vad.open_start, vad.speech_end, vad.trailing_silence, list(vad.completed)) == (
        0,
        None,
        0,
        0,
        [],
    )
    assert vad.min_silence == 8000  # half a second at 16 kHz
    assert vad.neg_threshold == pytest.approx(0.35)
    assert StreamingVad(threshold=0.1).neg_threshold == 0.01


def test_probabilities_come_one_per_whole_window_as_float32_whatever_the_input() -> None:
    vad = StreamingVad()
    short = vad.probabilities(np.zeros(100, dtype=np.float32))
    assert (short.shape, short.dtype) == ((0,), np.float32)
    # 100 + 500 samples: one whole 512-sample window.
    one = vad.probabilities(np.zeros(500, dtype=np.float64))
    assert (one.shape, one.dtype) == ((1,), np.float32)
    assert vad.position == 0  # probabilities classify nothing: feed does


def test_speech_cut_off_ends_where_the_audio_ends_and_speech_then_silence_where_the_silence_began(
    spoken: np.ndarray,
) -> None:
    vad = StreamingVad()
    vad.feed(spoken)
    assert vad.open_start is not None and vad.trailing_silence == 0
    vad.close(len(spoken) + 40)
    assert list(vad.completed) == [(vad.completed[0][0], len(spoken) + 40)]
    assert vad.completed[0][0] < 0.3 * 16000

    vad = StreamingVad()
    vad.feed(np.concatenate([spoken, np.zeros(int(0.3 * 16000), dtype=np.float32)]))  # shorter than min_silence
    assert vad.open_start is not None and vad.trailing_silence > 0
    silence_began = vad.speech_end
    assert abs(silence_began - len(spoken)) < 0.2 * 16000
    vad.close(len(spoken) + int(0.3 * 16000))
    assert list(vad.completed)[-1][1] == silence_began
    assert vad.open_start is None and vad.speech_end == vad.position


def test_context_far_from_its_time_is_still_found_by_its_letters() -> None:
    # Every word of the re-decode is more than a second from where the context ended (10 s): no cut is near in
    # time, so every word boundary is a candidate and the letters decide.
    context = words((" let", 9.0, 9.3), (" us", 9.3, 9.5), (" plan", 9.5, 10.0))
    again = words((" let", 20.0, 20.3), (" us", 20.3, 20.5), (" plan", 20.5, 21.0))
    assert [w.word for w in strip_context([*again, *words((" I", 21.2, 21.3), (" will", 21.3, 21.6))], context)] == [
        " I",
        " will",
    ]
    assert strip_context(again, context) == []  # all of it was context
