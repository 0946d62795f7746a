"""Offload to cloud: what the selected jobs would cost on each GPU, where to run them, and the run itself.

The dialog shows the estimate (:func:`app.cloud.estimate.estimate`) for the selected queued jobs, lets the user
pick a row to rent or their own SSH host, confirms a rental with its price, estimate and budget, and then runs
:class:`app.cloud.queue_offload.QueueOffload` on a Python thread. The jobs stay in the queue while they run
elsewhere: QueueOffload writes their remote progress and cost into the store, and finishes, fails or requeues
them itself.

Threading: the estimate (which probes durations and may read live prices over the network) and the run happen
on their own threads; they report only by emitting on a parentless :class:`_Relay`, so Qt queues the emission
and the dialog's slots run on the main thread. No widget is touched from another thread.

Heavy imports (paramiko through :mod:`app.cloud.offload`) happen inside the functions that need them: the
window imports this module at start for :class:`OrphanSweep`, before any offload is asked for.
"""

from __future__ import annotations

import contextlib
import logging
import re
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QButtonGroup,
    QCheckBox,
    QDialog,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.cloud.estimate import LOCAL_PROVIDER, SSH_PROVIDER, Estimate, Option, price_date_text, within_budget
from app.cloud.estimate import Job as EstimateJob
from app.core.export import clock
from app.core.jobs import Job, JobNotFoundError, JobOptions, JobState, JobStore

if TYPE_CHECKING:
    from app.cloud.offload import Offload, OffloadEvent, OffloadResult, RemoteSetup, Teardown
    from app.cloud.queue_offload import QueueOffload
    from app.cloud.types import Offer

log = logging.getLogger(__name__)

# Remembered in Settings.extra: where the user's own host is and how Scriba runs there (never a secret: the
# identity is a path to a key file, not the key), and the last budget.
SSH_HOST_KEY = "offload_ssh_host"
BUDGET_KEY = "offload_budget_usd"
DEFAULT_BUDGET_USD = 5.0
DEFAULT_REMOTE_COMMAND = "scriba"
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"

COLUMNS = ("", "Provider", "Offer", "GPU", "VRAM", "$/h", "Time", "Cost", "Audio h/$", "Price date", "Launch")
MARK_COLUMN, PROVIDER_COLUMN, OFFER_COLUMN, GPU_COLUMN = 0, 1, 2, 3
PRICE_COLUMN, TIME_COLUMN, COST_COLUMN, LAUNCH_COLUMN = 5, 6, 7, 10
EXCLUDED_COLUMNS = ("Provider", "Offer", "GPU", "Why not")
OPTION_ROLE = Qt.ItemDataRole.UserRole
PROGRESS_STEPS = 1000

_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

EstimateFunction = Callable[[EstimateJob], Estimate]
Confirm = Callable[[QWidget, str, str], bool]


class RentFactory(Protocol):
    """:func:`app.cloud.launch.build_rented_offload`'s shape."""

    def __call__(
        self,
        provider_name: str,
        chosen: Offer,
        data_dir: Path,
        *,
        options: JobOptions,
        on_event: Callable[[OffloadEvent], None] | None,
        budget_usd: float | None,
        estimate_usd: float | None,
        hf_token: str | None = None,
    ) -> Offload: ...


class SshFactory(Protocol):
    """:func:`app.cloud.launch.build_ssh_offload`'s shape."""

    def __call__(
        self,
        url: str,
        data_dir: Path,
        *,
        identity: Path | None,
        known_hosts: Path,
        options: JobOptions,
        on_event: Callable[[OffloadEvent], None] | None,
        hf_token: str | None = None,
        setup: RemoteSetup | None = None,
    ) -> Offload: ...


# ------------------------------------------------------------------------------------------------ pure helpers


@dataclass(frozen=True)
class SelectedJobs:
    """The jobs to offload, summed up for the estimate."""

    job_ids: tuple[int, ...]
    names: tuple[str, ...]
    audio_seconds: float  # of the files whose length is known
    unknown_lengths: int  # files whose length neither the queue nor the file's header gives
    total_bytes: int
    model: str  # a catalog name, or a model directory's path (then nothing can be estimated)
    diarize: bool
    options: JobOptions  # the first job's: the estimate and the remote default use these
    mixed_options: bool

    def estimate_job(self) -> EstimateJob:
        return EstimateJob(
            audio_seconds=self.audio_seconds,
            model=self.model,
            diarize=self.diarize,
            upload_bytes=self.total_bytes,
            files=len(self.job_ids),
        )


def summarize_jobs(jobs: Sequence[Job], probe: Callable[[Path], float | None] | None = None) -> SelectedJobs:
    """Total length and size of ``jobs``; a length the queue does not know yet is read from the file's header.

    Reads files: call it off the main thread.
    """
    if not jobs:
        raise ValueError("no jobs to offload")
    if probe is None:
        from app.core.audio import probe_duration

        probe = probe_duration
    seconds = 0.0
    unknown = 0
    total_bytes = 0
    for job in jobs:
        duration = job.duration if job.duration else probe(job.source)
        if duration:
            seconds += duration
        else:
            unknown += 1
        # A missing file counts nothing here: the offload itself refuses it, with its name.
        with contextlib.suppress(OSError):
            total_bytes += job.source.stat().st_size
    first = jobs[0].options
    model = first.model
    if model is None:
        # "The best model on disk": what this computer would run, so the estimate compares like with like.
        from app.core.models import default_model

        model = default_model().name
    return SelectedJobs(
        job_ids=tuple(job.id for job in jobs),
        names=tuple(job.source.name for job in jobs),
        audio_seconds=seconds,
        unknown_lengths=unknown,
        total_bytes=total_bytes,
        model=model,
        diarize=first.diarize,
        options=first,
        mixed_options=any(job.options != first for job in jobs[1:]),
    )


