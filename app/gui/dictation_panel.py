"""The dictation panel: speak, watch the text appear (partials lighter, finals normal), copy it or keep it.

Threading: each Start runs one *session thread* (:func:`_run_session`) that builds the audio source, loads the
model (seconds), starts :class:`Dictation` and, when Stop is asked for, calls :meth:`Dictation.stop` (which
joins the decoder and flushes: a decode's time). So the main thread never waits on a model or a decode. The
engine calls ``on_event`` on its worker thread; that callback only hands the event to a callable from
:func:`app.gui.main_thread.deliver_on_main_thread`, so every widget is touched on the main thread alone. Each
report carries the session's number: a late event from a session that has ended is dropped.

A panel *session* spans the Start/Stop runs since the last Clear or Save: Stop then Start continues the text
(and the audio) instead of discarding it, and Save keeps all of it as one recording and one job.

Dictating into other programs: each final can also be typed into the window that has the focus, or kept on the
clipboard (:class:`DesktopTextOutput`, fed on the dictation worker thread, closed by the session thread after
the flush), and a global hotkey starts and stops the panel while another program has the focus (toggle, or
push-to-talk). A floating badge says "Listening" meanwhile, since Scriba's window is then out of sight.
"""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
import threading
from collections.abc import Callable
from enum import Enum
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import QColor, QGuiApplication, QPalette, QShowEvent, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.core.cancel import CancelToken
from app.core.desktop.output import DesktopTextOutput, OutputMode
from app.core.desktop.session import DesktopError
from app.core.desktop.x11_hotkey import HotkeyMode
from app.core.dictation.save import SavedDictation, save_dictation
from app.core.dictation.session import Dictation
from app.core.dictation.sources import AudioInputError, AudioSource, MicrophoneSource, list_input_devices
from app.core.dictation.stream import DictationEvent, DictationOptions
from app.core.engine.audio import SAMPLE_RATE
from app.core.paths import data_dir
from app.core.queue.jobs import JobStore
from app.core.transcript.document import Word
from app.gui.dictation_model import DictationModelPicker
from app.gui.global_hotkey import GlobalHotkey
from app.gui.listening_indicator import ListeningIndicator
from app.gui.main_thread import deliver_on_main_thread
from app.gui.theme import mix_colours

log = logging.getLogger(__name__)

InputDevice = int | str | None  # a PortAudio device index or name; None: the system's default input
SourceFactory = Callable[[InputDevice], AudioSource]

METER_FLOOR_DB = -60.0  # the level meter's empty end: quieter than a quiet room through a typical microphone
METER_INTERVAL_MS = 50  # 20 Hz: smooth enough for the eye, a negligible cost for the main thread
JOIN_TIMEOUT_S = 10.0  # how long closing the window waits for a session to flush


class PanelState(Enum):
    IDLE = "idle"
    LOADING = "loading"  # the session thread is opening the input and loading the model
    RUNNING = "running"
    STOPPING = "stopping"  # Dictation.stop() is flushing the last words


def microphone_source(device: InputDevice) -> AudioSource:
    return MicrophoneSource(device)


def _shifted(event: DictationEvent, offset: float) -> DictationEvent:
    """The event on the panel session's clock: a second run's audio follows the first run's in the recording."""
    if offset == 0:
        return event
    words = tuple(Word(word.start + offset, word.end + offset, word.word, word.probability) for word in event.words)
    return dataclasses.replace(
        event, start=event.start + offset, end=event.end + offset, emitted_at=event.emitted_at + offset, words=words
    )


@dataclasses.dataclass(frozen=True)
class _Reports:
    """How a session's threads report: each call runs the panel's slot on the main thread, in the order of the
    calls (:func:`app.gui.main_thread.deliver_on_main_thread`). Every report names its session's number."""

    arrived: Callable[[tuple[int, DictationEvent]], None]
    started: Callable[[int], None]  # the model is loaded and audio flows
    finished: Callable[[tuple[int, str | None]], None]  # the error message, or None


class _Session:
    """One Start…Stop run; shared by the main thread and its session thread."""

    def __init__(self, number: int, offset: float) -> None:
        self.number = number
        self.offset = offset  # seconds of panel-session audio recorded before this run
        self.stop_requested = CancelToken()
        # Set by the session thread before it emits ``started`` and never changed after; the main thread reads
        # it only after that signal (the level meter, the recording at the end).
        self.dictation: Dictation | None = None
        self.thread: threading.Thread | None = None
        self.output: DesktopTextOutput | None = None  # where finals are typed or copied, besides the panel


