"""What a dictation stream is made of: the decoder (a faster-whisper model with dictation's settings), Silero
VAD run block by block, and LocalAgreement between consecutive hypotheses. faster_whisper is imported only
when a model or the VAD is loaded."""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from app.core.engine.audio import SAMPLE_RATE
from app.core.transcript.document import Word

if TYPE_CHECKING:
    from app.core.engine.transcribe import Device


# --------------------------------------------------------------------------------------------------------------
# Decoding


class Decoder(Protocol):
    """Turns a window of 16 kHz audio into words with times relative to the window's first sample."""

    def decode(self, samples: np.ndarray, *, final: bool, prompt: str | None) -> list[Word]: ...


class WhisperDecoder:
    """A faster-whisper model with dictation's settings: temperature 0 only (fallback re-decodes would make a
    step's cost unpredictable), no conditioning on earlier windows, word timestamps, no VAD of its own."""

    def __init__(
        self,
        model: Any,
        *,
        language: str | None,
        partial_beam_size: int = 1,
        final_beam_size: int = 5,
        encoder_margin_s: float | None = None,
    ) -> None:
        self.model = model
        self.encoder_margin_s = encoder_margin_s
        # An English-only model needs no detection; a multilingual one detects once, then keeps the language
        # so that partials of one session do not switch language on a short or unclear window.
        self.language = language or (None if getattr(model, "is_multilingual", True) else "en")
        self.partial_beam_size = partial_beam_size
        self.final_beam_size = final_beam_size
        self.hotwords: str | None = None
        self.hotword_notes: tuple[str, ...] = ()

    def set_vocabulary(self, vocabulary: Sequence[str]) -> None:
        """Words and names to favour (the person's vocabulary), given to Whisper as hotwords before every
        window; cut to what Whisper reads (a note in ``hotword_notes`` says so)."""
        from app.core.engine.transcribe import bound_prompt

        text = ", ".join(word.strip() for word in vocabulary if word.strip()) or None
        tokenizer = getattr(self.model, "hf_tokenizer", None)
        if text is not None and tokenizer is not None:
            _, text, self.hotword_notes = bound_prompt(tokenizer, None, text)
        else:
            self.hotword_notes = ()
        self.hotwords = text

    # Speech is at most about 5 tokens a second; a window's token budget stops a repetition loop (which a
    # temperature fallback would otherwise have to catch) from costing seconds of decoding.
    TOKENS_PER_SECOND = 8
    TOKENS_EXTRA = 16

    # What a final's tail pass hears at least: a second of speech in 10 s was misheard ("First up" for "full
    # stop", which 15 s and 30 s hear right).
    FINAL_TAIL_HEARD_S = 15

    # A loop decoded again may not repeat any three tokens: Whisper's own way out of a loop (a temperature
    # fallback) is random and costs up to five decodes.
    NO_REPEAT_NGRAM = 3

    def decode(self, samples: np.ndarray, *, final: bool, prompt: str | None) -> list[Word]:
        hotwords = self.hotwords
        words = self._decode(samples, final=final, prompt=prompt, hotwords=hotwords)
        if hotwords and looping(words):
            # Text before the audio makes tiny.en loop at times ("see you in the next video" five times after
            # the last word; mfa_en_spontaneous_a's WER 0.14 -> 0.76 with two hotwords): decoded again without.
            hotwords = None
            words = self._decode(samples, final=final, prompt=prompt, hotwords=None)
        if looping(words):
            # An unclear word can start a loop with no hotwords too ("the exception of ah, ah, ah, ..." to the
            # end of the window in gentle_lucier 40.2-49.0 s), and a loop would be typed as it is.
            words = self._decode(samples, final=final, prompt=prompt, hotwords=hotwords, no_repeat=True)
        return cut_loop(words)

    def _decode(
        self,
        samples: np.ndarray,
        *,
        final: bool,
        prompt: str | None,
        hotwords: str | None,
        no_repeat: bool = False,
    ) -> list[Word]:
        no_repeat_ngram_size = self.NO_REPEAT_NGRAM if no_repeat else 0
        if self.encoder_margin_s is not None and self.language is not None:
            return self._decode_short(
                samples, final=final, prompt=prompt, hotwords=hotwords, no_repeat_ngram_size=no_repeat_ngram_size
            )
        seconds = len(samples) / SAMPLE_RATE
        segments, info = self.model.transcribe(
            samples,
            language=self.language,
            beam_size=self.final_beam_size if final else self.partial_beam_size,
            temperature=0.0,
            condition_on_previous_text=False,
            word_timestamps=True,
            vad_filter=False,
            initial_prompt=prompt or None,
            hotwords=hotwords,
            max_new_tokens=self._token_budget(seconds),
            no_repeat_ngram_size=no_repeat_ngram_size,
        )
        words = [
            Word(start=float(w.start), end=float(w.end), word=str(w.word), probability=float(w.probability))
            for segment in segments
            for w in segment.words or ()
        ]
        if self.language is None and float(info.language_probability) >= 0.5:
            self.language = str(info.language)
        return words

    def _token_budget(self, seconds: float) -> int:
        return min(200, int(seconds * self.TOKENS_PER_SECOND) + self.TOKENS_EXTRA)

    def _decode_short(
        self,
        samples: np.ndarray,
        *,
        final: bool,
        prompt: str | None,
        hotwords: str | None,
        no_repeat_ngram_size: int = 0,
    ) -> list[Word]:
        """A decode as faster-whisper's ``transcribe`` makes it (its prompt, search settings, passes and word
        alignment), except that the encoder hears the audio and ``encoder_margin_s`` of silence after it, in 5 s
        steps, not always 30 s: its attention is quadratic in what it hears (0.23 s on 30 s here, 0.06 s on
        15 s). A final's first pass hears 30 s (with a short span its words were worse, docs/benchmarks.md);
        the pass that decodes an unfinished tail again hears the tail and the margin, and at least
        ``FINAL_TAIL_HEARD_S``."""
        from faster_whisper.audio import pad_or_trim
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_end, get_suppressed_tokens

        assert self.encoder_margin_s is not None and self.language is not None
        model = self.model
        multilingual = model.model.is_multilingual
        tokenizer = Tokenizer(model.hf_tokenizer, multilingual, task="transcribe", language=self.language)
        features = model.feature_extractor(samples)
        frames = features.shape[-1] - 1
        words: list[Word] = []
        seek, last_speech = 0, 0.0
        while seek < frames:
            size = frames - seek
            seconds = size / 100
            heard_s = min(30, 5 * math.ceil((seconds + self.encoder_margin_s) / 5))
            if final:
                heard_s = 30 if seek == 0 else max(heard_s, self.FINAL_TAIL_HEARD_S)
            encoder_output = model.encode(pad_or_trim(features[:, seek:frames], heard_s * 100))
            previous = tokenizer.encode(" " + prompt.strip()) if prompt and seek == 0 else []
            prompt_tokens = model.get_prompt(tokenizer, previous, without_timestamps=False, hotwords=hotwords)
            new_tokens = self._token_budget(seconds)
            result = model.model.generate(
                encoder_output,
                [prompt_tokens],
                beam_size=self.final_beam_size if final else self.partial_beam_size,
                max_length=min(model.max_length, len(prompt_tokens) + new_tokens),
                return_scores=True,
                return_no_speech_prob=True,
                suppress_blank=True,
                no_repeat_ngram_size=no_repeat_ngram_size,
                suppress_tokens=get_suppressed_tokens(tokenizer, [-1]),
                max_initial_timestamp_index=50,  # the first word within 1 s of the start, as transcribe
            )[0]
            tokens = result.sequences_ids[0]
            average_logprob = result.scores[0] * len(tokens) / (len(tokens) + 1)
            if result.no_speech_prob > 0.6 and average_logprob < -1.0:
                break  # transcribe's test for audio without speech
            segments, next_seek, single_ending = model._split_segments_by_timestamps(
                tokenizer=tokenizer,
                tokens=tokens,
                time_offset=seek / 100,
                segment_size=size,
                segment_duration=seconds,
                seek=seek,
            )
            model.add_word_timestamps(
                [segments], tokenizer, encoder_output, size, _PREPEND, _APPEND, last_speech_timestamp=last_speech
            )
            if not single_ending:
                # As transcribe: an unfinished last segment is decoded again from the last word's end.
                last_end = get_end(segments)
                if last_end is not None and last_end > seek / 100:
                    next_seek = round(last_end * 100)
            for segment in segments:
                if segment["start"] == segment["end"] or not tokenizer.decode(segment["tokens"]).strip():
                    continue
                words += [
                    Word(float(w["start"]), float(w["end"]), str(w["word"]), float(w["probability"]))
                    for w in segment.get("words", ())
                ]
            last_speech = get_end(segments) or last_speech
            if next_seek <= seek:
                break
            seek = next_seek
        return words