def default_estimate(job: EstimateJob) -> Estimate:
    """The price table, with live prices for every provider whose API key is stored (network: not on the main
    thread). A provider whose API fails falls back to the table, with a note saying so."""
    from app.cloud.estimate import Assumptions, estimate
    from app.cloud.providers import configured_providers
    from app.core.models import BUNDLED_MODEL, cached_model_path, is_model_dir

    live = {name: provider.offers for name, provider in configured_providers().items()}
    on_disk = job.model == BUNDLED_MODEL or is_model_dir(cached_model_path(job.model))
    return estimate(
        job,
        assumptions=Assumptions(local_model_on_disk=on_disk),
        live=live or None,
        # Marketplaces list hundreds of near-identical live offers: the three cheapest per GPU are enough.
        max_per_gpu=3 if live else None,
    )


def why_not_rentable(option: Option) -> str | None:
    """None when Scriba can rent this row in one click; otherwise why not, for the Run button's tooltip."""
    from app.cloud.providers import PROVIDER_CLASSES

    offer = option.offer
    if offer.provider == LOCAL_PROVIDER:
        return "This computer: nothing to rent. Close this dialog and the local queue transcribes the jobs."
    if offer.provider == SSH_PROVIDER:
        return "Your own SSH host: choose “My SSH host” below."
    if not offer.launchable or offer.provider not in PROVIDER_CLASSES:
        rentable = ", ".join(cls.title for cls in PROVIDER_CLASSES.values())
        return (
            f"Estimate only: Scriba cannot rent from {offer.provider} (no adapter). "
            f"Pick a row of {rentable}, or your own SSH host."
        )
    return None


def provider_title(name: str) -> str:
    from app.cloud.providers import PROVIDER_CLASSES

    cls = PROVIDER_CLASSES.get(name)
    return cls.title if cls is not None else name


def parse_remote_command(text: str) -> RemoteSetup:
    """``[NAME=VALUE …] command [args …]``: leading assignments become the remote environment (like env(1))."""
    from app.cloud.offload import RemoteSetup

    words = shlex.split(text)
    env: list[tuple[str, str]] = []
    while words and _ENV_WORD.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env.append((name, value))
    if not words:
        raise ValueError("give the command that runs Scriba on the host, for example: scriba")
    return RemoteSetup(command=tuple(words), env=tuple(env))


def format_duration(seconds: float) -> str:
    from app.cloud.offload_cli import format_duration as cli_format

    return cli_format(seconds)


def format_size(size_bytes: float) -> str:
    return f"{size_bytes / 1_000_000:.1f} MB" if size_bytes < 1e9 else f"{size_bytes / 1e9:.2f} GB"


def breakdown_text(option: Option) -> str:
    """The tooltip of a row: where the time goes, and how the cost follows from it."""
    parts = option.breakdown
    speed = option.transcribe_speed
    lines = [
        f"{option.offer.provider} {option.offer.offer}: about {format_duration(option.est_seconds)}, "
        f"${option.est_cost_usd:.3f}",
        f"boot {format_duration(parts.boot_s)} · set-up {format_duration(parts.setup_s)} · "
        f"model download {format_duration(parts.model_download_s)}",
        f"upload {format_duration(parts.upload_s)} · transcription {format_duration(parts.transcribe_s)} "
        f"({speed.x_realtime:.1f}× real time, {speed.kind})",
    ]
    if option.diarize_speed is not None:
        lines.append(
            f"diarization {format_duration(parts.diarize_s)} ({option.diarize_speed.x_realtime:.1f}× real time, "
            f"{option.diarize_speed.kind}) · download {format_duration(parts.download_s)}"
        )
    else:
        lines.append(f"download {format_duration(parts.download_s)}")
    if option.usd_per_hour > 0:
        lines.append(
            f"billed {format_duration(option.billed_seconds)} at ${option.usd_per_hour:.3f}/h"
            + (" (spot)" if option.spot else "")
        )
    if option.price_note:
        lines.append(option.price_note)
    lines.extend(option.notes)
    return "\n".join(lines)


def describe_error(error: BaseException) -> str:
    """What went wrong, said so the user knows what to do next (the typed errors already carry that text)."""
    from app.cloud.offload import OffloadError
    from app.cloud.providers import AuthError, NoCapacity, ProviderError
    from app.cloud.transport import HostKeyError, TransportError

    text = str(error).strip() or type(error).__name__
    if isinstance(error, AuthError):
        hint = f" In a terminal: `scriba offload key set {error.provider}`." if error.provider else ""
        return f"No usable API key. {text}{hint}"
    if isinstance(error, NoCapacity):
        return f"No machine free. {text}"
    if isinstance(error, HostKeyError):
        return f"The host's key was refused; nothing was sent. {text}"
    if isinstance(error, OffloadError | TransportError | ProviderError):
        return text
    if isinstance(error, FileNotFoundError | PermissionError):
        return f"{type(error).__name__}: {text}"
    return f"Unexpected error ({type(error).__name__}): {text}"


