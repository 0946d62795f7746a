"""The dictation panel: speak, watch the text appear (partials lighter, finals normal), copy it or keep it.

The panel drives a :class:`app.core.dictation.controller.DictationController` and only shows its events: the
controller loads the model, starts and stops runs (from Start, the window's shortcut or the global hotkey),
types finals into other programs and keeps the session's audio and finals for Save. Its events come from its
threads; :func:`app.gui.main_thread.deliver_on_main_thread` carries each to the main thread, in order, so every
widget is touched there alone. An event of a run that has been superseded is dropped.

A dictation *session* spans the Start/Stop runs since the last Clear or Save: Stop then Start continues the text
(and the audio) instead of discarding it, and Save keeps all of it as one recording and one job.

While the text goes to another program (typed or copied) or a global hotkey is set, a floating badge says
"Listening", since Scriba's window is then out of sight.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import (
    QColor,
    QGuiApplication,
    QKeySequence,
    QPalette,
    QShowEvent,
    QTextCharFormat,
    QTextCursor,
)
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QKeySequenceEdit,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.core.config.settings import DictationPreferences
from app.core.desktop.display import DesktopError
from app.core.desktop.output import OutputMode
from app.core.desktop.x11_hotkey import X11GlobalHotkey
from app.core.dictation.commands import Edit
from app.core.dictation.controller import (
    ControllerEvent,
    DictationController,
    DictationState,
    Edited,
    Heard,
    InputDevice,
    Listening,
    ModelLoading,
    Notice,
    Problem,
    RunEnded,
    RunEvent,
    RunStarting,
    SaveError,
    SourceFactory,
    Speaking,
    Stopping,
    microphone_source,
)
from app.core.dictation.modes import DEFAULT_MODE, MODES, DictationMode, parse_mode
from app.core.dictation.save import SavedDictation
from app.core.dictation.sounds import ListeningSounds
from app.core.dictation.sources import AudioInputError, list_input_devices
from app.core.dictation.stream import DictationOptions
from app.core.paths import data_dir
from app.core.queue.jobs import JobStore
from app.gui.dictation.listening_indicator import ListeningIndicator
from app.gui.dictation.model_picker import DictationModelPicker
from app.gui.dictation.words import WordsBar
from app.gui.main_thread import deliver_on_main_thread
from app.gui.theme import mix_colours

log = logging.getLogger(__name__)

__all__ = ["DictationPanel", "InputDevice", "PanelState", "SourceFactory"]

METER_FLOOR_DB = -60.0  # the level meter's empty end: quieter than a quiet room through a typical microphone
METER_INTERVAL_MS = 50  # 20 Hz: smooth enough for the eye, a negligible cost for the main thread
JOIN_TIMEOUT_S = 10.0  # how long closing the window waits for a run to flush

PanelState = DictationState  # what the panel shows: the controller's state as its events have told it


class DictationPanel(QWidget):
    """Input picker, level meter, Start/Stop, the live text, Copy all, Clear and Save.

    ``source_factory`` makes the audio source for a device (default: the microphone through PortAudio; tests
    give a replayed file). ``store`` and ``save_directory`` say where Save puts the job and the WAV.
    """

    saved = Signal(object)  # SavedDictation, after Save wrote the audio and added the job
    # (output mode or None, hotkey text or None, hotkey mode) after the person changed them: the window keeps them
    desktop_settings_changed = Signal(object, object, str)
    sounds_changed = Signal(bool)  # the person turned the start/stop sound on or off: the window keeps it
    preferences_changed = Signal(dict)  # DictationPreferences' fields the person changed here, to be kept
    message = Signal(str)  # something for the window's status bar (an error, where a save went)
    view_updated = Signal()  # after the text view changed (a partial or final shown, or cleared)
    state_changed = Signal(object)  # PanelState
    speaking = Signal(bool)  # speech began (True), or an utterance's finals are out (False): may hold the queue

    def __init__(
        self,
        options: DictationOptions | None = None,
        source_factory: SourceFactory | None = None,
        store: JobStore | None = None,
        save_directory: Callable[[], Path] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("dictationPanel")
        self.setAccessibleName("Dictation")
        options = options or DictationOptions()
        if options.model is None:
            raise ValueError("dictation needs a named model (the saved job records it)")
        # A report racing the panel's deletion is dropped: Qt disconnects a dead receiver.
        self.controller = DictationController(
            options, deliver_on_main_thread(self._on_controller_event), source_factory=source_factory
        )
        self._source_factory = source_factory
        self.store = store
        self.save_directory = save_directory or (lambda: data_dir() / "dictations")
        self.state = PanelState.IDLE
        self._run = 0  # the run the panel shows
        self._devices_listed = False
        self._microphone_problem: str | None = None
        # What the text view shows: the final text, then the partial from ``_partial_start`` to the end.
        self._final_text = ""
        self._partial_text = ""
        self._partial_start = 0
        self._run_has_final = False
        self.output_mode: OutputMode | None = None  # None: the text stays in the panel
        # With commands or replacements on, the view shows the run's editor's document from _doc_view_start on.
        self._doc = self._doc_base = ""
        self._doc_view_start = 0
        self._indicator: ListeningIndicator | None = None

        self.device_combo = QComboBox()
        self.device_combo.setAccessibleName("Input device")
        self.device_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.device_combo.setMinimumContentsLength(16)
        self.device_combo.addItem("System default", None)
        # The hotkey starts runs too: the controller always knows the chosen input.
        self.device_combo.currentIndexChanged.connect(self._device_chosen)
        self.refresh_button = QToolButton()
        self.refresh_button.setText("↻")
        self.refresh_button.setToolTip("List the input devices again")
        self.refresh_button.setAccessibleName("Refresh input devices")
        # Only while idle (the button is disabled otherwise): listing again restarts PortAudio.
        self.refresh_button.clicked.connect(lambda: self.list_devices(rescan=True))
        self.level_meter = QProgressBar()
        self.level_meter.setAccessibleName("Input level")
        self.level_meter.setToolTip(f"Input level, {METER_FLOOR_DB:.0f} to 0 dBFS")
        self.level_meter.setRange(0, round(-METER_FLOOR_DB))
        self.level_meter.setValue(0)
        self.level_meter.setTextVisible(False)
        self.level_meter.setMaximumHeight(12)
        self.level_meter.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.clock_label = QLabel("")
        self.clock_label.setAccessibleName("Dictation time")

        self.start_button = QPushButton("Start")
        self.start_button.setToolTip("Start or stop dictating (Ctrl+D in the window)")
        self.start_button.clicked.connect(self.toggle)
        self.copy_button = QPushButton("Copy all")
        self.copy_button.setToolTip("Copy the final text to the clipboard")
        self.copy_button.clicked.connect(self.copy_all)
        self.clear_button = QPushButton("Clear")
        self.clear_button.setToolTip("Discard the text and the audio, and begin a new session")
        self.clear_button.clicked.connect(self.clear)
        self.save_button = QPushButton("Save")
        self.save_button.setToolTip("Keep the audio as a WAV file and the text as a job in the queue")
        self.save_button.clicked.connect(self.save)
        self.status_label = QLabel("")
        self.status_label.setAccessibleName("Dictation status")
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)

        self.view = QPlainTextEdit()
        self.view.setReadOnly(True)
        self.view.setUndoRedoEnabled(False)  # a live transcript, not an editor: no undo history to grow
        self.view.setAccessibleName("Dictated text")
        self.view.setPlaceholderText("Press Start and speak; the text appears here.")
        self.message_label = QLabel("")
        self.message_label.setAccessibleName("Dictation message")
        self.message_label.setTextFormat(Qt.TextFormat.PlainText)
        self.message_label.setWordWrap(True)
        self.message_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message_label.hide()

        self.output_combo = QComboBox()
        self.output_combo.setAccessibleName("Dictated text goes to")
        self.output_combo.addItem("This panel only", None)
        self.output_combo.addItem("Also type into the focused window", "type")
        self.output_combo.addItem("Also copy to the clipboard", "copy")
        self.output_combo.setToolTip(
            "Type each finished sentence where the cursor is in another program, or keep the text on the clipboard"
        )
        self.output_combo.currentIndexChanged.connect(self._output_chosen)
        # The person presses the keys they want (one combination); the field's clear button removes it.
        self.hotkey_edit = QKeySequenceEdit()
        self.hotkey_edit.setMaximumSequenceLength(1)
        self.hotkey_edit.setClearButtonEnabled(True)
        self.hotkey_edit.setAccessibleName("Global hotkey")
        self.hotkey_edit.setToolTip(
            "Click here and press the keys (e.g. Ctrl+Alt+D): they drive dictation while another program has the "
            "focus (X11)"
        )
        self.hotkey_edit.editingFinished.connect(self._hotkey_edited)
        self.hotkey_edit.keySequenceChanged.connect(self._hotkey_cleared)
        self.model_picker = DictationModelPicker(
            str(self.options.model), self.options.language, self.options.final_model
        )
        self.model_picker.changed.connect(self._model_chosen)
        self.hotkey_mode_combo = QComboBox()
        self.hotkey_mode_combo.setAccessibleName("Hotkey mode")
        for name, words in MODES.items():
            self.hotkey_mode_combo.addItem(words, name)
        self.hotkey_mode_combo.setCurrentIndex(self.hotkey_mode_combo.findData(DEFAULT_MODE))
        self.hotkey_mode_combo.currentIndexChanged.connect(self._hotkey_edited)
        self.sounds_check = QCheckBox("Sounds")
        self.sounds_check.setToolTip("A short tone when the hotkey starts and stops listening")
        self.sounds_check.toggled.connect(self.set_sounds)
        self.sounds_check.clicked.connect(self.sounds_changed)  # a click, not apply_preferences' setChecked
        self.sounds_check.clicked.connect(lambda on: self.preferences_changed.emit({"sounds": bool(on)}))
        self.words = WordsBar()  # the switches and the person's words, applied at once to the next Start's options
        self.words.changed.connect(self.load_words)
        self.words.switched.connect(self.preferences_changed)

        inputs = QHBoxLayout()
        inputs.addWidget(QLabel("Input:"))
        inputs.addWidget(self.device_combo, 2)
        inputs.addWidget(self.refresh_button)
        inputs.addWidget(self.level_meter, 1)
        inputs.addWidget(self.clock_label)
        inputs.addWidget(self.model_picker)
        buttons = QHBoxLayout()
        for button in (self.start_button, self.copy_button, self.clear_button, self.save_button):
            buttons.addWidget(button)
        buttons.addWidget(self.status_label, 1)
        elsewhere = QHBoxLayout()
        elsewhere.addWidget(QLabel("Text to:"))
        elsewhere.addWidget(self.output_combo, 1)
        elsewhere.addWidget(QLabel("Hotkey:"))
        elsewhere.addWidget(self.hotkey_edit, 1)
        elsewhere.addWidget(self.hotkey_mode_combo)
        elsewhere.addWidget(self.sounds_check)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        layout.addLayout(inputs)
        layout.addLayout(buttons)
        layout.addLayout(elsewhere)
        layout.addWidget(self.words)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.message_label)

        self._meter_timer = QTimer(self)
        self._meter_timer.setInterval(METER_INTERVAL_MS)
        self._meter_timer.timeout.connect(self._update_meter)
        self._update_buttons()

    # ------------------------------------------------------------------------------------------- devices

    @property
    def source_factory(self) -> SourceFactory | None:
        """None: the microphone. Set before Start (tests put a replayed file here)."""
        return self._source_factory

    @source_factory.setter
    def source_factory(self, factory: SourceFactory | None) -> None:
        self._source_factory = factory
        self.controller.source_factory = factory or microphone_source
        self._update_buttons()

    @property
    def options(self) -> DictationOptions:
        return self.controller.options

    @options.setter
    def options(self, options: DictationOptions) -> None:
        self.controller.options = options  # from the next Start: a different model is loaded then

    def showEvent(self, event: QShowEvent) -> None:
        # Listing initialises PortAudio (it probes ALSA, which takes a moment): only once someone looks.
        if not self._devices_listed:
            self.list_devices()
        super().showEvent(event)

    def list_devices(self, rescan: bool = False) -> None:
        """Fill the picker from PortAudio; without it, say why and (for the microphone) disable Start. ``rescan``
        (the refresh button) finds devices that appeared since PortAudio started; only while idle."""
        self._devices_listed = True
        rescan = rescan and self.state is PanelState.IDLE
        chosen = self.device_combo.currentData()
        self.device_combo.clear()
        self.device_combo.addItem("System default", None)
        try:
            devices = list_input_devices(rescan=True) if rescan else list_input_devices()
        except AudioInputError as error:
            self._microphone_problem = error.words
            self._show_message(f"No microphone: {error.words}")
        else:
            # None found: Start stays off (it would fail on "input device None") until ↻ finds one.
            self._microphone_problem = None if devices else "no microphone found"
            for device in devices:
                default = " (default)" if device["is_default"] else ""
                label = f"{device['name']}{default} · {device['hostapi']}"
                self.device_combo.addItem(label, device["index"])
            if devices:
                self._show_message("")
            else:
                self._show_message(
                    "No microphone found. Connect one (and check that the computer's sound is on), then press ↻ "
                    "to look again."
                )
        index = self.device_combo.findData(chosen)
        self.device_combo.setCurrentIndex(max(index, 0))
        self._update_buttons()

    def selected_device(self) -> InputDevice:
        data = self.device_combo.currentData()
        return int(data) if data is not None else None

    @Slot()
    def _device_chosen(self) -> None:
        self.controller.device = self.selected_device()

    # ------------------------------------------------------------------------------------------- start/stop

    @Slot()
    def toggle(self) -> None:
        """Start when idle, stop when loading or running (what the button and the shortcut do)."""
        if self.state is PanelState.IDLE:
            self.start()
        elif self.state in (PanelState.LOADING, PanelState.RUNNING):
            self.stop()

    def _model_chosen(self, model: str, language: str | None, final_model: str | None) -> None:
        self.options = dataclasses.replace(self.options, model=model, language=language, final_model=final_model)
        self.preferences_changed.emit({"model": model, "language": language, "final_model": final_model})

    def can_start(self) -> bool:
        return self.state is PanelState.IDLE and (self._source_factory is not None or self._microphone_problem is None)

    def start(self) -> None:
        if not self.can_start():
            return
        if self.controller.saved:
            self.clear()  # the previous session is kept in the queue: a new one begins
        self.controller.device = self.selected_device()
        self.controller.output_mode = self.output_mode
        # Shown at once, not when the event comes: the button offers Stop from the click on.
        if self.controller.start():
            self._run_starting(self.controller.run_number)

    def stop(self) -> None:
        """Ask the run to stop; the last words arrive as finals, then the panel is idle again."""
        if self.state not in (PanelState.LOADING, PanelState.RUNNING):
            return
        self._run_stopping()
        self.controller.stop()

    def shutdown(self, timeout: float = JOIN_TIMEOUT_S) -> None:
        """Stop and wait for the run (the window is closing); the hotkey is given back. An unsaved session is
        lost."""
        self._meter_timer.stop()
        self.set_sounds(False)
        self.controller.close(timeout)
        if self._indicator is not None:
            self._indicator.close()

    @Slot(object)
    def _on_controller_event(self, event: ControllerEvent) -> None:
        if isinstance(event, ModelLoading):
            if self.state is PanelState.LOADING:
                self._set_status("Loading model…")
            return
        run = event.run if isinstance(event, RunEvent) else self._run
        if run < self._run:
            return  # a run the panel has moved on from
        if isinstance(event, Problem):
            if event.ended:
                self._show_message(event.text)
                self.message.emit(f"Dictation: {event.text}")
            else:
                self._set_status(event.text)
        elif isinstance(event, RunStarting):
            if event.new_session:
                self._clear_view()
            self._run_starting(event.run)
        elif isinstance(event, Notice):
            self._show_message(event.text)
        elif run != self._run:
            return
        elif isinstance(event, Heard):
            if event.event.type == "final":
                self._add_final(event.event.text)
            elif event.event.type == "partial":
                self._set_partial(event.event.text)
            else:
                self._set_status(event.event.text)
        elif isinstance(event, Edited):
            self._apply_edit(event.edit, event.rules_active)
        elif isinstance(event, Speaking):
            self.speaking.emit(event.active)
        elif isinstance(event, Listening):
            if self.state is PanelState.LOADING:
                self._set_status("Listening")
                self._set_state(PanelState.RUNNING)
        elif isinstance(event, Stopping):
            if self.state in (PanelState.LOADING, PanelState.RUNNING):
                self._run_stopping()
        elif isinstance(event, RunEnded):
            self._set_partial("")
            self._set_state(PanelState.IDLE)
            self._set_status("")

    def _run_starting(self, run: int) -> None:
        if run == self._run:
            return  # already shown: the panel started it itself
        self._run = run
        self._run_has_final = False
        if not (self.controller.keep_output and self._doc):  # else one editor goes on typing across runs
            self._doc, self._doc_base, self._doc_view_start = "", self._final_text, self._partial_start
        self._show_message("")
        self._set_status("Loading model…")
        self._set_state(PanelState.LOADING)

    def _run_stopping(self) -> None:
        self._set_status("Finishing…")
        self._set_state(PanelState.STOPPING)

    def _set_state(self, state: PanelState) -> None:
        self.state = state
        self._update_indicator()
        if state is PanelState.RUNNING:
            self._meter_timer.start()
        elif state is PanelState.IDLE:
            self._meter_timer.stop()
            self.level_meter.setValue(self.level_meter.minimum())
        self._update_buttons()
        self.state_changed.emit(state)

    def _update_buttons(self) -> None:
        idle = self.state is PanelState.IDLE
        self.start_button.setText("Start" if idle else "Stop")
        self.start_button.setEnabled(self.can_start() or self.state in (PanelState.LOADING, PanelState.RUNNING))
        self.device_combo.setEnabled(idle)
        self.refresh_button.setEnabled(idle)
        self.model_picker.setEnabled(idle)
        self.clear_button.setEnabled(idle and (bool(self._final_text) or self.controller.recorded_seconds > 0))
        self.save_button.setEnabled(self.can_save())
        self.copy_button.setEnabled(bool(self._final_text))

    @Slot()
    def _update_meter(self) -> None:
        # A float written by the source thread; reading it here is safe (one attribute read) and cheap.
        level = max(METER_FLOOR_DB, min(0.0, self.controller.level_dbfs))
        self.level_meter.setValue(round(level - METER_FLOOR_DB))
        seconds = int(self.elapsed())
        self.clock_label.setText(f"{seconds // 60}:{seconds % 60:02d}")

    def elapsed(self) -> float:
        """Seconds of audio in the session: the runs before this one, and this one so far."""
        return self.controller.elapsed

    # ------------------------------------------------------------------------------------------- text

    def final_text(self) -> str:
        """All final text of the panel session: runs as paragraphs, finals within a run joined by spaces."""
        return self._final_text

    def partial_text(self) -> str:
        return self._partial_text

    def partial_color(self) -> QColor:
        """Halfway between the text and the background: lighter on a light theme, darker on a dark one."""
        palette = self.view.palette()
        return mix_colours(palette.color(QPalette.ColorRole.Text), palette.color(QPalette.ColorRole.Base), 0.45)

    def _separator(self, text: str) -> str:
        if not self._final_text or not text:
            return ""
        return " " if self._run_has_final else "\n"

    def _tail(self) -> QTextCursor:
        """A cursor selecting the partial at the end of the view."""
        cursor = QTextCursor(self.view.document())
        cursor.setPosition(self._partial_start)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        return cursor

    def _edit(self, change: Callable[[QTextCursor], None]) -> None:
        """Apply ``change`` to the tail, keeping the view at the bottom if it was there (but not stealing a
        scroll position the user chose, nor their selection: the view's own cursor is not moved)."""
        scrollbar = self.view.verticalScrollBar()
        following = scrollbar.value() >= scrollbar.maximum() - 2
        cursor = self._tail()
        cursor.beginEditBlock()
        change(cursor)
        cursor.endEditBlock()
        if following:
            scrollbar.setValue(scrollbar.maximum())
        self.view_updated.emit()

    def _add_final(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        piece = self._separator(text) + text

        def change(cursor: QTextCursor) -> None:
            cursor.removeSelectedText()
            cursor.insertText(piece, QTextCharFormat())
            self._partial_start = cursor.position()

        self._edit(change)
        self._final_text += piece
        self._partial_text = ""
        self._run_has_final = True
        self._update_buttons()

    def _set_partial(self, text: str) -> None:
        text = text.strip()
        if text == self._partial_text:
            return
        shown = self._separator(text) + text
        light = QTextCharFormat()
        light.setForeground(self.partial_color())

        def change(cursor: QTextCursor) -> None:
            cursor.removeSelectedText()
            if shown:
                cursor.insertText(shown, light)

        self._edit(change)
        self._partial_text = text

    def _apply_edit(self, edit: Edit, rules_active: bool) -> None:
        """What a final typed: with rules on, the run's text becomes exactly that (the Heard before it showed the
        words as heard); the commands it carried out go to the status line."""
        self._doc = self._doc[: len(self._doc) - edit.erase] + edit.text
        if edit.actions:
            self._set_status(" · ".join(edit.actions))
        if not rules_active:
            return
        piece = ("\n" if self._doc_base and self._doc else "") + self._doc

        def change(cursor: QTextCursor) -> None:
            cursor.setPosition(self._doc_view_start)
            cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
            cursor.removeSelectedText()
            cursor.insertText(piece, QTextCharFormat())
            self._partial_start = cursor.position()

        self._edit(change)
        self._final_text = self._doc_base + piece
        self._partial_text = ""
        self._run_has_final = bool(self._doc)
        self._update_buttons()

    def _set_status(self, text: str) -> None:
        self.status_label.setText(text)
        self.status_label.setToolTip(text)

    def _show_message(self, text: str) -> None:
        self.message_label.setText(text)
        self.message_label.setVisible(bool(text))

    @Slot()
    def copy_all(self) -> None:
        QGuiApplication.clipboard().setText(self._final_text)
        self._set_status("Copied")

    @Slot()
    def clear(self) -> None:
        """Discard the session: the text, its finals and the audio (only while idle)."""
        if self.state is not PanelState.IDLE or not self.controller.clear():
            return
        self._clear_view()

    def _clear_view(self) -> None:
        self.view.clear()
        self._final_text = self._partial_text = ""
        self._partial_start = self._doc_view_start = 0
        self._doc = self._doc_base = ""
        self._run_has_final = False
        self.clock_label.setText("")
        self._set_status("")
        self._update_buttons()
        self.view_updated.emit()

    # ------------------------------------------------------------------------------------------- save

    def can_save(self) -> bool:
        return self.state is PanelState.IDLE and self.controller.recorded_seconds > 0 and not self.controller.saved

    def recording(self) -> np.ndarray:
        """The session's audio, every run one after another (16 kHz mono float32)."""
        return self.controller.recording()

    @Slot()
    def save(self) -> SavedDictation | None:
        """Write the audio to the save directory and add the text as a finished job (``saved`` says so)."""
        if not self.can_save():
            return None
        try:
            saved = self.controller.save(self.save_directory(), self.store)
        except SaveError as error:
            self._show_message(str(error))
            self.message.emit(str(error))
            return None
        self._update_buttons()
        where = f"{saved.audio}" + (f" (job {saved.job.id} in the queue)" if saved.job is not None else "")
        self._set_status("Saved")
        self._show_message(f"Saved {where}")
        self.saved.emit(saved)
        return saved

    # ------------------------------------------------------------------------------------------- other programs

    def apply_preferences(self, preferences: DictationPreferences, words_folder: Path | None = None) -> str | None:
        """Where finals go, the global hotkey, the switches and the person's words (the replacements and
        vocabulary files in ``words_folder``, default the config folder), as the settings keep them. Returns the
        hotkey's problem in words when it cannot be had, else None."""
        self.words.set_switches(preferences.commands, preferences.numbers)
        self.words.folder = words_folder
        self.load_words()
        output = preferences.output
        self.set_output_mode("copy" if output == "copy" else ("type" if output == "type" else None))
        self.sounds_check.setChecked(preferences.sounds)
        self.set_sounds(preferences.sounds)
        try:
            mode = parse_mode(preferences.hotkey_mode)
        except ValueError:  # a settings file from elsewhere: the default mode, the rest kept
            mode = DEFAULT_MODE
        if not preferences.hotkey:
            self._show_mode(None, mode)
            return None
        return self.set_hotkey(preferences.hotkey, mode)

    @Slot()
    def load_words(self) -> None:
        """The switches and the words files, read now, into the options of the next Start."""
        self.options = self.words.applied(self.options)

    def set_output_mode(self, mode: OutputMode | None) -> None:
        """Where finals go besides the panel (from the next Start): typed, copied, or nowhere else (None)."""
        self.output_combo.setCurrentIndex(max(0, self.output_combo.findData(mode)))
        self.output_mode = self.controller.output_mode = mode

    @Slot()
    def _output_chosen(self) -> None:
        self.output_mode = self.controller.output_mode = self.output_combo.currentData()
        self._emit_desktop_settings()

    @property
    def hotkey(self) -> X11GlobalHotkey | None:
        return self.controller.hotkey

    @property
    def hotkey_mode(self) -> DictationMode:
        return self.controller.hotkey_mode

    def set_hotkey(self, keys: str | None, mode: DictationMode = DEFAULT_MODE) -> str | None:
        """Listen for ``keys`` ("ctrl+alt+d") system-wide in ``mode``, or for nothing (None or ""). In continuous
        mode listening starts now. Returns the problem in words when the hotkey cannot be had (it is then off),
        else None."""
        self._show_mode(keys, mode)
        try:
            self.controller.set_hotkey(keys, mode)
        except DesktopError as error:
            self._show_message(f"Hotkey off: {error}")
            return str(error)
        if keys:
            self._show_message("")
            if mode == "continuous" and self.can_start():
                self.start()
        self._update_indicator()
        return None

    def _show_mode(self, keys: str | None, mode: DictationMode) -> None:
        """The hotkey field and the mode choice as given, without their signals (nothing is grabbed here)."""
        for widget in (self.hotkey_edit, self.hotkey_mode_combo):
            widget.blockSignals(True)
        self.hotkey_edit.setKeySequence(key_sequence(keys))
        self.hotkey_mode_combo.setCurrentIndex(max(0, self.hotkey_mode_combo.findData(mode)))
        for widget in (self.hotkey_edit, self.hotkey_mode_combo):
            widget.blockSignals(False)

    def chosen_hotkey(self) -> str | None:
        """The keys in the field as the hotkey grabber writes them ("ctrl+alt+d"), None when it is empty."""
        return hotkey_text(self.hotkey_edit.keySequence())

    @Slot()
    def _hotkey_cleared(self) -> None:
        if self.hotkey_edit.keySequence().isEmpty():
            self._hotkey_edited()  # the clear button: no editingFinished follows it

    @Slot()
    def _hotkey_edited(self) -> None:
        keys = self.chosen_hotkey()
        mode = parse_mode(self.hotkey_mode_combo.currentData())
        current = self.hotkey.hotkey.text if self.hotkey is not None else None
        if keys == current and mode == self.hotkey_mode:
            return
        if self.hotkey_mode == "continuous" and mode != "continuous" and self.hotkey is not None:
            self.stop()  # listening all the time ends with that mode
        self.set_hotkey(keys, mode)
        self._emit_desktop_settings()

    def _emit_desktop_settings(self) -> None:
        self.desktop_settings_changed.emit(self.output_mode, self.chosen_hotkey(), self.hotkey_mode)

    @Slot(bool)
    def set_sounds(self, on: bool) -> None:
        """A tone when listening starts and stops (on the system's default output)."""
        if on and self.controller.sounds is None:
            self.controller.sounds = ListeningSounds(on_error=deliver_on_main_thread(self._sounds_failed))
        elif not on and self.controller.sounds is not None:
            sounds, self.controller.sounds = self.controller.sounds, None
            sounds.close()

    def _sounds_failed(self, text: str) -> None:
        self.message.emit(f"Dictation: {text}")  # the status bar: the panel's own lines say what dictation does

    def indicator_visible(self) -> bool:
        return self._indicator is not None and self._indicator.isVisible()

    def indicator_text(self) -> str:
        """What the badge says (empty while it is hidden)."""
        return self._indicator.label.text() if self.indicator_visible() and self._indicator is not None else ""

    def _update_indicator(self) -> None:
        """The badge shows while listening for another program (with a hotkey, or text going elsewhere), while
        the last words are made final, and in continuous mode while the hotkey has paused listening."""
        text = self._indicator_words()
        if text:
            if self._indicator is None:
                self._indicator = ListeningIndicator()
            self._indicator.set_text(text)
            self._indicator.show_near_bottom()
        elif self._indicator is not None:
            self._indicator.hide()

    def _indicator_words(self) -> str:
        keys = self.hotkey.hotkey.text if self.hotkey is not None else None
        if keys is None and self.output_mode is None:
            return ""
        if self.state in (PanelState.LOADING, PanelState.RUNNING):
            if keys is None:
                return "● Listening"
            hints: dict[DictationMode, str] = {
                "hold": f"release {keys} to type",
                "toggle": f"{keys} stops",
                "continuous": f"{keys} pauses",
            }
            return f"● Listening · {hints[self.hotkey_mode]}"
        if self.state is PanelState.STOPPING:
            return "… Finishing"
        if keys is not None and self.hotkey_mode == "continuous":
            return f"⏸ Paused · {keys} resumes"
        return ""


# Qt's names of modifiers and the hotkey grabber's ("ctrl+alt+d"; Meta is the Super/Windows key on X11).
_QT_MODIFIERS = {"ctrl": "Ctrl", "control": "Ctrl", "alt": "Alt", "shift": "Shift", "super": "Meta", "win": "Meta"}


def hotkey_text(sequence: QKeySequence) -> str | None:
    """A key sequence as the grabber parses it: "Ctrl+Alt+D" -> "ctrl+alt+d"; None when empty."""
    if sequence.isEmpty():
        return None
    # One combination: the field takes no more (setMaximumSequenceLength(1)).
    portable = sequence.toString(QKeySequence.SequenceFormat.PortableText).split(", ")[0]
    *modifiers, key = portable.split("+")
    names = [("super" if name == "Meta" else name.lower()) for name in modifiers]
    return "+".join([*names, key.lower() if len(key) == 1 else key])


def key_sequence(keys: str | None) -> QKeySequence:
    """The grabber's text shown in the field: "ctrl+alt+d" -> Ctrl+Alt+D."""
    if not keys:
        return QKeySequence()
    *modifiers, key = keys.split("+")
    names = [_QT_MODIFIERS.get(name.strip().lower(), name.strip().capitalize()) for name in modifiers]
    shown = key.strip().upper() if len(key.strip()) == 1 else key.strip()
    return QKeySequence.fromString("+".join([*names, shown]), QKeySequence.SequenceFormat.PortableText)
