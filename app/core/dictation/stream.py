"""The dictation algorithm, synchronous and without threads: audio goes in (:meth:`DictationStream.take`,
:meth:`~DictationStream.feed`), partial and final text comes out as events, returned by each call and handed to
``on_event`` the moment each is made. :class:`app.core.dictation.live.Dictation` runs one on a worker thread
fed by a live source; a test or a script can drive one directly. The design is described in live.py."""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from app.core.dictation.decoding import (
    Decoder,
    StreamingVad,
    common_prefix,
    ends_sentence,
    join_words,
    strip_committed,
    strip_context,
)
from app.core.engine.audio import SAMPLE_RATE
from app.core.engine.level import RunningGain
from app.core.transcript.document import Word

if TYPE_CHECKING:
    from app.core.dictation.vocabulary import Replacement
    from app.core.engine.transcribe import Device

log = logging.getLogger(__name__)

EventType = Literal["partial", "final", "status"]
EventCallback = Callable[["DictationEvent"], None]
SpeechCallback = Callable[[bool], None]  # True: speech began; False: the utterance ended, its finals are out
WHISPER_WINDOW_S = 29.0  # Whisper hears 30 s at once; a decode's context and window stay within it


@dataclass(frozen=True)
class DictationOptions:
    model: str | None = "tiny.en"  # catalog name or CTranslate2 directory, as for file transcription
    # A bigger model for the final decodes only (partials stay with ``model``): finals are few (one or two an
    # utterance) and their words are the ones that stay. None: ``model`` decodes everything. When its final
    # decodes take longer than ``final_model_max_s`` (on average, from the second on), this machine cannot
    # keep up with it: finals go back to ``model`` for the rest of the session, and the stream says so.
    final_model: str | None = None
    final_model_max_s: float = 1.0
    language: str | None = None  # None: "en" for English-only models, else detected once and then kept
    device: Device = "cpu"
    compute_type: str = "auto"
    cpu_threads: int = 0  # 0 = every core
    step_s: float = 0.6  # audio between two partial decodes while someone speaks
    max_step_s: float = 3.0  # the longest the step grows to on a machine that cannot keep up
    first_partial_after_s: float = 0.4  # speech heard before the first partial of an utterance is decoded
    end_silence_s: float = 0.5  # silence that ends an utterance (then everything in it becomes final)
    # A shorter pause after words the closing decode ended with ".", "?" or "!" makes them final too: people
    # pause briefly between sentences and expect each typed then (docs/benchmarks.md, Dictation). 0: off.
    sentence_end_s: float = 0.3
    # Silence after which the closing decode starts, before the end is certain: it is usually done by the
    # time the end is; a pause that does not end the utterance costs one decode more.
    close_after_s: float = 0.1
    # Audio decoded at once at most; longer speech is committed in pieces. It also bounds how long a word the
    # model is unsure of (never made final by agreement) holds back the words after it, in speech without pauses.
    max_window_s: float = 8.0
    tail_guard_s: float = 1.0  # when a window is cut, words ending this close to the cut stay uncommitted
    speech_pad_s: float = 0.25  # audio kept before and after the VAD's speech, which clips word edges
    min_speech_s: float = 0.15  # shorter blips (a click, a cough) are not decoded
    vad_threshold: float = 0.5
    partial_beam_size: int = 1  # partials are replaced a moment later: the cheapest search is enough
    # Beam 5 for finals, like file transcription: the final decode's words are the ones that stay.
    final_beam_size: int = 5
    # A partial decode's encoder hears the window and at least this much silence after it (in 5 s steps, up to
    # 30 s), not always the 30 s Whisper was trained on: a partial costs about half as much and its words are
    # the same. A final's first pass hears 30 s; a tail it decodes again hears the tail and this margin (at
    # least 15 s). None: every pass hears 30 s.
    encoder_margin_s: float | None = 5.0
    # A word two hypotheses agree on is committed only when the model is this sure of it: early partials
    # hear a fraction of a second and can agree on a wrong word ("So" for "Sure"); the rest waits for the
    # final decode, which hears all of the utterance.
    agreement_min_probability: float = 0.8
    # ...except a word a closing decode (final settings, at a pause that may not end the utterance) agrees on
    # with the partial before it and heard this much speech after: what follows a word is what settles it, and
    # an unsure word would otherwise hold back every word after it through pauses too short to end anything.
    closing_settles_s: float = 1.0
    # Final text before the window given to Whisper as its initial prompt (0 = none). Off: with tiny.en a
    # prompt makes it invent text after the speech ("Thank you.", loops of a phrase).
    prompt_chars: int = 0
    # A final decode starts this much earlier, in the speech that ran on into it, and drops the words it hears
    # again there (strip_context): alone, a short utterance is misheard ("Welcome out on" for "What about");
    # with the speech before it, it decodes as it would in a whole file.
    context_s: float = 8.0
    # Speech before a pause longer than this is not context: after a real pause a new thought starts, and
    # Whisper, given a long silence inside its window, tends to end its text there.
    context_gap_s: float = 1.0
    behind_lag_s: float = 3.0  # audio waiting in the queue beyond which partials pause until it drains
    keep_audio: bool = True  # keep everything received, for :meth:`Dictation.recording`
    # What finals become before they are typed (commands.py, run by the controller): spoken punctuation and
    # commands, numbers said as words written as digits, the person's replacements (heard -> typed). The
    # vocabulary is given to the decoder as hotwords. None of them changes the stream's own events.
    commands: bool = False
    numbers: bool = False
    replacements: tuple[Replacement, ...] = ()
    vocabulary: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.step_s <= 0 or self.max_step_s < self.step_s:
            raise ValueError("step_s must be positive and at most max_step_s")
        if self.close_after_s >= self.end_silence_s:
            raise ValueError("close_after_s must be shorter than end_silence_s")
        if self.sentence_end_s and not self.close_after_s <= self.sentence_end_s < self.end_silence_s:
            raise ValueError("sentence_end_s must lie between close_after_s and end_silence_s")
        if self.max_window_s <= 2 * self.tail_guard_s:
            raise ValueError("max_window_s must be more than twice tail_guard_s")