# transcribe's defaults: punctuation joined to the word after / before it when words are timed.
_PREPEND = "\"'“¿([{-"
_APPEND = "\"'.。,，!！?？:：”)]}、"


def _first_loop(words: Sequence[Word], repeats: int) -> tuple[int, int] | None:
    """Where the first phrase of two to eight words that comes ``repeats`` times in a row starts, and its length."""
    keys = [_norm(word) for word in words]
    found: tuple[int, int] | None = None
    for size in range(2, 9):
        for start in range(len(keys) - size * repeats + 1):
            if found is not None and start >= found[0]:
                break
            phrase = keys[start : start + size]
            if all(keys[start + size * turn : start + size * (turn + 1)] == phrase for turn in range(1, repeats)):
                found = (start, size)
                break
    return found


def looping(words: Sequence[Word], repeats: int = 3) -> bool:
    """Whether a phrase of two to eight words comes ``repeats`` times in a row: a decoder stuck in a loop (a
    person may say "words words words", one word again, but hardly a phrase three times over)."""
    return _first_loop(words, repeats) is not None


def cut_loop(words: Sequence[Word], repeats: int = 3) -> list[Word]:
    """The words up to the first time round a loop (see :func:`looping`); what follows a loop in the same
    decode is lost too, as the decoder never got past it."""
    found = _first_loop(words, repeats)
    if found is None:
        return list(words)
    start, size = found
    return list(words[: start + size])