def teardown_text(teardown: Teardown | None) -> str:
    """What a run left behind remotely, as its teardown found it. "Torn down" only when the provider confirmed
    every machine gone: a teardown that could not confirm it must not read like one that did."""
    if teardown is None or teardown.state == "not_started":
        # Cancelled before the offload wrote a launch down, so before it asked any provider for a machine.
        return "nothing was started remotely"
    if teardown.state == "terminated":
        return "everything remote was torn down"
    if teardown.state == "nothing_to_end":
        # The user's own host, or an interrupted launch whose label the provider's list does not show.
        return teardown.message or "no machine was rented, so none bills"
    # Unconfirmed: the teardown's message names the machine, says it may bill and what to do.
    return teardown.message or (
        "the teardown could not confirm that the machine is gone: it may still be billing. Run "
        "`scriba offload sweep`, or check the provider's console."
    )


def gpu_event_text(data: dict[str, Any]) -> str:
    """``remote GPU 87% · 3.1/16.0 GB · 61 °C`` from a remote worker's "gpu" event."""
    gpus = data.get("gpus") or []
    if not gpus:
        cpu = data.get("cpu_pct")
        return f"remote: no GPU reading · CPU {cpu:.0f}%" if isinstance(cpu, int | float) else ""
    gpu = gpus[0]
    parts = ["remote GPU"]
    if gpu.get("utilization_pct") is not None:
        parts.append(f"{gpu['utilization_pct']:.0f}%")
    if gpu.get("memory_used_mb") is not None and gpu.get("memory_total_mb"):
        parts.append(f"{gpu['memory_used_mb'] / 1024:.1f}/{gpu['memory_total_mb'] / 1024:.1f} GB")
    if gpu.get("temperature_c") is not None:
        parts.append(f"{gpu['temperature_c']:.0f} °C")
    return " · ".join(parts)


