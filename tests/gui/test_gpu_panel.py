"""The GPU panel in the window: readings replayed by the NVML stand-in, and the real sampler on this machine."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from app.core.config.settings import SettingsStore
from app.core.gpu.gpustats import GpuReading, GpuStatsSampler, HostReading, StatsSnapshot
from app.core.queue.jobs import JobStore
from app.core.queue.worker import JobEvent
from app.gui.gpu_panel import CPU_SERIES, GPU_SERIES, GpuPanel
from app.gui.window import MainWindow
from tests.core.nvml_standin import Frame, NVMLError, NvmlStandIn

INTERVAL = 0.05  # seconds between samples: the tests see many within a fraction of a second
WAIT = 5000  # ms
# The stand-in's default frame: 11,500 of 81,559 MiB used, 412 of 700 W, 10,900 MiB held by our pid 4242.
H100_LINE = "GPU 0 · NVIDIA H100 80GB HBM3 · 87% · 11.2/79.6 GB · 61 °C · 412/700 W · 1980 MHz · Scriba: 10.6 GB"
H100_COMPACT = "GPU 87% · 11.2/79.6 GB · 61 °C"
A10G = Frame(
    name="NVIDIA A10G",
    utilization=5,
    memory_used=2048 * 2**20,
    memory_total=23_028 * 2**20,
    temperature=40,
    power_mw=60_000,
    power_limit_mw=300_000,
    sm_clock=210,
    processes=((1, 2**30),),  # another program's process: none of this memory is Scriba's
)
A10G_LINE = "GPU 1 · NVIDIA A10G · 5% · 2.0/22.5 GB · 40 °C · 60/300 W · 210 MHz · Scriba: 0.0 GB"


def standin_sampler(*frames: list[Frame]) -> tuple[GpuStatsSampler, NvmlStandIn]:
    nvml = NvmlStandIn(list(frames))
    return GpuStatsSampler(nvml, process_ids=lambda: {4242}), nvml


def sampler_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == "scriba-gpu-stats"}


@pytest.fixture
def gpu_window(qtbot, tmp_path: Path) -> Callable[..., MainWindow]:  # type: ignore[no-untyped-def]
    """A window (no queue worker) whose GPU panel samples ``sampler`` (None: the real NVML) every 50 ms."""

    def open_(sampler: GpuStatsSampler | None = None) -> MainWindow:
        window = MainWindow(
            JobStore(tmp_path / "data"),
            SettingsStore(tmp_path / "config"),
            start_worker=False,
            gpu_sampler=sampler,
            gpu_interval=INTERVAL,
        )
        qtbot.addWidget(window)
        window.show()
        qtbot.waitExposed(window)
        return window

    return open_


def test_readings_from_the_standin_reach_the_panel_and_the_status_bar(gpu_window, qtbot) -> None:  # type: ignore[no-untyped-def]
    sampler, nvml = standin_sampler([Frame(), A10G])
    window = gpu_window(sampler)
    panel = window.gpu_panel
    qtbot.waitUntil(lambda: panel.compact_label.text() == H100_COMPACT, timeout=WAIT)
    assert [label.text() for label in panel.gpu_labels] == [H100_LINE, A10G_LINE]
    assert panel.reason_label.isHidden() and panel.message_label.isHidden()
    assert panel.job_label.text() == "Job: idle"
    assert window.statusBar().isAncestorOf(panel.compact_label)
    assert H100_LINE in panel.compact_label.toolTip()
    # The legend names the GPU series with their current values (memory: 11,500 / 81,559 = 14.1%).
    assert [label.accessibleName() for label in panel.legend_labels] == [
        "Utilisation 87%",
        "Memory 14%",
        "Temperature 61 °C",
    ]

    # The history grows by one point per sample, GPU 0's utilisation, memory % and temperature.
    shown = len(panel.history)
    qtbot.waitUntil(lambda: len(panel.history) >= shown + 3, timeout=WAIT)
    utilisation, memory, temperature = panel.history[-1].values
    assert utilisation == 87 and memory == pytest.approx(100 * 11_500 / 81_559) and temperature == 61

    # New readings replace the old ones (the stand-in repeats its last frame, so this one is current now).
    nvml.frames.append([Frame(utilization=12, temperature=70, memory_used=40_960 * 2**20), A10G])
    qtbot.waitUntil(lambda: panel.compact_label.text() == "GPU 12% · 40.0/79.6 GB · 70 °C", timeout=WAIT)
    assert panel.history[-1].values[0] == 12 and panel.history[0].values[0] == 87


def test_an_nvml_error_mid_run_is_shown_and_the_panel_recovers(gpu_window, qtbot) -> None:  # type: ignore[no-untyped-def]
    sampler, nvml = standin_sampler([Frame(), A10G])
    window = gpu_window(sampler)
    panel = window.gpu_panel
    qtbot.waitUntil(lambda: panel.compact_label.text() == H100_COMPACT, timeout=WAIT)

    # NVML fails to read one clock on the first card, and the second card falls off the bus.
    nvml.frames.append([Frame(sm_clock=NVMLError(999)), Frame(lost=True)])
    qtbot.waitUntil(lambda: not panel.message_label.isHidden(), timeout=WAIT)
    assert panel.message_label.text() == (
        "GPU 0: SM clock: NVML error 999; GPU 1: the GPU fell off the bus (NVML: GPU is lost); reboot needed"
    )
    assert [label.text() for label in panel.gpu_labels] == [
        "GPU 0 · NVIDIA H100 80GB HBM3 · 87% · 11.2/79.6 GB · 61 °C · 412/700 W · Scriba: 10.6 GB",
        "GPU 1: no reading",
    ]
    assert panel.compact_label.text() == H100_COMPACT  # the other readings still arrive
    during = panel.snapshots_shown

    nvml.frames.append([Frame(utilization=40), A10G])
    qtbot.waitUntil(lambda: panel.message_label.isHidden(), timeout=WAIT)
    assert panel.snapshots_shown > during
    assert [label.text() for label in panel.gpu_labels] == [H100_LINE.replace("87%", "40%"), A10G_LINE]
    assert panel.compact_label.text() == "GPU 40% · 11.2/79.6 GB · 61 °C"


def test_without_a_gpu_the_real_sampler_says_why_and_shows_cpu_and_ram(gpu_window, qtbot) -> None:  # type: ignore[no-untyped-def]
    probe = GpuStatsSampler()
    expected = probe.sample()
    probe.close()
    window = gpu_window()  # the default sampler: the real pynvml
    panel = window.gpu_panel
    qtbot.waitUntil(lambda: panel.snapshots_shown >= 2, timeout=WAIT)
    if expected.nvml_available:  # pragma: no cover - only on a machine with an NVIDIA driver and GPU
        assert len(panel.gpu_labels) == len(expected.gpus) and panel.reason_label.isHidden()
        return
    assert not panel.reason_label.isHidden() and panel.gpu_labels == []
    total = re.escape(f"{psutil.virtual_memory().total / 2**30:.1f}")
    host = re.fullmatch(rf"CPU (\d+)% · RAM (\d+\.\d)/{total} GB · Scriba: (\d+\.\d) GB", panel.host_label.text())
    assert host is not None, panel.host_label.text()
    assert 0 <= int(host[1]) <= 100 and float(host[2]) > 0 and float(host[3]) > 0  # this process's RSS
    assert re.fullmatch(rf"No NVIDIA GPU: .* · CPU \d+% · RAM \d+\.\d/{total} GB", panel.compact_label.text())
    # The graph follows CPU and RAM instead, and the legend says so.
    assert panel.graph.series == CPU_SERIES
    assert [label.accessibleName().split()[0] for label in panel.legend_labels[:2]] == ["CPU", "RAM"]
    assert panel.legend_labels[2].isHidden()


def test_job_speed_and_eta_follow_worker_events_and_clear_when_done(gpu_window, qtbot) -> None:  # type: ignore[no-untyped-def]
    sampler, _ = standin_sampler([Frame()])
    window = gpu_window(sampler)
    panel = window.gpu_panel
    qtbot.waitUntil(lambda: panel.compact_label.text() == H100_COMPACT, timeout=WAIT)
    source = Path("/recordings/interview.wav")

    window.bridge.job_event.emit(JobEvent("started", 7, source, duration=84.0))
    assert panel.job_label.text() == "Job: interview.wav · 0% · measuring speed…"
    window.bridge.job_event.emit(JobEvent("progress", 7, source, 0.01, "transcribing", 84.0))
    assert panel.job_label.text() == "Job: interview.wav · 1% · measuring speed…"
    assert panel.compact_label.text() == H100_COMPACT
    window.bridge.job_event.emit(JobEvent("progress", 7, source, 0.5, "transcribing", 84.0, 12.07, 42.4))
    assert panel.job_label.text() == "Job: interview.wav · 50% · 12.1× real time · ETA 0:42"
    assert panel.compact_label.text() == H100_COMPACT + " · 12.1× · ETA 0:42"
    # New GPU readings keep the job's part of the status bar.
    shown = panel.snapshots_shown
    qtbot.waitUntil(lambda: panel.snapshots_shown >= shown + 2, timeout=WAIT)
    assert panel.compact_label.text() == H100_COMPACT + " · 12.1× · ETA 0:42"

    window.bridge.job_event.emit(JobEvent("done", 7, source, 1.0, "", 84.0, 12.5, 0.0))
    assert panel.job_label.text() == "Job: idle"
    assert panel.compact_label.text() == H100_COMPACT


def test_closing_the_window_stops_the_sampler_and_the_dock_is_remembered(gpu_window, qtbot) -> None:  # type: ignore[no-untyped-def]
    before = sampler_threads()
    sampler, nvml = standin_sampler([Frame()])
    window = gpu_window(sampler)
    qtbot.waitUntil(lambda: window.gpu_panel.snapshots_shown >= 1, timeout=WAIT)
    (thread,) = sampler_threads() - before
    assert thread.is_alive()
    assert window.gpu_dock.objectName() == "gpuDock"  # saveState/restoreState find a dock by its name
    assert window.dockWidgetArea(window.gpu_dock) == Qt.DockWidgetArea.BottomDockWidgetArea
    view_menu = next(action.menu() for action in window.menuBar().actions() if action.text() == "&View")
    toggle = window.gpu_dock.toggleViewAction()
    assert toggle in view_menu.actions() and toggle.isChecked()
    toggle.trigger()
    assert window.gpu_dock.isHidden()

    window.close()
    assert not thread.is_alive() and nvml.shut_down
    QApplication.processEvents()  # a snapshot emitted just before the stop is delivered now, harmlessly

    again, _ = standin_sampler([Frame()])
    reopened = gpu_window(again)  # the same config folder: a restart
    assert reopened.gpu_dock.isHidden() and not reopened.gpu_dock.toggleViewAction().isChecked()
    reopened.gpu_dock.toggleViewAction().trigger()
    assert not reopened.gpu_dock.isHidden()


# ------------------------------------------------------------------------------------------------ the graph


def _gpu_snapshot(time: float, utilisation: float, memory_pct: float, temperature: float) -> StatsSnapshot:
    reading = GpuReading(
        0,
        "Test GPU",
        utilization_pct=utilisation,
        memory_used_mb=memory_pct * 100,
        memory_total_mb=10_000,
        temperature_c=temperature,
    )
    host = HostReading(cpu_pct=10, ram_used_mb=1024, ram_total_mb=4096, our_rss_mb=100)
    return StatsSnapshot(time, True, "NVIDIA driver 1.0, 1 GPU(s)", (reading,), host)


def _colour_near(image: QImage, x: int, y: int, colour: str, background: QColor, radius: int = 3) -> bool:
    """Whether a pixel near (x, y) is drawn in ``colour``: antialiasing blends a line's edge with the background,
    so a pixel counts when ``colour`` is the nearest of the series colours and the background."""
    candidates = [QColor(series.colour) for series in GPU_SERIES] + [background]
    target = QColor(colour)

    def distance(a: QColor, b: QColor) -> int:
        return abs(a.red() - b.red()) + abs(a.green() - b.green()) + abs(a.blue() - b.blue())

    for dx in range(-radius, radius + 1):
        for dy in range(-radius, radius + 1):
            pixel = image.pixelColor(x + dx, y + dy)
            if min(candidates, key=lambda candidate: distance(pixel, candidate)) == target:
                return True
    return False


def test_the_graph_draws_each_series_at_its_value_over_ten_minutes(qtbot) -> None:  # type: ignore[no-untyped-def]
    panel = GpuPanel(standin_sampler([Frame()])[0])  # never started: the test hands it the snapshots
    qtbot.addWidget(panel)
    panel.resize(900, 220)
    panel.show()
    qtbot.waitExposed(panel)
    # Ten minutes of steady readings, two points: one at each edge of the graph.
    for time in (1000.0, 1600.0):
        panel.show_snapshot(_gpu_snapshot(time, utilisation=80, memory_pct=50, temperature=20))
    assert len(panel.history) == 2 and panel.graph.series == GPU_SERIES
    image = panel.graph.grab().toImage()
    middle = image.width() // 2
    height = image.height() - 8  # the plot leaves 4 px above and below

    def y(value: float) -> int:
        return round(image.height() - 4 - value * height / 100)

    background = panel.graph.palette().base().color()
    utilisation, memory, temperature = (series.colour for series in GPU_SERIES)
    assert _colour_near(image, middle, y(80), utilisation, background)
    assert _colour_near(image, middle, y(50), memory, background)
    assert _colour_near(image, middle, y(20), temperature, background)
    assert not _colour_near(image, middle, y(50), utilisation, background)

    # A point older than ten minutes leaves the history; a missing reading is a gap, not a zero.
    panel.show_snapshot(_gpu_snapshot(1700.0, utilisation=80, memory_pct=50, temperature=20))
    assert [point.time for point in panel.history] == [1600.0, 1700.0]
    panel.show_snapshot(StatsSnapshot(1701.0, True, "", (GpuReading(0, "?", error="the GPU fell off the bus"),), None))
    assert panel.history[-1].values == (None, None, None)
    assert panel.compact_label.text() == "GPU: no reading"
    assert panel.message_label.text() == "GPU 0: the GPU fell off the bus"


def test_without_a_gpu_the_panel_starts_folded_into_a_status_bar_line(gpu_window, qtbot) -> None:  # type: ignore[no-untyped-def]
    """Issue 40, point 5: on a computer without an NVIDIA GPU the panel does not take a fifth of the window; one
    status-bar line says so in words (no library file), and a click opens the panel."""
    probe = GpuStatsSampler()
    expected = probe.sample()
    probe.close()
    if expected.nvml_available:  # pragma: no cover - only on a machine with an NVIDIA driver and GPU
        pytest.skip("this computer has an NVIDIA GPU")
    window = gpu_window()  # the real NVML: this computer's own answer
    panel = window.gpu_panel
    cores = os.cpu_count()
    line = f"No NVIDIA GPU: transcribing on the CPU ({cores} cores)"
    qtbot.waitUntil(lambda: panel.compact_label.text().startswith(line), timeout=WAIT)
    assert window.gpu_dock.isHidden()
    assert panel.compact_label.isVisible()
    shown = [panel.compact_label.text(), panel.compact_label.toolTip(), panel.reason_label.text()]
    assert not any(".so" in text or "libnvidia" in text or "`" in text for text in shown), shown
    QTest.mouseClick(panel.compact_label, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(window.gpu_dock.isVisible, timeout=WAIT)
    QTest.mouseClick(panel.compact_label, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(window.gpu_dock.isHidden, timeout=WAIT)