class DecoderOptions(Protocol):
    """What loading a decoder reads of :class:`app.core.dictation.stream.DictationOptions` (named here so that
    this module, below the stream, does not import it)."""

    @property
    def model(self) -> str | None: ...
    @property
    def device(self) -> Device: ...
    @property
    def compute_type(self) -> str: ...
    @property
    def cpu_threads(self) -> int: ...
    @property
    def language(self) -> str | None: ...
    @property
    def partial_beam_size(self) -> int: ...
    @property
    def final_beam_size(self) -> int: ...
    @property
    def encoder_margin_s(self) -> float | None: ...


def load_decoder(options: DecoderOptions, model: str | None = None) -> WhisperDecoder:
    """The model (``options.model``, or ``model``: the finals model) through the same machinery as file
    transcription: catalog, device choice, compute types."""
    from app.core.engine.transcribe import Transcriber, TranscriptionOptions

    transcriber = Transcriber(
        TranscriptionOptions(
            model=model or options.model,
            device=options.device,
            compute_type=options.compute_type,
            cpu_threads=options.cpu_threads,
            language=options.language,
        )
    )
    # Dictation calls the model per window with its own settings, so it takes the loaded model itself.
    return WhisperDecoder(
        transcriber.whisper_model,
        language=options.language,
        partial_beam_size=options.partial_beam_size,
        final_beam_size=options.final_beam_size,
        encoder_margin_s=options.encoder_margin_s,
    )