def _error_text(error: BaseException) -> str:
    return str(error) or type(error).__name__


def _run_session(
    session: _Session,
    reports: _Reports,
    source_factory: SourceFactory,
    device: InputDevice,
    options: DictationOptions,
) -> None:
    """The session thread: open, load, start; wait for Stop; flush. Reports through ``reports`` only."""
    number = session.number

    output = session.output

    def deliver(event: DictationEvent) -> None:  # on the dictation worker thread: no widget is touched
        if output is not None and event.type == "final":
            output.send(event.text)  # finals only: a partial changes, and typed keys cannot be taken back
        reports.arrived((number, event))

    error: str | None = None
    dictation: Dictation | None = None
    started = False
    try:
        dictation = Dictation(options, source_factory(device), deliver)
        dictation.load()
        if not session.stop_requested.cancelled:  # Stop while the model was loading: do not open the input
            dictation.start()
            started = True
            session.dictation = dictation
            reports.started(number)
            session.stop_requested.wait()
    except AudioInputError as problem:
        error = f"Microphone: {_error_text(problem)}"
    except Exception as problem:  # a missing model, a refused compute type, …: shown, never a dead window
        log.exception("dictation could not start")
        error = _error_text(problem)
    finally:
        if started and dictation is not None:
            try:
                dictation.stop()  # flushes: every word heard so far becomes final (emitted before this returns)
            except Exception as problem:  # the worker failed mid-session; stop() re-raises its error
                log.exception("dictation failed")
                error = error or _error_text(problem)
        if output is not None:
            output.close()  # the flushed finals are typed before the panel hears that the run is over
        # Always last: events emitted above are queued before it, so the panel sees every final first.
        reports.finished((number, error))


