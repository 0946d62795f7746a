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
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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


def dictate(samples: np.ndarray, options: Any, decoder: Any) -> tuple[str, list[Any]]:
    """The final text and the events (stamped on the audio clock: as if each decode took no time)."""
    from app.core.dictation.decoding import StreamingVad
    from app.core.dictation.stream import DictationStream

    events: list[Any] = []
    stream = DictationStream(
        options, decoder, StreamingVad(options.vad_threshold, options.end_silence_s), on_event=events.append
    )
    for first in range(0, len(samples), BLOCK):
        stream.feed(samples[first : first + BLOCK])
    stream.flush()
    return stream.text, events


def main() -> None:
    from app.core.dictation.decoding import load_decoder
    from app.core.dictation.stream import DictationOptions
    from app.core.engine.audio import decode_audio

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", default=["{}"], help="JSON objects of DictationOptions fields")
    parser.add_argument("--levels", default="1", help="comma-separated factors applied to every recording")
    args = parser.parse_args()
    variants = [json.loads(text) for text in args.variants]
    levels = [float(level) for level in args.levels.split(",")]
    files = recordings()
    offline = {}
    for name, path, reference, _ in files:
        offline[name] = metrics.word_errors(reference, offline_text(path))
    for variant, level in ((variant, level) for variant in variants for level in levels):
        options = DictationOptions(model="tiny.en", device="cpu", cpu_threads=2, **variant)
        decoder = load_decoder(options)
        rows = []
        totals = np.zeros(3)
        waits: list[float] = []
        for name, path, reference, sentences in files:
            text, events = dictate((decode_audio(path).samples * level).astype(np.float32), options, decoder)
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
    agreement), not the decodes' time."""
    if not values:
        return ["-", "-"]
    return [f"{np.median(values):.2f}", f"{p90(values):.2f}"]


if __name__ == "__main__":
    main()
