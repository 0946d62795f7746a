"""Long recordings: time, peak memory and DER for 10 minutes, 1 hour and 3 hours. Prints tables, asserts nothing.

    .venv/bin/python benchmarks/bench_long.py [--minutes 10,60,180] [--threads N] [--material group|all]

Material (benchmarks/long_material.py): rounds of real speech (AMI meeting openings, four readings, pyannote's
phone call) and a four-voice espeak-ng meeting, each round shuffled, repeated up to the length, so every speaker
comes back an hour and more later. ``group`` (default) takes the AMI meetings whose participants recur (15
speakers in all); ``all`` takes the nine (32 speakers, more than the diarizer's cap of 20).

Each length runs Scriba's whole pipeline (decode, transcribe with tiny.en on the CPU, the built-in diarizer,
merge) in its own process, so the peak RSS is that file's alone. DER is strict (collar 0, overlap scored)
against the corpora's own labels; a second DER column labels each reading's reader per recording (the two mfa
readings are one person in two rooms, a link the short files never ask for: see ``by_recording``). "Short
files" diarizes every recording of one round on its own: the figure a long file should stay near.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "0")

from benchmarks import long_material  # noqa: E402
from benchmarks.bench_engine import peak_rss_mb, sample_dir, table  # noqa: E402
from benchmarks.long_material import AMI, GROUP_AMI, SAMPLE_RATE, Piece, build, round_pieces  # noqa: E402
from tests import metrics  # noqa: E402


def pieces_for(material: str) -> list[Piece]:
    folder = metrics.real_speech_dir()
    if folder is None:
        raise SystemExit(f"bench_long: no real-speech recordings ({metrics.REAL_SPEECH_HINT})")
    return round_pieces(folder, sample_dir(), meetings=GROUP_AMI if material == "group" else AMI)


def make_file(pieces: list[Piece], minutes: float, folder: Path) -> tuple[Path, Path, Path]:
    """Rounds up to ``minutes`` (the last one cut there), written as WAV and two RTTMs: as labelled, and with each
    reading's reader a voice of that recording only (see ``by_recording``)."""
    round_s = sum(piece.duration for piece in pieces)
    rounds = math.ceil(minutes * 60 / round_s)
    samples, turns, _ = build(pieces, rounds)
    length = int(minutes * 60 * SAMPLE_RATE)
    samples = samples[:length]
    end = length / SAMPLE_RATE
    name = f"long_{minutes:g}min"

    def written(turns: list[tuple[float, float, str]], suffix: str) -> Path:
        kept = [(start, min(stop, end), speaker) for start, stop, speaker in turns if start < end]
        return long_material.write_rttm(folder / f"{name}{suffix}.rttm", kept, name)

    # The same seed gives the same order: only the labels differ.
    _, separate, _ = build(by_recording(pieces), rounds)
    return long_material.write_wav(folder / f"{name}.wav", samples), written(turns, ""), written(separate, "-own")


def by_recording(pieces: list[Piece]) -> list[Piece]:
    """The pieces with each reader labelled per recording. Both mfa readings are one person, but recorded in
    another room and with a cold: telling that they are the same voice is recognising a known speaker across
    recordings (issue 11), which the short files never ask; within one long recording the room and the voice
    stay the same. This reference shows what the length alone costs."""
    return [
        Piece(
            piece.name,
            piece.samples,
            tuple(
                (start, stop, f"{speaker}@{piece.name}" if speaker.startswith("reader_") else speaker)
                for start, stop, speaker in piece.turns
            ),
        )
        for piece in pieces
    ]


def child(wav: Path, rttm: Path, own_rttm: Path, threads: int) -> None:
    """One file through the whole pipeline; prints one JSON line."""
    from app.core.engine.pipeline import Engine, PipelineOptions
    from app.core.engine.transcribe import TranscriptionOptions

    options = PipelineOptions(
        transcription=TranscriptionOptions(
            model="tiny.en",
            device="cpu",
            compute_type="int8",
            batch_size=0,
            # Every core: the engine splits them between the transcription and the diarization beside it.
            cpu_threads=0 if threads >= (os.cpu_count() or 1) else threads,
            language="en",
        ),
        identify=False,
    )
    progress: list[tuple[float, float]] = []
    started = time.perf_counter()
    transcript = Engine().run(wav, options, progress=lambda p: progress.append((time.perf_counter(), p.fraction)))
    wall = time.perf_counter() - started
    peak_mb = peak_rss_mb()
    turns = [(t.start, t.end, t.speaker) for t in transcript.diarization.turns] if transcript.diarization else []
    der = metrics.der(metrics.rttm_annotation(rttm), metrics.turns_annotation(turns))
    own_der = metrics.der(metrics.rttm_annotation(own_rttm), metrics.turns_annotation(turns))
    print(
        json.dumps(
            {
                "duration": transcript.duration,
                "wall": wall,
                "timings": transcript.timings,
                "peak_mb": peak_mb,
                "der": der,
                "own_der": own_der,
                "speakers": len({turn[2] for turn in turns}),
                "true_speakers": len(metrics.rttm_annotation(rttm).labels()),
                "eta_error": _eta_error(progress, started, wall),
            }
        )
    )


