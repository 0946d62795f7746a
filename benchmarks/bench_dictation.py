"""Dictation benchmark: espeak-ng speech with pauses replayed in real time through the streaming engine.

    .venv/bin/python benchmarks/bench_dictation.py [--minutes 10] [--threads N] [--set final_beam_size=5 ...]

    .venv/bin/python benchmarks/bench_dictation.py --conversation   # three voices, 0.6 s between turns, 90 s

Prints tables, asserts nothing. Without --minutes it replays twelve sentences (about 60 s); with it, at least
that many minutes, and compares the first minute with the last. ``--conversation`` replays what dictation meets
in a conversation rather than separated sentences: three voices taking turns with the ordinary 0.6 s pause.
``--set`` changes a DictationOptions field (the
value is JSON). Per sentence, what was said, made final and transcribed offline is written next to the audio in
benchmarks/out (``*.result.json``). Measured per sentence (its true start and end
are known from how the file was built):
- end-of-utterance latency: from the end of the sentence to the moment its last word became final;
- first partial: from the start of the sentence to the first text shown for it (partial or final);
and for the whole replay: WER of the final text and of an offline transcript of the same file (Scriba's
Transcriber, beam 5, whole file), CPU use (process CPU time / wall time) and the worst queue lag.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.bench_engine import table  # noqa: E402 (needs ROOT on the path)

OUT = ROOT / "benchmarks" / "out"
PAUSES = (1.0, 1.5, 2.0, 1.2)  # silence after each sentence, cycled
TARGETS = {"median_eou": 1.0, "p90_eou": 2.0, "first_partial": 1.5, "wer_delta": 0.05}
# A conversation: three voices, the ordinary 0.6 s between turns, about 90 s (issue 15's targets).
CONVERSATION_PAUSES = (0.6,)
CONVERSATION_TARGETS = {"median_eou": 1.0, "p90_eou": 1.6, "first_partial": 1.0, "wer_delta": 0.04}


@dataclass(frozen=True)
class Sentence:
    start: float
    end: float
    text: str


def make_speech(minutes: float | None, conversation: bool = False) -> tuple[Path, list[Sentence]]:
    """Sentences in four voices with PAUSES between them (a conversation: three voices, 0.6 s, 90 s), cached in
    benchmarks/out with their true times."""
    import numpy as np

    from tests import synth

    OUT.mkdir(parents=True, exist_ok=True)
    label = "conversation" if conversation else f"{minutes:g}min" if minutes else "12sent"
    pauses = CONVERSATION_PAUSES if conversation else PAUSES
    voices = synth.VOICES[:3] if conversation else synth.VOICES
    minutes = 1.5 if conversation else minutes
    wav, times = OUT / f"dictation_{label}.wav", OUT / f"dictation_{label}.json"
    if wav.exists() and times.exists():
        return wav, [Sentence(**row) for row in json.loads(times.read_text())]
    rate = synth.SAMPLE_RATE
    spoken = {}  # espeak is deterministic: each (sentence, voice) is synthesized once
    pieces, sentences, clock, index = [np.zeros(rate // 2, dtype=np.float32)], [], 0.5, 0
    while (minutes and clock < minutes * 60) or (not minutes and index < len(synth.SENTENCES)):
        text = synth.SENTENCES[index % len(synth.SENTENCES)]
        voice = (
            voices[(index * 3 + index // len(synth.SENTENCES)) % len(voices)]
            if not conversation
            else (
                voices[index % len(voices)]  # turns: each sentence answered by the next voice
            )
        )
        if (text, voice) not in spoken:
            spoken[(text, voice)] = synth.speak(text, *voice) * 0.8
        samples = spoken[(text, voice)]
        pause = pauses[index % len(pauses)]
        sentences.append(Sentence(clock, clock + len(samples) / rate, text))
        pieces += [samples, np.zeros(int(pause * rate), dtype=np.float32)]
        clock += len(samples) / rate + pause
        index += 1
    synth.write_wav(wav, np.concatenate(pieces))
    times.write_text(json.dumps([s.__dict__ for s in sentences]))
    return wav, sentences


def offline_transcript(path: Path, threads: int) -> tuple[list[Any], float]:
    from app.core.engine.audio import decode_audio
    from app.core.engine.transcribe import Transcriber, TranscriptionOptions

    transcriber = Transcriber(
        TranscriptionOptions(model="tiny.en", device="cpu", language="en", cpu_threads=threads, batch_size=0)
    )
    audio = decode_audio(path)
    started = time.perf_counter()
    result = transcriber.transcribe(audio)
    return list(result.segments), time.perf_counter() - started


def replay(path: Path, threads: int, overrides: dict[str, Any]) -> dict[str, Any]:
    from app.core.dictation.live import Dictation
    from app.core.dictation.sources import FileSource
    from app.core.dictation.stream import DictationEvent, DictationOptions

    events: list[DictationEvent] = []
    options = DictationOptions(model="tiny.en", device="cpu", cpu_threads=threads, **overrides)
    dictation = Dictation(options, FileSource(path, realtime=True), events.append)
    dictation.load()  # model load and warm-up are not part of the replay's figures
    cpu, wall = time.process_time(), time.perf_counter()
    text = dictation.run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"events": events, "text": text, "cpu": cpu, "wall": wall, "stats": dictation.stats}


def per_sentence(sentences: list[Sentence], events: list[Any]) -> list[tuple[Sentence, float, float]]:
    """(sentence, end-of-utterance latency, first-text delay) for each sentence that got final text."""
    rows = []
    for sentence in sentences:
        near = [e for e in events if e.text and e.end > sentence.start - 0.3 and e.start < sentence.end + 0.3]
        finals = [e for e in near if e.type == "final"]
        shown = [e for e in near if e.type in ("partial", "final")]
        if finals:
            rows.append(
                (
                    sentence,
                    max(e.emitted_at for e in finals) - sentence.end,
                    min(e.emitted_at for e in shown) - sentence.start,
                )
            )
    return rows


def save_texts(path: Path, sentences: list[Sentence], segments: list[Any], rows: list[Any], events: list[Any]) -> None:
    """Per sentence: what was said, what dictation made final, what the offline transcript says (for reading)."""

    def words_in(sentence: Sentence, words: list[tuple[float, float, str]]) -> str:
        return "".join(w for start, end, w in words if start < sentence.end + 0.3 and end > sentence.start - 0.3)

    finals = [(w.start, w.end, w.word) for e in events if e.type == "final" for w in e.words]
    offline = [(w.start, w.end, w.word) for segment in segments for w in segment.words]
    latency = {id(row[0]): row[1] for row in rows}
    report = [
        {
            "said": s.text,
            "dictation": words_in(s, finals).strip(),
            "offline": words_in(s, offline).strip(),
            "latency": latency.get(id(s)),
        }
        for s in sentences
    ]
    path.with_suffix(".result.json").write_text(json.dumps(report, indent=1))


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=0.0, help="replay at least this long (default: 12 sentences)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE", help="a DictationOptions field")
    parser.add_argument("--conversation", action="store_true", help="three voices, 0.6 s between turns, 90 s")
    args = parser.parse_args()
    targets = CONVERSATION_TARGETS if args.conversation else TARGETS
    overrides = {name: json.loads(value) for name, value in (item.split("=", 1) for item in args.set)}

    from app.core.engine.audio import decode_audio
    from tests import metrics

    path, sentences = make_speech(args.minutes or None, args.conversation)
    reference = " ".join(s.text for s in sentences)
    segments, offline_s = offline_transcript(path, args.threads)
    offline = " ".join(segment.text for segment in segments)
    run = replay(path, args.threads, overrides)
    rows = per_sentence(sentences, run["events"])
    eou = [row[1] for row in rows]
    first = [row[2] for row in rows]
    stats = run["stats"]
    wer_dictation, wer_offline = metrics.wer(reference, run["text"]), metrics.wer(reference, offline)
    cores = run["cpu"] / run["wall"]
    save_texts(path, sentences, segments, rows, run["events"])

    duration = len(decode_audio(path).samples) / 16000
    print(f"# Scriba dictation benchmark, {time.strftime('%Y-%m-%d %H:%M')}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, threads={args.threads}, "
        f"load average at the end {load:.2f}; model: bundled tiny.en, int8, CPU; audio: {duration:.0f} s, "
        f"{len(sentences)} espeak-ng sentences, pauses "
        f"{'/'.join(f'{p:g}' for p in (CONVERSATION_PAUSES if args.conversation else PAUSES))} s"
    )
    print(f"options changed from the defaults: {overrides or 'none'}\n")
    ok = {
        "median_eou": statistics.median(eou) <= targets["median_eou"],
        "p90_eou": p90(eou) <= targets["p90_eou"],
        "first_partial": statistics.median(first) <= targets["first_partial"],
        "wer_delta": wer_dictation - wer_offline <= targets["wer_delta"],
    }
    verdict = {key: "met" if value else "MISSED" for key, value in ok.items()}
    print(
        table(
            ["measure", "value", "target", ""],
            [
                [
                    "end of utterance -> final, median",
                    f"{statistics.median(eou):.2f} s",
                    f"<= {targets['median_eou']:g} s",
                    verdict["median_eou"],
                ],
                [
                    "end of utterance -> final, p90",
                    f"{p90(eou):.2f} s",
                    f"<= {targets['p90_eou']:g} s",
                    verdict["p90_eou"],
                ],
                ["end of utterance -> final, max", f"{max(eou):.2f} s", "", ""],
                [
                    "speech onset -> first partial, median",
                    f"{statistics.median(first):.2f} s",
                    f"<= {targets['first_partial']:g} s",
                    verdict["first_partial"],
                ],
                ["speech onset -> first partial, p90", f"{p90(first):.2f} s", "", ""],
                ["sentences with final text", f"{len(rows)}/{len(sentences)}", "all", ""],
                ["WER dictation (vs the text spoken)", f"{wer_dictation:.3f}", "", ""],
                [
                    "WER offline Transcriber, beam 5 (vs the text spoken)",
                    f"{wer_offline:.3f}",
                    "",
                    "",
                ],
                [
                    "WER dictation - WER offline",
                    f"{100 * (wer_dictation - wer_offline):+.1f} points",
                    f"<= +{100 * targets['wer_delta']:g} points",
                    verdict["wer_delta"],
                ],
                ["WER dictation vs the offline transcript", f"{metrics.wer(offline, run['text']):.3f}", "", ""],
                [
                    "CPU use (process CPU time / wall)",
                    f"{cores:.2f} cores ({100 * cores / (os.cpu_count() or 1):.0f}% of the machine)",
                    "",
                    "",
                ],
                [
                    "decodes: partial / final, mean s",
                    f"{stats.partial_decodes} / {stats.final_decodes}, "
                    f"{stats.decode_seconds / max(1, stats.decodes):.2f} s",
                    "",
                    "",
                ],
                ["worst audio waiting in the queue", f"{stats.max_lag_s:.2f} s", "", ""],
                ["offline transcription of the file (for scale)", f"{offline_s:.1f} s", "", ""],
            ],
        )
    )
    statuses = [e.text for e in run["events"] if e.type == "status"]
    if statuses:
        print(f"\nstatus events ({len(statuses)}): " + "; ".join(statuses[:6]) + (" …" if len(statuses) > 6 else ""))

    if args.minutes:
        duration = sentences[-1].end
        windows = {"first minute": (0.0, 60.0), "last minute": (duration - 60.0, duration + 1.0)}
        lines = []
        for label, (low, high) in windows.items():
            inside = [row for row in rows if low <= row[0].end < high]
            lags = [lag for clock, lag in stats.lags if low <= clock < high]
            if not inside:
                continue
            latencies = [row[1] for row in inside]
            lines.append(
                [
                    label,
                    str(len(inside)),
                    f"{statistics.median(latencies):.2f}",
                    f"{p90(latencies):.2f}",
                    f"{statistics.median(row[2] for row in inside):.2f}",
                    f"{max(lags):.2f}" if lags else "-",
                ]
            )
        print("\n## Growth over the replay\n")
        print(table(["part", "sentences", "EOU median s", "EOU p90 s", "first partial median s", "max lag s"], lines))


if __name__ == "__main__":
    main()
