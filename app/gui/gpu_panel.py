"""The GPU panel: live GPU (or CPU and RAM) readings, a 10-minute history graph, and the running job's speed.

Threading: :class:`GpuStatsSampler` reads NVML on its own thread and hands each snapshot to a callable from
:func:`app.gui.main_thread.deliver_on_main_thread`, so the panel's slot runs on the main thread: the sampler
thread never touches a widget. Per snapshot the main thread only
sets a few label texts, appends one point to a bounded deque and schedules a repaint of the graph; NVML calls,
the pynvml import and psutil all stay on the sampler thread.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from PySide6.QtCore import QLineF, QPointF, QRectF, QSize, Qt, Signal, Slot
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPen, QPolygonF, QTransform
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.core.gpu.gpustats import GpuReading, GpuStatsSampler, HostReading, StatsSnapshot
from app.core.queue.worker import JobEvent
from app.core.transcript.times import clock
from app.gui.main_thread import deliver_on_main_thread

HISTORY_SECONDS = 600.0  # the graph shows the last 10 minutes
GRAPHED_GPU = 0  # the engine's "cuda" device is GPU 0, so that is the card a job loads
IDLE_JOB_TEXT = "Job: idle"
# Events after which no job is running: the speed and ETA shown would be stale.
_JOB_ENDED = frozenset({"done", "failed", "cancelled", "requeued", "taken_over", "idle"})


class Series(NamedTuple):
    name: str
    colour: str
    unit: str
    description: str  # the legend entry's tooltip


GPU_SERIES = (
    Series("Utilisation", "#1e88e5", "%", "GPU 0: share of time a kernel was running, in %"),
    Series("Memory", "#8e24aa", "%", "GPU 0: memory in use, in % of the card's memory"),
    # Drawn on the same 0–100 scale: degrees read as percent, and a GPU's working range fits in it.
    Series("Temperature", "#e53935", " °C", "GPU 0: temperature in °C, on the same 0–100 scale"),
)
CPU_SERIES = (
    Series("CPU", "#1e88e5", "%", "CPU use, all cores, in %"),
    Series("RAM", "#8e24aa", "%", "memory in use, in % of the machine's RAM"),
)


class HistoryPoint(NamedTuple):
    time: float  # the snapshot's time (seconds since the epoch)
    values: tuple[float | None, ...]  # one per series; None is a gap in the line


# ------------------------------------------------------------------------------------------------ text


def _gb(megabytes: float) -> str:
    # NVML and psutil count in MiB; shown in GB with binary units, as nvidia-smi and system monitors do.
    return f"{megabytes / 1024:.1f}"


def _percent(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return 100.0 * part / whole


def gpu_values(reading: GpuReading) -> list[str]:
    """The readings this GPU reported, formatted; unsupported ones (None) are left out."""
    parts: list[str] = []
    if reading.utilization_pct is not None:
        parts.append(f"{reading.utilization_pct:.0f}%")
    if reading.memory_used_mb is not None and reading.memory_total_mb is not None:
        parts.append(f"{_gb(reading.memory_used_mb)}/{_gb(reading.memory_total_mb)} GB")
    if reading.temperature_c is not None:
        parts.append(f"{reading.temperature_c:.0f} °C")
    return parts


def gpu_line(reading: GpuReading) -> str:
    """``GPU 0 · NVIDIA H100 80GB HBM3 · 87% · 11.2/79.6 GB · 61 °C · 412/700 W · 1980 MHz · Scriba: 10.6 GB``."""
    parts = [f"GPU {reading.index}", *gpu_values(reading)]
    if reading.power_w is not None:
        limit = f"/{reading.power_limit_w:.0f}" if reading.power_limit_w is not None else ""
        parts.append(f"{reading.power_w:.0f}{limit} W")
    if reading.sm_clock_mhz is not None:
        parts.append(f"{reading.sm_clock_mhz:.0f} MHz")
    if reading.our_memory_mb is not None:
        parts.append(f"Scriba: {_gb(reading.our_memory_mb)} GB")
    if len(parts) == 1:
        return f"GPU {reading.index}: no reading"  # a lost GPU: the message line says why
    parts.insert(1, reading.name)
    return " · ".join(parts)


def gpu_compact(reading: GpuReading | None) -> str:
    """The status-bar form: ``GPU 87% · 11.2/79.6 GB · 61 °C``."""
    values = gpu_values(reading) if reading is not None else []
    return "GPU " + " · ".join(values) if values else "GPU: no reading"


def host_compact(host: HostReading) -> str:
    return f"CPU {host.cpu_pct:.0f}% · RAM {_gb(host.ram_used_mb)}/{_gb(host.ram_total_mb)} GB"


def host_line(host: HostReading) -> str:
    return f"{host_compact(host)} · Scriba: {_gb(host.our_rss_mb)} GB"


def unavailable_line(problem: str, cores: int | None = None) -> str:
    """Why there are no GPU readings (a kind of :data:`app.core.gpu.gpustats.NVML_PROBLEMS`), in words: the
    sampler's own reason names the driver's library file, which is for ``scriba doctor``, not for the window."""
    on_cpu = f"transcribing on the CPU ({cores or os.cpu_count() or 1} cores)"
    if problem == "driver-updated":
        return f"The NVIDIA driver was updated: restart the computer to use the GPU. Until then {on_cpu}."
    if problem == "no-permission":
        return f"This account may not use the NVIDIA GPU (ask the computer's administrator): {on_cpu}."
    if problem == "reader-missing":
        return f"This copy of Scriba cannot read the GPU: {on_cpu}."
    if problem == "failed":
        return f"The NVIDIA GPU could not be read: {on_cpu}."
    return f"No NVIDIA GPU: {on_cpu}"


def job_line(event: JobEvent) -> str:
    name = event.source.name if event.source is not None else f"job {event.job_id}"
    parts = [f"Job: {name}", f"{event.fraction:.0%}"]
    if event.speed is None:
        parts.append("measuring speed…")  # the worker reports a speed once 2% is done
    else:
        parts.append(f"{event.speed:.1f}× real time")
    if event.eta is not None:
        parts.append(f"ETA {clock(event.eta)}")
    return " · ".join(parts)


def job_compact(event: JobEvent) -> str:
    parts = ([f"{event.speed:.1f}×"] if event.speed is not None else []) + (
        [f"ETA {clock(event.eta)}"] if event.eta is not None else []
    )
    return "".join(f" · {part}" for part in parts)


def _set_text(label: QLabel, text: str, tooltip: str | None = None) -> None:
    """Set a label's text and tooltip (default: the text), calling into Qt only for what changed.

    Most readings repeat from one second to the next: an unchanged text must not invalidate the layout (a new
    text can change the label's size hint), and each call the main thread skips is time it keeps.
    """
    if label.text() != text:
        label.setText(text)
    tooltip = text if tooltip is None else tooltip
    if label.toolTip() != tooltip:
        label.setToolTip(tooltip)


def _set_visible(widget: QWidget, visible: bool) -> None:
    if widget.isHidden() == visible:
        widget.setVisible(visible)


def _reading_label(accessible_name: str) -> QLabel:
    label = QLabel()
    label.setAccessibleName(accessible_name)
    label.setTextFormat(Qt.TextFormat.PlainText)
    # A long line (a GPU's full reading) is clipped rather than widening the dock and the window: the
    # layout may shrink the label below its text width. The tooltip carries the whole text.
    label.setMinimumWidth(40)
    return label


# ------------------------------------------------------------------------------------------------ widgets


class HistoryGraph(QWidget):
    """The last :data:`HISTORY_SECONDS` of up to three series on a 0–100 scale, painted with QPainter.

    Each point becomes a QPointF once, when it arrives, in (seconds since the first point, value) coordinates;
    a paint maps those to pixels with one transform. So a paint builds no geometry per point in Python, and the
    graph scrolls by changing the transform alone.
    """

    def __init__(self, max_points: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.history: deque[HistoryPoint] = deque(maxlen=max_points)
        self._points: deque[tuple[QPointF | None, ...]] = deque(maxlen=max_points)  # parallel to history
        self._origin = 0.0
        self.series: tuple[Series, ...] = GPU_SERIES
        self.setAccessibleName("GPU history, last 10 minutes")
        self.setToolTip("The last 10 minutes on a 0–100 scale; the newest reading is at the right edge")
        self.setMinimumSize(120, 60)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        # Nothing behind the graph shows through: Qt skips painting the parent under it.
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)

    def sizeHint(self) -> QSize:
        return QSize(420, 90)

    def reset(self, series: tuple[Series, ...]) -> None:
        self.series = series
        self.history.clear()
        self._points.clear()

    def append(self, point: HistoryPoint) -> None:
        if not self.history:
            self._origin = point.time  # small coordinates keep the transform's arithmetic exact
        x = point.time - self._origin
        self.history.append(point)
        self._points.append(
            tuple(
                None if value is None or math.isnan(value) else QPointF(x, min(max(value, 0.0), 100.0))
                for value in point.values
            )
        )
        # The sampler can fall behind its interval (a slow NVML call): the span is time, not a point count.
        while point.time - self.history[0].time > HISTORY_SECONDS:
            self.history.popleft()
            self._points.popleft()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        palette = self.palette()
        painter.fillRect(self.rect(), palette.base())
        plot = QRectF(self.rect()).adjusted(1, 4, -1, -4)
        grid = QColor(palette.text().color())
        grid.setAlpha(40)
        painter.setPen(QPen(grid, 1, Qt.PenStyle.DotLine))
        levels = [plot.bottom() - plot.height() * level / 100 for level in (25, 50, 75)]
        painter.drawLines([QLineF(plot.left(), y, plot.right(), y) for y in levels])
        painter.setPen(palette.placeholderText().color())
        painter.drawText(plot, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop, "100")
        painter.drawText(plot, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom, "−10 min")
        painter.drawText(plot, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignBottom, "now")
        if not self.history:
            painter.drawText(plot, Qt.AlignmentFlag.AlignCenter, "Waiting for the first reading…")
            return
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        x_scale = plot.width() / HISTORY_SECONDS
        y_scale = plot.height() / 100.0
        newest = self.history[-1].time - self._origin
        # x: the newest point at the right edge; y: 0 at the bottom, 100 at the top.
        painter.setTransform(QTransform(x_scale, 0, 0, -y_scale, plot.right() - newest * x_scale, plot.bottom()))
        for number, series in enumerate(self.series):
            pen = QPen(QColor(series.colour), 1.5)
            pen.setCosmetic(True)  # 1.5 px whatever the transform's scale
            painter.setPen(pen)
            for line in self._lines(number):
                painter.drawPolyline(line)

    def _lines(self, number: int) -> Iterable[QPolygonF]:
        """The series as polylines, broken where a reading is missing."""
        # A list converted once: QPolygonF.append would be one call into Qt per point.
        line: list[QPointF] = []
        for points in self._points:
            point = points[number] if number < len(points) else None
            if point is not None:
                line.append(point)
                continue
            if len(line) > 1:
                yield QPolygonF(line)
            line = []
        if len(line) > 1:
            yield QPolygonF(line)


class StatusLine(QLabel):
    """The panel's one line in the status bar; a click shows or hides the panel."""

    clicked = Signal()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit()
        super().mouseReleaseEvent(event)


class GpuPanel(QWidget):
    """Current readings per GPU (or CPU/RAM and the reason there are no GPU statistics), history, job speed.

    ``compact_label`` is the one-line form for the status bar; the window places it there. ``no_gpu`` is said
    once, at the first reading without a GPU: the window then keeps the panel folded into that line.
    """

    no_gpu = Signal()

    def __init__(
        self, sampler: GpuStatsSampler | None = None, interval: float = 1.0, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("gpuPanel")
        self.setAccessibleName("GPU statistics")
        self.sampler = sampler or GpuStatsSampler()
        self.interval = interval
        self.snapshots_shown = 0
        self._gpu_mode: bool | None = None  # which series the history holds; None before the first snapshot
        self._device_compact = ""
        self._details: list[str] = []  # the full lines, for the status-bar label's tooltip
        self._job_compact = ""

        # For the sampler thread; a snapshot racing the panel's deletion is dropped (Qt disconnects a dead receiver).
        self.deliver_snapshot = deliver_on_main_thread(self.show_snapshot)

        self.reason_label = _reading_label("Why there are no GPU statistics")
        self.reason_label.hide()
        self.gpu_labels: list[QLabel] = []
        self._gpu_box = QVBoxLayout()
        self._gpu_box.setSpacing(2)
        self.host_label = _reading_label("CPU and memory")
        self.host_label.setText("Reading…")
        self.job_label = _reading_label("Running job")
        self.job_label.setText(IDLE_JOB_TEXT)
        self.message_label = _reading_label("GPU statistics error")
        self.message_label.setStyleSheet("color: #c62828;")
        self.message_label.hide()

        # Enough points for the whole span at this interval; older ones are also dropped by age.
        self.graph = HistoryGraph(max_points=math.ceil(HISTORY_SECONDS / interval) + 1)
        self.history = self.graph.history
        self.legend_labels = [QLabel() for _ in GPU_SERIES]
        legend = QHBoxLayout()
        for label, series in zip(self.legend_labels, GPU_SERIES, strict=True):
            label.setTextFormat(Qt.TextFormat.RichText)
            label.setToolTip(series.description)
            legend.addWidget(label)
        legend.addStretch(1)
        self._set_legend(GPU_SERIES, ())

        readings = QVBoxLayout()
        readings.setSpacing(2)
        readings.addWidget(self.reason_label)
        readings.addLayout(self._gpu_box)
        readings.addWidget(self.host_label)
        readings.addWidget(self.job_label)
        readings.addWidget(self.message_label)
        readings.addStretch(1)
        history = QVBoxLayout()
        history.setSpacing(2)
        history.addWidget(self.graph, 1)
        history.addLayout(legend)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        layout.addLayout(readings, 3)
        layout.addLayout(history, 2)

        self.compact_label = StatusLine("")
        self.compact_label.setObjectName("gpuCompact")
        self.compact_label.setAccessibleName("GPU summary")
        self.compact_label.setCursor(Qt.CursorShape.PointingHandCursor)

    # ------------------------------------------------------------------------------------------- sampler

    def start(self) -> None:
        """Start sampling (NVML is opened on the sampler thread, so the main thread never waits on it)."""
        self.sampler.start(self.deliver_snapshot, self.interval)

    def stop(self) -> None:
        """Stop the sampler thread and release NVML; safe to call twice."""
        self.sampler.close()

    # ------------------------------------------------------------------------------------------- slots

    @Slot(object)
    def show_snapshot(self, snapshot: StatsSnapshot) -> None:
        values: tuple[float | None, ...]
        if snapshot.nvml_available:
            gpu = next((reading for reading in snapshot.gpus if reading.index == GRAPHED_GPU), None)
            self._show_gpus(snapshot.gpus)
            values = (None, None, None)
            if gpu is not None:
                values = (gpu.utilization_pct, _percent(gpu.memory_used_mb, gpu.memory_total_mb), gpu.temperature_c)
            device_compact = gpu_compact(gpu)
            details = [label.text() for label in self.gpu_labels]
        else:
            self._show_gpus(())
            host = snapshot.host
            values = (host.cpu_pct, _percent(host.ram_used_mb, host.ram_total_mb)) if host is not None else ()
            _set_text(self.reason_label, unavailable_line(snapshot.nvml_problem))
            device_compact = self.reason_label.text().rstrip(".")
            device_compact += f" · {host_compact(host)}" if host is not None else ""
            details = [self.reason_label.text()]
            if self._gpu_mode is None:
                self.no_gpu.emit()
        _set_visible(self.reason_label, not snapshot.nvml_available)
        if snapshot.host is not None:
            _set_text(self.host_label, host_line(snapshot.host))
            details.append(self.host_label.text())
        self._show_errors(snapshot)
        self._append(snapshot.nvml_available, HistoryPoint(snapshot.time, values))
        self._device_compact = device_compact
        self._details = details
        self._update_compact()
        self.snapshots_shown += 1
        self.graph.update()  # a repaint is scheduled, and merged with any other pending one

    @Slot(object)
    def show_job_event(self, event: JobEvent) -> None:
        if event.kind == "progress":
            text, compact = job_line(event), job_compact(event)
        elif event.kind == "started":
            text, compact = job_line(event), ""
        elif event.kind in _JOB_ENDED:
            text, compact = IDLE_JOB_TEXT, ""
        else:  # "waiting": the job line still holds what it showed
            return
        _set_text(self.job_label, text)
        self._job_compact = compact
        self._update_compact()

    # ------------------------------------------------------------------------------------------- parts

    def _show_gpus(self, gpus: Iterable[GpuReading]) -> None:
        readings = list(gpus)
        # GPUs rarely come and go (one falls off the bus): labels are added or removed only when the count changes.
        while len(self.gpu_labels) < len(readings):
            label = _reading_label(f"GPU {len(self.gpu_labels)}")
            self.gpu_labels.append(label)
            self._gpu_box.addWidget(label)
        while len(self.gpu_labels) > len(readings):
            self.gpu_labels.pop().deleteLater()
        for label, reading in zip(self.gpu_labels, readings, strict=True):
            _set_text(label, gpu_line(reading))

    def _show_errors(self, snapshot: StatsSnapshot) -> None:
        errors = list(snapshot.errors) + [f"GPU {gpu.index}: {gpu.error}" for gpu in snapshot.gpus if gpu.error]
        _set_text(self.message_label, "; ".join(errors))
        _set_visible(self.message_label, bool(errors))

    def _append(self, gpu_mode: bool, point: HistoryPoint) -> None:
        if gpu_mode != self._gpu_mode:
            # The series change meaning (GPU or CPU): an old line would be read on the new legend.
            self._gpu_mode = gpu_mode
            self.graph.reset(GPU_SERIES if gpu_mode else CPU_SERIES)
            self.graph.setAccessibleName(
                "GPU history, last 10 minutes" if gpu_mode else "CPU and RAM history, last 10 minutes"
            )
            for number, label in enumerate(self.legend_labels):
                shown = number < len(self.graph.series)
                _set_visible(label, shown)
                label.setToolTip(self.graph.series[number].description if shown else "")
        self.graph.append(point)
        self._set_legend(self.graph.series, point.values)

    def _set_legend(self, series: tuple[Series, ...], values: tuple[float | None, ...]) -> None:
        for entry, label, value in zip(series, self.legend_labels, values + (None,) * len(series), strict=False):
            reading = f" {value:.0f}{entry.unit}" if value is not None else ""
            text = f'<span style="color:{entry.colour}">■</span> {entry.name}{reading}'
            if label.text() != text:
                label.setText(text)
                label.setAccessibleName(f"{entry.name}{reading}")

    def _update_compact(self) -> None:
        tooltip = "\n".join([*self._details, "A click shows or hides the GPU panel."])
        _set_text(self.compact_label, self._device_compact + self._job_compact, tooltip)