def ask_to_confirm(parent: QWidget, title: str, text: str) -> bool:
    answer = QMessageBox.question(
        parent,
        title,
        text,
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes


# ------------------------------------------------------------------------------------------------ threads


class _Relay(QObject):
    """Carries news from the dialog's threads to the main thread (queued cross-thread emissions)."""

    prepared = Signal(object)  # Prepared, or the exception that stopped it
    news = Signal(object)  # OffloadEvent
    ended = Signal(object)  # RunOutcome


@dataclass(frozen=True)
class Prepared:
    selected: SelectedJobs
    estimate: Estimate | None
    why_no_estimate: str | None


@dataclass(frozen=True)
class RunOutcome:
    result: OffloadResult | None = None
    error: BaseException | None = None
    cancelled: bool = False


class _EventHook:
    """Lets the offload be built first (where a missing key or no capacity fails) without taking any job from
    the queue; the QueueOffload that then runs it plugs its own event handler in."""

    def __init__(self) -> None:
        self.target: Callable[[OffloadEvent], None] | None = None

    def __call__(self, event: OffloadEvent) -> None:
        if self.target is not None:
            self.target(event)


class _Run:
    """One offload, shared by the main thread (cancel) and its run thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cancel_requested = threading.Event()
        self.queue: QueueOffload | None = None
        self.offload: Offload | None = None
        self.thread: threading.Thread | None = None
        self.started_at = time.monotonic()

    def cancel(self) -> None:
        with self.lock:
            self.cancel_requested.set()
            queue = self.queue
        if queue is not None:
            queue.cancel()  # thread-safe; the teardown happens in the offload's finally, on the run thread


def _run_offload(
    run: _Run,
    relay: _Relay,
    data_dir: Path,
    job_ids: Sequence[int],
    build: Callable[[Callable[[OffloadEvent], None]], Offload],
) -> None:
    """The run thread: build the offload, then let QueueOffload take the jobs and run it. Reports via ``relay``."""
    from app.cloud.queue_offload import QueueOffload

    outcome = RunOutcome()
    store: JobStore | None = None
    try:
        hook = _EventHook()
        offload = build(hook)
        run.offload = offload

        def make_offload(on_event: Callable[[OffloadEvent], None]) -> Offload:
            hook.target = on_event
            return offload

        # A connection of its own: the window polls SQLite's data_version, which moves only on commits made by
        # other connections, so progress written here reaches the queue's rows within its poll.
        store = JobStore(data_dir, recover=False)
        with run.lock:
            if run.cancel_requested.is_set():
                outcome = RunOutcome(cancelled=True)  # before anything ran: the jobs were never taken
                return
            run.queue = QueueOffload(store, job_ids, make_offload, on_event=relay.news.emit)
        result = run.queue.run()
        outcome = RunOutcome(result=result, cancelled=result is None)
    except BaseException as error:  # shown to the user; QueueOffload has already failed or requeued the jobs
        log.info("offload ended with %s: %s", type(error).__name__, error)
        outcome = RunOutcome(error=error)
    finally:
        if store is not None:
            store.close()
        relay.ended.emit(outcome)  # always last: every event of the run is queued before it


def _prepare(relay: _Relay, store: JobStore, job_ids: Sequence[int], estimate_function: EstimateFunction) -> None:
    """The estimate thread: read the jobs' lengths (probing files where needed) and estimate."""
    try:
        jobs = []
        for job_id in job_ids:
            try:
                jobs.append(store.get(job_id))
            except JobNotFoundError:
                continue
        selected = summarize_jobs(jobs)
        why_none: str | None = None
        result: Estimate | None = None
        if selected.audio_seconds <= 0:
            why_none = "no estimate: the length of the audio is unknown (the files' headers do not say)"
        else:
            try:
                result = estimate_function(selected.estimate_job())
            except ValueError as error:  # a model outside the catalog (a model directory), no audio
                why_none = f"no estimate: {error}"
        relay.prepared.emit(Prepared(selected, result, why_none))
    except Exception as error:
        log.exception("offload estimate failed")
        relay.prepared.emit(error)


# ------------------------------------------------------------------------------------------------ the dialog


class OffloadDialog(QDialog):
    """Estimate, choose, confirm and run the offload of some queued jobs; non-modal, one run per dialog."""

    offload_event = Signal(object)  # OffloadEvent, re-emitted on the main thread after the dialog applied it
    offload_ended = Signal(str)  # the final status, for the window's notification
    remember = Signal(dict)  # Settings.extra entries to store (the SSH host's fields, the budget)

    def __init__(
        self,
        store: JobStore,
        job_ids: Sequence[int],
        *,
        remembered: dict[str, Any] | None = None,
        estimate_function: EstimateFunction = default_estimate,
        rent_factory: RentFactory | None = None,
        ssh_factory: SshFactory | None = None,
        confirm: Confirm = ask_to_confirm,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Offload to cloud")
        self.store = store
        self.job_ids = tuple(job_ids)
        self.data_dir = store.directory
        self._estimate_function = estimate_function
        self._rent_factory = rent_factory
        self._ssh_factory = ssh_factory
        self._confirm = confirm
        remembered = remembered or {}
        self.selected: SelectedJobs | None = None
        self.estimate: Estimate | None = None
        self.outcome: RunOutcome | None = None
        self.offload_run: _Run | None = None
        self._spent = False  # a run took the jobs from the queue: this dialog has nothing left to run
        self._running_ids: list[int] = []  # the jobs of the current run (those still queued when it started)
        self._prepare_thread: threading.Thread | None = None
        self._last_message = ""
        self._cost_usd = 0.0
        self._file_fractions: dict[int, float] = {}
        self._relay = _Relay()
        self._relay.prepared.connect(self._on_prepared)
        self._relay.news.connect(self._on_event)
        self._relay.ended.connect(self._on_ended)
        self._tick = QTimer(self)
        self._tick.setInterval(1000)
        self._tick.timeout.connect(self._render_status)

        self.summary_label = QLabel("Reading the jobs…")
        self.summary_label.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setMinimumHeight(220)
        self.table.itemSelectionChanged.connect(self._update_run_button)

        self.excluded_toggle = QToolButton()
        self.excluded_toggle.setCheckable(True)
        self.excluded_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.excluded_toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.excluded_toggle.setText("Left out (0)")
        self.excluded_toggle.toggled.connect(self._toggle_excluded)
        self.excluded_table = QTableWidget(0, len(EXCLUDED_COLUMNS))
        self.excluded_table.setHorizontalHeaderLabels(list(EXCLUDED_COLUMNS))
        self.excluded_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.excluded_table.verticalHeader().setVisible(False)
        self.excluded_table.horizontalHeader().setStretchLastSection(True)
        self.excluded_table.setMaximumHeight(140)
        self.excluded_table.hide()
        self.notes_label = QLabel("")
        self.notes_label.setWordWrap(True)
        self.notes_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        # Where to run.
        self.rent_choice = QRadioButton("Rent the selected row")
        self.ssh_choice = QRadioButton("My SSH host")
        self.rent_choice.setChecked(True)
        self._where = QButtonGroup(self)
        self._where.addButton(self.rent_choice)
        self._where.addButton(self.ssh_choice)
        self.rent_choice.toggled.connect(self._update_run_button)
        host = remembered.get(SSH_HOST_KEY) or {}
        self.ssh_url = QLineEdit(str(host.get("url", "")))
        self.ssh_url.setPlaceholderText("ssh://user@host:port")
        self.ssh_identity = QLineEdit(str(host.get("identity", "")))
        self.ssh_identity.setPlaceholderText("private key file (empty: your SSH agent and default keys)")
        self.ssh_known_hosts = QLineEdit(str(host.get("known_hosts") or DEFAULT_KNOWN_HOSTS))
        self.ssh_command = QLineEdit(str(host.get("command") or DEFAULT_REMOTE_COMMAND))
        self.ssh_command.setToolTip(
            "How Scriba starts on the host. Leading NAME=VALUE words set its environment, "
            "e.g. PYTHONPATH=/opt/scriba python3 -m app"
        )
        for field in (self.ssh_url, self.ssh_identity, self.ssh_known_hosts, self.ssh_command):
            field.textEdited.connect(lambda _text: self.ssh_choice.setChecked(True))
        ssh_form = QFormLayout()
        ssh_form.addRow("Address", self.ssh_url)
        ssh_form.addRow("Identity file", self._with_browse(self.ssh_identity, "SSH private key"))
        ssh_form.addRow("Known hosts", self._with_browse(self.ssh_known_hosts, "Known-hosts file"))
        ssh_form.addRow("Remote command", self.ssh_command)
        ssh_box = QGroupBox()
        ssh_box.setLayout(ssh_form)

        self.budget = QDoubleSpinBox()
        self.budget.setPrefix("$")
        self.budget.setDecimals(2)
        self.budget.setRange(0.01, 10_000.0)
        self.budget.setSingleStep(1.0)
        self.budget.setValue(float(remembered.get(BUDGET_KEY) or DEFAULT_BUDGET_USD))
        self.budget.setToolTip("A rental whose estimate is higher is refused; the remote stops when it is spent")
        self.budget.valueChanged.connect(self._update_run_button)
        self.send_token = QCheckBox("Send my Hugging Face token to this machine for this job")
        self.send_token.setToolTip(
            "Only needed for pyannote diarization there. It goes to a file only the remote user can read, "
            "deleted as soon as the worker has read it."
        )

        self.run_button = QPushButton("Run")
        self.run_button.setDefault(True)
        self.run_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel offload")
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.hide()
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.close)

        self.status_label = QLabel("")
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.gpu_label = QLabel("")
        self.progress = QProgressBar()
        self.progress.setRange(0, PROGRESS_STEPS)
        self.progress.setValue(0)
        self.progress.hide()
        self.error_label = QLabel("")
        self.error_label.setWordWrap(True)
        self.error_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_label.setStyleSheet("color: #c62828;")
        self.error_label.hide()

        options_row = QHBoxLayout()
        options_row.addWidget(QLabel("Budget"))
        options_row.addWidget(self.budget)
        options_row.addSpacing(12)
        options_row.addWidget(self.send_token)
        options_row.addStretch(1)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for button in (self.cancel_button, self.run_button, self.close_button):
            buttons.addWidget(button)

        layout = QVBoxLayout(self)
        layout.addWidget(self.summary_label)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.excluded_toggle)
        layout.addWidget(self.excluded_table)
        layout.addWidget(self.notes_label)
        where = QHBoxLayout()
        where.addWidget(self.rent_choice)
        where.addWidget(self.ssh_choice)
        where.addStretch(1)
        layout.addLayout(where)
        layout.addWidget(ssh_box)
        layout.addLayout(options_row)
        layout.addWidget(self.status_label)
        layout.addWidget(self.progress)
        layout.addWidget(self.gpu_label)
        layout.addWidget(self.error_label)
        layout.addLayout(buttons)
        self.resize(980, 720)
        self._update_run_button()
        self._start_estimate()

    def _with_browse(self, field: QLineEdit, title: str) -> QWidget:
        button = QToolButton()
        button.setText("…")
        button.setToolTip(f"Choose the {title.lower()}")

        def browse() -> None:
            start = str(Path(field.text()).expanduser().parent) if field.text() else str(Path.home() / ".ssh")
            chosen, _ = QFileDialog.getOpenFileName(self, title, start)
            if chosen:
                field.setText(chosen)
                self.ssh_choice.setChecked(True)

        button.clicked.connect(browse)
        row = QWidget()
        layout = QHBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(field, 1)
        layout.addWidget(button)
        return row

    # -------------------------------------------------------------------------------------------- estimate

    def _start_estimate(self) -> None:
        self._prepare_thread = threading.Thread(
            target=_prepare,
            args=(self._relay, self.store, self.job_ids, self._estimate_function),
            daemon=True,  # reads headers and prices only: nothing to clean up if the program ends meanwhile
            name="offload-estimate",
        )
        self._prepare_thread.start()

    def _on_prepared(self, prepared: object) -> None:
        if not isinstance(prepared, Prepared):
            self.summary_label.setText(f"The jobs could not be read: {prepared}")
            return
        self.selected = prepared.selected
        self.estimate = prepared.estimate
        self.summary_label.setText(self._summary_text(prepared.selected, prepared.why_no_estimate))
        if prepared.estimate is not None:
            self._fill_table(prepared.estimate)
        self._update_run_button()

    def _summary_text(self, selected: SelectedJobs, why_none: str | None) -> str:
        count = len(selected.job_ids)
        diarization = f"on ({selected.options.diarizer})" if selected.diarize else "off"
        lines = [
            f"{count} job{'s' if count != 1 else ''}: {format_duration(selected.audio_seconds)} of audio, "
            f"{format_size(selected.total_bytes)} to upload · model {selected.model} · diarization {diarization}"
        ]
        if selected.unknown_lengths:
            lines.append(
                f"The length of {selected.unknown_lengths} file(s) is unknown: the estimate counts only the others."
            )
        if selected.mixed_options:
            lines.append("The jobs have different options: the estimate uses the first job's.")
        if why_none:
            lines.append(why_none[:1].upper() + why_none[1:] + ". Your own SSH host can still run them.")
        return "\n".join(lines)

    def _fill_table(self, result: Estimate) -> None:
        bold = QFont(self.table.font())
        bold.setBold(True)
        self.table.setRowCount(len(result.options))
        for row, option in enumerate(result.options):
            offer = option.offer
            per_usd = option.audio_hours_per_usd
            marks = [name for name, flag in (("cheapest", option.cheapest), ("fastest", option.fastest)) if flag]
            over_budget = option.is_rented and not within_budget(option, self.budget.value())
            cells = [
                " · ".join(("★ " if mark == "cheapest" else "⚡ ") + mark for mark in marks),
                offer.provider,
                offer.offer,
                offer.gpu if offer.gpu_count == 1 else f"{offer.gpu_count}× {offer.gpu}",
                f"{offer.vram_gb:g} GB" if offer.vram_gb else "-",
                f"{option.usd_per_hour:.3f}" + (" spot" if option.spot else ""),
                format_duration(option.est_seconds),
                f"${option.est_cost_usd:.2f}",
                "-" if per_usd is None else f"{per_usd:.1f}",
                price_date_text(offer),
                "yes" if why_not_rentable(option) is None else "no",
            ]
            tooltip = breakdown_text(option)
            if over_budget:
                tooltip += f"\nOver your budget (${self.budget.value():.2f})"
            reason = why_not_rentable(option)
            if reason:
                tooltip += f"\n{reason}"
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(OPTION_ROLE, row)
                item.setToolTip(tooltip)
                if marks:
                    item.setFont(bold)
                if reason:
                    # Still selectable, so the Run button can say why it cannot rent this row.
                    item.setForeground(self.palette().placeholderText())
                self.table.setItem(row, column, item)
        self.excluded_toggle.setText(f"Left out ({len(result.excluded)})")
        self.excluded_toggle.setEnabled(bool(result.excluded))
        self.excluded_table.setRowCount(len(result.excluded))
        for row, excluded in enumerate(result.excluded):
            for column, text in enumerate((excluded.offer.provider, excluded.offer.offer, excluded.offer.gpu)):
                self.excluded_table.setItem(row, column, QTableWidgetItem(text))
            reason_item = QTableWidgetItem(excluded.reason)
            reason_item.setToolTip(excluded.reason)
            self.excluded_table.setItem(row, 3, reason_item)
        notes = [
            "Time = boot + set-up + model download + upload + transcription"
            + (" + diarization" if result.job.diarize else "")
            + " + download; cost = that time at the provider's billing granularity. Hover a row for the details."
        ]
        notes += result.notes
        self.notes_label.setText("\n".join(f"• {note}" for note in notes))
        # Preselect the cheapest rentable row: the one most people want.
        for row, option in enumerate(result.options):
            if option.cheapest and why_not_rentable(option) is None:
                self.table.selectRow(row)
                break

    def _toggle_excluded(self, shown: bool) -> None:
        self.excluded_table.setVisible(shown)
        self.excluded_toggle.setArrowType(Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow)

    def selected_option(self) -> Option | None:
        if self.estimate is None:
            return None
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        return self.estimate.options[rows[0].row()]

    # -------------------------------------------------------------------------------------------- run button

    def _update_run_button(self) -> None:
        if self.running or self.selected is None or self._spent:
            self.run_button.setEnabled(False)
            if self._spent:
                self.run_button.setToolTip("These jobs are no longer queued")
            return
        if self.ssh_choice.isChecked():
            self.run_button.setText("Run on my SSH host")
            self.run_button.setToolTip("Nothing is rented: the jobs run on your machine over SSH")
            self.run_button.setEnabled(True)
            return
        option = self.selected_option()
        if option is None:
            self.run_button.setText("Run")
            self.run_button.setToolTip("Pick a row of the estimate, or choose “My SSH host”")
            self.run_button.setEnabled(False)
            return
        self.run_button.setText(f"Run on {option.offer.gpu} ({option.offer.provider}) ≈ ${option.est_cost_usd:.2f}")
        reason = why_not_rentable(option)
        if reason is None and not within_budget(option, self.budget.value()):
            reason = (
                f"The estimate (${option.est_cost_usd:.2f}) is over your budget (${self.budget.value():.2f}): "
                "raise the budget or pick a cheaper row"
            )
        self.run_button.setToolTip(reason or "Rent this machine, run the jobs there, then destroy it")
        self.run_button.setEnabled(reason is None)

    # -------------------------------------------------------------------------------------------- start

    def start(self) -> None:
        """Check the choice, confirm a rental, then run the offload on its own thread."""
        if self.offload_run is not None and self.outcome is None:
            return
        self._show_error("")
        queued = self._still_queued()
        if not queued:
            self._show_error("None of these jobs is queued any more: nothing to offload.")
            return
        selected = self.selected
        if selected is None:
            return
        options = selected.options
        budget = self.budget.value()
        if self.ssh_choice.isChecked():
            build = self._ssh_build(options)
            if build is None:
                return
            where = f"your SSH host {self.ssh_url.text().strip()}"
        else:
            option = self.selected_option()
            if option is None:
                self._show_error("Pick a row of the estimate, or choose “My SSH host”.")
                return
            reason = why_not_rentable(option)
            if reason is not None:
                self._show_error(reason)
                return
            if not within_budget(option, budget):
                self._show_error(
                    f"The estimate (${option.est_cost_usd:.2f}) is over your budget (${budget:.2f}): nothing was "
                    "rented. Raise the budget, pick a cheaper row, or send fewer files."
                )
                return
            if not self._confirm(self, "Rent a GPU?", self.confirmation_text(option, budget)):
                self._set_status("Nothing was rented.")
                return
            build = self._rent_build(option, options, budget)
            where = f"{option.offer.gpu} ({provider_title(option.offer.provider)})"
        self.remember.emit({BUDGET_KEY: budget})
        self._begin(queued, build, where)

    def confirmation_text(self, option: Option, budget: float) -> str:
        offer = option.offer
        vram = f" ({offer.vram_gb:g} GB)" if offer.vram_gb else ""
        return (
            f"Rent {offer.gpu}{vram} on {provider_title(offer.provider)} at ${option.usd_per_hour:.3f} per hour?\n\n"
            f"Estimate: about {format_duration(option.est_seconds)} and ${option.est_cost_usd:.2f} "
            f"(prices of {price_date_text(offer)}).\n"
            f"Budget: ${budget:.2f}; the remote work stops when it is spent.\n\n"
            "The machine is destroyed when the jobs finish, fail or are cancelled."
        )

    def _still_queued(self) -> list[int]:
        queued = []
        for job_id in self.job_ids:
            try:
                if self.store.get(job_id).state is JobState.QUEUED:
                    queued.append(job_id)
            except JobNotFoundError:
                continue
        return queued

    def _ssh_build(self, options: JobOptions) -> Callable[[Callable[[OffloadEvent], None]], Offload] | None:
        from app.cloud.transport import TransportError, parse_ssh_url

        url = self.ssh_url.text().strip()
        identity_text = self.ssh_identity.text().strip()
        known_hosts_text = self.ssh_known_hosts.text().strip() or DEFAULT_KNOWN_HOSTS
        command_text = self.ssh_command.text().strip() or DEFAULT_REMOTE_COMMAND
        identity = Path(identity_text).expanduser() if identity_text else None
        known_hosts = Path(known_hosts_text).expanduser()
        try:
            parse_ssh_url(url, identity)
            setup = parse_remote_command(command_text)
        except (TransportError, ValueError) as error:
            self._show_error(str(error))
            return None
        if identity is not None and not identity.is_file():
            self._show_error(f"The identity file {identity} does not exist.")
            return None
        if not known_hosts.is_file():
            self._show_error(
                f"The known-hosts file {known_hosts} does not exist. Scriba never accepts a host key silently: "
                "connect once with ssh, or add the key with ssh-keyscan."
            )
            return None
        self.remember.emit(
            {
                SSH_HOST_KEY: {
                    "url": url,
                    "identity": identity_text,
                    "known_hosts": known_hosts_text,
                    "command": command_text,
                }
            }
        )
        factory = self._ssh_factory
        if factory is None:
            from app.cloud.launch import build_ssh_offload

            factory = build_ssh_offload
        data_dir = self.data_dir
        send_token = self.send_token.isChecked()

        def build(on_event: Callable[[OffloadEvent], None]) -> Offload:
            token = self._hf_token_now(send_token)
            return factory(
                url,
                data_dir,
                identity=identity,
                known_hosts=known_hosts,
                options=options,
                on_event=on_event,
                hf_token=token,
                setup=setup,
            )

        return build

    def _rent_build(
        self, option: Option, options: JobOptions, budget: float
    ) -> Callable[[Callable[[OffloadEvent], None]], Offload]:
        factory = self._rent_factory
        if factory is None:
            from app.cloud.launch import build_rented_offload

            factory = build_rented_offload
        data_dir = self.data_dir
        send_token = self.send_token.isChecked()

        def build(on_event: Callable[[OffloadEvent], None]) -> Offload:
            # On the run thread: the provider's key is read and its live offers fetched here (network).
            return factory(
                option.offer.provider,
                option.offer,
                data_dir,
                options=options,
                on_event=on_event,
                budget_usd=budget,
                estimate_usd=option.est_cost_usd,
                hf_token=self._hf_token_now(send_token),
            )

        return build

    @staticmethod
    def _hf_token_now(send: bool) -> str | None:
        """Read on the run thread (the keyring can be slow): only when the user ticked the box, for this job."""
        if not send:
            return None
        from app.core.secrets import huggingface_token

        token, _ = huggingface_token()
        return token

    def _begin(
        self, job_ids: list[int], build: Callable[[Callable[[OffloadEvent], None]], Offload], where: str
    ) -> None:
        self.outcome = None
        self._running_ids = job_ids
        self.offload_run = _Run()
        self._last_message = f"starting on {where}"
        self._cost_usd = 0.0
        self._file_fractions = {}
        self.gpu_label.setText("")
        self.progress.setValue(0)
        self.progress.setFormat("Starting…")
        self.progress.show()
        self.cancel_button.setEnabled(True)
        self.cancel_button.show()
        self.close_button.setEnabled(False)
        for widget in (self.table, self.rent_choice, self.ssh_choice, self.budget, self.send_token):
            widget.setEnabled(False)
        self._update_run_button()
        self.offload_run.thread = threading.Thread(
            target=_run_offload,
            args=(self.offload_run, self._relay, self.data_dir, job_ids, build),
            # Not a daemon: a program ending mid-run waits for the teardown in the offload's finally, so a
            # rented machine is destroyed rather than left for the next start's orphan sweep.
            daemon=False,
            name="offload-run",
        )
        self.offload_run.thread.start()
        self._tick.start()
        self._render_status()

    # -------------------------------------------------------------------------------------------- running

    @property
    def running(self) -> bool:
        return self.offload_run is not None and self.outcome is None

    def cancel(self) -> None:
        """Stop the offload; the machine is torn down (and the jobs marked cancelled) before run() returns."""
        if not self.running or self.offload_run is None:
            return
        self.offload_run.cancel()
        self.cancel_button.setEnabled(False)
        self._render_status()

    def shutdown(self) -> None:
        """The window is closing: cancel a running offload (its thread finishes the teardown)."""
        self._tick.stop()
        if self.running:
            self.cancel()

    def wait_until_ended(self, timeout_s: float | None = None) -> bool:
        """Block until the run thread has ended (tests, and a caller that must not leave before the teardown)."""
        if self.offload_run is None or self.offload_run.thread is None:
            return True
        self.offload_run.thread.join(timeout_s)
        return not self.offload_run.thread.is_alive()

    def _on_event(self, event: OffloadEvent) -> None:
        if event.message:
            self._last_message = event.message
        self._cost_usd = max(self._cost_usd, event.cost_usd)
        count = max(len(self._running_ids), 1)
        if event.kind == "upload" and event.fraction is not None:
            self.progress.setFormat("Uploading %p%")
            self.progress.setValue(round(event.fraction * PROGRESS_STEPS))
        elif event.kind in ("started", "progress", "done", "failed") and event.index is not None:
            fraction = 1.0 if event.kind in ("done", "failed") else float(event.fraction or 0.0)
            self._file_fractions[event.index] = max(self._file_fractions.get(event.index, 0.0), fraction)
            self.progress.setFormat("Transcribing %p%")
            self.progress.setValue(round(sum(self._file_fractions.values()) / count * PROGRESS_STEPS))
        elif event.kind == "gpu":
            self.gpu_label.setText(gpu_event_text(event.data))
        self._render_status()
        self.offload_event.emit(event)

    def _render_status(self) -> None:
        if not self.running or self.offload_run is None:
            self._tick.stop()
            return
        elapsed = time.monotonic() - self.offload_run.started_at
        # Until run() returns, the offload's finally is removing the work and destroying the machine.
        prefix = "Tearing down… " if self.offload_run.cancel_requested.is_set() else ""
        self._set_status(f"{prefix}{self._last_message} · {clock(elapsed)} · ${self._cost_usd:.3f} so far")

    def _on_ended(self, outcome: RunOutcome) -> None:
        self.outcome = outcome
        self._tick.stop()
        self.cancel_button.hide()
        self.close_button.setEnabled(True)
        elapsed = time.monotonic() - self.offload_run.started_at if self.offload_run is not None else 0.0
        offload = self.offload_run.offload if self.offload_run is not None else None
        where = f"{offload.offer.gpu} ({offload.provider.name})" if offload is not None else "the remote"
        teardown = offload.teardown if offload is not None else None
        # A machine that may still bill must not hide behind "failed" or "finished" (a cancel's status says so).
        billing_warning = (
            teardown_text(teardown)
            if teardown is not None and teardown.state == "unconfirmed" and not outcome.cancelled
            else ""
        )
        if outcome.error is not None:
            text = describe_error(outcome.error)
            if set(self._running_ids) <= set(self._still_queued()):
                text += " The jobs are still queued."
            self._show_error(f"{text}\n{billing_warning}".strip())
            final = f"Offload failed after {clock(elapsed)}."
            self.progress.setFormat("Failed")
        elif outcome.cancelled:
            final = f"Cancelled after {clock(elapsed)}; {teardown_text(teardown)} · ${self._cost_usd:.3f}"
            self.progress.setFormat("Cancelled")
        else:
            result = outcome.result
            assert result is not None
            done, failed = len(result.transcripts), len(result.failures)
            final = (
                f"Finished on {where}: {done} transcribed"
                + (f", {failed} failed" if failed else "")
                + f" in {clock(result.seconds or elapsed)} · ${result.cost_usd:.3f}"
            )
            failures = "\n".join(result.failures.values()) if failed else ""
            self._show_error(f"{failures}\n{billing_warning}".strip())
            self.progress.setFormat("Done")
            self.progress.setValue(PROGRESS_STEPS)
        self._set_status(final)
        # A run that took nothing from the queue (no key, no capacity, a refused host key) may be tried again.
        self._spent = not self._still_queued()
        for widget in (self.table, self.rent_choice, self.ssh_choice, self.budget, self.send_token):
            widget.setEnabled(not self._spent)
        self._update_run_button()
        if outcome.error is not None:
            self.offload_ended.emit(f"{final} {self.error_label.text()}")
        else:
            self.offload_ended.emit(f"{final} {billing_warning}".strip())

    def _set_status(self, text: str) -> None:
        self.status_label.setText(text)

    def _show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))

    # -------------------------------------------------------------------------------------------- closing

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.running:
            # Closing would hide the only Cancel button of a run that may be billing: keep the dialog up.
            self._set_status("The offload is running: “Cancel offload” stops it and tears the machine down.")
            event.ignore()
            return
        super().closeEvent(event)

    def reject(self) -> None:  # Escape
        if self.running:
            self._set_status("The offload is running: “Cancel offload” stops it and tears the machine down.")
            return
        super().reject()


