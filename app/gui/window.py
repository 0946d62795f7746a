"""The main window: drop zone and queue on the left, the selected job's transcript on the right."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QItemSelectionModel, QModelIndex, QPoint, QSize, Qt, QTimer
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent, QIcon
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.core.config.settings import Settings, SettingsStore
from app.core.dictation.save import SavedDictation
from app.core.dictation.stream import DictationOptions
from app.core.engine.audio import MEDIA_EXTENSIONS
from app.core.engine.recommend import Machine
from app.core.gpu.gpustats import GpuStatsSampler
from app.core.queue.engine_process import EngineProcess
from app.core.queue.exports import export_job
from app.core.queue.jobs import Job, JobNotFoundError, JobOptions, JobState, JobStateError, JobStore, media_files
from app.core.queue.trash import Trash
from app.core.queue.worker import JobEvent
from app.core.secrets import HF_TOKEN_KEY, get_secret, set_secret
from app.core.transcript.document import Transcript
from app.core.transcript.save import SavedTranscript
from app.gui.about import about_text
from app.gui.actions import WindowActions
from app.gui.desktop_notice import DesktopNotifier
from app.gui.dictation.panel import DictationPanel
from app.gui.dictation.queue_hold import PanelQueueHold
from app.gui.error_dialog import show_error
from app.gui.gpu_panel import GpuPanel
from app.gui.main_thread import deliver_on_main_thread, run_off_main_thread
from app.gui.offload.dialog import OffloadDialog
from app.gui.offload.launcher import OffloadLauncher
from app.gui.offload.orphan_sweep import OrphanSweep
from app.gui.queue.bridge import BatchTally, WorkerBridge
from app.gui.queue.drop_zone import DropZone
from app.gui.queue.job_changes import JobChanges
from app.gui.queue.options_sheet import ask_options
from app.gui.queue.table import QueueTable
from app.gui.queue.time_range import TimeRangeDialog
from app.gui.queue.trash_dialog import TrashDialog
from app.gui.queue.watch_folder import FolderWatcher
from app.gui.screen_fit import fitting_size
from app.gui.settings.first_run import FirstRunDialog
from app.gui.settings.language_offer import LanguageOffer, offer_multilingual
from app.gui.settings.model_offer import DownloadFailedNotice, MissingModelOffer, offer_missing_model
from app.gui.settings.models_dialog import ModelsDialog
from app.gui.speakers.dialog import SpeakersDialog, remember_speaker
from app.gui.theme import apply_theme
from app.gui.transcript.export_refresh import ExportRefresher
from app.gui.transcript.export_sheet import open_export_sheet
from app.gui.transcript.view import TranscriptView
from app.gui.window_state import decode_state, encode_state
from app.resources import icon_path

if TYPE_CHECKING:
    from app.gui.settings.dialog import SettingsDialog

log = logging.getLogger(__name__)


class MainWindow(QMainWindow):
    def __init__(
        self,
        store: JobStore,
        settings_store: SettingsStore,
        engine: EngineProcess | None = None,
        start_worker: bool = True,
        gpu_sampler: GpuStatsSampler | None = None,
        gpu_interval: float = 1.0,
    ) -> None:
        super().__init__()
        self.store = store
        self.settings_store = settings_store
        # The first start: no settings file yet (the first-run page then opens, see offer_first_run).
        self.first_start = not settings_store.path.exists()
        self.settings: Settings = settings_store.load()
        if self.settings.window.theme != "system":
            apply_theme(self.settings.window.theme)
        self.notifications: list[tuple[str, str]] = []
        self._desktop_notifier = DesktopNotifier(self)
        self._batch = BatchTally()
        self.setWindowTitle("Scriba")
        self.setWindowIcon(QIcon(str(icon_path())))
        self.setAcceptDrops(True)

        self.table = QueueTable()
        self.model = self.table.queue_model
        self.table.customContextMenuRequested.connect(self._context_menu)
        self.table.selectionModel().currentRowChanged.connect(self._selection_changed)
        self.offloads = OffloadLauncher(store, self)
        self.offloads.remember.connect(self._remember_offload_choice)
        self.offloads.ended.connect(self._offload_ended)
        self.offload_dialogs = self.offloads.dialogs

        self.drop_zone = DropZone()
        self.drop_zone.paths_dropped.connect(self.ask_and_add)
        add_button = QPushButton("Add files…")
        add_button.clicked.connect(self.choose_files)
        folder_button = QPushButton("Add folder…")
        folder_button.clicked.connect(self.choose_folder)
        self.export_button = QPushButton("Export…")
        self.export_button.clicked.connect(self.choose_export)
        settings_button = QPushButton("Settings…")
        settings_button.clicked.connect(self.open_settings)
        buttons = QHBoxLayout()
        for button in (add_button, folder_button, self.export_button, settings_button):
            buttons.addWidget(button)
        buttons.addStretch(1)

        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.addWidget(self.drop_zone)
        left_layout.addLayout(buttons)
        left_layout.addWidget(self.table)
        self.transcript_view = TranscriptView()
        self.transcript_view.transcript_edited.connect(self._transcript_edited)
        self.transcript_view.remember_requested.connect(self.remember_speaker)
        self.export_refresher = ExportRefresher(store, self)  # edits reach the files exported automatically
        self.remember_threads: list[threading.Thread] = []
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(left)
        self.splitter.addWidget(self.transcript_view)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 3)
        self.setCentralWidget(self.splitter)
        self.worker_label = QLabel("")
        self.statusBar().addPermanentWidget(self.worker_label)
        # A dock, not in the splitter: the queue keeps its room; saveState remembers where the user put it.
        self.gpu_panel = GpuPanel(gpu_sampler, gpu_interval)
        self.gpu_dock = QDockWidget("GPU", self)
        self.gpu_dock.setObjectName("gpuDock")
        self.gpu_dock.setWidget(self.gpu_panel)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.gpu_dock)
        self.statusBar().addPermanentWidget(self.gpu_panel.compact_label)
        self.gpu_panel.compact_label.clicked.connect(self.gpu_dock.toggleViewAction().trigger)
        # Dictation runs its own model on the CPU whatever the queue's settings: it must keep up with speech and
        # leaves the GPU to the jobs. Tabbed with the GPU dock, hidden until Dictate (Ctrl+D).
        dictation = self.settings.dictation
        self.dictation_panel = DictationPanel(
            DictationOptions(
                model=dictation.model, final_model=dictation.final_model, language=dictation.language, device="cpu"
            ),
            store=store,
            save_directory=self.dictation_directory,
        )
        self.dictation_panel.saved.connect(self._dictation_saved)
        self.dictation_panel.preferences_changed.connect(self._dictation_preferences_changed)
        self.dictation_panel.message.connect(lambda text: self.statusBar().showMessage(text, 15000))
        problem = self.dictation_panel.apply_preferences(dictation, self.settings_store.path.parent)
        if problem:
            self.statusBar().showMessage(f"Dictation hotkey off: {problem}", 15000)
        self.dictation_panel.desktop_settings_changed.connect(self._dictation_desktop_changed)
        self.dictation_dock = QDockWidget("Dictation", self)
        self.dictation_dock.setObjectName("dictationDock")
        self.dictation_dock.setWidget(self.dictation_panel)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.dictation_dock)
        self.tabifyDockWidget(self.gpu_dock, self.dictation_dock)
        self.dictation_dock.hide()

        self.language_offer: LanguageOffer | None = None
        self.models_dialog: ModelsDialog | None = None
        self.model_offer: MissingModelOffer | None = None
        self.first_run_dialog: FirstRunDialog | None = None
        self.download_notice: DownloadFailedNotice | None = None
        self.job_changes = JobChanges(
            self,
            store,
            lambda: self.settings.job_options(),
            lambda: self.transcript_view.job_id,
            self.transcript_view.clear,
            lambda text: self.statusBar().showMessage(text, 10000),
            self.refresh,
            lambda: self.bridge.wake(),  # a retried job starts without waiting for the next look at the queue
        )
        self.menu_actions = self._connect_actions(
            WindowActions(
                self,
                self.table,
                (self.transcript_view.undo_action, self.transcript_view.redo_action),
                (self.gpu_dock.toggleViewAction(), self.dictation_dock.toggleViewAction()),
                self.settings.window.theme,
            )
        )
        self.table.selectionModel().selectionChanged.connect(self._update_offload_action)
        self.bridge = WorkerBridge(store, engine=engine, parent=self)
        # With the setting on, the file queue's job is frozen while the person speaks (it slows dictation).
        self.speech_hold = PanelQueueHold(self.dictation_panel, self.bridge.worker, self._pause_queue_for_speech)
        self.bridge.job_event.connect(self._on_worker_event)
        self.bridge.job_event.connect(self.gpu_panel.show_job_event)
        # Jobs changed by another process (`scriba queue add` in a terminal) appear within two seconds.
        self._poll = QTimer(self)
        self._poll.setInterval(2000)
        self._poll.timeout.connect(self._refresh_if_changed)
        self._poll.start()
        self.folder_watcher = FolderWatcher(self.store, lambda: self.settings.job_options(), self)
        self.folder_watcher.queued.connect(self.refresh)
        self.folder_watcher.queued.connect(self.bridge.wake)
        self.folder_watcher.set_folder(self.settings.job.watch_folder)
        self._restore_state()
        self.refresh()
        self.set_aside_box: QMessageBox | None = None
        if store.set_aside is not None:
            self._say_queue_set_aside(store.set_aside)
        elif store.recovered:
            self.statusBar().showMessage(
                f"{len(store.recovered)} interrupted job(s) were queued again: they start from the beginning", 10000
            )
        else:
            self.statusBar().showMessage("Ready. Drop files to transcribe them.", 5000)
        if start_worker:
            self.bridge.start()
        self.gpu_panel.start()
        # Rented machines an earlier run left behind (a crash mid-offload) are ended now, off the main thread.
        self.orphan_sweep = OrphanSweep(store.directory, self)
        self.orphan_sweep.message.connect(lambda text: self.notify("Scriba: cloud machines", text))
        self.orphan_sweep.start()

    # ------------------------------------------------------------------------------------------- menus

    def _say_queue_set_aside(self, path: Path) -> None:
        """Once, when this window's opening found the queue file damaged and moved it aside."""
        text = (
            "The queue database could not be read (it is damaged), so Scriba started a new, empty queue.\n\n"
            f"The old file was kept as {path}; nothing was deleted. Transcripts already made are still in "
            f"{self.store.transcripts_dir}."
        )
        self.statusBar().showMessage(f"The damaged queue file was moved to {path}; a new queue was started.", 30000)
        self.set_aside_box = show_error(self, "Scriba: queue reset", text)

    def _connect_actions(self, actions: WindowActions) -> WindowActions:
        """What each menu item and shortcut does (app/gui/actions.py owns them)."""
        actions.add_files_requested.connect(self.choose_files)
        actions.add_folder_requested.connect(self.choose_folder)
        actions.dictate_requested.connect(self.toggle_dictation)
        actions.export_requested.connect(self.choose_export)
        actions.settings_requested.connect(self.open_settings)
        actions.models_requested.connect(self.open_models)
        jobs: dict[str, Callable[[int], object]] = {"up": lambda i: self.move_job(i, -1), "cancel": self.cancel_job}
        jobs |= {"down": lambda i: self.move_job(i, 1), "part": self.choose_time_range}
        every = {"retry": self.job_changes.retry, "remove": self.job_changes.remove}  # every selected row
        actions.job_requested.connect(
            lambda kind: (
                every[kind]([j.id for j in self._selected_rows()]) if kind in every else self._on_selected(jobs[kind])
            )
        )
        actions.offload_requested.connect(self.open_offload_dialog)
        actions.pause_toggled.connect(self.toggle_pause)
        actions.find_requested.connect(self.transcript_view.focus_search)
        actions.trash_requested.connect(self.open_trash)
        actions.speakers_requested.connect(self.open_speakers)
        actions.theme_chosen.connect(self.set_theme)
        actions.first_run_requested.connect(self.open_first_run)
        actions.about_requested.connect(lambda: QMessageBox.about(self, "About Scriba", about_text()))
        return actions

    def _context_menu(self, point: QPoint) -> None:
        index = self.table.indexAt(point)
        if not index.isValid():
            return
        if self.table.selectionModel().isRowSelected(index.row()):
            # A right click inside a multiple selection keeps it (for "Offload to cloud…").
            self.table.selectionModel().setCurrentIndex(index, QItemSelectionModel.SelectionFlag.NoUpdate)
        else:
            self.table.selectRow(index.row())
        job = self.model.job_at(index.row())
        if job is None:
            return
        menu = self.menu_actions.job_menu(self._selected_states(), self)
        self._update_offload_action()
        menu.popup(self.table.viewport().mapToGlobal(point))

    def choose_time_range(self, job_id: int) -> TimeRangeDialog | None:
        """Queue › Transcribe a part…: only a stretch of a queued job's recording (window-modal dialog)."""
        job = self.store.get(job_id)
        if job.state is not JobState.QUEUED:
            self.statusBar().showMessage(f"{job.source.name} is {job.state.value}: only a queued job can change", 8000)
            return None
        dialog = TimeRangeDialog(job, self)
        dialog.accepted.connect(lambda: self._set_options(job_id, dialog.options))
        dialog.open()
        return dialog

    def _set_options(self, job_id: int, options: JobOptions | None) -> None:
        if options is not None:
            try:
                self.store.set_options(job_id, options)
            except (JobNotFoundError, JobStateError) as error:  # it started or went while the dialog was open
                self.statusBar().showMessage(f"The part was not set: {error}", 10000)
            self.refresh()

    # ------------------------------------------------------------------------------------------- queue

    def _refresh_if_changed(self) -> None:
        if self.store.changed():  # a cheap pragma; the table is read again only after another commit
            self.refresh()

    def set_theme(self, theme: str) -> None:
        """View › Theme: system, light or dark; remembered with the window."""
        apply_theme(theme)
        self.settings = self.settings.with_window(theme=theme)
        self.settings_store.save(self._with_window_state(self.settings))
        self.refresh()  # the queue's state colours are chosen for the palette

    def toggle_pause(self, paused: bool) -> None:
        """Pause: the running job finishes and no new one starts; resume: the queue goes on."""
        if paused:
            self.bridge.worker.pause()
        else:
            self.bridge.worker.resume()
        self.menu_actions.pause_action.setChecked(paused)
        self.menu_actions.pause_action.setText("Resume queue" if paused else "Pause queue")
        self.refresh()

    def refresh(self) -> None:
        selected = self.selected_job_id()
        jobs = self.store.jobs()
        self.model.set_jobs(jobs)
        if selected is not None:
            self.select_job(selected)
        counts = self.store.counts()
        self.worker_label.setText(
            f"{counts[JobState.QUEUED]} queued · {counts[JobState.RUNNING]} running · {counts[JobState.DONE]} done"
            + (f" · {counts[JobState.FAILED]} failed" if counts[JobState.FAILED] else "")
            + (" · paused (Queue › Resume)" if self.bridge.worker.paused else "")
            + (" · waiting while you dictate" if self.bridge.worker.held else "")
        )
        self._update_offload_action()

    def ask_and_add(self, paths: list[Path]) -> None:
        advice = self.first_run_dialog.recommendation if self.first_run_dialog else None
        self.options_sheet = ask_options(self, paths, self.settings, advice, self.add_paths, self._keep)

    def add_paths(self, paths: Iterable[Path], options: JobOptions | None = None) -> list[Job]:
        files = media_files([Path(path) for path in paths])
        if not files:
            self.statusBar().showMessage("Nothing to add: no audio or video files there.", 8000)
            return []
        options = options or self.settings.job_options()
        repeated = [path.name for path in files if self.store.find_by_source(path)]
        jobs = self.store.add_many(files, options)
        message = f"Added {len(jobs)} file(s) to the queue."
        if repeated:
            message += f" Already in the queue, added again: {', '.join(repeated[:3])}" + (
                "…" if len(repeated) > 3 else ""
            )
        self.statusBar().showMessage(message, 8000)
        self.refresh()
        if self.selected_job_id() is None:
            self.select_job(jobs[0].id)  # its transcript shows here when it is done, without a click on the row
        self.bridge.wake()
        ids = [job.id for job in jobs]
        run_off_main_thread(lambda: self.store.probe_durations(ids), self._durations_probed, name="probe-durations")
        return jobs

    def _durations_probed(self, _: None) -> None:
        self.refresh()  # a method of the window, not a lambda: Qt drops the call when the window is already gone

    def files_from_another_launch(self, paths: list[Path]) -> None:
        """`scriba FILE…` while this window is open: the files join this queue and the window comes forward."""
        if paths:
            self.add_paths(paths)
        self.showNormal() if self.isMinimized() else self.show()
        self.raise_()
        self.activateWindow()

    def choose_files(self) -> None:
        patterns = " ".join(f"*{ext}" for ext in sorted(MEDIA_EXTENSIONS))
        files, _ = QFileDialog.getOpenFileNames(
            self,
            "Add audio or video",
            self.settings.window.last_folder or "",
            f"Audio and video ({patterns});;All files (*)",
        )
        if files:
            self._remember_folder(Path(files[0]).parent)
            self.ask_and_add([Path(file) for file in files])

    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(
            self, "Add every audio or video file in", self.settings.window.last_folder or ""
        )
        if folder:
            self._remember_folder(Path(folder))
            self.ask_and_add([Path(folder)])

    def _remember_folder(self, folder: Path) -> None:
        self.settings = self.settings.with_window(last_folder=str(folder))

    def selected_job_id(self) -> int | None:
        return self.table.selected_job_id()

    def select_job(self, job_id: int) -> None:
        self.table.select_job(job_id)

    def _on_selected(self, action: Callable[[int], object]) -> None:
        job_id = self.selected_job_id()
        if job_id is not None:
            action(job_id)

    def _guard(self, what: str, action: object) -> bool:
        try:
            action()  # type: ignore[operator]
        except (JobNotFoundError, JobStateError) as error:
            self.statusBar().showMessage(f"Cannot {what}: {error}", 8000)
            return False
        self.refresh()
        return True

    def cancel_job(self, job_id: int) -> None:
        if self._guard("cancel", lambda: self.store.cancel(job_id)):
            self.statusBar().showMessage(f"Cancelling job {job_id}…", 4000)

    def retry_job(self, job_id: int) -> None:
        self.job_changes.retry([job_id])

    def offer_multilingual(self, job_id: int, reason: str) -> None:
        """A job stopped because its English-only model cannot transcribe its language: ask how to go on."""
        if self.language_offer is not None and self.language_offer.isVisible():
            return  # one question at a time; the other failures stay in the queue with their reason
        offer = offer_multilingual(
            self, self.store, job_id, reason, lambda: self.settings.job_options(), self.retry_with, self.open_models
        )
        self.language_offer = offer or self.language_offer

    def offer_missing_model(self, job_id: int) -> None:
        """A job stopped because its model is not on this computer: download it, or use the built-in one."""
        if self.model_offer is not None and self.model_offer.isVisible():
            return  # one question at a time; the other failures stay in the queue with their reason
        offer = offer_missing_model(self, self.store, job_id, self.retry_with, self.open_models)
        self.model_offer = offer or self.model_offer

    def open_models(self, download: str | None = None) -> ModelsDialog:
        """The model manager; with ``download``, that model's download starts at once."""
        dialog = ModelsDialog(self, select=download or self.settings.job.model)
        if download is not None:
            dialog.download(download)
        dialog.open()
        self.models_dialog = dialog
        return dialog

    def offer_first_run(self) -> FirstRunDialog | None:
        """On the first start, the page that recommends a model for this computer (once answered, never again)."""
        if not self.first_start or self.settings.window.first_run_done:
            return None
        return self.open_first_run()

    def open_first_run(self, machine: Machine | None = None) -> FirstRunDialog:
        """Help › Choose a speech model…: this computer, the model for it, download or start with the built-in one.
        ``machine``: readings to use instead of reading this computer (tests)."""
        dialog = FirstRunDialog(self, machine=machine)
        dialog.model_chosen.connect(self._use_model)
        dialog.finished.connect(lambda _result: self._first_run_answered())
        self.first_run_dialog = dialog
        dialog.open()
        return dialog

    def _use_model(self, name: str) -> None:
        self.apply_settings(self.settings.with_job(model=name))
        self.statusBar().showMessage(f"New jobs are transcribed with {name}.", 10000)

    def _first_run_answered(self) -> None:
        if not self.settings.window.first_run_done:
            self.settings = self.settings.with_window(first_run_done=True)
            self.settings_store.save(self._with_window_state(self.settings))

    def say_download_failed(self, name: str, what: str) -> DownloadFailedNotice:
        """A model chosen in Settings did not arrive: say so, with a button that tries the download again."""
        kept = self.settings.job.model or "the best model on this computer"
        notice = DownloadFailedNotice(self, name, kept, what)
        notice.buttonClicked.connect(lambda button: self._retry_download(notice, button))
        self.download_notice = notice
        self.statusBar().showMessage(f"{name} was not downloaded; new jobs keep using {kept}.", 15000)
        notice.open()
        return notice

    def _retry_download(self, notice: DownloadFailedNotice, button: object) -> None:
        if button is notice.retry_button:
            self.open_models(notice.model).downloaded.connect(self._use_model)

    def retry_with(self, job_id: int, what: str, options: JobOptions) -> None:
        """Queue a failed job again with ``options`` (the current settings with one change, for this job only)."""
        if self._guard("retry", lambda: self.store.retry(job_id, options)):
            self.bridge.wake()
            self.statusBar().showMessage(f"Queued again with {what}.", 10000)

    def remove_job(self, job_id: int) -> None:
        self.job_changes.remove([job_id])

    def open_trash(self) -> TrashDialog:
        dialog = TrashDialog(Trash(self.store.directory), self.store, self)
        dialog.restored.connect(self._restored)
        dialog.open()
        return dialog

    def _restored(self, job: Job) -> None:
        self.refresh()
        self.select_job(job.id)
        self.statusBar().showMessage(f"{job.source.name} restored.", 8000)

    def move_job(self, job_id: int, offset: int) -> None:
        self._guard("move", lambda: self.store.move(job_id, offset))
        self.select_job(job_id)

    # ------------------------------------------------------------------------------------------- offload

    def _selected_queued_ids(self) -> list[int]:
        queued = {job.id for job in self.model.jobs if job.state is JobState.QUEUED}
        return [job_id for job_id in self.table.selected_job_ids() if job_id in queued]

    def _selected_rows(self) -> list[Job]:
        """The jobs of the rows shown selected, in queue order (none when the person sees none selected)."""
        rows = sorted({index.row() for index in self.table.selectionModel().selectedRows()})
        return [job for job in map(self.model.job_at, rows) if job is not None]

    def _selected_states(self) -> list[JobState]:
        return [job.state for job in self._selected_rows()]

    def _update_offload_action(self) -> None:
        self.menu_actions.enable_for(self._selected_states())  # nothing selected: no job action applies
        self.menu_actions.offload_action.setEnabled(bool(self._selected_queued_ids()))

    def open_offload_dialog(self, job_ids: list[int] | None = None) -> OffloadDialog | None:
        """The estimate and run dialog for the selected queued jobs (or ``job_ids``); non-modal."""
        ids = self._selected_queued_ids() if job_ids is None else job_ids
        if not ids:
            self.statusBar().showMessage("Select queued jobs to offload.", 5000)
            return None
        return self.offloads.open(ids, self.settings.offload)

    def _remember_offload_choice(self, changes: dict[str, object]) -> None:
        self.settings = self.settings.with_offload(**changes)
        self.settings_store.save(self._with_window_state(self.settings))

    def _offload_ended(self, text: str) -> None:
        self.refresh()
        self.notify("Scriba: offload", text)

    # ------------------------------------------------------------------------------------------- worker

    def _on_worker_event(self, event: JobEvent) -> None:
        if event.kind == "progress":
            self.model.apply_progress(event)
            return
        if event.kind == "waiting":
            self.statusBar().showMessage(f"Waiting: {event.message}", 15000)
            return
        if event.kind in ("recovered", "taken_over"):
            self.statusBar().showMessage(event.message or "", 10000)
        elif event.kind == "error":  # the queue's disk refused a write: say it; the worker tries again later
            self.notify("Scriba: queue stopped", event.message or "")
        elif event.kind == "idle" and (summary := self._batch.finish()):
            self.notify("Scriba: queue finished", summary)
        if event.kind in ("recovered", "taken_over", "error", "idle", "held", "released"):  # held: by dictation
            self.refresh()
            return
        self._batch.count(event)
        name = event.source.name if event.source else ""
        if event.kind == "failed":
            self.statusBar().showMessage(f"Failed: {event.message}", 15000)
            if event.error_type == "LanguageMismatchError" and event.job_id is not None:
                self.offer_multilingual(event.job_id, event.message or "")
            elif event.error_type == "ModelNotFoundError" and event.job_id is not None:
                self.offer_missing_model(event.job_id)
        elif event.kind == "done":
            self.statusBar().showMessage(f"Finished {name}" + (f" ({event.message})" if event.message else ""), 15000)
        elif event.kind == "started":
            self.statusBar().showMessage(f"Transcribing {name}…", 4000)
        self.refresh()
        if event.kind == "done" and event.job_id is not None and self._nothing_read():
            if event.job_id == self.selected_job_id():
                self._show_job(event.job_id)
            else:
                self.select_job(event.job_id)  # its row's selection shows it

    def _nothing_read(self) -> bool:
        """A finished job opens unless a transcript or a failed job's reason is open, or rows are picked to act on."""
        jobs = [job for job in self.model.jobs if job.id in self.table.selected_job_ids()]
        return self.transcript_view.job_id is None and len(jobs) <= 1 and all(j.state != JobState.FAILED for j in jobs)

    def notify(self, title: str, body: str) -> None:
        """A desktop notification (tray balloon, else notify-send), and always the status bar."""
        self.notifications.append((title, body))
        self.statusBar().showMessage(f"{title}: {body}", 15000)
        if not self.isActiveWindow():  # else the user is looking at the window already
            self._desktop_notifier.show(title, body, self.windowIcon())

    # ------------------------------------------------------------------------------------------- transcript

    def _selection_changed(self, current: QModelIndex, previous: QModelIndex) -> None:
        job = self.model.job_at(current.row()) if current.isValid() else None
        if job is None:
            self.transcript_view.clear()
            return
        if job.id == self.transcript_view.job_id:
            return
        self._show_job(job.id)

    def _show_job(self, job_id: int) -> None:
        try:
            job = self.store.get(job_id)
        except JobNotFoundError:
            self.transcript_view.clear()
            return
        if job.state is not JobState.DONE:
            reason = f"\n{job.error}" if job.error else ""
            self.transcript_view.clear(f"{job.source.name}: {job.state.value}.{reason}")
            return
        try:
            transcript = self.store.load_transcript(job_id)
        except (OSError, ValueError, JobStateError) as error:
            self.transcript_view.clear(f"{job.source.name}: the stored transcript cannot be read ({error}).")
            return
        self.transcript_view.show_transcript(job_id, transcript, job.source if job.source.exists() else None)

    def _transcript_edited(self, transcript: Transcript) -> None:
        job_id = self.transcript_view.job_id
        if job_id is None:
            return
        # Written on the store's writer thread (a long meeting takes a quarter of a second to save); the exports
        # read the newest state from the store, on disk yet or not.
        self.store.save_transcript_later(job_id, transcript, deliver_on_main_thread(self._transcript_saved))
        self.export_refresher.schedule(job_id)

    def _transcript_saved(self, error: BaseException | None) -> None:
        if error is not None:
            show_error(self, "Scriba", f"Your edit could not be saved: {error}")
        else:
            self.statusBar().showMessage("Saved.", 2000)

    # ------------------------------------------------------------------------------------------- speakers

    def open_speakers(self) -> SpeakersDialog:
        dialog = SpeakersDialog(self.store.directory, self)
        dialog.show()
        return dialog

    def remember_speaker(self, speaker: str, name: str | None = None) -> threading.Thread | None:
        """Enroll ``speaker`` of the transcript on show, under the name it has (asked for when it has none)."""
        return remember_speaker(
            self, self.statusBar(), self.store, self.transcript_view, speaker, name, self.remember_threads
        )

    def export_job(self, job_id: int, directory: Path, formats: Iterable[str]) -> SavedTranscript:
        """Each format on its own; a file there that Scriba did not write as it is now is kept (new name)."""
        return export_job(self.store, job_id, directory, formats)

    def choose_export(self, formats: tuple[str, ...] | None = None) -> None:
        job_id, say = self.selected_job_id(), self.statusBar().showMessage
        self.export_sheet = open_export_sheet(self, self.store, job_id, self.settings, formats, self._keep, say)

    def _keep(self, changes: dict[str, object]) -> None:
        self.settings = self.settings.with_window(**changes)
        self.settings_store.save(self._with_window_state(self.settings))

    # ------------------------------------------------------------------------------------------- dictation

    def toggle_dictation(self) -> None:
        """Show the dictation panel (in front of its tab group) and start, or stop, dictating."""
        self.dictation_dock.show()
        self.dictation_dock.raise_()
        self.dictation_panel.toggle()

    def _pause_queue_for_speech(self) -> bool:
        return self.settings.dictation.pause_queue

    def _dictation_desktop_changed(self, output: str | None, hotkey: str | None, mode: str) -> None:
        self.settings = self.settings.with_dictation(output=output, hotkey=hotkey, hotkey_mode=mode)
        self.settings_store.save(self._with_window_state(self.settings))

    def _dictation_preferences_changed(self, changes: dict[str, object]) -> None:
        self.settings = self.settings.with_dictation(**changes)
        self.settings_store.save(self._with_window_state(self.settings))

    def dictation_directory(self) -> Path:
        """Where saved dictations go: the output folder when one is set, else beside the queue's data."""
        if self.settings.job.output_dir:
            return Path(self.settings.job.output_dir)
        return self.store.directory / "dictations"

    def _dictation_saved(self, saved: SavedDictation) -> None:
        self.refresh()
        if saved.job is not None:
            self.select_job(saved.job.id)
        self.statusBar().showMessage(f"Dictation saved to {saved.audio}", 15000)

    # ------------------------------------------------------------------------------------------- settings

    def open_settings(self) -> None:
        from app.gui.settings.dialog import SettingsDialog

        dialog = SettingsDialog(self.settings, self._token_stored(), self)
        if self.first_run_dialog is not None and self.first_run_dialog.recommendation is not None:
            dialog.set_recommended(self.first_run_dialog.recommendation.best.model)
        if dialog.exec():
            self.settings_accepted(dialog)

    def settings_accepted(self, dialog: SettingsDialog) -> None:
        self.apply_settings(dialog.result_settings(self.settings), dialog.new_token(), dialog.token_cleared)
        if dialog.download_failure is not None:
            self.say_download_failed(*dialog.download_failure)

    @staticmethod
    def _token_stored() -> bool:
        try:
            return bool(get_secret(HF_TOKEN_KEY))
        except Exception:  # no keyring backend: the field still works once one exists
            return False

    def apply_settings(self, settings: Settings, token: str | None = None, clear_token: bool = False) -> None:
        """New settings apply to jobs added from now on; queued jobs keep the options they were added with."""
        self.settings = settings
        self.settings_store.save(self._with_window_state(settings))
        self.folder_watcher.set_folder(settings.job.watch_folder)
        self.speech_hold.setting_changed()
        try:
            if token:
                set_secret(HF_TOKEN_KEY, token)
            elif clear_token:
                set_secret(HF_TOKEN_KEY, None)
        except Exception as error:
            from app.core.secrets import keyring_problem

            problem = keyring_problem()
            detail = f"{problem[:1].upper()}{problem[1:]}" if problem else f"({type(error).__name__}: {error})"
            show_error(self, "Keyring unavailable", f"The token could not be stored in the system keyring. {detail}")

    def _with_window_state(self, settings: Settings) -> Settings:
        return settings.with_window(
            geometry=encode_state(self.saveGeometry()),
            state=encode_state(self.saveState()),
            splitter=encode_state(self.splitter.saveState()),
        )

    def _restore_state(self) -> None:
        geometry = decode_state(self.settings.window.geometry)
        if geometry is None or not self.restoreGeometry(geometry):
            self.resize(fitting_size(QSize(1200, 720), self))
        state = decode_state(self.settings.window.state)
        if state is None or not self.restoreState(state):
            # First start: the GPU panel gets a fifth of the height, the queue and the transcript the rest
            # (at 800x600 its own size hint would take a third of a small window).
            self.resizeDocks([self.gpu_dock], [max(90, self.height() // 5)], Qt.Orientation.Vertical)
            self.gpu_panel.no_gpu.connect(self.gpu_dock.hide)  # no GPU: its status-bar line says so, a click opens
        splitter = decode_state(self.settings.window.splitter)
        if splitter is None or not self.splitter.restoreState(splitter):
            # Two fifths for the queue: its own minimum would leave the file names a few letters.
            self.splitter.setSizes([self.width() * 2 // 5, self.width() * 3 // 5])

    def closeEvent(self, event: QCloseEvent) -> None:
        self._poll.stop()
        self.folder_watcher.stop()
        self.transcript_view.commit_pending()  # words typed a moment ago are saved, not lost
        self.export_refresher.flush()
        self.store.flush_transcripts()  # on disk before the window is gone: the next start reads them
        self.transcript_view.stop_playback()
        self.settings_store.save(self._with_window_state(self.settings))
        # A running job goes back to the queue and starts again next time; nothing is lost.
        self.speech_hold.close()
        self.bridge.stop()
        self.gpu_panel.stop()  # no sampler thread outlives the window
        self.dictation_panel.shutdown()  # the last words are flushed; an unsaved dictation is lost
        for thread in list(self.remember_threads):
            thread.join()  # a voiceprint being saved is finished (seconds), never cut half-written
        self.offloads.shutdown()  # cancelled; each thread tears its remote down before the program exits
        super().closeEvent(event)

    # Drops anywhere on the window count, not only on the drop zone.
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        self.drop_zone.dragEnterEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        self.drop_zone.dropEvent(event)
