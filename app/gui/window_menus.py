"""The window's menu bar: File, Queue, Edit, View and Help, and the queue's job actions (window.job_actions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence

from app.core.transcript.formats import FORMATS
from app.gui.theme import THEMES

if TYPE_CHECKING:
    from app.gui.window import MainWindow


def build_menus(window: MainWindow) -> None:
    menu = window.menuBar()
    file_menu = menu.addMenu("&File")
    file_menu.addAction(window._action("Add files…", QKeySequence.StandardKey.Open, window.choose_files))
    file_menu.addAction(window._action("Add folder…", "Ctrl+Shift+O", window.choose_folder))
    window.dictate_action = window._action("Dictate", "Ctrl+D", window.toggle_dictation)
    file_menu.addAction(window.dictate_action)
    export_menu = file_menu.addMenu("Export as")
    for fmt in FORMATS:
        export_menu.addAction(
            window._action(fmt.upper() + "…", None, lambda _=False, f=fmt: window.choose_export((f,)))
        )
    file_menu.addAction(window._action("Export…", "Ctrl+E", window.choose_export))
    file_menu.addSeparator()
    file_menu.addAction(window._action("Settings…", "Ctrl+,", window.open_settings))
    file_menu.addAction(window._action("Speech models…", None, lambda: window.open_models()))
    file_menu.addSeparator()
    file_menu.addAction(window._action("Quit", QKeySequence.StandardKey.Quit, window.close))

    window.job_actions = {
        "cancel": window._action("Cancel job", "Ctrl+.", lambda: window._on_selected(window.cancel_job)),
        "retry": window._action("Retry job", "Ctrl+R", lambda: window._on_selected(window.retry_job)),
        "remove": window._action(
            "Remove job", QKeySequence.StandardKey.Delete, lambda: window._on_selected(window.remove_job)
        ),
        "up": window._action("Move up", "Alt+Up", lambda: window._on_selected(lambda i: window.move_job(i, -1))),
        "down": window._action("Move down", "Alt+Down", lambda: window._on_selected(lambda i: window.move_job(i, 1))),
        "part": window._action("Transcribe a part…", None, lambda: window._on_selected(window.choose_time_range)),
    }
    # Delete removes a job only from the queue: in the transcript or a text field it must edit text.
    remove = window.job_actions["remove"]
    window.removeAction(remove)
    remove.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
    window.table.addAction(remove)
    queue_menu = menu.addMenu("&Queue")
    for action in window.job_actions.values():
        queue_menu.addAction(action)
    window.offload_action = window._action("Offload to cloud…", None, lambda: window.open_offload_dialog())
    window.offload_action.setEnabled(False)
    queue_menu.addSeparator()
    # Pause: the running job finishes, no new one starts until Resume (this window's worker; not remembered
    # across restarts, so a queue never stays stopped without the user seeing why).
    window.pause_action = window._action("Pause queue", "Ctrl+Shift+P", window.toggle_pause)
    window.pause_action.setCheckable(True)
    queue_menu.addAction(window.pause_action)
    queue_menu.addSeparator()
    queue_menu.addAction(window.offload_action)
    edit_menu = menu.addMenu("&Edit")
    # The transcript's undo history, wherever the focus is in the window (a text field keeps its own).
    for action in (window.transcript_view.undo_action, window.transcript_view.redo_action):
        window.addAction(action)
        edit_menu.addAction(action)
    edit_menu.addSeparator()
    edit_menu.addAction(window._action("Find in transcript", QKeySequence.StandardKey.Find, window._focus_search))
    edit_menu.addAction(window._action("Restore removed…", None, window.open_trash))
    window.speakers_action = window._action("Known speakers…", None, window.open_speakers)
    edit_menu.addAction(window.speakers_action)
    view_menu = menu.addMenu("&View")
    view_menu.addAction(window.gpu_dock.toggleViewAction())
    view_menu.addAction(window.dictation_dock.toggleViewAction())
    theme_menu = view_menu.addMenu("Theme")
    window.theme_actions = QActionGroup(window)
    for theme in THEMES:
        action = QAction(theme.capitalize(), window)
        action.setCheckable(True)
        action.setChecked(theme == window.settings.window.theme)
        action.triggered.connect(lambda _=False, chosen=theme: window.set_theme(chosen))
        window.theme_actions.addAction(action)
        theme_menu.addAction(action)
    help_menu = menu.addMenu("&Help")
    help_menu.addAction(window._action("Choose a speech model…", None, lambda: window.open_first_run()))
    help_menu.addAction(window._action("About Scriba", None, window._about))
