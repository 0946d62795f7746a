"""The dictation panel: speak, watch the text appear (partials lighter, finals normal), copy it or keep it.

Threading: each Start runs one *session thread* (:func:`_run_session`) that builds the audio source, loads the
model (seconds), starts :class:`Dictation` and, when Stop is asked for, calls :meth:`Dictation.stop` (which
joins the decoder and flushes: a decode's time). So the main thread never waits on a model or a decode. The
engine calls ``on_event`` on its worker thread; that callback only emits on a parentless :class:`_Relay`
living on the main thread, so Qt queues the call and every widget is touched on the main thread alone. Each
emission carries the session's number: a late event from a session that has ended is dropped.

A panel *session* spans the Start/Stop runs since the last Clear or Save: Stop then Start continues the text
(and the audio) instead of discarding it, and Save keeps all of it as one recording and one job.
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
from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QColor, QGuiApplication, QPalette, QShowEvent, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.core.audio import SAMPLE_RATE
from app.core.dictation import (
    AudioInputError,
    AudioSource,
    Dictation,
    DictationEvent,
    DictationOptions,
    MicrophoneSource,
    list_input_devices,
)
from app.core.dictation_save import SavedDictation, save_dictation
from app.core.jobs import JobStore
from app.core.paths import data_dir
from app.core.transcript import Word

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


def _mix(first: QColor, second: QColor, weight: float) -> QColor:
    """``weight`` of ``first`` and the rest of ``second``, channel by channel."""
    return QColor.fromRgbF(
        first.redF() * weight + second.redF() * (1 - weight),
        first.greenF() * weight + second.greenF() * (1 - weight),
        first.blueF() * weight + second.blueF() * (1 - weight),
    )


def _shifted(event: DictationEvent, offset: float) -> DictationEvent:
    """The event on the panel session's clock: a second run's audio follows the first run's in the recording."""
    if offset == 0:
        return event
    words = tuple(Word(word.start + offset, word.end + offset, word.word, word.probability) for word in event.words)
    return dataclasses.replace(
        event, start=event.start + offset, end=event.end + offset, emitted_at=event.emitted_at + offset, words=words
    )


class _Relay(QObject):
    """Carries a session's news from its threads to the main thread (queued cross-thread emissions)."""

    arrived = Signal(int, object)  # session number, DictationEvent
    started = Signal(int)  # session number: the model is loaded and audio flows
    finished = Signal(int, object)  # session number, error message (str) or None


class _Session:
    """One Start…Stop run; shared by the main thread and its session thread."""

    def __init__(self, number: int, offset: float) -> None:
        self.number = number
        self.offset = offset  # seconds of panel-session audio recorded before this run
        self.stop_requested = threading.Event()
        # Set by the session thread before it emits ``started`` and never changed after; the main thread reads
        # it only after that signal (the level meter, the recording at the end).
        self.dictation: Dictation | None = None
        self.thread: threading.Thread | None = None


def _error_text(error: BaseException) -> str:
    return str(error) or type(error).__name__


def _run_session(
    session: _Session,
    relay: _Relay,
    source_factory: SourceFactory,
    device: InputDevice,
    options: DictationOptions,
) -> None:
    """The session thread: open, load, start; wait for Stop; flush. Reports through ``relay`` only."""
    number = session.number

    def deliver(event: DictationEvent) -> None:  # on the dictation worker thread: no widget is touched
        relay.arrived.emit(number, event)

    error: str | None = None
    dictation: Dictation | None = None
    started = False
    try:
        dictation = Dictation(options, source_factory(device), deliver)
        dictation.load()
        if not session.stop_requested.is_set():  # Stop while the model was loading: do not open the input
            dictation.start()
            started = True
            session.dictation = dictation
            relay.started.emit(number)
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
        # Always last: events emitted above are queued before it, so the panel sees every final first.
        relay.finished.emit(number, error)


class DictationPanel(QWidget):
    """Input picker, level meter, Start/Stop, the live text, Copy all, Clear and Save.

    ``source_factory`` makes the audio source for a device (default: the microphone through PortAudio; tests
    give a replayed file). ``store`` and ``save_directory`` say where Save puts the job and the WAV.
    """

    saved = Signal(object)  # SavedDictation, after Save wrote the audio and added the job
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

        # Parentless, so Python owns it and each session thread holds a reference: an emission racing the
        # panel's deletion reaches a live relay whose dead receiver Qt has already disconnected.
        self.relay = _Relay()
        self.relay.arrived.connect(self._on_event, Qt.ConnectionType.QueuedConnection)
        self.relay.started.connect(self._on_started, Qt.ConnectionType.QueuedConnection)
        self.relay.finished.connect(self._on_finished, Qt.ConnectionType.QueuedConnection)

        self.device_combo = QComboBox()
        self.device_combo.setAccessibleName("Input device")
        self.device_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.device_combo.setMinimumContentsLength(16)
        self.device_combo.addItem("System default", None)
        self.refresh_button = QToolButton()
        self.refresh_button.setText("↻")
        self.refresh_button.setToolTip("List the input devices again")
        self.refresh_button.setAccessibleName("Refresh input devices")
        self.refresh_button.clicked.connect(self.list_devices)
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

        inputs = QHBoxLayout()
        inputs.addWidget(QLabel("Input:"))
        inputs.addWidget(self.device_combo, 2)
        inputs.addWidget(self.refresh_button)
        inputs.addWidget(self.level_meter, 1)
        inputs.addWidget(self.clock_label)
        buttons = QHBoxLayout()
        for button in (self.start_button, self.copy_button, self.clear_button, self.save_button):
            buttons.addWidget(button)
        buttons.addWidget(self.status_label, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        layout.addLayout(inputs)
        layout.addLayout(buttons)
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

    @Slot()
    def list_devices(self) -> None:
        """Fill the picker from PortAudio; without it, say why and (for the microphone) disable Start."""
        self._devices_listed = True
        chosen = self.device_combo.currentData()
        self.device_combo.clear()
        self.device_combo.addItem("System default", None)
        try:
            devices = list_input_devices()
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

    def can_start(self) -> bool:
        return self.state is PanelState.IDLE and (self._source_factory is not None or self._microphone_problem is None)

    def start(self) -> None:
        if not self.can_start():
            return
        if self._saved:
            self.clear()  # the previous session is kept in the queue: a new one begins
        self._session_numbers += 1
        session = self._session = _Session(self._session_numbers, self._recorded_seconds())
        session.thread = threading.Thread(
            target=_run_session,
            args=(session, self.relay, self._source_factory or microphone_source, self.selected_device(), self.options),
            name="dictation-session",
            daemon=True,  # a wedged audio driver must not keep the process alive after the window closed
        )
        self._run_has_final = False
        self._show_message("")
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
        session.stop_requested.set()

    def shutdown(self, timeout: float = JOIN_TIMEOUT_S) -> None:
        """Stop and wait for the session thread (the window is closing). An unsaved session is lost."""
        self._meter_timer.stop()
        session = self._session
        if session is None:
            return
        session.stop_requested.set()
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

    @Slot(int, object)
    def _on_finished(self, number: int, error: str | None) -> None:
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

    @Slot(int, object)
    def _on_event(self, number: int, event: DictationEvent) -> None:
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
        return _mix(palette.color(QPalette.ColorRole.Text), palette.color(QPalette.ColorRole.Base), 0.45)

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
