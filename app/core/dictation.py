"""Live dictation: speech in, partial and final text out, while the person speaks.

The audio comes from a source given as a parameter (:class:`MicrophoneSource` through PortAudio, or
:class:`FileSource`/:class:`ArraySource` replayed at real speed for tests and benchmarks). The source pushes
16 kHz mono float32 chunks into a thread-safe queue; one worker thread drains the queue, finds speech with
Silero VAD (run incrementally, about 2 ms of CPU per second of audio) and decodes with faster-whisper:

- while someone speaks, the utterance so far is decoded every ``step_s`` seconds of audio and shown as a
  *partial*; words that two consecutive hypotheses agree on (LocalAgreement-2, as in whisper_streaming) are
  committed as *final* right away when the model is confident of them;
- when the VAD has heard ``end_silence_s`` of silence, the utterance is decoded once more and everything in
  it becomes final. That closing decode starts speculatively after ``close_after_s`` of silence, so it is
  usually done by the time the silence is confirmed;
- the decode window is one utterance, capped at ``max_window_s`` (longer speech is committed up to a word
  boundary and the window restarts there), so one step costs a bounded time whatever the session length;
- each iteration of the worker takes in *all* the queued audio, then decodes the open utterance at most once,
  so a slow machine skips partials (the step interval grows, a "status" event says so) instead of building a
  backlog; utterances that ended meanwhile are decoded together;
- :meth:`Dictation.stop` flushes: the audio received so far is decoded and every word becomes final.

Events carry times on the audio clock: seconds of audio received since :meth:`Dictation.start`. For a real-time
source, ``emitted_at - end`` of a final is its latency.

faster_whisper (and through it ctranslate2 and onnxruntime) is imported only when a model or the VAD is
loaded, and sounddevice only when a microphone is opened or the devices are listed, so importing this module
is cheap and file replays work without PortAudio.
"""

from __future__ import annotations

import contextlib
import logging
import math
import queue
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from app.core.audio import SAMPLE_RATE, decode_audio
from app.core.errors import ScribaError
from app.core.transcript import Word

if TYPE_CHECKING:
    from app.core.transcribe import Device

log = logging.getLogger(__name__)

EventType = Literal["partial", "final", "status"]
EventCallback = Callable[["DictationEvent"], None]

SILENCE_DBFS = -100.0  # what the level meter shows for digital silence (log10 of 0 is -inf)


class AudioInputError(ScribaError):
    """The microphone cannot be opened: no sounddevice/PortAudio, an unknown device, or a refused format."""


# --------------------------------------------------------------------------------------------------------------
# Options and events


@dataclass(frozen=True)
class DictationOptions:
    model: str | None = "tiny.en"  # catalog name or CTranslate2 directory, as for file transcription
    language: str | None = None  # None: "en" for English-only models, else detected once and then kept
    device: Device = "cpu"
    compute_type: str = "auto"
    cpu_threads: int = 0  # 0 = every core
    step_s: float = 0.6  # audio between two partial decodes while someone speaks
    max_step_s: float = 3.0  # the longest the step grows to on a machine that cannot keep up
    first_partial_after_s: float = 0.4  # speech heard before the first partial of an utterance is decoded
    end_silence_s: float = 0.5  # silence that ends an utterance (then everything in it becomes final)
    close_after_s: float = 0.2  # silence after which the closing decode starts, before the end is certain
    max_window_s: float = 15.0  # audio decoded at once at most; longer speech is committed in pieces
    tail_guard_s: float = 1.0  # when a window is cut, words ending this close to the cut stay uncommitted
    speech_pad_s: float = 0.25  # audio kept before and after the VAD's speech, which clips word edges
    min_speech_s: float = 0.15  # shorter blips (a click, a cough) are not decoded
    vad_threshold: float = 0.5
    partial_beam_size: int = 1  # partials are replaced a moment later: the cheapest search is enough
    final_beam_size: int = 2
    # A word two hypotheses agree on is committed only when the model is this sure of it; the rest waits for
    # the end of the utterance. Early partials decode a fraction of a second of audio and agree on a wrong
    # first word ("So" for "Sure") often enough to matter: in one run of real-time replays of three espeak-ng
    # files, 0.5 took the WER from 0.166 to 0.153 (offline: 0.141); the latency did not change.
    agreement_min_probability: float = 0.5
    # Final text before the window given to Whisper as its initial prompt (0 = none). Off by default: with
    # tiny.en and one temperature, a prompt made it invent text after the speech ("Thank you.", loops of
    # "see you in the next video") on 4 of 12 test sentences, and raised the WER from 0.21 to 1.6 at beam 2.
    prompt_chars: int = 0
    behind_lag_s: float = 3.0  # audio waiting in the queue beyond which partials pause until it drains
    keep_audio: bool = True  # keep everything received, for :meth:`Dictation.recording`

    def __post_init__(self) -> None:
        if self.step_s <= 0 or self.max_step_s < self.step_s:
            raise ValueError("step_s must be positive and at most max_step_s")
        if self.close_after_s >= self.end_silence_s:
            raise ValueError("close_after_s must be shorter than end_silence_s")
        if self.max_window_s <= 2 * self.tail_guard_s:
            raise ValueError("max_window_s must be more than twice tail_guard_s")


