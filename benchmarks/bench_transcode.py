"""Whether sending 16 kHz mono FLAC instead of the original file saves upload time without costing accuracy.

    .venv/bin/python benchmarks/bench_transcode.py [--upload-mbps 20]

For each input (real recordings of ../shared/real-speech and pyannote's call, as they are and re-encoded the way
people's files come: 44.1 kHz stereo WAV, 128 kbit/s MP3), prints the original's size, the FLAC's, FLAC bytes
per second of audio, the seconds the transcode took here, the upload seconds saved at ``--upload-mbps``, and
the words that differ between tiny.en's transcript of the original and of the FLAC (a WER; 0 = the same words).
The fleet (app/cloud/fleet/pieces.py) sends FLAC when the original is at least 1.5x the FLAC's expected size.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_engine import sample_dir
from tests import metrics


def encode(samples: np.ndarray, path: Path, codec: str, rate: int, channels: int, bit_rate: int = 0) -> Path:
    """``samples`` (16 kHz mono float32) written with PyAV as ``codec`` at ``rate`` Hz and ``channels``."""
    import av

    layout = "stereo" if channels == 2 else "mono"
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=rate, layout=layout)
        if bit_rate:
            stream.bit_rate = bit_rate
        resampler = av.AudioResampler(format=stream.format.name, layout=layout, rate=rate)
        frame = av.AudioFrame.from_ndarray(samples[None, :].astype(np.float32), format="flt", layout="mono")
        frame.sample_rate = 16000
        for piece in resampler.resample(frame) + resampler.resample(None):
            for packet in stream.encode(piece):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upload-mbps", type=float, default=20.0)
    args = parser.parse_args()
    from app.cloud.fleet.pieces import PIECE_RATE, _write_flac
    from app.core.engine.audio import decode_audio
    from app.core.engine.pipeline import Engine, PipelineOptions
    from app.core.engine.transcribe import TranscriptionOptions

    folder = metrics.real_speech_dir()
    sources = [sample_dir() / "sample.wav"]
    if folder is not None:
        sources += [folder / "gentle_lucier.wav", folder / "mfa_en_spontaneous_a.wav", folder / "ami_ES2003a_0-30.wav"]
    options = PipelineOptions(
        transcription=TranscriptionOptions(model="tiny.en", device="cpu", compute_type="int8", language="en"),
        diarize=False,
        identify=False,
    )
    engine = Engine()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        for source in sources:
            samples = decode_audio(source).samples
            variants = {
                "as given (16 kHz mono WAV)": source,
                "44.1 kHz stereo WAV": encode(samples, work / f"{source.stem}-44k.wav", "pcm_s16le", 44100, 2),
                "128 kbit/s MP3": encode(samples, work / f"{source.stem}.mp3", "libmp3lame", 44100, 2, 128_000),
            }
            for kind, original in variants.items():
                started = time.perf_counter()
                flac = work / f"{original.stem}-{len(rows)}.flac"
                _write_flac(flac, decode_audio(original, PIECE_RATE).samples)
                seconds = time.perf_counter() - started
                duration = len(samples) / 16000
                size, smaller = original.stat().st_size, flac.stat().st_size
                saved = (size - smaller) * 8 / (args.upload_mbps * 1e6) - seconds
                before = engine.run(original, options).text
                after = engine.run(flac, options).text
                truth = reference(source)
                accuracy = f"{metrics.wer(truth, before):.3f} / {metrics.wer(truth, after):.3f}" if truth else "-"
                rows.append(
                    (source.stem, kind, size / 1e6, smaller / 1e6, smaller / duration, seconds, saved,
                     metrics.wer(before, after), accuracy)
                )  # fmt: skip
    print(f"\nupload at {args.upload_mbps:g} Mbit/s; transcripts by tiny.en without diarization")
    print(f"{'recording':22} {'original':27} {'MB':>6} {'FLAC MB':>7} {'FLAC B/s':>8} {'encode s':>8} "
          f"{'saved s':>7} {'words changed':>13} {'WER original / FLAC':>19}")  # fmt: skip
    for name, kind, size, smaller, rate, seconds, saved, changed, accuracy in rows:
        print(f"{name:22} {kind:27} {size:6.2f} {smaller:7.2f} {rate:8.0f} {seconds:8.2f} {saved:7.1f} "
              f"{changed:13.3f} {accuracy:>19}")  # fmt: skip


def reference(source: Path) -> str | None:
    """The words spoken in ``source``, where the recording has a reference."""
    if source.name == "sample.wav":
        return metrics.stm_text(source.with_suffix(".stm"))
    text = source.with_suffix(".ref.txt")
    return text.read_text() if text.is_file() else None


if __name__ == "__main__":
    main()
