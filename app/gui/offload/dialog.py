"""Offload to cloud: what the selected jobs would cost on each GPU, where to run them, and the run itself.

The widgets only: :class:`app.cloud.offload.controller.OffloadController` estimates, checks the choice, runs
:class:`app.cloud.offload.queue_offload.QueueOffload` on its own thread and says how the run ended. The jobs stay
in the queue while they run elsewhere: QueueOffload writes their remote progress and cost into the store, and
finishes, fails or requeues them itself.

Threading: the controller's threads report only through callables from
:func:`app.gui.main_thread.deliver_on_main_thread`, so the dialog's slots run on the main thread, where they
hand the news to the controller. No widget is touched, and no controller state changed, from another thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QSize, Qt, QTimer, Signal
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
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.cloud.offload.controller import (
    DEFAULT_BUDGET_USD,
    BuildOffload,
    ChoiceError,
    EstimateFunction,
    FleetFactory,
    OffloadController,
    OffloadRun,
    Prepared,
    RentFactory,
    RunOutcome,
    SshFactory,
    SshHostChoice,
    check_ssh_host,
    default_estimate,
    needs_key,
    over_budget_text,
    refuse_rental,
    stored_keys,
    why_not_rentable,
)
from app.cloud.offload.selection import SelectedJobs
from app.cloud.offload.wording import (
    breakdown_text,
    confirmation_text,
    gpu_event_text,
    provider_title,
    summary_text,
)
from app.cloud.pricing.estimate import LOCAL_PROVIDER, Estimate, Option, within_budget
from app.cloud.pricing.report import option_figures
from app.cloud.pricing.spread import Spread, spread_over
from app.core.config.settings import OffloadPreferences
from app.core.queue.jobs import JobOptions, JobStore
from app.gui.main_thread import deliver_on_main_thread
from app.gui.offload.provider_keys import ProviderKeysDialog
from app.gui.screen_fit import fitting_size

if TYPE_CHECKING:
    from app.cloud.offload.base import OffloadEvent

COLUMNS = ("", "Provider", "Offer", "GPU", "VRAM", "$/h", "Time", "Cost", "Audio h/$", "Price date", "Launch")
MARK_COLUMN, PROVIDER_COLUMN, OFFER_COLUMN, GPU_COLUMN = 0, 1, 2, 3
PRICE_COLUMN, TIME_COLUMN, COST_COLUMN, LAUNCH_COLUMN = 5, 6, 7, 10
EXCLUDED_COLUMNS = ("Provider", "Offer", "GPU", "Why not")
OPTION_ROLE = Qt.ItemDataRole.UserRole
PROGRESS_STEPS = 1000

Confirm = Callable[[QWidget, str, str], bool]


def launch_text(option: Option, keyed: frozenset[str] | None) -> str:
    """The Launch column: whether Run can rent this row now, and if not for want of a key, says so."""
    if needs_key(option, keyed):
        return "needs an API key"
    return "yes" if why_not_rentable(option, keyed) is None else "no"


# This computer comes first when it costs nothing and is not much slower than the cheapest rental: a short clip
# is not worth renting for (a machine's boot alone takes minutes).
LOCAL_SLOWER_BY_AT_MOST = 1.5


def preselected_row(options: Sequence[Option], keyed: frozenset[str] | None) -> int | None:
    """The row chosen when the estimate arrives: this computer when it is fast enough (see above), else the
    cheapest row Run can rent now, else none (no key stored: nothing to rent)."""
    rentable = [row for row, option in enumerate(options) if why_not_rentable(option, keyed) is None]
    cheapest = min(rentable, key=lambda row: options[row].est_cost_usd, default=None)
    local = next((row for row, option in enumerate(options) if option.offer.provider == LOCAL_PROVIDER), None)
    if local is not None and (
        cheapest is None or options[local].est_seconds <= options[cheapest].est_seconds * LOCAL_SLOWER_BY_AT_MOST
    ):
        return local
    return cheapest


def ask_to_confirm(parent: QWidget, title: str, text: str) -> bool:
    answer = QMessageBox.question(
        parent,
        title,
        text,
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes


class OffloadDialog(QDialog):
    """Estimate, choose, confirm and run the offload of some queued jobs; non-modal, one run per dialog."""

    offload_event = Signal(object)  # OffloadEvent, re-emitted on the main thread after the dialog applied it
    offload_ended = Signal(str)  # the final status, for the window's notification
    remember = Signal(dict)  # OffloadPreferences fields to store (the SSH host's fields, the budget)

    def __init__(
        self,
        store: JobStore,
        job_ids: Sequence[int],
        *,
        preferences: OffloadPreferences | None = None,
        estimate_function: EstimateFunction = default_estimate,
        rent_factory: RentFactory | None = None,
        ssh_factory: SshFactory | None = None,
        fleet_factory: FleetFactory | None = None,
        confirm: Confirm = ask_to_confirm,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Offload to cloud")
        keys_from_keyring = rent_factory is None and fleet_factory is None  # no factory bringing its own keys
        if fleet_factory is None:
            from app.cloud.fleet.rented import build_rented_fleet

            fleet_factory = build_rented_fleet
        self.controller = OffloadController(
            store,
            job_ids,
            estimate_function=estimate_function,
            rent_factory=rent_factory,
            ssh_factory=ssh_factory,
            fleet_factory=fleet_factory,
            keys_from_keyring=keys_from_keyring,
        )
        self._confirm = confirm
        preferences = preferences or OffloadPreferences()
        # For the controller's threads: each call runs the slot on the main thread, in the order of the calls.
        self._deliver_prepared = deliver_on_main_thread(self._on_prepared)
        self._deliver_event = deliver_on_main_thread(self._on_event)
        self._deliver_outcome = deliver_on_main_thread(self._on_ended)
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
        host = SshHostChoice.remembered(preferences.ssh_host)
        self.ssh_url = QLineEdit(host.url)
        self.ssh_url.setPlaceholderText("ssh://user@host:port")
        self.ssh_identity = QLineEdit(host.identity)
        self.ssh_identity.setPlaceholderText("private key file (empty: your SSH agent and default keys)")
        self.ssh_known_hosts = QLineEdit(host.known_hosts)
        self.ssh_command = QLineEdit(host.command)
        self.ssh_command.setToolTip(
            "How Scriba starts on the host. Leading NAME=VALUE words set its environment, "
            "e.g. PYTHONPATH=/opt/scriba python3 -m app"
        )
        self.ssh_install = QCheckBox("Install Scriba there if it is missing")
        self.ssh_install.setToolTip(
            "Scriba copies itself to the host and installs into a private folder under the remote user's cache "
            "(~/.cache/scriba/remote), reused next time. Nothing else on the host changes. It needs Python 3.11 "
            "or 3.12 there, and the host must reach the Python package index for the libraries Scriba uses."
        )
        self.ssh_install.setChecked(host.install)
        for field in (self.ssh_url, self.ssh_identity, self.ssh_known_hosts, self.ssh_command):
            field.textEdited.connect(lambda _text: self.ssh_choice.setChecked(True))
        ssh_form = QFormLayout()
        ssh_form.addRow("Address", self.ssh_url)
        ssh_form.addRow("Identity file", self._with_browse(self.ssh_identity, "SSH private key"))
        ssh_form.addRow("Known hosts", self._with_browse(self.ssh_known_hosts, "Known-hosts file"))
        ssh_form.addRow("Remote command", self.ssh_command)
        ssh_form.addRow("", self.ssh_install)
        ssh_box = QGroupBox()
        ssh_box.setLayout(ssh_form)

        self.budget = QDoubleSpinBox()
        self.budget.setPrefix("$")
        self.budget.setDecimals(2)
        self.budget.setRange(0.01, 10_000.0)
        self.budget.setSingleStep(1.0)
        self.budget.setValue(float(preferences.budget_usd or DEFAULT_BUDGET_USD))
        self.budget.setToolTip("A rental whose estimate is higher is refused; the remote stops when it is spent")
        self.budget.valueChanged.connect(self._update_run_button)
        self.machines = QSpinBox()
        self.machines.setRange(1, 16)
        self.machines.setValue(1)
        self.machines.setSuffix(" machine(s)")
        self.machines.setToolTip(
            "Rent this many machines of the chosen row: they share the jobs (each takes the next file), and each "
            "one is destroyed as soon as nothing is left for it"
        )
        self.machines.valueChanged.connect(self._update_run_button)
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
        options_row.addWidget(self.machines)
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
        self.keys_button = QPushButton("API keys…")
        self.keys_button.setToolTip("Your Vast.ai, Lambda or RunPod key, kept in the system keyring")
        self.keys_button.clicked.connect(self.open_keys)
        where = QHBoxLayout()
        where.addWidget(self.rent_choice)
        where.addWidget(self.keys_button)
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
        self.resize(fitting_size(QSize(980, 720), parent))
        self._update_run_button()
        self._start_estimate()

    def open_keys(self) -> ProviderKeysDialog:
        """The providers' API keys (window-modal); a key set here is used by the next Run."""
        dialog = ProviderKeysDialog(self)
        dialog.setWindowModality(Qt.WindowModality.WindowModal)
        dialog.finished.connect(lambda _result: self._keys_changed())
        dialog.show()
        return dialog

    def _keys_changed(self) -> None:
        """After the API keys dialog: the rows of a provider whose key was just stored can be rented now."""
        if self.controller.keyed is None or self.estimate is None:
            return  # the estimate, still running, reads the keys itself
        self.controller.keyed = stored_keys()
        selected = self.table.selectionModel().selectedRows()
        self._fill_table(self.estimate)
        if selected:
            self.table.selectRow(selected[0].row())  # the person's choice stays
        self._update_run_button()

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
        self.controller.start_estimate(self._deliver_prepared)

    def _on_prepared(self, prepared: object) -> None:
        if not isinstance(prepared, Prepared):
            self.summary_label.setText(f"The jobs could not be read: {prepared}")
            return
        self.controller.accept(prepared)
        self.summary_label.setText(summary_text(prepared.selected, prepared.why_no_estimate))
        if prepared.estimate is not None:
            self._fill_table(prepared.estimate)
        self._update_run_button()

    def _fill_table(self, result: Estimate) -> None:
        bold = QFont(self.table.font())
        bold.setBold(True)
        self.table.setRowCount(len(result.options))
        for row, option in enumerate(result.options):
            offer = option.offer
            marks = [name for name, flag in (("cheapest", option.cheapest), ("fastest", option.fastest)) if flag]
            over_budget = option.is_rented and not within_budget(option, self.budget.value())
            cells = [
                " · ".join(("★ " if mark == "cheapest" else "⚡ ") + mark for mark in marks),
                offer.provider,
                offer.offer,
                offer.gpu if offer.gpu_count == 1 else f"{offer.gpu_count}× {offer.gpu}",
                *option_figures(option),
                launch_text(option, self.controller.keyed),
            ]
            tooltip = breakdown_text(option)
            if over_budget:
                tooltip += f"\nOver your budget (${self.budget.value():.2f})"
            reason = why_not_rentable(option, self.controller.keyed)
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
        chosen = preselected_row(result.options, self.controller.keyed)
        if chosen is not None:
            self.table.selectRow(chosen)

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
        if self.running or self.selected is None or self.controller.spent:
            self.run_button.setEnabled(False)
            if self.controller.spent:
                self.run_button.setToolTip("These jobs are no longer queued")
            return
        self.machines.setEnabled(not self.ssh_choice.isChecked())  # several machines: a rental's choice
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
        spread = self._spread(option)
        count = f"{spread.nodes} × " if spread is not None else ""
        cost = spread.cost_usd if spread is not None else option.est_cost_usd
        self.run_button.setText(f"Run on {count}{option.offer.gpu} ({option.offer.provider}) ≈ ${cost:.2f}")
        reason = why_not_rentable(option, self.controller.keyed) or over_budget_text(option, self.budget.value(), cost)
        self.run_button.setToolTip(reason or "Rent this machine, run the jobs there, then destroy it")
        self.run_button.setEnabled(reason is None)

    # -------------------------------------------------------------------------------------------- start

    def start(self) -> None:
        """Check the choice, confirm a rental, then run the offload on its own thread."""
        if self.running:
            return
        self._show_error("")
        queued = self.controller.still_queued()
        if not queued:
            self._show_error("None of these jobs is queued any more: nothing to offload.")
            return
        selected = self.selected
        if selected is None:
            return
        options = selected.options
        budget = self.budget.value()
        build: BuildOffload
        if self.ssh_choice.isChecked():
            built = self._ssh_build(options)
            if built is None:
                return
            build = built
            where = f"your SSH host {self.ssh_url.text().strip()}"
        else:
            option = self.selected_option()
            spread = self._spread(option)
            cost = spread.cost_usd if spread is not None else None
            refusal = refuse_rental(option, budget, cost, self.controller.keyed)
            if refusal is None and spread is not None and self.send_token.isChecked():
                refusal = "The Hugging Face token goes to one machine only: untick it, or rent one machine."
            if refusal is not None or option is None:
                self._show_error(refusal or "")
                return
            if not self._confirm(self, "Rent a GPU?", confirmation_text(option, budget, spread)):
                self._set_status("Nothing was rented.")
                return
            machines = spread.nodes if spread is not None else 1
            build = self.controller.rent_build(option, options, budget, self.send_token.isChecked(), machines)
            count = f"{machines} × " if machines > 1 else ""
            where = f"{count}{option.offer.gpu} ({provider_title(option.offer.provider)})"
        self.remember.emit({"budget_usd": budget})
        self._begin(queued, build, where)

    def _spread(self, option: Option | None) -> Spread | None:
        """The chosen row on the chosen number of machines; None for one machine."""
        if option is None or self.machines.value() < 2:
            return None
        files = len(self.selected.job_ids) if self.selected is not None else 1
        return spread_over(option, self.machines.value(), files)

    def _ssh_build(self, options: JobOptions) -> BuildOffload | None:
        choice = SshHostChoice(
            self.ssh_url.text(),
            self.ssh_identity.text(),
            self.ssh_known_hosts.text(),
            self.ssh_command.text(),
            install=self.ssh_install.isChecked(),
        )
        try:
            host = check_ssh_host(choice)
        except ChoiceError as error:
            self._show_error(str(error))
            return None
        self.remember.emit({"ssh_host": choice.to_remember()})
        return self.controller.ssh_build(host, options, self.send_token.isChecked())

    def _begin(self, job_ids: list[int], build: BuildOffload, where: str) -> None:
        self.gpu_label.setText("")
        self.progress.setValue(0)
        self.progress.setFormat("Starting…")
        self.progress.show()
        self.cancel_button.setEnabled(True)
        self.cancel_button.show()
        self.close_button.setEnabled(False)
        for widget in (self.table, self.rent_choice, self.ssh_choice, self.budget, self.machines, self.send_token):
            widget.setEnabled(False)
        self.controller.begin(job_ids, build, where, self._deliver_event, self._deliver_outcome)
        self._update_run_button()
        self._tick.start()
        self._render_status()

    # -------------------------------------------------------------------------------------------- running

    # The controller's state, read where the window and the tests look for it.

    @property
    def running(self) -> bool:
        return self.controller.running

    @property
    def selected(self) -> SelectedJobs | None:
        return self.controller.selected

    @property
    def estimate(self) -> Estimate | None:
        return self.controller.estimate

    @property
    def outcome(self) -> RunOutcome | None:
        return self.controller.outcome

    @property
    def offload_run(self) -> OffloadRun | None:
        return self.controller.offload_run

    def cancel(self) -> None:
        """Stop the offload; the machine is torn down (and the jobs marked cancelled) before run() returns."""
        if not self.controller.cancel():
            return
        self.cancel_button.setEnabled(False)
        self._render_status()

    def shutdown(self) -> None:
        """The window is closing: cancel a running offload (its thread finishes the teardown)."""
        self._tick.stop()
        if self.running:
            self.cancel()

    def wait_until_ended(self, timeout_s: float | None = None) -> bool:
        """Block until the run thread has ended (tests, and a caller that must not leave before the teardown)."""
        return self.controller.wait_until_ended(timeout_s)

    def _on_event(self, event: OffloadEvent) -> None:
        shown = self.controller.apply_event(event)
        if shown is not None:
            self.progress.setFormat(shown.label)
            self.progress.setValue(round(shown.fraction * PROGRESS_STEPS))
        elif event.kind == "gpu":
            self.gpu_label.setText(gpu_event_text(event.data))
        self._render_status()
        self.offload_event.emit(event)

    def _render_status(self) -> None:
        text = self.controller.status_text()
        if text is None:
            self._tick.stop()
            return
        self._set_status(text)

    def _on_ended(self, outcome: RunOutcome) -> None:
        conclusion = self.controller.conclude(outcome)
        self._tick.stop()
        self.cancel_button.hide()
        self.close_button.setEnabled(True)
        if conclusion.error is not None:
            self._show_error(conclusion.error)
        self.progress.setFormat(conclusion.progress_label)
        if conclusion.complete:
            self.progress.setValue(PROGRESS_STEPS)
        self._set_status(conclusion.status)
        for widget in (self.table, self.rent_choice, self.ssh_choice, self.budget, self.machines, self.send_token):
            widget.setEnabled(not conclusion.spent)
        self._update_run_button()
        self.offload_ended.emit(conclusion.notification)

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
