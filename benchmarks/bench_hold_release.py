"""Hold-to-talk latency: from the hotkey's release to the final typed in another program.

    .venv/bin/python benchmarks/bench_hold_release.py [--sentences 12] [--release-after 0.0] [--model tiny.en]

A private X server (Xvfb) with an xterm running ``cat > FILE`` has the focus; ``DictationController`` holds a
global hotkey (ctrl+alt+d) in hold mode, as `scriba dictate --type --hotkey ctrl+alt+d --mode hold` does. Per
sentence (espeak-ng, four voices, the file ending with the last word): the key is pressed through XTest, the
sentence is replayed at the speed of speech as the capture, and the key is released ``--release-after`` seconds
after the sentence's last sample reached the capture (0: at once, so no pause can have ended the utterance and
only the release does). Measured from the release (after XTest's sync):
- final: the last final text out of the decoder (the one the release brought);
- first key: the first character of it in the xterm's file;
- typed: the last character of it there (the whole final typed).
Prints a table, asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.bench_engine import table  # noqa: E402 (needs ROOT on the path)

OUT = ROOT / "benchmarks" / "out"
HOTKEY = ("Control_L", "Alt_L", "d")


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=12)
    parser.add_argument("--release-after", type=float, default=0.0, help="seconds after the last word (default 0)")
    parser.add_argument("--model", default="tiny.en")
    args = parser.parse_args()

    import numpy as np

    from app.core.dictation.controller import (
        ControllerEvent,
        DictationController,
        Heard,
        Listening,
        RunEnded,
        RunEvent,
    )
    from app.core.dictation.sources import AudioSource, FileSource
    from app.core.dictation.stream import DictationOptions
    from app.core.engine.audio import SAMPLE_RATE
    from tests import metrics, synth
    from tests.xserver import focused_xterm, press_keys, release_keys, xvfb

    OUT.mkdir(parents=True, exist_ok=True)
    files: list[tuple[Path, str, float]] = []
    for index in range(args.sentences):
        text = synth.SENTENCES[index % len(synth.SENTENCES)]
        voice, pitch = synth.VOICES[index % len(synth.VOICES)]
        speech = synth.speak(text, voice, pitch) * 0.8
        samples = np.concatenate([np.zeros(int(0.3 * SAMPLE_RATE), dtype=np.float32), speech])
        path = synth.write_wav(OUT / f"hold_{index:02d}.wav", samples)
        files.append((path, text, FileSource(path, realtime=False).duration))  # as the capture decodes it

    events: list[tuple[float, ControllerEvent]] = []
    changed = threading.Condition()

    def listener(event: ControllerEvent) -> None:
        with changed:
            events.append((time.monotonic(), event))
            changed.notify_all()

    def wait_event(kind: type, run: int) -> float:
        deadline = time.monotonic() + 120
        with changed:
            while time.monotonic() < deadline:
                for at, event in events:
                    if isinstance(event, kind) and isinstance(event, RunEvent) and event.run == run:
                        return at
                changed.wait(0.05)
        raise SystemExit(f"no {kind.__name__} for run {run}: {[type(e).__name__ for _, e in events]}")

    current: list[Path] = []

    def replayed(_device: object) -> AudioSource:
        return FileSource(current[0], realtime=True)

    rows: list[list[str]] = []
    finals_s: list[float] = []
    first_s: list[float] = []
    typed_s: list[float] = []
    said: list[str] = []
    heard: list[str] = []
    with xvfb() as display_name:
        os.environ["DISPLAY"] = display_name
        os.environ.pop("WAYLAND_DISPLAY", None)
        os.environ.pop("XDG_SESSION_TYPE", None)
        received = OUT / "hold_received.txt"
        received.unlink(missing_ok=True)
        with focused_xterm(display_name, received):
            controller = DictationController(
                DictationOptions(model=args.model),
                listener,
                source_factory=replayed,
                output_mode="type",
                keep_output=True,
            )
            try:
                assert controller.prepare_output()
                controller.set_hotkey("ctrl+alt+d", "hold")
                assert controller.load()
                for run, (path, text, duration) in enumerate(files, start=1):
                    current[:] = [path]
                    before = len(received.read_text(encoding="utf-8"))
                    press_keys(display_name, *HOTKEY, release=False)
                    wait_event(Listening, run)
                    deadline = time.monotonic() + duration + 60
                    # Less a millisecond: the session clock is a sum of floats.
                    heard_s = duration + args.release_after - 0.001
                    while controller.elapsed - controller.recorded_seconds < heard_s:
                        if time.monotonic() > deadline:
                            seen = [type(e).__name__ for _, e in events if getattr(e, "run", 0) == run]
                            raise SystemExit(f"run {run}: the capture stopped at {controller.elapsed:.1f} s: {seen}")
                        time.sleep(0.005)
                    release_keys(display_name, *HOTKEY)
                    released = time.monotonic()
                    # The file, watched from the release on: when its first and last new character arrived.
                    first_at = last_at = None
                    size = before
                    ended = False
                    expected = None
                    deadline = released + 120
                    while expected is None or size < expected:
                        if time.monotonic() > deadline:
                            raise SystemExit(
                                f"run {run}: {size - before} of {expected} characters typed: "
                                f"{received.read_text(encoding='utf-8')[before:]!r} {heard[-1:]}"
                            )
                        now_size = len(received.read_text(encoding="utf-8"))
                        if now_size != size:
                            size, last_at = now_size, time.monotonic()
                            first_at = first_at or last_at
                        if not ended:
                            with changed:
                                ended = any(isinstance(e, RunEnded) and e.run == run for _, e in events)
                            if ended:
                                finals = [
                                    e.event.text.strip()
                                    for _, e in events
                                    if isinstance(e, Heard) and e.run == run and e.event.type == "final"
                                ]
                                typed_text = " ".join(f for f in finals if f)
                                expected = before + len(typed_text) + (1 if before and typed_text else 0)
                                heard.append(typed_text)
                        time.sleep(0.002)
                    final_at = max(  # the last final: the one the release brought
                        at
                        for at, e in events
                        if isinstance(e, Heard) and e.run == run and e.event.type == "final" and e.event.text.strip()
                    )
                    assert first_at is not None and last_at is not None
                    finals_s.append(final_at - released)
                    first_s.append(first_at - released)
                    typed_s.append(last_at - released)
                    said.append(text)
                    print(f"run {run}: typed {last_at - released:.2f} s after the release", file=sys.stderr, flush=True)
                    rows.append(
                        [
                            str(run),
                            f"{duration:.1f}",
                            f"{final_at - released:.2f}",
                            f"{first_at - released:.2f}",
                            f"{last_at - released:.2f}",
                            heard[-1][:48],
                        ]
                    )
            finally:
                controller.close(60)
    print(f"# hold-to-talk, release to typed ({platform.node()}, {os.cpu_count()} cores, model {args.model})")
    print(f"release {args.release_after:g} s after the last word; xterm on Xvfb; times in seconds from the release\n")
    print(table(["#", "audio s", "final", "first key", "typed", "text"], rows))
    print()
    summary = [
        [name, f"{statistics.median(values):.2f}", f"{_percentile(values, 0.9):.2f}", f"{max(values):.2f}"]
        for name, values in (("final", finals_s), ("first key", first_s), ("typed", typed_s))
    ]
    print(table(["from the release to", "median", "p90", "max"], summary))
    print(f"\nWER of what was typed: {metrics.wer(' '.join(said), ' '.join(heard)):.3f}")


if __name__ == "__main__":
    main()
