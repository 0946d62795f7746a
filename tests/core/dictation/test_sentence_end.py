"""Words that end a sentence become final at a short pause, not only once the utterance has ended: a person
pausing briefly between sentences gets each one typed while still speaking."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.dictation.decoding import StreamingVad, WhisperDecoder, ends_sentence, load_decoder
from app.core.dictation.stream import DictationEvent, DictationOptions, DictationStream
from app.core.engine.audio import SAMPLE_RATE
from app.core.transcript.document import Word
from tests import metrics, synth

SENTENCES = (
    "Please send me the report before Friday.",
    "Where did you put the blue folder?",
    "We should meet again next week.",
)
PAUSE_S = 0.45  # between sentences: shorter than the half second that ends an utterance


@pytest.fixture(scope="module")
def decoder() -> WhisperDecoder:
    return load_decoder(DictationOptions())


def _speech(espeak: str) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """The three sentences in one voice, PAUSE_S apart, with each sentence's (start, end) in seconds."""
    voice, pitch = synth.VOICES[0]
    pieces, bounds, clock = [np.zeros(SAMPLE_RATE // 2, dtype=np.float32)], [], 0.5
    for text in SENTENCES:
        samples = synth.speak(text, voice, pitch) * 0.8
        bounds.append((clock, clock + len(samples) / SAMPLE_RATE))
        pieces += [samples, np.zeros(int(PAUSE_S * SAMPLE_RATE), dtype=np.float32)]
        clock += len(samples) / SAMPLE_RATE + PAUSE_S
    pieces.append(np.zeros(SAMPLE_RATE, dtype=np.float32))
    return np.concatenate(pieces), bounds


def _replay(
    samples: np.ndarray, options: DictationOptions, decoder: WhisperDecoder
) -> tuple[str, list[DictationEvent]]:
    """Fed in 0.1 s blocks on the audio clock (as if each decode took no time)."""
    events: list[DictationEvent] = []
    stream = DictationStream(
        options, decoder, StreamingVad(options.vad_threshold, options.end_silence_s), on_event=events.append
    )
    for first in range(0, len(samples), 1600):
        stream.feed(samples[first : first + 1600])
    stream.flush()
    return stream.text, events


def test_each_sentence_is_final_at_the_short_pause_after_it(espeak: str, decoder: WhisperDecoder) -> None:
    samples, bounds = _speech(espeak)
    text, events = _replay(samples, DictationOptions(), decoder)
    finals = [event for event in events if event.type == "final"]
    for start, end in bounds:
        mine = [event for event in finals if event.end > start - 0.2 and event.start < end + 0.2]
        assert mine, (start, end, text)
        made_final = max(event.emitted_at for event in mine)
        # Before 0.6 s after its end: while the next sentence has barely begun (no partial decode of the next
        # sentence is due before then, so only the pause itself can have made these words final).
        assert made_final - end < 0.6, (end, made_final, [(e.text, e.emitted_at) for e in mine])
    # Each word once, nothing lost: the same text as the utterance would have made at its end.
    assert metrics.wer(" ".join(SENTENCES), text) <= 0.1, text


def test_off_the_first_sentences_wait_for_the_end_of_the_utterance(espeak: str, decoder: WhisperDecoder) -> None:
    """The same speech with the sentence end off: the words run on into the next sentence before they are final
    (what the test above rules out)."""
    samples, bounds = _speech(espeak)
    _, events = _replay(samples, DictationOptions(sentence_end_s=0.0), decoder)
    finals = [event for event in events if event.type == "final"]
    start, end = bounds[0]
    made_final = max(event.emitted_at for event in finals if event.end > start - 0.2 and event.start < end + 0.2)
    assert made_final - end >= 0.6


def _words(*texts: str) -> list[Word]:
    return [Word(float(index), float(index) + 0.5, text, 1.0) for index, text in enumerate(texts)]


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        ((" Send", " it", " by", " Friday."), True),
        ((" Where", " is", " it?"), True),
        ((" Stop!",), True),
        ((" He", ' said "yes."'), True),
        ((" Before", " Friday,"), False),
        ((" Before", " Friday"), False),
        ((" Mr.", " Smith"), False),
        ((), False),
    ],
)
def test_a_sentence_ends_with_its_closing_punctuation(texts: tuple[str, ...], expected: bool) -> None:
    assert ends_sentence(_words(*texts)) is expected


def test_the_sentence_end_lies_between_the_closing_decode_and_the_end_of_an_utterance() -> None:
    with pytest.raises(ValueError, match="sentence_end_s"):
        DictationOptions(sentence_end_s=0.05, close_after_s=0.1)
    with pytest.raises(ValueError, match="sentence_end_s"):
        DictationOptions(sentence_end_s=0.5, end_silence_s=0.5)
    assert DictationOptions(sentence_end_s=0.0).sentence_end_s == 0.0  # off