@dataclass(frozen=True)
class DictationEvent:
    """A partial (replaces the previous partial), a final (appended; clears the partial) or a status line.

    ``start``/``end`` bound the words on the audio clock (a status carries ``emitted_at`` in both);
    ``emitted_at`` is the audio clock when the event was produced.
    """

    type: EventType
    text: str
    start: float
    end: float
    emitted_at: float
    words: tuple[Word, ...] = ()

    def to_json(self) -> dict[str, str | float]:
        return {
            "type": self.type,
            "text": self.text,
            "start": round(self.start, 3),
            "end": round(self.end, 3),
            "emitted_at": round(self.emitted_at, 3),
        }


@dataclass
class DictationStats:
    """What the worker did; read by tests and the benchmark (and a GUI's diagnostics)."""

    partial_decodes: int = 0
    final_decodes: int = 0  # closing, end-of-utterance, window-cut and flush decodes
    decode_seconds: float = 0.0  # wall time spent in the decoder
    max_decode_s: float = 0.0
    max_lag_s: float = 0.0
    # (audio clock, seconds of audio that waited in the queue) at the start of each worker iteration
    lags: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=100_000))

    @property
    def decodes(self) -> int:
        return self.partial_decodes + self.final_decodes


# --------------------------------------------------------------------------------------------------------------
# Sources


class AudioSink(Protocol):
    """Where a source delivers audio. ``write`` must be cheap: a microphone calls it from PortAudio's thread."""

    def write(self, samples: np.ndarray) -> None:
        """16 kHz mono float32 samples in [-1, 1], in order."""

    def end(self) -> None:
        """The source has no more audio (end of a file); :meth:`Dictation.run` returns after the flush."""

    def warn(self, message: str) -> None:
        """Something the person should know (input overflow); becomes a "status" event."""


class AudioSource(Protocol):
    def start(self, sink: AudioSink) -> None: ...

    def stop(self) -> None:
        """Stop delivering; after it returns, ``sink.write`` is not called again."""


class ArraySource:
    """Samples replayed as a microphone would deliver them: ``chunk_s`` blocks at real speed (or ``speed``
    times faster), or everything at once with ``realtime=False``."""

    def __init__(
        self, samples: np.ndarray, *, realtime: bool = True, speed: float = 1.0, chunk_s: float = 0.05
    ) -> None:
        if speed <= 0 or chunk_s <= 0:
            raise ValueError("speed and chunk_s must be positive")
        self.samples = np.ascontiguousarray(samples, dtype=np.float32).reshape(-1)
        self.realtime = realtime
        self.speed = speed
        self.chunk = max(1, int(chunk_s * SAMPLE_RATE))
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def duration(self) -> float:
        return len(self.samples) / SAMPLE_RATE

    def start(self, sink: AudioSink) -> None:
        self._thread = threading.Thread(target=self._feed, args=(sink,), name="dictation-replay", daemon=True)
        self._thread.start()

    def _feed(self, sink: AudioSink) -> None:
        started = time.monotonic()
        for offset in range(0, len(self.samples), self.chunk):
            block = self.samples[offset : offset + self.chunk]
            if self.realtime:
                # A block is delivered once its last sample "has been spoken", as from a sound card; the
                # schedule is absolute, so sleeping late once does not shift the rest of the replay.
                due = started + (offset + len(block)) / SAMPLE_RATE / self.speed
                if self._stopping.wait(max(0.0, due - time.monotonic())):
                    return
            elif self._stopping.is_set():
                return
            sink.write(block)
        sink.end()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class FileSource(ArraySource):
    """An audio or video file, decoded to 16 kHz mono, replayed like a microphone (see :class:`ArraySource`)."""

    def __init__(self, path: Path | str, *, realtime: bool = True, speed: float = 1.0, chunk_s: float = 0.05) -> None:
        self.path = Path(path)
        super().__init__(decode_audio(self.path).samples, realtime=realtime, speed=speed, chunk_s=chunk_s)