def load_warm_decoder(options: DecoderOptions, model: str | None = None) -> WhisperDecoder:
    """:func:`load_decoder`, then one decode of silence: the first decode of a fresh model costs several times a
    normal one (CTranslate2 allocates its buffers), so it is spent here, not on the first partial."""
    decoder = load_decoder(options, model)
    decoder.decode(np.zeros(SAMPLE_RATE, dtype=np.float32), final=True, prompt=None)
    return decoder


# --------------------------------------------------------------------------------------------------------------
# Voice activity


class StreamingVad:
    """Silero VAD (the ONNX model faster-whisper ships) fed block by block, with the same hysteresis as
    faster-whisper's ``get_speech_timestamps``: speech starts at a window with probability ``threshold`` and
    ends after ``min_silence_s`` of windows below ``threshold - 0.15``.

    The model is an LSTM over 512-sample windows; carrying its state (h, c) and the 64-sample context from one
    call to the next gives exactly the probabilities of one call over the whole audio.
    """

    WINDOW = 512
    CONTEXT = 64

    def __init__(self, threshold: float = 0.5, min_silence_s: float = 0.5, session: Any = None) -> None:
        if session is None:
            from faster_whisper.vad import get_vad_model

            session = get_vad_model().session
        self._session = session
        self.threshold = threshold
        self.neg_threshold = max(threshold - 0.15, 0.01)
        self.min_silence = int(min_silence_s * SAMPLE_RATE)
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._context = np.zeros(self.CONTEXT, dtype=np.float32)
        self._leftover = np.zeros(0, dtype=np.float32)
        self.position = 0  # samples classified so far
        self.open_start: int | None = None  # sample where the current speech began
        self._silence_start: int | None = None  # first silent window inside the current speech
        self.completed: deque[tuple[int, int]] = deque()  # (start, end) samples of finished speech
        # (start, end) of the last pauses inside open speech that speech ended again (shorter than min_silence)
        self.pauses: deque[tuple[int, int]] = deque(maxlen=8)

    def probabilities(self, samples: np.ndarray) -> np.ndarray:
        """Speech probability of each complete 512-sample window, continuing from the previous call."""
        data = np.concatenate([self._leftover, samples]) if self._leftover.size else samples
        count = len(data) // self.WINDOW
        self._leftover = data[count * self.WINDOW :].copy()
        if count == 0:
            return np.zeros(0, dtype=np.float32)
        windows = data[: count * self.WINDOW].reshape(count, self.WINDOW)
        contexts = np.concatenate([self._context[None, :], windows[:-1, -self.CONTEXT :]], axis=0)
        batch = np.ascontiguousarray(np.concatenate([contexts, windows], axis=1), dtype=np.float32)
        probs, self._h, self._c = self._session.run(None, {"input": batch, "h": self._h, "c": self._c})
        self._context = windows[-1, -self.CONTEXT :].copy()
        return np.asarray(probs, dtype=np.float32).reshape(-1)

    def feed(self, samples: np.ndarray) -> None:
        for probability in self.probabilities(samples):
            start = self.position
            self.position += self.WINDOW
            if self.open_start is None:
                if probability >= self.threshold:
                    self.open_start = start
                    self._silence_start = None
                continue
            if probability >= self.threshold:
                if self._silence_start is not None:
                    self.pauses.append((self._silence_start, start))
                self._silence_start = None
            elif probability < self.neg_threshold and self._silence_start is None:
                self._silence_start = start
            if self._silence_start is not None and self.position - self._silence_start >= self.min_silence:
                self.completed.append((self.open_start, self._silence_start))
                self.open_start = self._silence_start = None

    @property
    def speech_end(self) -> int:
        """Where the open speech ends so far: the start of its trailing silence, or the last window."""
        return self._silence_start if self._silence_start is not None else self.position

    @property
    def trailing_silence(self) -> int:
        return self.position - self._silence_start if self._silence_start is not None else 0

    def close(self, total: int) -> None:
        """The audio ended at sample ``total``: open speech ends there (stopping mid-word keeps the word)."""
        if self.open_start is not None:
            end = self._silence_start if self._silence_start is not None else total
            self.completed.append((self.open_start, max(end, self.open_start)))
            self.open_start = self._silence_start = None


