"""Engine benchmark: prints tables, asserts nothing.

    .venv/bin/python benchmarks/bench_engine.py [--minutes 10] [--threads N]

Every case runs in its own process, so its peak RSS is its own. Cases:
- transcription only, plain faster-whisper vs Scriba's engine, same model and settings (bundled tiny.en,
  int8, beam 5, VAD, word timestamps, language en), sequential and batched;
- diarization (built-in backend) time and DER, strict (collar 0, overlap scored) and forgiving (collar
  0.25 s, overlap skipped), on pyannote's sample call and on a long espeak-ng meeting;
- the whole pipeline (decode + transcribe + diarize + merge) and its speed as x real time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "0")

OUT = ROOT / "benchmarks" / "out"


def sample_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("pyannote.audio")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "sample"


def make_long_meeting(minutes: float) -> tuple[Path, Path, Path]:
    """A meeting of four espeak-ng voices, at least ``minutes`` long, with its RTTM and text."""
    from tests import synth

    OUT.mkdir(parents=True, exist_ok=True)
    wav, rttm, txt = (
        OUT / f"meeting_{minutes:g}min.wav",
        OUT / f"meeting_{minutes:g}min.rttm",
        OUT / f"meeting_{minutes:g}min.txt",
    )
    if wav.exists() and rttm.exists() and txt.exists():
        return wav, rttm, txt
    turns = int(minutes * 60 / 4.6) + 1  # an espeak sentence plus its pause lasts about 4.6 s
    samples, utterances = synth.meeting(n_speakers=4, n_turns=turns)
    while len(samples) / synth.SAMPLE_RATE < minutes * 60:
        turns += 10
        samples, utterances = synth.meeting(n_speakers=4, n_turns=turns)
    synth.write_wav(wav, samples)
    synth.write_rttm(rttm, utterances, uri=wav.stem)
    txt.write_text(" ".join(u.text for u in utterances))
    return wav, rttm, txt


def peak_rss_mb() -> float:
    """This process's own peak resident size. Not ``ru_maxrss`` on Linux: a child started by ``subprocess``
    inherits it from the parent's address space at the fork (a benchmark parent holding three hours of generated
    audio made its child's "peak" 0.7 GB too high); VmHWM belongs to the process's own memory since its exec."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # no /proc: bytes on macOS, KiB elsewhere
    return peak / (1024 * 1024 if sys.platform == "darwin" else 1024)


def case_plain(path: str, threads: int, batch: int) -> dict:
    """faster-whisper as its README shows it, on the file path (it decodes itself)."""
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    from app.core.engine.models import bundled_model_path

    started = time.perf_counter()
    model = WhisperModel(str(bundled_model_path()), device="cpu", compute_type="int8", cpu_threads=threads)
    loaded = time.perf_counter()
    runner = BatchedInferencePipeline(model=model) if batch else model
    kwargs = {"batch_size": batch} if batch else {}
    segments, info = runner.transcribe(
        path, language="en", beam_size=5, vad_filter=True, word_timestamps=True, **kwargs
    )
    text = " ".join(segment.text.strip() for segment in segments)
    done = time.perf_counter()
    return {"load": loaded - started, "run": done - loaded, "duration": info.duration, "text": text}


def case_scriba_transcribe(path: str, threads: int, batch: int) -> dict:
    from app.core.engine.audio import decode_audio
    from app.core.engine.transcribe import Transcriber, TranscriptionOptions

    started = time.perf_counter()
    transcriber = Transcriber(
        TranscriptionOptions(language="en", compute_type="int8", cpu_threads=threads, batch_size=batch)
    )
    transcriber.load()
    loaded = time.perf_counter()
    audio = decode_audio(path)
    result = transcriber.transcribe(audio)
    done = time.perf_counter()
    text = " ".join(segment.text for segment in result.segments)
    return {"load": loaded - started, "run": done - loaded, "duration": audio.duration, "text": text}


def case_diarize(path: str, threads: int, batch: int) -> dict:
    from app.core.engine.audio import decode_audio
    from app.core.engine.diarize import DiarizerOptions
    from app.core.engine.pipeline import Engine

    audio = decode_audio(path)
    engine = Engine()
    started = time.perf_counter()
    result = engine.diarize(audio, DiarizerOptions(backend="embedded"))
    done = time.perf_counter()
    turns = [(t.start, t.end, t.speaker) for t in result.turns]
    return {"run": done - started, "duration": audio.duration, "turns": turns}


def case_pipeline(path: str, threads: int, batch: int) -> dict:
    from app.core.engine.pipeline import Engine, PipelineOptions
    from app.core.engine.transcribe import TranscriptionOptions

    engine = Engine()
    started = time.perf_counter()
    transcript = engine.run(
        path,
        PipelineOptions(
            transcription=TranscriptionOptions(
                language="en",
                # Every core: the engine splits them between the transcription and the diarization beside it.
                cpu_threads=0 if threads >= (os.cpu_count() or 1) else threads,
                batch_size=batch,
            )
        ),
    )
    done = time.perf_counter()
    turns = [(t.start, t.end, t.speaker) for t in transcript.diarization.turns] if transcript.diarization else []
    return {
        "run": done - started,
        "duration": transcript.duration,
        "timings": transcript.timings,
        "text": transcript.text,
        "turns": turns,
        "speakers": len(transcript.speakers),
    }