@dataclass(frozen=True)
class DictationEvent:
    """A partial (replaces the previous partial), a final (appended; clears the partial) or a status line.

    ``start``/``end`` bound the words on the audio clock (a status carries ``emitted_at`` in both);
    ``emitted_at`` is the audio clock when the event was produced. ``at_pause`` (finals): the VAD heard silence
    right after the final's last word (the utterance ended or paused there); a final of words two hypotheses
    agreed on while the person went on speaking has False. Spoken commands with ordinary meanings ("period")
    act only at such a boundary.
    """

    type: EventType
    text: str
    start: float
    end: float
    emitted_at: float
    words: tuple[Word, ...] = ()
    at_pause: bool = False

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
    sentences_to: int = -1  # the last pause looked at for a sentence's end (sentence_end_s)


class DictationStream:
    """One dictation stream. ``clock`` is the audio clock events are stamped with (seconds of audio received;
    the owner of a live source counts audio this stream has not taken in yet); without one it is the audio taken
    in. Not thread-safe: one thread calls it."""

    def __init__(
        self,
        options: DictationOptions,
        decoder: Decoder,
        vad: StreamingVad,
        on_event: EventCallback | None = None,
        clock: Callable[[], float] | None = None,
        stats: DictationStats | None = None,
        final_decoder: Decoder | None = None,
        on_speech: SpeechCallback | None = None,
    ) -> None:
        self.options = options
        self.decoder = decoder
        self._on_speech = on_speech
        self._speaking = False
        self.final_decoder = final_decoder  # options.final_model's, while it keeps up
        self._final_average: float | None = None
        self._final_count = 0
        self.stats = stats if stats is not None else DictationStats()
        self._vad = vad
        self._on_event = on_event
        self._clock = clock
        self._events: list[DictationEvent] = []
        self._processed = 0  # samples taken in
        self._buffer = _Rolling()
        # A quiet microphone is raised before the VAD and Whisper hear it, as a quiet file is (level.py): Silero
        # heard nothing of a real speaker 10 dB under an ordinary level. The saved recording stays as it came.
        self._level = RunningGain(SAMPLE_RATE)
        self._utterance: _Utterance | None = None
        self._final_words: list[Word] = []
        self._last_window_end = 0  # no window may reach back before the end of the previous one
        self._partial_text = ""
        self._interval = options.step_s
        self._decode_average: float | None = None
        self._slow = False
        self._partials_paused = False

    @property
    def clock(self) -> float:
        return self._clock() if self._clock is not None else self._processed / SAMPLE_RATE

    @property
    def processed_samples(self) -> int:
        return self._processed

    @property
    def text(self) -> str:
        """All final text so far."""
        return join_words(self._final_words)

    @property
    def final_words(self) -> list[Word]:
        return list(self._final_words)

    def feed(self, samples: np.ndarray) -> list[DictationEvent]:
        """Take in audio and decode as far as it allows; returns the events made."""
        self.take(samples)
        return self.step()

    def step(self) -> list[DictationEvent]:
        """Decode as far as the audio taken in allows (at most one partial decode of the open utterance)."""
        self._advance(flushing=False)
        return self._taken_events()

    def flush(self) -> list[DictationEvent]:
        """The audio has ended: decode what is left and make every word final."""
        self._advance(flushing=True)
        return self._taken_events()

    def _taken_events(self) -> list[DictationEvent]:
        events, self._events = self._events, []
        return events

    def _emit(
        self,
        kind: EventType,
        text: str,
        start: float,
        end: float,
        words: Sequence[Word] = (),
        *,
        at_pause: bool = False,
    ) -> None:
        event = DictationEvent(kind, text, start, end, self.clock, tuple(words), at_pause)
        self._events.append(event)
        if self._on_event is not None:
            self._on_event(event)  # at once: a final is shown before the next decode starts

    def status(self, message: str) -> list[DictationEvent]:
        """Say something to the person (a source's warning, an error); returns the event."""
        self._say(message)
        return self._taken_events()

    def _say(self, message: str) -> None:
        """A status event among the step's others (``status`` would hand them out apart from the step's)."""
        log.info("dictation: %s", message)
        now = self.clock
        self._emit("status", message, now, now)

    def take(self, samples: np.ndarray) -> None:
        """Take in audio without decoding: a caller that has several blocks waiting takes them all, then steps."""
        assert self._vad is not None
        samples = self._level.apply(samples, adapt=self._vad.open_start is None and self._utterance is None)
        self._buffer.append(samples)
        self._vad.feed(samples)
        self._processed += len(samples)

    def note_lag(self, lag: float) -> list[DictationEvent]:
        """How much audio waits for this stream (the owner's queue): beyond ``behind_lag_s`` partials pause."""
        self.stats.lags.append((self.clock, lag))
        self.stats.max_lag_s = max(self.stats.max_lag_s, lag)
        limit = self.options.behind_lag_s
        if lag > limit and not self._partials_paused:
            self._partials_paused = True
            self._say(f"falling behind: {lag:.1f} s of audio waiting; partials paused")
        elif self._partials_paused and lag < limit / 2:
            self._partials_paused = False
            self._say(f"caught up: {lag:.1f} s of audio waiting; partials resumed")
        return self._taken_events()

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
            self._speech(True)  # said between two steps, never seen open
            self._finish_utterance(start, end)
            self._speech(False)
        if vad.open_start is not None:
            self._speech(True)
            self._progress_open(vad)
        self._trim()

    def _speech(self, active: bool) -> None:
        """Speech began (the VAD opened), or an utterance ended and its finals are out: told once each."""
        if active != self._speaking:
            self._speaking = active
            if self._on_speech is not None:
                self._on_speech(active)

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
        if end <= utterance.window_start:
            pass  # the window was cut at this utterance's last pause: its words are final already
        elif closing is not None and closing[0] == end:
            # The closing decode already saw all of this speech and the silence after it: no new decode.
            self._commit(utterance, strip_committed(closing[2], utterance.committed), at_pause=True)
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
        self._commit(utterance, strip_committed(words, utterance.committed), at_pause=True)

    def _cut_window(self, utterance: _Utterance, cut: int) -> None:
        """Commit the words well before ``cut`` and restart the window after the last of them."""
        words = strip_committed(self._decode(utterance.window_start, cut, final=True), utterance.committed)
        guard = cut / SAMPLE_RATE - self.options.tail_guard_s
        keep = [word for word in words if word.end <= guard]
        self._commit(utterance, keep)
        restart = int(keep[-1].end * SAMPLE_RATE) if keep else int(guard * SAMPLE_RATE)
        self._restart_window(utterance, restart, words)
        utterance.last_decoded_to = cut

    @staticmethod
    def _restart_window(utterance: _Utterance, restart: int, heard: list[Word]) -> None:
        """Start the window at ``restart`` (or a second on); of ``heard``, the words after it stay pending."""
        # Always move forward, even when the model put a word's end before the window start.
        utterance.window_start = max(restart, utterance.window_start + SAMPLE_RATE)
        # The new window may begin with the tail of the last committed word again: keep the last few committed
        # words so that strip_committed drops such a repetition.
        utterance.committed = utterance.committed[-5:]
        utterance.pending = [word for word in heard if word.start * SAMPLE_RATE >= utterance.window_start]
        utterance.closing = None

    def _cut_at_pause(self, utterance: _Utterance) -> bool:
        """A window grown to ``max_window_s`` after a pause whose closing decode is in hand: the words before the
        pause become final and the window restarts there, without a decode of its own. False when there is no
        such pause, or so much speech came after it that the window would stay long."""
        closing = utterance.closing
        if closing is None or self._processed - closing[0] > self.options.max_window_s * SAMPLE_RATE / 2:
            return False
        speech_end, _, words = closing
        fresh = strip_committed(words, utterance.committed)
        self._commit(utterance, fresh, at_pause=True)
        restart = max(speech_end, int(fresh[-1].end * SAMPLE_RATE) if fresh else 0)
        self._restart_window(utterance, restart, utterance.pending)
        return True

    def _progress_open(self, vad: StreamingVad) -> None:
        """Speech is going on (or has paused for less than end_silence_s): partials, cuts, the closing decode."""
        assert vad.open_start is not None
        utterance = self._utterance
        if utterance is None or utterance.speech_start != vad.open_start:
            utterance = self._utterance = self._new_utterance(vad.open_start)
        now = self._processed
        options = self.options
        limit = int(options.max_window_s * SAMPLE_RATE)
        silence = vad.trailing_silence
        if now - utterance.window_start > limit:
            if self._cut_at_pause(utterance):
                self._set_partial(utterance.pending)
                return
            # A pause has just begun: its closing decode, due in a moment, lets the window be cut there
            # without a decode of its own (and is the last decode, if the pause ends the utterance).
            waiting = silence > 0 and now - utterance.window_start <= limit + options.end_silence_s * SAMPLE_RATE
            if not waiting:
                self._cut_window(utterance, utterance.window_start + limit)
                self._set_partial(utterance.pending)
                return
        self._end_sentences(utterance, vad)
        if silence >= options.close_after_s * SAMPLE_RATE:
            speech_end = vad.speech_end
            if utterance.closing is None or utterance.closing[0] != speech_end:
                # The speaker has paused: decode now with the final settings. If the pause turns out to end
                # the utterance, this result is committed without another decode (lower latency).
                words = self._decode(utterance.window_start, now, final=True)
                utterance.closing = (speech_end, now, words)
                settled = (speech_end / SAMPLE_RATE) - options.closing_settles_s
                self._agree(utterance, words, now, at_pause=True, settled_to=settled)
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

    def _end_sentences(self, utterance: _Utterance, vad: StreamingVad) -> None:
        """Words that end a sentence before a pause of ``sentence_end_s`` become final, not only once a pause
        has lasted ``end_silence_s``; also when speech went on before this step saw the pause (a decode took
        longer than the pause): then the words up to it are decoded once more, with the final settings."""
        options = self.options
        if options.sentence_end_s <= 0:
            return
        need = int(options.sentence_end_s * SAMPLE_RATE)
        pauses = [start for start, end in vad.pauses if end - start >= need]
        if vad.trailing_silence >= need:
            pauses.append(vad.speech_end)
        for start in pauses:
            if start <= max(utterance.sentences_to, utterance.window_start):
                continue
            closing = utterance.closing
            if closing is not None and closing[0] == start:
                words = closing[2]
            elif start == vad.speech_end:
                continue  # a pause still going on: its closing decode comes first
            else:
                window_end = min(start + int(options.speech_pad_s * SAMPLE_RATE), self._processed)
                words = self._decode(utterance.window_start, window_end, final=True)
            utterance.sentences_to = start
            if not ends_sentence(words):
                continue
            self._commit(utterance, strip_committed(words, utterance.committed), at_pause=True)
            utterance.pending = [word for word in utterance.pending if word.start * SAMPLE_RATE >= start]
            self._set_partial(utterance.pending)

    def _agree(
        self,
        utterance: _Utterance,
        words: list[Word],
        decoded_to: int,
        *,
        at_pause: bool = False,
        settled_to: float = -math.inf,
    ) -> None:
        """LocalAgreement-2: commit what this hypothesis shares with the previous one (up to the first word
        the model is unsure of that ends after ``settled_to``, in seconds), show the rest as the partial.
        ``at_pause``: the speaker has paused after this hypothesis's words (a closing decode)."""
        utterance.last_decoded_to = decoded_to
        fresh = strip_committed(words, utterance.committed)
        agreed = common_prefix(utterance.pending, fresh)
        for index in range(agreed):
            if fresh[index].end > settled_to and fresh[index].probability < self.options.agreement_min_probability:
                agreed = index
                break
        self._commit(utterance, fresh[:agreed], at_pause=at_pause and agreed == len(fresh))
        utterance.pending = fresh[agreed:]
        self._set_partial(utterance.pending)

    def _commit(self, utterance: _Utterance, words: Sequence[Word], *, at_pause: bool = False) -> None:
        if not words:
            return
        utterance.committed.extend(words)
        self._final_words.extend(words)
        self._partial_text = ""  # a final clears the partial on the consumer's side
        self._emit("final", join_words(words), words[0].start, words[-1].end, words, at_pause=at_pause)

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

    def _context_before(self, start: int, end: int) -> list[Word]:
        """The final words just before sample ``start`` whose audio a final decode of [start, end) hears first:
        within ``context_s``, in speech that ran on into the window (no pause over ``context_gap_s``), with
        their audio still held."""
        options = self.options
        if options.context_s <= 0:
            return []
        begin = start / SAMPLE_RATE
        held = self._buffer.start / SAMPLE_RATE
        earliest = max(begin - options.context_s, end / SAMPLE_RATE - WHISPER_WINDOW_S, held)
        context: list[Word] = []
        following = begin - options.speech_pad_s  # the window starts this much before its speech
        for word in reversed(self._final_words):
            if word.end > begin:
                continue  # a word the window itself holds (the model put its end late)
            if word.start < earliest or following - word.end > options.context_gap_s:
                break
            context.append(word)
            following = word.start
        return context[::-1]

    def _decode(self, start: int, end: int, *, final: bool) -> list[Word]:
        """Decode [start, end) and return its words on the absolute clock, clamped to the window."""
        assert self.decoder is not None
        context = self._context_before(start, end) if final else []
        decode_from = start
        if context:
            pad = int(self.options.speech_pad_s * SAMPLE_RATE)
            decode_from = max(self._buffer.start, int(context[0].start * SAMPLE_RATE) - pad)
        samples = self._buffer.slice(decode_from, end)
        decode_from = max(decode_from, self._buffer.start)
        start = max(start, self._buffer.start)
        offset, limit = start / SAMPLE_RATE, (decode_from + len(samples)) / SAMPLE_RATE
        began = time.perf_counter()
        decoder = self.final_decoder if final and self.final_decoder is not None else self.decoder
        words = decoder.decode(samples, final=final, prompt=self._prompt(offset))
        shift = decode_from / SAMPLE_RATE
        words = [Word(shift + w.start, shift + w.end, w.word, w.probability) for w in words]
        if context:
            words = strip_context(words, context)
            if not words:
                # The model ended with the context and said nothing of the new speech: decode it alone.
                samples = self._buffer.slice(start, end)
                words = decoder.decode(samples, final=final, prompt=self._prompt(offset))
                words = [Word(offset + w.start, offset + w.end, w.word, w.probability) for w in words]
        spent = time.perf_counter() - began
        if decoder is self.final_decoder and decoder is not self.decoder:
            self._check_final_model(spent)
        stats = self.stats
        stats.decode_seconds += spent
        stats.max_decode_s = max(stats.max_decode_s, spent)
        if final:
            stats.final_decodes += 1
        else:
            stats.partial_decodes += 1
            # Partials are paced by what a partial costs. A final decode (once an utterance, longer: it hears up
            # to context_s of the speech before) slowed the partials after every utterance and said "falling
            # behind" and "keeping up again" a few times a minute in a conversation; a real backlog is still
            # caught by note_lag.
            self._pace(spent)
        placed = []
        for word in words:
            word_start = min(max(offset, word.start), limit)
            word_end = min(max(word_start, word.end), limit)
            placed.append(Word(word_start, word_end, word.word, word.probability))
        return placed

    def _check_final_model(self, spent: float) -> None:
        """Give finals back to the dictation model when the finals model cannot keep up on this machine."""
        self._final_count += 1
        average = spent if self._final_average is None else 0.5 * self._final_average + 0.5 * spent
        self._final_average = average
        limit = self.options.final_model_max_s
        if self._final_count >= 2 and average > limit:
            self.final_decoder = None
            message = (
                f"the finals model ({self.options.final_model}) is too slow on this machine ({average:.1f} s a "
                f"decode, over {limit:.1f} s): finals by {self.options.model} from now on"
            )
            self._say(message)

    def _pace(self, spent: float) -> None:
        """Real time allows a decode per step: when decodes take longer, decode partials less often."""
        average = spent if self._decode_average is None else 0.5 * self._decode_average + 0.5 * spent
        self._decode_average = average
        step = self.options.step_s
        if average > step:
            self._interval = min(self.options.max_step_s, max(step, 1.5 * average))
            if not self._slow:
                self._slow = True
                self._say(f"falling behind: step {spent:.2f} s > {step:.2f} s; partials every {self._interval:.1f} s")
        elif self._slow and average < 0.8 * step:
            self._slow = False
            self._interval = step
            self._say(f"keeping up again: step {spent:.2f} s")

    def _trim(self) -> None:
        """Drop audio no window can need: before the open utterance, or older than the pre-roll."""
        if self._utterance is not None:
            keep_from = self._utterance.window_start - int(self.options.context_s * SAMPLE_RATE)
        else:
            # The VAD hears speech a little after it begins: keep enough for the next utterance's padding.
            keep_from = self._processed - int((self.options.speech_pad_s + 0.5 + self.options.context_s) * SAMPLE_RATE)
        self._buffer.trim(min(keep_from, self._processed))