# --------------------------------------------------------------------------------------------------------------
# LocalAgreement


def _norm(word: Word) -> str:
    """A word as compared between hypotheses: case and punctuation do not make two words different."""
    return re.sub(r"[^\w']+", "", word.word.lower())


def join_words(words: Sequence[Word]) -> str:
    return "".join(word.word for word in words).strip()


def common_prefix(previous: Sequence[Word], current: Sequence[Word]) -> int:
    """How many leading words two hypotheses share (LocalAgreement-2's commit rule)."""
    count = 0
    for old, new in zip(previous, current, strict=False):
        if _norm(old) != _norm(new):
            break
        count += 1
    return count


SENTENCE_ENDS = (".", "?", "!", "。", "？", "！", "…")


def ends_sentence(words: Sequence[Word]) -> bool:
    """The model ended these words with a sentence's closing punctuation."""
    return bool(words) and words[-1].word.rstrip().rstrip("\"')»”").endswith(SENTENCE_ENDS)


def strip_committed(hypothesis: Sequence[Word], committed: Sequence[Word]) -> list[Word]:
    """The words of ``hypothesis`` that are not already in ``committed``.

    A window is decoded from its start every time, so a new hypothesis usually repeats the committed words
    first; otherwise (the model changed an early word) the words that start before the last committed word
    ended are dropped, then any repetition of the committed tail (1 to 5 words), as whisper_streaming does.
    """
    if not committed:
        return list(hypothesis)
    keys = [_norm(word) for word in committed]
    if [_norm(word) for word in hypothesis[: len(keys)]] == keys:
        return list(hypothesis[len(keys) :])
    boundary = committed[-1].end - 0.1
    rest = [word for word in hypothesis if word.start > boundary]
    for size in range(min(5, len(keys), len(rest)), 0, -1):
        if keys[-size:] == [_norm(word) for word in rest[:size]]:
            return rest[size:]
    return rest


def strip_context(hypothesis: Sequence[Word], context: Sequence[Word]) -> list[Word]:
    """The words of ``hypothesis`` after those that repeat ``context`` (earlier final words whose audio was
    decoded again, before the window, as context).

    Matched by the letters, not by the times: Whisper's timestamps drift by a word or more, so a cut by time
    drops a new phrase's first word or keeps the context's last; and a re-decode may split or join words
    ("feedback" / "feed back"). The cut is the word boundary, within a second of the context's end, whose
    prefix is closest to the context in letter edits; among equally close ones, the nearest in time."""
    if not hypothesis:
        return []
    target = "".join(_norm(word) for word in context)
    letters = [_norm(word) for word in hypothesis]
    text = "".join(letters)
    # row[j]: edit distance between the context's letters and the hypothesis's first j letters.
    row = list(range(len(text) + 1))
    for letter in target:
        previous = row
        row = [previous[0] + 1]
        for index, other in enumerate(text):
            row.append(min(previous[index] + (letter != other), previous[index + 1] + 1, row[index] + 1))
    boundaries = [0]
    for word in letters:
        boundaries.append(boundaries[-1] + len(word))
    end = context[-1].end

    def time_of(cut: int) -> float:
        return hypothesis[cut - 1].end if cut else hypothesis[0].start

    cuts = [cut for cut in range(len(hypothesis) + 1) if abs(time_of(cut) - end) <= 1.0] or list(
        range(len(hypothesis) + 1)
    )
    best = min(cuts, key=lambda cut: (row[boundaries[cut]], abs(time_of(cut) - end)))
    return list(hypothesis[best:])