def _import_sounddevice() -> Any:
    try:
        import sounddevice
    except ImportError as error:
        raise AudioInputError(
            "Dictation from a microphone needs the Python package 'sounddevice' (`pip install sounddevice`)."
        ) from error
    except OSError as error:  # sounddevice raises OSError when the PortAudio library itself is missing
        raise AudioInputError(
            f"PortAudio could not be loaded ({error}). Install it: `apt install libportaudio2` on Debian/Ubuntu, "
            "`brew install portaudio` on macOS."
        ) from error
    return sounddevice


def list_input_devices(sounddevice: Any = None) -> list[dict[str, Any]]:
    """Every device that can record: index, name, channels, default samplerate, is_default, hostapi."""
    sd = sounddevice if sounddevice is not None else _import_sounddevice()
    try:
        default_input = int(sd.default.device[0])
    except (TypeError, ValueError, IndexError):
        default_input = -1
    hostapis = sd.query_hostapis()
    devices = []
    for index, info in enumerate(sd.query_devices()):
        if int(info["max_input_channels"]) <= 0:
            continue
        devices.append(
            {
                "index": index,
                "name": str(info["name"]),
                "channels": int(info["max_input_channels"]),
                "default_samplerate": float(info["default_samplerate"]),
                "is_default": index == default_input,
                "hostapi": str(hostapis[int(info["hostapi"])]["name"]),
            }
        )
    return devices


class _Resampler:
    """Streaming rate conversion to 16 kHz through FFmpeg's swresample (PyAV is already a dependency).

    It keeps its filter state between blocks, so block edges do not click as block-wise resampling would.
    """

    def __init__(self, rate: int) -> None:
        import av

        self._av = av
        self.rate = rate
        self._resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)

    def __call__(self, samples: np.ndarray | None) -> np.ndarray:
        """Resample one block; ``None`` flushes the samples still held in the filter."""
        frame = None
        if samples is not None:
            frame = self._av.AudioFrame.from_ndarray(
                np.ascontiguousarray(samples, dtype=np.float32).reshape(1, -1), format="flt", layout="mono"
            )
            frame.sample_rate = self.rate
            frame.pts = None
        pieces = [out.to_ndarray().reshape(-1) for out in self._resampler.resample(frame)]
        return np.concatenate(pieces).astype(np.float32, copy=False) if pieces else np.zeros(0, np.float32)