CASES = {
    "plain": case_plain,
    "scriba": case_scriba_transcribe,
    "diarize": case_diarize,
    "pipeline": case_pipeline,
}


def run_case(name: str, path: Path, threads: int, batch: int = 0) -> dict:
    """One case in a fresh interpreter: its own model load, its own peak RSS."""
    command = [sys.executable, __file__, "--case", name, "--input", str(path), "--threads", str(threads)]
    command += ["--batch", str(batch)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        raise RuntimeError(f"case {name} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows]
    return "\n".join([line, rule, *body])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--case", choices=sorted(CASES))
    parser.add_argument("--input")
    parser.add_argument("--batch", type=int, default=0)
    args = parser.parse_args()

    if args.case:
        result = CASES[args.case](args.input, args.threads, args.batch)
        result["peak_rss_mb"] = peak_rss_mb()
        print(json.dumps(result))
        return

    from tests import metrics

    sample = sample_dir()
    long_wav, long_rttm, long_txt = make_long_meeting(args.minutes)
    files = {
        "sample.wav (30 s call)": (
            sample / "sample.wav",
            sample / "sample.rttm",
            metrics.stm_text(sample / "sample.stm"),
        ),
        f"meeting ({args.minutes:g} min, 4 voices)": (long_wav, long_rttm, long_txt.read_text()),
    }
    print(f"# Scriba engine benchmark, {time.strftime('%Y-%m-%d')}")
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, threads={args.threads}; "
        "model: bundled tiny.en, int8, beam 5, VAD on, word timestamps\n"
    )

    rows: list[list[str]] = []
    for label, (path, _, reference) in files.items():
        for batch in (0, args.batch_size):
            plain = run_case("plain", path, args.threads, batch)
            ours = run_case("scriba", path, args.threads, batch)
            mode = f"batched ({batch})" if batch else "sequential"
            rows.append(
                [
                    label,
                    mode,
                    f"{plain['run']:.1f}",
                    f"{ours['run']:.1f}",
                    f"{ours['run'] / plain['run']:.2f}",
                    f"{plain['duration'] / plain['run']:.1f}x",
                    f"{ours['duration'] / ours['run']:.1f}x",
                    f"{metrics.wer(reference, plain['text']):.3f}",
                    f"{metrics.wer(reference, ours['text']):.3f}",
                    f"{plain['peak_rss_mb']:.0f}",
                    f"{ours['peak_rss_mb']:.0f}",
                ]
            )
    print("## Transcription only: plain faster-whisper vs Scriba (wall seconds after model load)\n")
    print(
        table(
            [
                "file",
                "mode",
                "plain s",
                "scriba s",
                "ratio",
                "plain speed",
                "scriba speed",
                "plain WER",
                "scriba WER",
                "plain RSS MB",
                "scriba RSS MB",
            ],
            rows,
        )
    )

    rows = []
    for label, (path, rttm, _) in files.items():
        result = run_case("diarize", path, args.threads)
        reference = metrics.rttm_annotation(rttm)
        hypothesis = metrics.turns_annotation(result["turns"])
        rows.append(
            [
                label,
                "embedded (built-in)",
                f"{result['run']:.1f}",
                f"{result['duration'] / result['run']:.0f}x",
                str(len({t[2] for t in result["turns"]})),
                str(len(reference.labels())),
                f"{metrics.der(reference, hypothesis, strict=True):.3f}",
                f"{metrics.der(reference, hypothesis, strict=False):.3f}",
                f"{result['peak_rss_mb']:.0f}",
            ]
        )
        rows.append(
            [
                label,
                "pyannote community-1",
                "-",
                "-",
                "-",
                str(len(reference.labels())),
                "-",
                "-",
                "not run: its weights are gated on the hub, unreachable offline",
            ]
        )
    print("\n## Diarization\n")
    print(
        table(
            [
                "file",
                "backend",
                "seconds",
                "speed",
                "speakers found",
                "speakers true",
                "DER strict",
                "DER forgiving",
                "peak RSS MB",
            ],
            rows,
        )
    )

    rows = []
    for label, (path, rttm, reference_text) in files.items():
        for batch in (0, args.batch_size):
            result = run_case("pipeline", path, args.threads, batch)
            timings = result["timings"]
            reference = metrics.rttm_annotation(rttm)
            rows.append(
                [
                    label,
                    f"batched ({batch})" if batch else "sequential",
                    f"{timings['decode']:.1f}",
                    f"{timings['transcribe']:.1f}",
                    f"{timings['diarize']:.1f}",
                    f"{result['run']:.1f}",
                    f"{result['duration'] / result['run']:.1f}x",
                    f"{metrics.wer(reference_text, result['text']):.3f}",
                    f"{metrics.der(reference, metrics.turns_annotation(result['turns'])):.3f}",
                    f"{result['peak_rss_mb']:.0f}",
                ]
            )
    print("\n## Whole pipeline: decode + transcribe + diarize + merge (model load included)\n")
    print(
        table(
            [
                "file",
                "mode",
                "decode s",
                "transcribe s",
                "diarize s",
                "total s",
                "speed",
                "WER",
                "DER strict",
                "peak RSS MB",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
