"""Words that end a sentence become final at a short pause, not only once the utterance has ended: a person
pausing briefly between sentences gets each one typed while still speaking."""

from __future__ import annotations

import itertools

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
    samples: np.ndarray,
    options: DictationOptions,
    decoder: WhisperDecoder,
    unseen: list[tuple[float, float]] = (),  # type: ignore[assignment]
) -> tuple[str, list[DictationEvent]]:
    """Fed in 0.1 s blocks on the audio clock, as if each decode took no time; each (start, end) of ``unseen``
    arrives as one block, as a live stream takes in all the audio that came while it decoded."""
    events: list[DictationEvent] = []
    stream = DictationStream(
        options, decoder, StreamingVad(options.vad_threshold, options.end_silence_s), on_event=events.append
    )
    cuts = [
        cut
        for cut in range(0, len(samples), 1600)
        if not any(start * SAMPLE_RATE < cut < end * SAMPLE_RATE for start, end in unseen)
    ]
    for first, last in zip(cuts, [*cuts[1:], len(samples)], strict=True):
        stream.feed(samples[first:last])
    stream.flush()
    return stream.text, events


def test_each_sentence_is_final_at_the_short_pause_after_it(espeak: str, decoder: WhisperDecoder) -> None:
    samples, bounds = _speech(espeak)
    text, events = _replay(samples, DictationOptions(), decoder)
    finals = [event for event in events if event.type == "final"]
    for start, end in bounds:
        made_final = _made_final(finals, start, end)
        assert made_final is not None, (start, end, text)
        # Before 0.6 s after its end: while the next sentence has barely begun (no partial decode of the next
        # sentence is due before then, so only the pause itself can have made these words final).
        assert made_final - end < 0.6, (end, made_final, [(e.text, e.emitted_at) for e in finals])
    # Each word once, nothing lost: the same text as the utterance would have made at its end.
    assert metrics.wer(" ".join(SENTENCES), text) <= 0.1, text


def test_off_the_first_sentences_wait_for_the_end_of_the_utterance(espeak: str, decoder: WhisperDecoder) -> None:
    """The same speech with the sentence end off: the words run on into the next sentence before they are final
    (what the test above rules out)."""
    samples, bounds = _speech(espeak)
    _, events = _replay(samples, DictationOptions(sentence_end_s=0.0), decoder)
    finals = [event for event in events if event.type == "final"]
    start, end = bounds[0]
    made_final = _made_final(finals, start, end)
    assert made_final is not None and made_final - end >= 0.6


def test_a_pause_that_ended_while_the_stream_decoded_still_ends_the_sentence(
    espeak: str, decoder: WhisperDecoder
) -> None:
    """On a busy machine a pause can be over before the stream looks again (the last 0.1 s of a sentence, the
    pause and 0.3 s of the next arrive at once): the words before it are still final at that look (the block
    ends on the next 0.1 s)."""
    samples, bounds = _speech(espeak)
    unseen = [(end - 0.1, following + 0.3) for (_, end), (following, _) in itertools.pairwise(bounds)]
    text, events = _replay(samples, DictationOptions(), decoder, unseen)
    finals = [event for event in events if event.type == "final"]
    for (start, end), (_, seen) in zip(bounds, unseen, strict=False):
        made_final = _made_final(finals, start, end)
        assert made_final is not None and made_final <= seen + 0.11, (end, seen, made_final, text)
    _, off = _replay(samples, DictationOptions(sentence_end_s=0.0), decoder, unseen)
    made_final = _made_final([event for event in off if event.type == "final"], *bounds[0])
    assert made_final is not None and made_final > unseen[0][1] + 0.11  # what the test above rules out
    assert metrics.wer(" ".join(SENTENCES), text) <= 0.1, text


def _made_final(finals: list[DictationEvent], start: float, end: float) -> float | None:
    """When the last word said between ``start`` and ``end`` (by its middle) became final."""
    times = [e.emitted_at for e in finals for word in e.words if start <= (word.start + word.end) / 2 <= end]
    return max(times) if times else None


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