class MicrophoneSource:
    """A PortAudio input through sounddevice, mono float32, resampled to 16 kHz when the device cannot record
    at 16 kHz itself. ``sounddevice`` can be given (a stand-in in tests); by default it is imported at start."""

    def __init__(self, device: int | str | None = None, *, block_s: float = 0.05, sounddevice: Any = None) -> None:
        self.device = device
        self.block_s = block_s
        self.samplerate = 0  # what the device records at, known after start()
        self._sd = sounddevice
        self._stream: Any = None
        self._resampler: _Resampler | None = None
        self._sink: AudioSink | None = None
        self._lock = threading.Lock()  # stop() and PortAudio's callback thread both touch the resampler

    def _pick_format(self, sd: Any) -> tuple[int, int]:
        """(samplerate, channels): 16 kHz mono when the device records it, else what it offers by default."""
        info = sd.query_devices(self.device, "input")
        rates = (SAMPLE_RATE, int(info["default_samplerate"]))
        # Some hardware devices (ALSA hw:) refuse mono; their first two channels are then mixed down.
        channel_counts = (1, max(1, min(2, int(info["max_input_channels"]))))
        for channels in dict.fromkeys(channel_counts):
            for rate in dict.fromkeys(rates):
                try:
                    sd.check_input_settings(device=self.device, channels=channels, dtype="float32", samplerate=rate)
                except Exception:  # PortAudio says no in several exception types (PortAudioError, ValueError)
                    continue
                return rate, channels
        raise AudioInputError(f"input device {self.device!r} records neither mono nor stereo float32 audio")

    def start(self, sink: AudioSink) -> None:
        sd = self._sd if self._sd is not None else _import_sounddevice()
        try:
            self.samplerate, channels = self._pick_format(sd)
        except AudioInputError:
            raise
        except Exception as error:  # an unknown device name or index
            raise AudioInputError(f"input device {self.device!r} cannot be used: {error}") from error
        self._resampler = _Resampler(self.samplerate) if self.samplerate != SAMPLE_RATE else None
        self._sink = sink

        def callback(indata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
            if status:
                sink.warn(f"audio input: {status}")
            # A new array either way: PortAudio reuses its buffer after the callback returns.
            mono = indata.mean(axis=1, dtype=np.float32) if channels > 1 else np.array(indata[:, 0], np.float32)
            with self._lock:
                if self._resampler is not None:
                    mono = self._resampler(mono)
            if mono.size:
                sink.write(mono)

        try:
            self._stream = sd.InputStream(
                device=self.device,
                channels=channels,
                samplerate=self.samplerate,
                dtype="float32",
                blocksize=max(1, int(self.samplerate * self.block_s)),
                callback=callback,
            )
            self._stream.start()
        except Exception as error:
            self._stream = None
            raise AudioInputError(f"could not open input device {self.device!r}: {error}") from error

    def stop(self) -> None:
        stream, self._stream = self._stream, None
        if stream is None:
            return
        stream.stop()  # returns after the last callback has run
        stream.close()
        with self._lock:
            if self._resampler is not None and self._sink is not None:
                tail = self._resampler(None)
                if tail.size:
                    self._sink.write(tail)


# --------------------------------------------------------------------------------------------------------------
# Decoding


class Decoder(Protocol):
    """Turns a window of 16 kHz audio into words with times relative to the window's first sample."""

    def decode(self, samples: np.ndarray, *, final: bool, prompt: str | None) -> list[Word]: ...


class WhisperDecoder:
    """A faster-whisper model with dictation's settings: temperature 0 only (fallback re-decodes would make a
    step's cost unpredictable), no conditioning on earlier windows, word timestamps, no VAD of its own."""

    def __init__(
        self, model: Any, *, language: str | None, partial_beam_size: int = 1, final_beam_size: int = 2
    ) -> None:
        self.model = model
        # An English-only model needs no detection; a multilingual one detects once, then keeps the language
        # so that partials of one session do not switch language on a short or unclear window.
        self.language = language or (None if getattr(model, "is_multilingual", True) else "en")
        self.partial_beam_size = partial_beam_size
        self.final_beam_size = final_beam_size

    # Speech is at most about 5 tokens a second; a window's token budget stops a repetition loop (which a
    # temperature fallback would otherwise have to catch) from costing seconds of decoding.
    TOKENS_PER_SECOND = 8
    TOKENS_EXTRA = 16

    def decode(self, samples: np.ndarray, *, final: bool, prompt: str | None) -> list[Word]:
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
            max_new_tokens=min(200, int(seconds * self.TOKENS_PER_SECOND) + self.TOKENS_EXTRA),
        )
        words = [
            Word(start=float(w.start), end=float(w.end), word=str(w.word), probability=float(w.probability))
            for segment in segments
            for w in segment.words or ()
        ]
        if self.language is None and float(info.language_probability) >= 0.5:
            self.language = str(info.language)
        return words