class DictationPanel(QWidget):
    """Input picker, level meter, Start/Stop, the live text, Copy all, Clear and Save.

    ``source_factory`` makes the audio source for a device (default: the microphone through PortAudio; tests
    give a replayed file). ``store`` and ``save_directory`` say where Save puts the job and the WAV.
    """

    saved = Signal(object)  # SavedDictation, after Save wrote the audio and added the job
    # (output mode or None, hotkey text or None, hotkey mode) after the person changed them: the window keeps them
    desktop_settings_changed = Signal(object, object, str)
    message = Signal(str)  # something for the window's status bar (an error, where a save went)
    view_updated = Signal()  # after the text view changed (a partial or final shown, or cleared)
    state_changed = Signal(object)  # PanelState

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
        self.options = options or DictationOptions()
        if self.options.model is None:
            raise ValueError("dictation needs a named model (the saved job records it)")
        self._source_factory = source_factory
        self.store = store
        self.save_directory = save_directory or (lambda: data_dir() / "dictations")
        self.state = PanelState.IDLE
        self._session: _Session | None = None
        self._session_numbers = 0
        self._devices_listed = False
        self._microphone_problem: str | None = None
        # The panel session (since the last Clear or Save): finals on the panel clock, and each run's audio.
        self._events: list[DictationEvent] = []
        self._recordings: list[np.ndarray] = []
        self._language: str | None = None
        self._saved = False
        # What the text view shows: the final text, then the partial from ``_partial_start`` to the end.
        self._final_text = ""
        self._partial_text = ""
        self._partial_start = 0
        self._run_has_final = False
        self.output_mode: OutputMode | None = None  # None: the text stays in the panel
        self.hotkey: GlobalHotkey | None = None
        self.hotkey_mode: HotkeyMode = "toggle"
        self._hotkey_down = False
        self._indicator: ListeningIndicator | None = None

        # A report racing the panel's deletion is dropped: Qt disconnects a dead receiver.
        self.reports = _Reports(
            arrived=deliver_on_main_thread(self._on_event),
            started=deliver_on_main_thread(self._on_started),
            finished=deliver_on_main_thread(self._on_finished),
        )

        self.device_combo = QComboBox()
        self.device_combo.setAccessibleName("Input device")
        self.device_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.device_combo.setMinimumContentsLength(16)
        self.device_combo.addItem("System default", None)
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
        self.hotkey_edit = QLineEdit()
        self.hotkey_edit.setAccessibleName("Global hotkey")
        self.hotkey_edit.setPlaceholderText("e.g. ctrl+alt+d")
        self.hotkey_edit.setToolTip("Starts and stops dictation while another program has the focus (X11)")
        self.hotkey_edit.editingFinished.connect(self._hotkey_edited)
        self.model_picker = DictationModelPicker(
            str(self.options.model), self.options.language, self.options.final_model
        )
        self.model_picker.changed.connect(self._model_chosen)
        self.hotkey_mode_combo = QComboBox()
        self.hotkey_mode_combo.setAccessibleName("Hotkey mode")
        self.hotkey_mode_combo.addItem("Press to start/stop", "toggle")
        self.hotkey_mode_combo.addItem("Hold to talk", "push")
        self.hotkey_mode_combo.currentIndexChanged.connect(self._hotkey_edited)

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
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        layout.addLayout(inputs)
        layout.addLayout(buttons)
        layout.addLayout(elsewhere)
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
        self._update_buttons()

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
            self._microphone_problem = str(error)
            self._show_message(f"No microphone: {error}")
        else:
            self._microphone_problem = None
            for device in devices:
                default = " (default)" if device["is_default"] else ""
                label = f"{device['name']}{default} · {device['hostapi']}"
                self.device_combo.addItem(label, device["index"])
            if devices:
                self._show_message("")
            else:
                self._show_message("No input device found: is a microphone connected, and the sound server running?")
        index = self.device_combo.findData(chosen)
        self.device_combo.setCurrentIndex(max(index, 0))
        self._update_buttons()

    def selected_device(self) -> InputDevice:
        data = self.device_combo.currentData()
        return int(data) if data is not None else None

    # ------------------------------------------------------------------------------------------- start/stop

    @Slot()
    def toggle(self) -> None:
        """Start when idle, stop when loading or running (what the button and the shortcut do)."""
        if self.state is PanelState.IDLE:
            self.start()
        elif self.state in (PanelState.LOADING, PanelState.RUNNING):
            self.stop()

    def _model_chosen(self, model: str, language: str | None, final_model: str | None) -> None:
        # From the next Start.
        self.options = dataclasses.replace(self.options, model=model, language=language, final_model=final_model)

    def can_start(self) -> bool:
        return self.state is PanelState.IDLE and (self._source_factory is not None or self._microphone_problem is None)

    def start(self) -> None:
        if not self.can_start():
            return
        output = None
        if self.output_mode is not None:
            # Made here, not on the session thread: a refusal (no X11, no clipboard tool) is said at once, and a
            # push-to-talk key already down holds the typing from the first final on.
            try:
                number, reports = self._session_numbers + 1, self.reports
                output = DesktopTextOutput(
                    self.output_mode,
                    # On the output's thread: reported to the main thread, as the engine's events are.
                    on_error=lambda text: reports.arrived((number, _status_event(f"Typing: {text}"))),
                )
            except DesktopError as error:
                self._show_message(str(error))
                self.message.emit(f"Dictation: {error}")
                return
            if self._hotkey_down:
                output.hold()
        if self._saved:
            self.clear()  # the previous session is kept in the queue: a new one begins
        self._session_numbers += 1
        session = self._session = _Session(self._session_numbers, self._recorded_seconds())
        session.output = output
        session.thread = threading.Thread(
            target=_run_session,
            args=(
                session,
                self.reports,
                self._source_factory or microphone_source,
                self.selected_device(),
                self.options,
            ),
            name="dictation-session",
            daemon=True,  # a wedged audio driver must not keep the process alive after the window closed
        )
        self._run_has_final = False
        self._show_message(output.notice if output is not None and output.notice else "")
        self._set_status("Loading model…")
        self._set_state(PanelState.LOADING)
        session.thread.start()

    def stop(self) -> None:
        """Ask the session to stop; the last words arrive as finals, then the panel is idle again."""
        session = self._session
        if session is None or self.state not in (PanelState.LOADING, PanelState.RUNNING):
            return
        self._set_status("Finishing…")
        self._set_state(PanelState.STOPPING)
        session.stop_requested.cancel()

    def shutdown(self, timeout: float = JOIN_TIMEOUT_S) -> None:
        """Stop and wait for the session thread (the window is closing). An unsaved session is lost."""
        self._meter_timer.stop()
        self.set_hotkey(None)
        if self._indicator is not None:
            self._indicator.close()
        session = self._session
        if session is None:
            return
        session.stop_requested.cancel()
        if session.thread is not None:
            session.thread.join(timeout)
            if session.thread.is_alive():
                log.warning("the dictation session did not stop within %.0f s", timeout)

    @Slot(int)
    def _on_started(self, number: int) -> None:
        session = self._session
        if session is None or number != session.number or self.state is not PanelState.LOADING:
            return  # a late signal, or Stop was pressed meanwhile (the session thread stops by itself)
        self._set_status("Listening")
        self._set_state(PanelState.RUNNING)

    @Slot(object)
    def _on_finished(self, report: tuple[int, str | None]) -> None:
        number, error = report
        session = self._session
        if session is None or number != session.number:
            return
        self._session = None
        dictation = session.dictation
        if dictation is not None:
            recording = dictation.recording()
            if recording.size:
                self._recordings.append(recording)
            # An English-only model says "en"; a multilingual one says what it detected (None: nothing heard).
            self._language = getattr(dictation.decoder, "language", None) or self._language
        self._set_partial("")
        self._set_state(PanelState.IDLE)
        self._set_status("")
        if error is not None:
            self._show_message(error)
            self.message.emit(f"Dictation: {error}")

    @Slot(object)
    def _on_event(self, report: tuple[int, DictationEvent]) -> None:
        number, event = report
        session = self._session
        if session is None or number != session.number:
            return
        if event.type == "final":
            self._events.append(_shifted(event, session.offset))
            self._add_final(event.text)
        elif event.type == "partial":
            self._set_partial(event.text)
        else:
            self._set_status(event.text)

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
        self.clear_button.setEnabled(idle and (bool(self._final_text) or bool(self._recordings)))
        self.save_button.setEnabled(self.can_save())
        self.copy_button.setEnabled(bool(self._final_text))

    @Slot()
    def _update_meter(self) -> None:
        session = self._session
        if session is None or session.dictation is None:
            return
        dictation = session.dictation
        # A float written by the source thread; reading it here is safe (one attribute read) and cheap.
        level = max(METER_FLOOR_DB, min(0.0, dictation.level_dbfs))
        self.level_meter.setValue(round(level - METER_FLOOR_DB))
        seconds = int(self.elapsed())
        self.clock_label.setText(f"{seconds // 60}:{seconds % 60:02d}")

    def elapsed(self) -> float:
        """Seconds of audio in the panel session: the runs before this one, and this one so far."""
        session = self._session
        if session is None or session.dictation is None:
            return self._recorded_seconds()
        return session.offset + session.dictation.clock

    def _recorded_seconds(self) -> float:
        return sum(len(recording) for recording in self._recordings) / SAMPLE_RATE

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
        """Discard the panel session: the text, its finals and the audio (only while idle)."""
        if self.state is not PanelState.IDLE:
            return
        self.view.clear()
        self._events.clear()
        self._recordings.clear()
        self._language = None
        self._saved = False
        self._final_text = self._partial_text = ""
        self._partial_start = 0
        self._run_has_final = False
        self.clock_label.setText("")
        self._set_status("")
        self._update_buttons()
        self.view_updated.emit()

    # ------------------------------------------------------------------------------------------- save

    def can_save(self) -> bool:
        return self.state is PanelState.IDLE and bool(self._recordings) and not self._saved

    def recording(self) -> np.ndarray:
        """The panel session's audio, every run one after another (16 kHz mono float32)."""
        if not self._recordings:
            return np.zeros(0, dtype=np.float32)
        return np.concatenate(self._recordings)

    @Slot()
    def save(self) -> SavedDictation | None:
        """Write the audio to the save directory and add the text as a finished job (``saved`` says so)."""
        if not self.can_save():
            return None
        directory = self.save_directory()
        options = self.options
        # "auto" is resolved inside the engine, which does not say to what: save_dictation's default stands then.
        extra = {"compute_type": options.compute_type} if options.compute_type != "auto" else {}
        try:
            saved = save_dictation(
                self.recording(),
                self._events,
                directory,
                store=self.store,
                model=str(options.model),
                language=self._language or options.language,
                device=options.device,
                **extra,
            )
        except (OSError, ValueError, sqlite3.Error) as error:  # a full disk, a read-only folder, a locked queue
            text = f"Could not save the dictation to {directory}: {error}"
            self._show_message(text)
            self.message.emit(text)
            return None
        self._saved = True
        self._update_buttons()
        where = f"{saved.audio}" + (f" (job {saved.job.id} in the queue)" if saved.job is not None else "")
        self._set_status("Saved")
        self._show_message(f"Saved {where}")
        self.saved.emit(saved)
        return saved

    # ------------------------------------------------------------------------------------------- other programs

    def set_output_mode(self, mode: OutputMode | None) -> None:
        """Where finals go besides the panel (from the next Start): typed, copied, or nowhere else (None)."""
        self.output_combo.setCurrentIndex(max(0, self.output_combo.findData(mode)))
        self.output_mode = mode

    @Slot()
    def _output_chosen(self) -> None:
        self.output_mode = self.output_combo.currentData()
        self._emit_desktop_settings()

    def set_hotkey(self, keys: str | None, mode: HotkeyMode = "toggle") -> str | None:
        """Listen for ``keys`` ("ctrl+alt+d") system-wide, or for nothing (None or ""). Returns the problem in
        words when the hotkey cannot be had (it is then off), else None."""
        if self.hotkey is not None:
            self.hotkey.stop()
            self.hotkey = None
        self._hotkey_down = False
        self.hotkey_mode = mode
        for widget, value in ((self.hotkey_edit, keys or ""), (self.hotkey_mode_combo, mode)):
            widget.blockSignals(True)
            if isinstance(widget, QLineEdit):
                widget.setText(str(value))
            else:
                widget.setCurrentIndex(max(0, widget.findData(value)))
            widget.blockSignals(False)
        if not keys:
            return None
        try:
            hotkey = GlobalHotkey(keys, self)
            hotkey.start()
        except DesktopError as error:
            self._show_message(f"Hotkey off: {error}")
            return str(error)
        hotkey.pressed.connect(self._hotkey_pressed)
        hotkey.released.connect(self._hotkey_released)
        self.hotkey = hotkey
        self._show_message("")
        return None

    @Slot()
    def _hotkey_edited(self) -> None:
        keys = self.hotkey_edit.text().strip() or None
        mode: HotkeyMode = "push" if self.hotkey_mode_combo.currentData() == "push" else "toggle"
        current = self.hotkey.hotkey.text if self.hotkey is not None else None
        if keys == current and mode == self.hotkey_mode:
            return
        self.set_hotkey(keys, mode)
        self._emit_desktop_settings()

    def _emit_desktop_settings(self) -> None:
        keys = self.hotkey_edit.text().strip() or None
        self.desktop_settings_changed.emit(self.output_mode, keys, self.hotkey_mode)

    @Slot()
    def _hotkey_pressed(self) -> None:
        self._hotkey_down = True
        session = self._session
        if session is not None and session.output is not None:
            session.output.hold()  # the hotkey's grab owns the keyboard until the key is released
        if self.hotkey_mode == "push":
            self.start()
        else:
            self.toggle()

    @Slot()
    def _hotkey_released(self) -> None:
        self._hotkey_down = False
        if self.hotkey_mode == "push":
            self.stop()
        session = self._session
        if session is not None and session.output is not None:
            session.output.release()

    def indicator_visible(self) -> bool:
        return self._indicator is not None and self._indicator.isVisible()

    def _update_indicator(self) -> None:
        """The badge shows while listening for another program: with a hotkey, or text going elsewhere."""
        listening = self.state in (PanelState.LOADING, PanelState.RUNNING)
        wanted = listening and (self.hotkey is not None or self.output_mode is not None)
        if wanted:
            if self._indicator is None:
                self._indicator = ListeningIndicator()
            hint = (
                f" · {self.hotkey.hotkey.text} stops"
                if self.hotkey is not None and self.hotkey_mode == "toggle"
                else ""
            )
            self._indicator.set_text(f"● Listening{hint}")
            self._indicator.show_near_bottom()
        elif self._indicator is not None:
            self._indicator.hide()


def _status_event(text: str) -> DictationEvent:
    return DictationEvent(type="status", text=text, start=0.0, end=0.0, emitted_at=0.0)
