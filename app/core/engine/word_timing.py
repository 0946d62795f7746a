"""Word timings that cannot change the words: decode first, then align the decoded tokens to the audio.

faster-whisper's sequential decoder, asked for word timestamps, moves the start of the next 30 s window to the
end of the last aligned word instead of the last timestamp token. On real speech that skips whole phrases
(gentle_lucier.wav, tiny.en, beam 5, VAD, lost about 5 s: WER 0.095 against 0.029 without word timestamps,
scored as in tests/metrics.py). Here the decoding runs
with word timestamps off, so the text is exactly plain faster-whisper's, and each window's tokens are then
aligned to that same window's encoder output with faster-whisper's own cross-attention alignment
(``WhisperModel.add_word_timestamps``), which only reads the tokens and never feeds back into the seeking.

The alignment needs the window each segment was decoded in, in the time of the audio the decoder saw. With
the VAD filter on, that audio is the speech chunks glued together, so the VAD runs here (with the same
options and the same functions faster-whisper uses) and the decoder gets the glued audio with its own VAD off;
times are mapped back to the original audio at the end, again with faster-whisper's own function. The
encoder output of each window is kept from the decoding rather than computed again: the encoder is most of
what an alignment costs (gentle_lucier.wav, tiny.en on 2 cores: 2.5 s re-encoding, 0.34 s reusing).
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

SAMPLE_RATE = 16000


@dataclass
class AlignmentClock:
    """Seconds spent on the alignment pass alone (the cross-attention alignment of each window, plus an
    encoder run for a window the decoder did not encode itself), reported apart from the decoding."""

    seconds: float = 0.0


def transcribe_then_align(
    model: Any, samples: np.ndarray, clock: AlignmentClock | None = None, **kwargs: Any
) -> tuple[Iterator[Any], Any]:
    """Like ``WhisperModel.transcribe(samples, word_timestamps=True, **kwargs)`` but with the text of
    ``word_timestamps=False``. Returns faster-whisper's segments (with ``words``) and its info."""
    from faster_whisper.vad import VadOptions, collect_chunks, get_speech_timestamps

    kwargs = dict(kwargs, word_timestamps=False)
    speech_chunks: list[dict[str, Any]] | None = None
    audio = samples
    if kwargs.pop("vad_filter", False):
        speech_chunks = get_speech_timestamps(samples, VadOptions())
        chunks, _ = collect_chunks(samples, speech_chunks)
        audio = np.concatenate(chunks, axis=0)
    encodings = _EncoderTap(model)
    # A shallow copy for this job alone (same weights, same tokenizer) whose encoder calls are seen by the
    # tap; the shared model object itself is left untouched, so another thread using it is unaffected.
    job = copy.copy(model)
    job.encode = encodings
    segments, info = job.transcribe(audio, vad_filter=False, **kwargs)
    return _aligned(model, segments, audio, speech_chunks, info, encodings, clock or AlignmentClock()), info


class _EncoderTap:
    """Calls the model's encoder and keeps its latest output. faster-whisper encodes a window, then yields
    that window's segments before it encodes the next: the output kept when a window's first segment arrives
    is that window's."""

    def __init__(self, model: Any) -> None:
        self._encode = model.encode
        self.latest: Any = None
        self.calls = 0

    def __call__(self, features: np.ndarray) -> Any:
        self.latest = self._encode(features)
        self.calls += 1
        return self.latest


def _aligned(
    model: Any,
    segments: Iterator[Any],
    audio: np.ndarray,
    speech_chunks: list[dict[str, Any]] | None,
    info: Any,
    encodings: _EncoderTap,
    clock: AlignmentClock,
) -> Iterator[Any]:
    from faster_whisper.tokenizer import Tokenizer
    from faster_whisper.transcribe import restore_speech_timestamps

    options = info.transcription_options
    tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language=info.language)
    extractor = model.feature_extractor
    # The decoder's frame count, as its feature extractor makes it: (samples + 160 padding) // hop frames, of
    # which the last is dropped, then one more ("content_frames" in faster-whisper).
    content_frames = (len(audio) + 160) // extractor.hop_length - 1
    window_frames = extractor.nb_max_frames
    last_speech = 0.0

    def encoder_output_of(seek: int, size: int) -> Any:
        """The window's encoding from the decoding; computed again only if the decoder did not encode it here
        (a first window encoded ahead of the decoding, as language detection could)."""
        from faster_whisper.audio import pad_or_trim

        features = extractor(audio)[:, seek : seek + size]
        return model.encode(pad_or_trim(features))

    def align(window: list[Any], encoder_output: Any) -> list[Any]:
        nonlocal last_speech
        from faster_whisper.transcribe import Word

        started = time.perf_counter()
        seek = window[0].seek
        size = min(window_frames, content_frames - seek)
        if encoder_output is None:
            encoder_output = encoder_output_of(seek, size)
        rows = [{"seek": seek, "start": s.start, "end": s.end, "tokens": list(s.tokens)} for s in window]
        last_speech = model.add_word_timestamps(
            [rows],
            tokenizer,
            encoder_output,
            size,
            options.prepend_punctuations,
            options.append_punctuations,
            last_speech_timestamp=last_speech,
        )
        aligned = [
            dataclasses.replace(
                segment, start=row["start"], end=row["end"], words=[Word(**word) for word in row["words"]]
            )
            for segment, row in zip(window, rows, strict=True)
        ]
        clock.seconds += time.perf_counter() - started
        return aligned

    def windows() -> Iterator[Any]:
        # Segments arrive window by window (all of one window share its ``seek``); a window is aligned as soon
        # as the next one starts, so a cancel between segments still stops the decoding within a window.
        window: list[Any] = []
        encoder_output: Any = None
        # Counted from here, when the decoding starts: encodings made before it (language detection in
        # ``transcribe`` itself) belong to no window.
        calls = encodings.calls
        try:
            for segment in segments:
                if window and segment.seek != window[0].seek:
                    yield from align(window, encoder_output)
                    window = []
                if not window:
                    # A new window: the tap's output is this window's if the decoder encoded since the last.
                    encoder_output = encodings.latest if encodings.calls > calls else None
                    calls = encodings.calls
                window.append(segment)
            if window:
                yield from align(window, encoder_output)
        finally:
            close = getattr(segments, "close", None)
            if close is not None:
                close()

    aligned = windows()
    if speech_chunks:
        return _in_order(restore_speech_timestamps(aligned, speech_chunks, SAMPLE_RATE), aligned)
    return _in_order(aligned, aligned)


def _in_order(segments: Iterator[Any], inner: Iterator[Any]) -> Iterator[Any]:
    """Segments and words that never go back in time, each word inside its segment. Where one window's
    alignment ends and the next begins the two can overlap by a fraction of a second (seen once in
    gentle_lucier.wav, 0.1 s); the merge with the speaker turns and the subtitle exporters expect times in
    order, so the later one is clipped. Only times move here, never a word."""
    from faster_whisper.transcribe import Word

    previous_end = 0.0
    try:
        for segment in segments:
            start = max(float(segment.start), previous_end)
            end = max(float(segment.end), start)
            cursor = start
            words = []
            for word in segment.words or ():
                word_start = min(max(float(word.start), cursor), end)
                word_end = min(max(float(word.end), word_start), end)
                words.append(Word(start=word_start, end=word_end, word=word.word, probability=word.probability))
                cursor = word_end
            previous_end = end
            yield dataclasses.replace(segment, start=start, end=end, words=words)
    finally:
        close = getattr(inner, "close", None)
        if close is not None:
            close()