def _eta_error(progress: list[tuple[float, float]], started: float, wall: float) -> float:
    """Largest error of a linear ETA (elapsed / fraction) made after 10 % of the job, as a share of the wall time:
    how honest the progress bar's ETA is over the job."""
    worst = 0.0
    for moment, fraction in progress:
        elapsed = moment - started
        if fraction >= 0.1 and elapsed > 0:
            predicted_total = elapsed / fraction
            worst = max(worst, abs(predicted_total - wall) / wall)
    return worst


def short_files_der(pieces: list[Piece], threads: int) -> float:
    """Every recording of one round diarized on its own; DER over all of them (time-weighted)."""
    from app.core.engine.audio import Audio
    from app.core.engine.diarize.base import SpeakerHints
    from app.core.engine.diarize.embedded import EmbeddedDiarizer

    diarizer = EmbeddedDiarizer(threads=threads)
    metric = metrics.der_metric(strict=True)
    for piece in pieces:
        turns = diarizer.diarize(Audio(piece.samples, SAMPLE_RATE, Path(piece.name)), SpeakerHints())
        metric(
            metrics.turns_annotation(piece.turns),
            metrics.turns_annotation((t.start, t.end, t.speaker) for t in turns),
        )
    return abs(metric)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", default="10,60,180")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--material", choices=("group", "all"), default="group")
    parser.add_argument("--child", nargs=3, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.child[2], args.threads)
        return

    pieces = pieces_for(args.material)
    round_min = sum(piece.duration for piece in pieces) / 60
    speakers = len({turn[2] for piece in pieces for turn in piece.turns})
    print(f"# Long recordings ({platform.machine()}, {os.cpu_count()} cores, {args.threads} threads, tiny.en int8)")
    print(f"material '{args.material}': rounds of {round_min:.1f} min, {len(pieces)} recordings, {speakers} speakers\n")
    short = short_files_der(pieces, args.threads)
    rows: list[list[str]] = []
    results: dict[float, dict] = {}  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as tmp:
        for minutes in (float(m) for m in args.minutes.split(",")):
            wav, rttm, own_rttm = make_file(pieces, minutes, Path(tmp))
            run = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--threads",
                    str(args.threads),
                    "--child",
                    str(wav),
                    str(rttm),
                    str(own_rttm),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if run.returncode != 0:
                print(f"{minutes:g} min failed:\n{run.stderr[-2000:]}")
                continue
            result = json.loads(run.stdout.strip().splitlines()[-1])
            results[minutes] = result
            timings = result["timings"]
            rows.append(
                [
                    f"{minutes:g} min",
                    f"{result['wall']:.0f}",
                    f"{timings.get('transcribe', 0):.0f}",
                    f"{timings.get('diarize', 0):.0f}",
                    f"{result['peak_mb']:.0f}",
                    f"{result['der']:.3f}",
                    f"{result['own_der']:.3f}",
                    f"{result['speakers']} / {result['true_speakers']}",
                    f"{result['eta_error'] * 100:.0f} %",
                ]
            )
            wav.unlink()
    headers = [
        "length",
        "wall s",
        "transcribe s",
        "diarize s",
        "peak RSS MB",
        "DER",
        "DER, readers per recording",
        "speakers found / true",
        "ETA error",
    ]
    print(table(headers, rows))
    print(f"\nShort files (each recording of a round on its own): DER {short:.3f}")
    if 60.0 in results and 180.0 in results:
        hour, three = results[60.0], results[180.0]
        print(
            f"3 h / 1 h: time x{three['wall'] / hour['wall']:.2f} (diarization "
            f"x{three['timings']['diarize'] / hour['timings']['diarize']:.2f}), "
            f"peak memory x{three['peak_mb'] / hour['peak_mb']:.2f}"
        )


if __name__ == "__main__":
    main()
