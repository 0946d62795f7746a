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
  boundary and the window restarts there), so one step costs a bounded time however long the dictation runs;
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
import threading

import numpy as np

from app.core.dictation.decoding import Decoder, StreamingVad, load_warm_decoder
from app.core.dictation.sources import AudioSource
from app.core.dictation.stream import (
    DictationEvent,
    DictationOptions,
    DictationStats,
    DictationStream,
    EventCallback,
    SpeechCallback,
)
from app.core.engine.audio import SAMPLE_RATE
from app.core.transcript.document import Word

log = logging.getLogger(__name__)

SILENCE_DBFS = -100.0  # what the level meter shows for digital silence (log10 of 0 is -inf)

_END = object()  # queued after the last audio: the worker flushes and exits


class Dictation:
    """One live dictation: ``start()``, then events arrive on ``on_event`` (called on the worker thread),
    then ``stop()`` flushes and returns once every word is final. ``run()`` does all three for a source that
    ends by itself (a file). It runs once, and owns the source, the queue between the
    source's thread and the worker, and the worker thread; the worker drives a :class:`DictationStream`."""

    def __init__(
        self,
        options: DictationOptions,
        source: AudioSource,
        on_event: EventCallback | None = None,
        *,
        decoder: Decoder | None = None,
        vad: StreamingVad | None = None,
        final_decoder: Decoder | None = None,
        on_speech: SpeechCallback | None = None,
    ) -> None:
        self.options = options
        self.source = source
        self.on_event = on_event
        self.on_speech = on_speech  # True when the VAD hears speech begin, False once its finals are out
        self.decoder = decoder
        self.final_decoder = final_decoder  # options.final_model's (loaded by load() when not given)
        self.stats = DictationStats()
        self._vad = vad
        self._stream: DictationStream | None = None
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._received = 0  # samples delivered by the source: the audio clock
        self._level = SILENCE_DBFS
        self._recording: list[np.ndarray] = []
        self._recording_lock = threading.Lock()
        self._source_ended = threading.Event()
        self._worker: threading.Thread | None = None
        self._error: BaseException | None = None
        self._stopped = False

    # ---- public state

    @property
    def clock(self) -> float:
        """Seconds of audio received since start()."""
        return self._received / SAMPLE_RATE

    @property
    def processed(self) -> float:
        """Seconds of audio the worker has taken in (the rest waits in the queue)."""
        return self._stream.processed_samples / SAMPLE_RATE if self._stream is not None else 0.0

    @property
    def level_dbfs(self) -> float:
        """RMS level of the latest block from the source, in dBFS (for a level meter)."""
        return self._level

    @property
    def text(self) -> str:
        """All final text so far."""
        return self._stream.text if self._stream is not None else ""

    @property
    def final_words(self) -> list[Word]:
        return self._stream.final_words if self._stream is not None else []

    @property
    def source_ended(self) -> bool:
        """The source has no more audio (the end of a file); a microphone never ends by itself."""
        return self._source_ended.is_set()

    @property
    def failed(self) -> bool:
        """The worker stopped before stop() was asked for (a decode failed): stop() re-raises its error."""
        worker = self._worker
        return worker is not None and not worker.is_alive() and not self._stopped

    def recording(self) -> np.ndarray:
        """Everything received so far, 16 kHz mono float32 (empty when ``keep_audio`` is off)."""
        with self._recording_lock:
            return np.concatenate(self._recording) if self._recording else np.zeros(0, dtype=np.float32)

    # ---- life cycle

    def load(self) -> None:
        """Load the model and the VAD (seconds for a large model): call it early to start without a wait."""
        if self.decoder is None:
            decoder = load_warm_decoder(self.options)
            decoder.set_vocabulary(self.options.vocabulary)
            self.decoder = decoder
        wanted = self.options.final_model
        if self.final_decoder is None and wanted and wanted != self.options.model:
            final_decoder = load_warm_decoder(self.options, wanted)
            final_decoder.set_vocabulary(self.options.vocabulary)
            self.final_decoder = final_decoder
        if self._vad is None:
            self._vad = StreamingVad(self.options.vad_threshold, self.options.end_silence_s)
        if self._stream is None:
            self._stream = DictationStream(
                self.options,
                self.decoder,
                self._vad,
                self._deliver,
                clock=lambda: self.clock,
                stats=self.stats,
                final_decoder=self.final_decoder,
                on_speech=self.on_speech,
            )

    def start(self) -> None:
        if self._worker is not None or self._stopped:
            raise RuntimeError("a Dictation runs once; make a new one to dictate again")
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
                if self.failed:
                    break  # stop() re-raises the worker's error
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

    def _deliver(self, event: DictationEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def _work(self) -> None:
        stream = self._stream
        assert stream is not None
        try:
            finished = False
            while not finished:
                items = [self._queue.get()]
                lag = (self._received - stream.processed_samples) / SAMPLE_RATE
                while True:
                    try:
                        items.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                stream.note_lag(lag)
                # Everything that waited is taken in before one step: a slow machine skips partials instead of
                # building a backlog.
                for item in items:
                    if item is _END:
                        finished = True
                    elif isinstance(item, str):
                        stream.status(item)
                    elif isinstance(item, np.ndarray):
                        stream.take(item)
                if finished:
                    stream.flush()
                else:
                    stream.step()
        except BaseException as error:  # handed to stop(); the thread must not die silently
            log.exception("dictation worker failed")
            self._error = error
            with contextlib.suppress(Exception):  # on_event itself may be what failed
                stream.status(f"error: {error}")


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
