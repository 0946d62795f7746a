"""Window responsiveness while the queue runs: how late a 20 ms timer fires on the Qt main thread. Prints a table,
asserts nothing.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/bench_window_events.py [--files 2]

The real MainWindow, offscreen, runs the sample phone call (tiny.en, diarized) ``--files`` times and one corrupt
file, as tests/gui/test_window.py's drop test does; inference runs in the window's child process, so the event
loop should keep serving events throughout. A 20 ms QTimer records the time between its ticks: a gap of a second
is a window that froze for a second. Moved here from the test, where it was an assert against the clock.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from benchmarks.bench_engine import table  # noqa: E402 (needs ROOT on the path)


def sample_call() -> Path:
    spec = importlib.util.find_spec("pyannote.audio")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "sample" / "sample.wav"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2, help="copies of the 30 s phone call to queue")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the queue to finish")
    args = parser.parse_args()

    import numpy as np
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.core.config.settings import SettingsStore
    from app.core.queue.jobs import JobState, JobStore
    from app.gui.window import MainWindow

    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = []
        for index in range(args.files):
            copy = folder / f"call {index + 1}.wav"
            copy.write_bytes(sample_call().read_bytes())
            paths.append(copy)
        corrupt = folder / "broken download.mp3"
        corrupt.write_bytes(np.random.default_rng(7).bytes(20000))
        paths.insert(1, corrupt)

        window = MainWindow(JobStore(folder / "data"), SettingsStore(folder / "config"))
        window.show()
        gaps: list[float] = []
        last = time.perf_counter()

        def tick() -> None:
            nonlocal last
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

        timer = QTimer()
        timer.setInterval(20)
        timer.timeout.connect(tick)
        timer.start()
        started = time.perf_counter()
        window.add_paths(paths)
        ended = (JobState.DONE, JobState.FAILED, JobState.CANCELLED)
        while not all(job.state in ended for job in window.store.jobs()):
            app.processEvents()
            time.sleep(0.005)
            if time.perf_counter() - started > args.timeout:
                print(f"the queue did not finish in {args.timeout:g} s; figures so far")
                break
        wall = time.perf_counter() - started
        timer.stop()
        states = [job.state.value for job in window.store.jobs()]
        window.close()

    ordered = sorted(gaps)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    print(f"\n{args.files} calls + 1 corrupt file, {wall:.1f} s, jobs: {', '.join(states)}; timer interval 20 ms\n")
    rows = [
        [
            str(len(gaps)),
            f"{statistics.median(gaps) * 1000:.0f}",
            f"{p99 * 1000:.0f}",
            f"{ordered[-1] * 1000:.0f}",
            str(sum(gap >= 0.25 for gap in gaps)),
            str(sum(gap >= 1.0 for gap in gaps)),
        ]
    ]
    print(table(["ticks", "median ms", "p99 ms", "longest ms", "gaps >= 250 ms", "gaps >= 1 s"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