# ------------------------------------------------------------------------------------------------ start-up sweep


class OrphanSweep(QObject):
    """At start, end any rented machine an earlier run left behind: the teardown ledger's open entries, and any
    machine a provider still lists although the ledger says it is gone (:func:`app.cloud.launch.sweep_left_behind`,
    the same sweep as `scriba offload run`'s).

    Runs on a thread, and only where a ledger exists (something was offloaded from this data folder once): then
    it reads the keyring and asks every provider that has a key for its list of Scriba's machines.
    """

    message = Signal(str)  # one per machine found, checked or ended
    done = Signal(int)  # entries still open afterwards

    def __init__(self, data_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.data_dir = data_dir
        self.worker: threading.Thread | None = None
        self._relay = _SweepRelay()
        self._relay.message.connect(self.message)
        self._relay.done.connect(self.done)

    def start(self) -> bool:
        """False when there is no ledger at all (nothing was ever offloaded from this data folder)."""
        from app.cloud.ledger import DATABASE_NAME

        if not (self.data_dir / DATABASE_NAME).is_file():
            return False
        self.worker = threading.Thread(
            target=_sweep,
            args=(self.data_dir, self._relay),
            daemon=True,  # an unfinished sweep is simply done again at the next start
            name="offload-orphan-sweep",
        )
        self.worker.start()
        return True


class _SweepRelay(QObject):
    message = Signal(str)
    done = Signal(int)


def _sweep(data_dir: Path, relay: _SweepRelay) -> None:
    from app.cloud.launch import sweep_left_behind

    try:
        # The CLI's sweep, run even when the ledger has no open entry: a machine the ledger wrongly closed (as
        # "never launched", or terminated) shows only in the provider's own list, and it bills until it is ended.
        still_open = sweep_left_behind(data_dir, relay.message.emit)
        relay.done.emit(still_open)
    except Exception as error:  # the sweep must never stop the window; it runs again at the next start
        log.exception("orphan sweep failed")
        relay.message.emit(f"Could not check for cloud machines left by an earlier run: {error}")
        relay.done.emit(-1)
