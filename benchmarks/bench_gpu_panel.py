"""GPU panel benchmark: what one statistics update costs the Qt main thread. Prints a table, asserts nothing.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/bench_gpu_panel.py [--updates 300]

The snapshots come from the real sampler over the NVML stand-in (tests/core/nvml_standin.py), made in advance
and stamped one second apart, with readings that change every time (every label gets a new text: the worst
case). The history is first filled to its full 600 points (10 minutes at 1 Hz), so every measured paint draws
three full-length lines. One update, as the sampler thread's queued signal delivers it, is measured as:
- slot: the panel's slot run synchronously (labels, legend, one history point, a scheduled repaint);
- paint: the events that follow (the graph's paint, the status bar's relayout), flushed with processEvents;
- repaint: the graph alone repainted (QWidget.repaint, synchronous), for the drawing cost by itself.
Cases: the panel alone, and the whole MainWindow (dock plus the status-bar label); GPU and CPU-only modes.
The queued delivery itself (one QMetaCallEvent) is not included: microseconds, not worth a column.

The last column counts references to None and True lost per update: PySide6 6.12.0 on Python < 3.12 drops one
per void Qt call and per Signal.emit, which aborts a long-running process; 0 / 0 on a sound PySide6.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from benchmarks.bench_engine import table  # noqa: E402 (needs ROOT on the path)

if TYPE_CHECKING:  # the app is imported once the environment is set up, in main()
    from app.core.gpu.gpustats import StatsSnapshot
    from app.gui.gpu_panel import GpuPanel

HISTORY_POINTS = 600


def gpu_snapshots(count: int) -> list[StatsSnapshot]:
    """``count`` GPU snapshots, one second apart, from the sampler over the NVML stand-in."""
    from app.core.gpu.gpustats import GpuStatsSampler
    from tests.core.nvml_standin import Frame, NvmlStandIn

    frames = [
        [
            Frame(
                utilization=round(50 + 45 * math.sin(i / 40)),
                memory_used=round((20_000 + 15_000 * math.sin(i / 90)) * 2**20),
                temperature=round(60 + 15 * math.sin(i / 60)),
                power_mw=300_000 + 1000 * (i % 300),
                sm_clock=1400 + i % 500,
            )
        ]
        for i in range(count)
    ]
    sampler = GpuStatsSampler(NvmlStandIn(frames), process_ids=lambda: {4242})
    start = time.time()
    snapshots = [dataclasses.replace(sampler.sample(), time=start + i) for i in range(count)]
    sampler.close()
    return snapshots


def cpu_snapshots(count: int) -> list[StatsSnapshot]:
    """CPU-only snapshots (no NVML), one second apart, with changing CPU and RAM readings."""
    from app.core.gpu.gpustats import GpuStatsSampler
    from tests.core.nvml_standin import NVML_ERROR_LIBRARY_NOT_FOUND, NvmlStandIn

    sampler = GpuStatsSampler(NvmlStandIn([[]], init_error=NVML_ERROR_LIBRARY_NOT_FOUND))
    base = sampler.sample()
    assert base.host is not None
    start = time.time()
    snapshots = [
        dataclasses.replace(
            base,
            time=start + i,
            host=dataclasses.replace(
                base.host,
                cpu_pct=50 + 45 * math.sin(i / 40),
                ram_used_mb=base.host.ram_total_mb * (0.5 + 0.3 * math.sin(i / 90)),
            ),
        )
        for i in range(count)
    ]
    sampler.close()
    return snapshots


def none_lost_per_call() -> int:
    """References to None that one void Qt call drops: 0 on a sound PySide6, 1 with the bug described below."""
    from PySide6.QtWidgets import QLabel

    label = QLabel()
    before = sys.getrefcount(None)
    for _ in range(100):
        label.setText("x")
    return round((before - sys.getrefcount(None)) / 100)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)]


def measure(
    panel: GpuPanel, snapshots: list[StatsSnapshot], updates: int, flush: Callable[[], None]
) -> dict[str, list[float]]:
    """Fill the history, then time ``updates`` updates; milliseconds per update for each part."""
    from PySide6.QtCore import QEvent, QObject

    class PaintCounter(QObject):
        def __init__(self) -> None:
            super().__init__()
            self.paints = 0

        def eventFilter(self, watched: QObject, event: QEvent) -> bool:
            if event.type() == QEvent.Type.Paint:
                self.paints += 1
            return False

    emit = panel.relay.arrived.emit
    graph = panel.graph
    panel.history.clear()  # the window's own sampler may have delivered one already
    for snapshot in snapshots[:HISTORY_POINTS]:
        emit(snapshot)
    flush()
    assert len(panel.history) == HISTORY_POINTS, len(panel.history)
    counter = PaintCounter()
    graph.installEventFilter(counter)
    parts: dict[str, list[float]] = {"slot": [], "paint": [], "total": [], "repaint": []}
    none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
    for snapshot in snapshots[HISTORY_POINTS : HISTORY_POINTS + updates]:
        started = time.perf_counter()
        emit(snapshot)  # same thread: the slot runs now, as it does when the queued event is delivered
        slotted = time.perf_counter()
        flush()  # the scheduled paint and any relayout
        flushed = time.perf_counter()
        graph.repaint()
        repainted = time.perf_counter()
        parts["slot"].append((slotted - started) * 1000)
        parts["paint"].append((flushed - slotted) * 1000)
        parts["total"].append((flushed - started) * 1000)
        parts["repaint"].append((repainted - flushed) * 1000)
    none_lost, true_lost = none_before - sys.getrefcount(None), true_before - sys.getrefcount(True)
    graph.removeEventFilter(counter)
    # Each update painted the graph twice: once in the flush (the real path), once by repaint().
    parts["paints_per_update"] = [counter.paints / updates]
    parts["singletons_lost_per_update"] = [none_lost / updates, true_lost / updates]
    return parts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--updates", type=int, default=300)
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="scriba-bench-gpu-"))
    for name in ("XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        os.environ[name] = str(home / name.lower())
    from PySide6 import __version__ as pyside_version
    from PySide6.QtWidgets import QApplication

    from app.core.config.settings import SettingsStore
    from app.core.gpu.gpustats import GpuStatsSampler
    from app.core.queue.jobs import JobStore
    from app.gui.gpu_panel import GpuPanel
    from app.gui.window import MainWindow
    from tests.core.nvml_standin import Frame, NvmlStandIn

    app = QApplication.instance() or QApplication(sys.argv[:1])
    lost_per_call = none_lost_per_call()
    if lost_per_call:
        # Measuring on it would abort with "none_dealloc" within a few thousand calls (pyproject pins it out).
        raise SystemExit(
            f"PySide6 {pyside_version} on Python {platform.python_version()} drops a reference to None on every "
            "void Qt call: install the pinned PySide6 (`make venv`) and run again."
        )
    count = HISTORY_POINTS + args.updates
    sources = {"GPU (stand-in)": gpu_snapshots(count), "CPU only": cpu_snapshots(count)}

    def idle_sampler() -> GpuStatsSampler:
        # The panel needs a sampler, but the benchmark delivers the snapshots itself: this one is never started.
        return GpuStatsSampler(NvmlStandIn([[Frame()]]))

    rows: list[list[str]] = []
    for mode, snapshots in sources.items():
        panel = GpuPanel(idle_sampler())
        panel.resize(1200, 180)
        panel.show()
        app.processEvents()
        results = {"panel alone": measure(panel, snapshots, args.updates, app.processEvents)}
        panel.close()

        window = MainWindow(
            JobStore(home / f"data-{len(rows)}"),
            SettingsStore(home / f"config-{len(rows)}"),
            start_worker=False,
            gpu_sampler=idle_sampler(),
        )
        window.show()
        window.gpu_panel.stop()  # the window started its sampler: stopped, only the benchmark's snapshots arrive
        app.processEvents()
        results["in the window"] = measure(window.gpu_panel, snapshots, args.updates, app.processEvents)
        window.close()

        for case, parts in results.items():
            median = statistics.median(parts["total"])
            rows.append(
                [
                    f"{mode}, {case}",
                    f"{statistics.median(parts['slot']):.2f}",
                    f"{statistics.median(parts['paint']):.2f}",
                    f"{median:.2f}",
                    f"{percentile(parts['total'], 0.99):.2f}",
                    f"{max(parts['total']):.2f}",
                    f"{statistics.median(parts['repaint']):.2f}",
                    f"{median / 1000 * 100:.3f}%",
                    f"{parts['paints_per_update'][0]:.1f}",
                    "{:.0f} / {:.0f}".format(*parts["singletons_lost_per_update"]),
                ]
            )

    print(
        f"GPU panel: main-thread cost of one update, {args.updates} updates on a full {HISTORY_POINTS}-point "
        f"history; Python {platform.python_version()}, PySide6 {pyside_version}, "
        f"QPA {QApplication.platformName()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores\n"
    )
    print(
        table(
            [
                "case",
                "slot ms (median)",
                "paint ms (median)",
                "update ms (median)",
                "update ms (p99)",
                "update ms (max)",
                "graph repaint ms",
                "main thread at 1 Hz",
                "paints/update",
                "None / True refs lost per update",
            ],
            rows,
        )
    )
    print("\nupdate = slot + paint (the real path); main thread at 1 Hz = median update / 1000 ms.")
    print("paints/update counts the graph's paint events: 2 = one from the update itself plus the repaint column.")


if __name__ == "__main__":
    main()
