"""Dictation pacing on the real clock: final decodes made slower by a fixed delay must not slow the partials.
Prints a table, asserts nothing.

    .venv/bin/python benchmarks/bench_dictation_pacing.py [--delay 3.0]

Three espeak-ng sentences with pauses, fed to the stream (DictationStream) in 50 ms blocks as fast as it takes
them, with tiny.en decoding; every final decode sleeps ``--delay`` seconds more (as a final decode that hears
its context takes longer). A pacing status ("falling behind: step X s", "keeping up again: step X s") names the
decode time it reacted to: that time should be a partial's (at most the longest partial measured), never a
final's. tests/core/dictation/test_dictation.py checks the rule on a simulated clock; this is the same on this
machine's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.bench_engine import table  # noqa: E402 (needs ROOT on the path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=3.0, help="seconds added to every final decode")
    args = parser.parse_args()

    import numpy as np

    from app.core.dictation.decoding import StreamingVad, load_decoder
    from app.core.dictation.stream import DictationOptions, DictationStream
    from app.core.engine.audio import SAMPLE_RATE
    from app.core.transcript.document import Word
    from tests import synth

    decoder = load_decoder(DictationOptions())
    decoder.decode(np.zeros(SAMPLE_RATE, dtype=np.float32), final=True, prompt=None)  # warm-up
    partial_seconds: list[float] = []

    class SlowFinals:
        def decode(self, samples: np.ndarray, *, final: bool, prompt: str | None) -> list[Word]:
            began = time.perf_counter()
            if final:
                time.sleep(args.delay)
            words = decoder.decode(samples, final=final, prompt=prompt)
            if not final:
                partial_seconds.append(time.perf_counter() - began)
            return words

    pieces = [np.zeros(SAMPLE_RATE // 2, dtype=np.float32)]
    for index, text in enumerate(synth.SENTENCES[:3]):
        voice, pitch = synth.VOICES[index % 2]
        spoken = (synth.speak(text, voice, pitch) * 0.8).astype(np.float32)
        pieces += [spoken, np.zeros(int(1.5 * SAMPLE_RATE), dtype=np.float32)]
    audio = np.concatenate(pieces)

    stream = DictationStream(DictationOptions(), SlowFinals(), StreamingVad(0.5, 0.5))
    events = []
    block = int(0.05 * SAMPLE_RATE)
    for start in range(0, len(audio), block):
        events += stream.feed(audio[start : start + block])
    events += stream.flush()

    paced = [e.text for e in events if e.type == "status" and e.text.startswith(("falling behind", "keeping"))]
    longest = max(partial_seconds) if partial_seconds else 0.0
    rows = []
    for status in paced:
        step = float(status.split("step ")[1].split(" s")[0]) if "step " in status else float("nan")
        rows.append([status, f"{step:.2f}", "yes" if step <= longest + 0.05 else "NO (a final's time)"])
    print(
        f"\n{stream.stats.final_decodes} final decodes (+{args.delay:g} s each), {len(partial_seconds)} partials "
        f"(longest {longest:.2f} s, median {float(np.median(partial_seconds)):.2f} s)\n"
    )
    if rows:
        print(table(["pacing status", "step s", "a partial's time"], rows))
    else:
        print("no pacing status: the partials kept up with the step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
