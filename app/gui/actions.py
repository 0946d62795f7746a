"""The window's menus and shortcuts: File, Queue, Edit, View and Help, and the queue's job actions.

:class:`WindowActions` owns the QActions and says what the user asked for through its signals; the window connects
them to what it does. Nothing here knows the window's class: it gets the widgets it adds actions to."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu, QWidget

from app.core.queue.jobs import JobState
from app.core.transcript.formats import FORMATS
from app.gui.theme import THEMES

# What a job action asks, as job_requested sends it: the selected job is cancelled, retried, removed, moved up or
# down, or given a time range.
JOB_ACTIONS = ("cancel", "retry", "remove", "up", "down", "part")


class WindowActions(QObject):
    """The menu bar of ``window``, built at once. ``table`` is the queue's table (Delete removes a job only there),
    ``edit_actions`` the transcript's undo and redo, ``dock_toggles`` the panels' show/hide actions for View,
    ``theme`` the theme checked in View › Theme."""

    add_files_requested = Signal()
    add_folder_requested = Signal()
    dictate_requested = Signal()
    export_requested = Signal(object)  # a tuple of formats (File › Export as), or None: the formats in Settings
    settings_requested = Signal()
    models_requested = Signal()
    job_requested = Signal(str)  # one of JOB_ACTIONS, on the selected job
    offload_requested = Signal()
    pause_toggled = Signal(bool)
    find_requested = Signal()
    trash_requested = Signal()
    speakers_requested = Signal()
    theme_chosen = Signal(str)
    first_run_requested = Signal()
    about_requested = Signal()

    def __init__(
        self,
        window: QMainWindow,
        table: QWidget,
        edit_actions: Iterable[QAction],
        dock_toggles: Iterable[QAction],
        theme: str,
    ) -> None:
        super().__init__(window)
        self._window = window
        menu = window.menuBar()
        file_menu = menu.addMenu("&File")
        file_menu.addAction(self._action("Add files…", QKeySequence.StandardKey.Open, self.add_files_requested))
        file_menu.addAction(self._action("Add folder…", "Ctrl+Shift+O", self.add_folder_requested))
        self.dictate_action = self._action("Dictate", "Ctrl+D", self.dictate_requested)
        file_menu.addAction(self.dictate_action)
        export_menu = file_menu.addMenu("Export as")
        for fmt in FORMATS:
            export_menu.addAction(
                self._action(fmt.upper() + "…", None, lambda _=False, f=fmt: self.export_requested.emit((f,)))
            )
        file_menu.addAction(self._action("Export…", "Ctrl+E", lambda: self.export_requested.emit(None)))
        file_menu.addSeparator()
        file_menu.addAction(self._action("Settings…", "Ctrl+,", self.settings_requested))
        file_menu.addAction(self._action("Speech models…", None, self.models_requested))
        file_menu.addSeparator()
        file_menu.addAction(self._action("Quit", QKeySequence.StandardKey.Quit, window.close))

        shortcuts: dict[str, str | QKeySequence.StandardKey | None] = {
            "cancel": "Ctrl+.",
            "retry": "Ctrl+R",
            "remove": QKeySequence.StandardKey.Delete,
            "up": "Alt+Up",
            "down": "Alt+Down",
            "part": None,
        }
        texts = {
            "cancel": "Cancel job",
            "retry": "Retry job",
            "remove": "Remove job",
            "up": "Move up",
            "down": "Move down",
            "part": "Transcribe a part…",
        }
        self.job_actions = {
            kind: self._action(texts[kind], shortcuts[kind], lambda _=False, k=kind: self.job_requested.emit(k))
            for kind in JOB_ACTIONS
        }
        # Delete removes a job only from the queue: in the transcript or a text field it must edit text.
        remove = self.job_actions["remove"]
        window.removeAction(remove)
        remove.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        table.addAction(remove)
        queue_menu = menu.addMenu("&Queue")
        for action in self.job_actions.values():
            queue_menu.addAction(action)
        self.offload_action = self._action("Offload to cloud…", None, self.offload_requested)
        self.offload_action.setEnabled(False)
        queue_menu.addSeparator()
        # Pause: the running job finishes, no new one starts until Resume (this window's worker; not remembered
        # across restarts, so a queue never stays stopped without the user seeing why).
        self.pause_action = self._action("Pause queue", "Ctrl+Shift+P", self.pause_toggled)
        self.pause_action.setCheckable(True)
        queue_menu.addAction(self.pause_action)
        queue_menu.addSeparator()
        queue_menu.addAction(self.offload_action)
        edit_menu = menu.addMenu("&Edit")
        # The transcript's undo history, wherever the focus is in the window (a text field keeps its own).
        for action in edit_actions:
            window.addAction(action)
            edit_menu.addAction(action)
        edit_menu.addSeparator()
        edit_menu.addAction(self._action("Find in transcript", QKeySequence.StandardKey.Find, self.find_requested))
        edit_menu.addAction(self._action("Restore removed…", None, self.trash_requested))
        self.speakers_action = self._action("Known speakers…", None, self.speakers_requested)
        edit_menu.addAction(self.speakers_action)
        view_menu = menu.addMenu("&View")
        for toggle in dock_toggles:
            view_menu.addAction(toggle)
        theme_menu = view_menu.addMenu("Theme")
        self.theme_actions = QActionGroup(window)
        for name in THEMES:
            action = QAction(name.capitalize(), window)
            action.setCheckable(True)
            action.setChecked(name == theme)
            action.triggered.connect(lambda _=False, chosen=name: self.theme_chosen.emit(chosen))
            self.theme_actions.addAction(action)
            theme_menu.addAction(action)
        help_menu = menu.addMenu("&Help")
        help_menu.addAction(self._action("Choose a speech model…", None, self.first_run_requested))
        help_menu.addAction(self._action("About Scriba", None, self.about_requested))

    def _action(self, text: str, shortcut: str | QKeySequence.StandardKey | None, slot: object) -> QAction:
        action = QAction(text, self._window)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        self._window.addAction(action)  # shortcuts work wherever the focus is in the window
        return action

    def enable_for(self, states: Sequence[JobState]) -> None:
        """The job actions that apply to the selected jobs in ``states`` (none selected: none applies)."""
        self.job_actions["cancel"].setEnabled(any(state in (JobState.QUEUED, JobState.RUNNING) for state in states))
        # "Running" may be a job whose process died (a reboot reused its pid): the store decides, and takes such a
        # job back; a job really running is refused with a message.
        self.job_actions["retry"].setEnabled(any(state is not JobState.QUEUED for state in states))
        self.job_actions["remove"].setEnabled(bool(states))
        self.job_actions["up"].setEnabled(len(states) == 1)
        self.job_actions["down"].setEnabled(len(states) == 1)
        self.job_actions["part"].setEnabled(list(states) == [JobState.QUEUED])

    def job_menu(self, states: Sequence[JobState], parent: QWidget) -> QMenu:
        """The queue's right-click menu for the selected jobs in ``states``: the job actions that apply, then the
        offload."""
        menu = QMenu(parent)
        self.enable_for(states)
        for action in self.job_actions.values():
            menu.addAction(action)
        menu.addSeparator()
        menu.addAction(self.offload_action)
        return menu