def load_decoder(options: DictationOptions) -> WhisperDecoder:
    """The model through the same machinery as file transcription: catalog, device choice, compute types."""
    from app.core.transcribe import Transcriber, TranscriptionOptions

    transcriber = Transcriber(
        TranscriptionOptions(
            model=options.model,
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
    )


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


# --------------------------------------------------------------------------------------------------------------
# The engine


class _Rolling:
    """Audio addressed by absolute sample index, with the part before a point dropped when no longer needed."""

    def __init__(self) -> None:
        self._data = np.zeros(SAMPLE_RATE * 32, dtype=np.float32)
        self._offset = 0  # index in _data of the first kept sample
        self._length = 0
        self.start = 0  # absolute index of the first kept sample

    @property
    def end(self) -> int:
        return self.start + self._length

    def append(self, samples: np.ndarray) -> None:
        needed = self._offset + self._length + len(samples)
        if needed > len(self._data):
            kept = self._data[self._offset : self._offset + self._length]
            size = max(len(self._data), 2 * (self._length + len(samples)))
            self._data = np.zeros(size, dtype=np.float32) if size > len(self._data) else self._data
            self._data[: self._length] = kept  # numpy copes with the overlap when the array is reused
            self._offset = 0
        self._data[self._offset + self._length : self._offset + self._length + len(samples)] = samples
        self._length += len(samples)

    def slice(self, start: int, end: int) -> np.ndarray:
        start, end = max(start, self.start), min(end, self.end)
        return self._data[self._offset + start - self.start : self._offset + end - self.start].copy()

    def trim(self, before: int) -> None:
        drop = min(max(0, before - self.start), self._length)
        self._offset += drop
        self._length -= drop
        self.start += drop


@dataclass
class _Utterance:
    """The worker's state for the speech being decoded now."""

    speech_start: int  # sample where the VAD heard it begin
    window_start: int  # first sample of the decode window (moves forward when a long window is cut)
    committed: list[Word] = field(default_factory=list)  # final words inside the current window
    pending: list[Word] = field(default_factory=list)  # the last hypothesis's words not yet final
    last_decoded_to: int | None = None  # window end of the last decode
    closing: tuple[int, int, list[Word]] | None = None  # (speech end, window end, words) of the closing decode


_END = object()  # queued after the last audio: the worker flushes and exits


class Dictation:
    """A dictation session: ``start()``, then events arrive on ``on_event`` (called on the worker thread),
    then ``stop()`` flushes and returns once every word is final. ``run()`` does all three for a source that
    ends by itself (a file). One session per object."""

    def __init__(
        self,
        options: DictationOptions,
        source: AudioSource,
        on_event: EventCallback | None = None,
        *,
        decoder: Decoder | None = None,
        vad: StreamingVad | None = None,
    ) -> None:
        self.options = options
        self.source = source
        self.on_event = on_event
        self.decoder = decoder
        self.stats = DictationStats()
        self._vad = vad
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._received = 0  # samples delivered by the source: the audio clock
        self._processed = 0  # samples the worker has taken from the queue
        self._level = SILENCE_DBFS
        self._recording: list[np.ndarray] = []
        self._recording_lock = threading.Lock()
        self._source_ended = threading.Event()
        self._worker: threading.Thread | None = None
        self._error: BaseException | None = None
        self._stopped = False
        # worker-thread state
        self._buffer = _Rolling()
        self._utterance: _Utterance | None = None
        self._final_words: list[Word] = []
        self._last_window_end = 0  # no window may reach back before the end of the previous one
        self._partial_text = ""
        self._interval = options.step_s
        self._decode_average: float | None = None
        self._slow = False
        self._partials_paused = False

    # ---- public state

    @property
    def clock(self) -> float:
        """Seconds of audio received since start()."""
        return self._received / SAMPLE_RATE

    @property
    def processed(self) -> float:
        """Seconds of audio the worker has taken in (the rest waits in the queue)."""
        return self._processed / SAMPLE_RATE

    @property
    def level_dbfs(self) -> float:
        """RMS level of the latest block from the source, in dBFS (for a level meter)."""
        return self._level

    @property
    def text(self) -> str:
        """All final text so far."""
        return join_words(self._final_words)

    @property
    def final_words(self) -> list[Word]:
        return list(self._final_words)

    def recording(self) -> np.ndarray:
        """Everything received so far, 16 kHz mono float32 (empty when ``keep_audio`` is off)."""
        with self._recording_lock:
            return np.concatenate(self._recording) if self._recording else np.zeros(0, dtype=np.float32)

    # ---- life cycle

    def load(self) -> None:
        """Load the model and the VAD (seconds for a large model): call it early to start without a wait."""
        if self.decoder is None:
            self.decoder = load_decoder(self.options)
            # The first decode of a fresh model costs several times a normal one (CTranslate2 allocates its
            # buffers): spend it here, not on the first partial.
            self.decoder.decode(np.zeros(SAMPLE_RATE, dtype=np.float32), final=True, prompt=None)
        if self._vad is None:
            self._vad = StreamingVad(self.options.vad_threshold, self.options.end_silence_s)

    def start(self) -> None:
        if self._worker is not None or self._stopped:
            raise RuntimeError("a Dictation runs once; make a new one for a new session")
        self.load()
        self._worker = threading.Thread(target=self._work, name="dictation", daemon=True)
        self._worker.start()
        try:
            self.source.start(_Sink(self))
        except BaseException:
            self._queue.put(_END)
            self._worker.join()
            self._stopped = True
            raise

    def stop(self) -> None:
        """Stop the source, decode what is left, emit every remaining final; re-raise a worker failure."""
        if self._stopped:
            return
        if threading.current_thread() is self._worker:
            raise RuntimeError("stop() waits for the worker thread: call it from another thread, not on_event")
        self._stopped = True
        try:
            self.source.stop()
        finally:
            if self._worker is not None:
                self._queue.put(_END)
                self._worker.join()
        if self._error is not None:
            raise self._error

    def run(self) -> str:
        """For a source that ends by itself: start, wait for its end, flush. Returns the final text."""
        self.start()
        try:
            while not self._source_ended.wait(0.1):
                worker = self._worker
                if worker is None or not worker.is_alive():
                    break  # the worker failed: stop() re-raises its error
        finally:
            self.stop()
        return self.text

    def __enter__(self) -> Dictation:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- source side (source thread or PortAudio callback)

    def _write(self, samples: np.ndarray) -> None:
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        if samples.size == 0:
            return
        rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
        self._level = max(SILENCE_DBFS, 20 * math.log10(rms)) if rms > 0 else SILENCE_DBFS
        if self.options.keep_audio:
            with self._recording_lock:
                self._recording.append(samples)
        # The clock first, the queue after: the worker can then never have taken in audio the clock has not
        # counted, so an event's emitted_at is never before the end of the words it carries.
        self._received += len(samples)
        self._queue.put(samples)

    # ---- worker thread

    def _emit(self, kind: EventType, text: str, start: float, end: float, words: Sequence[Word] = ()) -> None:
        if self.on_event is not None:
            self.on_event(DictationEvent(kind, text, start, end, self.clock, tuple(words)))

    def _status(self, message: str) -> None:
        log.info("dictation: %s", message)
        now = self.clock
        self._emit("status", message, now, now)

    def _work(self) -> None:
        try:
            finished = False
            while not finished:
                items = [self._queue.get()]
                lag = (self._received - self._processed) / SAMPLE_RATE
                while True:
                    try:
                        items.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                self._note_lag(lag)
                for item in items:
                    if item is _END:
                        finished = True
                    elif isinstance(item, str):
                        self._status(item)
                    elif isinstance(item, np.ndarray):
                        self._take(item)
                self._advance(flushing=finished)
        except BaseException as error:  # handed to stop(); the thread must not die silently
            log.exception("dictation worker failed")
            self._error = error
            with contextlib.suppress(Exception):  # on_event itself may be what failed
                self._status(f"error: {error}")

    def _take(self, samples: np.ndarray) -> None:
        assert self._vad is not None
        self._buffer.append(samples)
        self._vad.feed(samples)
        self._processed += len(samples)

    def _note_lag(self, lag: float) -> None:
        self.stats.lags.append((self.clock, lag))
        self.stats.max_lag_s = max(self.stats.max_lag_s, lag)
        limit = self.options.behind_lag_s
        if lag > limit and not self._partials_paused:
            self._partials_paused = True
            self._status(f"falling behind: {lag:.1f} s of audio waiting; partials paused")
        elif self._partials_paused and lag < limit / 2:
            self._partials_paused = False
            self._status(f"caught up: {lag:.1f} s of audio waiting; partials resumed")

    def _advance(self, flushing: bool) -> None:
        vad = self._vad
        assert vad is not None
        if flushing:
            vad.close(self._processed)
        reach = int((self.options.max_window_s - 2 * self.options.speech_pad_s) * SAMPLE_RATE)
        while vad.completed:
            start, end = vad.completed.popleft()
            # Catching up (several utterances ended while the worker was busy, or a file is replayed faster
            # than real time): one decode for as many of them as fit in a window.
            while vad.completed and vad.completed[0][1] - start <= reach:
                end = vad.completed.popleft()[1]
            self._finish_utterance(start, end)
        if vad.open_start is not None:
            self._progress_open(vad)
        self._trim()

    def _new_utterance(self, speech_start: int) -> _Utterance:
        pad = int(self.options.speech_pad_s * SAMPLE_RATE)
        return _Utterance(speech_start, max(speech_start - pad, self._buffer.start, self._last_window_end))

    def _finish_utterance(self, start: int, end: int) -> None:
        """The VAD heard the end of an utterance (or the audio ended): make all of it final."""
        utterance = self._utterance
        self._utterance = None
        if utterance is None or utterance.speech_start != start:
            utterance = self._new_utterance(start)
        if end - start < self.options.min_speech_s * SAMPLE_RATE and not utterance.committed:
            self._set_partial([])
            return
        window_end = min(end + int(self.options.speech_pad_s * SAMPLE_RATE), self._processed)
        closing = utterance.closing
        if closing is not None and closing[0] == end:
            # The closing decode already saw all of this speech and the silence after it: no new decode.
            self._commit(utterance, strip_committed(closing[2], utterance.committed))
            window_end = max(window_end, closing[1])
        else:
            self._decode_to_end(utterance, window_end)
        self._set_partial([])
        self._last_window_end = window_end

    def _decode_to_end(self, utterance: _Utterance, window_end: int) -> None:
        """Decode [window_start, window_end) in windows of at most max_window_s and commit every word."""
        limit = int(self.options.max_window_s * SAMPLE_RATE)
        while window_end - utterance.window_start > limit:
            self._cut_window(utterance, utterance.window_start + limit)
        words = self._decode(utterance.window_start, window_end, final=True)
        self._commit(utterance, strip_committed(words, utterance.committed))

    def _cut_window(self, utterance: _Utterance, cut: int) -> None:
        """Commit the words well before ``cut`` and restart the window after the last of them."""
        words = strip_committed(self._decode(utterance.window_start, cut, final=True), utterance.committed)
        guard = cut / SAMPLE_RATE - self.options.tail_guard_s
        keep = [word for word in words if word.end <= guard]
        self._commit(utterance, keep)
        restart = int(keep[-1].end * SAMPLE_RATE) if keep else int(guard * SAMPLE_RATE)
        # Always move forward, even when the model put a word's end before the window start.
        utterance.window_start = max(restart, utterance.window_start + SAMPLE_RATE)
        # The new window may begin with the tail of the last committed word again: keep the last few committed
        # words so that strip_committed drops such a repetition.
        utterance.committed = utterance.committed[-5:]
        utterance.pending = [word for word in words if word.start * SAMPLE_RATE >= utterance.window_start]
        utterance.closing = None
        utterance.last_decoded_to = cut

    def _progress_open(self, vad: StreamingVad) -> None:
        """Speech is going on (or has paused for less than end_silence_s): partials, cuts, the closing decode."""
        assert vad.open_start is not None
        utterance = self._utterance
        if utterance is None or utterance.speech_start != vad.open_start:
            utterance = self._utterance = self._new_utterance(vad.open_start)
        now = self._processed
        options = self.options
        limit = int(options.max_window_s * SAMPLE_RATE)
        if now - utterance.window_start > limit:
            self._cut_window(utterance, utterance.window_start + limit)
            self._set_partial(utterance.pending)
            return
        silence = vad.trailing_silence
        if silence >= options.close_after_s * SAMPLE_RATE:
            speech_end = vad.speech_end
            if utterance.closing is None or utterance.closing[0] != speech_end:
                # The speaker has paused: decode now with the final settings. If the pause turns out to end
                # the utterance, this result is committed without another decode (lower latency).
                words = self._decode(utterance.window_start, now, final=True)
                utterance.closing = (speech_end, now, words)
                self._agree(utterance, words, now)
            return
        if self._partials_paused or silence > 0:
            # In a pause that may end the utterance, a partial would only delay the closing decode.
            return
        if utterance.last_decoded_to is None:
            due = now - vad.open_start >= options.first_partial_after_s * SAMPLE_RATE
        else:
            due = now - utterance.last_decoded_to >= self._interval * SAMPLE_RATE
        if due:
            words = self._decode(utterance.window_start, now, final=False)
            self._agree(utterance, words, now)

    def _agree(self, utterance: _Utterance, words: list[Word], decoded_to: int) -> None:
        """LocalAgreement-2: commit what this hypothesis shares with the previous one (up to the first word
        the model is unsure of), show the rest as the partial."""
        utterance.last_decoded_to = decoded_to
        fresh = strip_committed(words, utterance.committed)
        agreed = common_prefix(utterance.pending, fresh)
        for index in range(agreed):
            if fresh[index].probability < self.options.agreement_min_probability:
                agreed = index
                break
        self._commit(utterance, fresh[:agreed])
        utterance.pending = fresh[agreed:]
        self._set_partial(utterance.pending)

    def _commit(self, utterance: _Utterance, words: Sequence[Word]) -> None:
        if not words:
            return
        utterance.committed.extend(words)
        self._final_words.extend(words)
        self._partial_text = ""  # a final clears the partial on the consumer's side
        self._emit("final", join_words(words), words[0].start, words[-1].end, words)

    def _set_partial(self, words: Sequence[Word]) -> None:
        text = join_words(words)
        if text == self._partial_text:
            return
        self._partial_text = text
        if words:
            self._emit("partial", text, words[0].start, words[-1].end, words)
        else:
            # Nothing is pending any more but a partial is on screen (the model dropped it): clear it.
            now = self._processed / SAMPLE_RATE
            self._emit("partial", "", now, now)

    def _prompt(self, before: float) -> str | None:
        """The final text before the window, as Whisper's initial prompt (context for names and style)."""
        chars = self.options.prompt_chars
        if chars <= 0:
            return None
        words = [word for word in self._final_words[-60:] if word.end <= before]
        text = join_words(words)[-chars:]
        return text or None

    def _decode(self, start: int, end: int, *, final: bool) -> list[Word]:
        """Decode [start, end) and return its words on the absolute clock, clamped to the window."""
        assert self.decoder is not None
        samples = self._buffer.slice(start, end)
        start = max(start, self._buffer.start)
        offset, limit = start / SAMPLE_RATE, (start + len(samples)) / SAMPLE_RATE
        began = time.perf_counter()
        words = self.decoder.decode(samples, final=final, prompt=self._prompt(offset))
        spent = time.perf_counter() - began
        stats = self.stats
        stats.decode_seconds += spent
        stats.max_decode_s = max(stats.max_decode_s, spent)
        if final:
            stats.final_decodes += 1
        else:
            stats.partial_decodes += 1
        self._pace(spent)
        placed = []
        for word in words:
            word_start = min(max(offset, offset + word.start), limit)
            word_end = min(max(word_start, offset + word.end), limit)
            placed.append(Word(word_start, word_end, word.word, word.probability))
        return placed

    def _pace(self, spent: float) -> None:
        """Real time allows a decode per step: when decodes take longer, decode partials less often."""
        average = spent if self._decode_average is None else 0.5 * self._decode_average + 0.5 * spent
        self._decode_average = average
        step = self.options.step_s
        if average > step:
            self._interval = min(self.options.max_step_s, max(step, 1.5 * average))
            if not self._slow:
                self._slow = True
                self._status(
                    f"falling behind: step {spent:.2f} s > {step:.2f} s; partials every {self._interval:.1f} s"
                )
        elif self._slow and average < 0.8 * step:
            self._slow = False
            self._interval = step
            self._status(f"keeping up again: step {spent:.2f} s")

    def _trim(self) -> None:
        """Drop audio no window can need: before the open utterance, or older than the pre-roll."""
        if self._utterance is not None:
            keep_from = self._utterance.window_start
        else:
            # The VAD hears speech a little after it begins: keep enough for the next utterance's padding.
            keep_from = self._processed - int((self.options.speech_pad_s + 0.5) * SAMPLE_RATE)
        self._buffer.trim(min(keep_from, self._processed))


class _Sink:
    """What a source sees of a Dictation (keeps the source from reaching into the engine)."""

    def __init__(self, dictation: Dictation) -> None:
        self._dictation = dictation

    def write(self, samples: np.ndarray) -> None:
        self._dictation._write(samples)

    def end(self) -> None:
        self._dictation._source_ended.set()

    def warn(self, message: str) -> None:
        self._dictation._queue.put(message)
