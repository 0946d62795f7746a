"""The life of dictation as a person drives it, without Qt: the window's panel and `scriba dictate` both run
one :class:`DictationController` and differ only in how they show its events.

The controller loads the model once (and again only when the model options change), starts and stops *runs*
(one :class:`app.core.dictation.live.Dictation` each, from a button, a command or a global hotkey's press),
hands partials to the face and types only finals into other programs (:class:`DesktopTextOutput`: a partial is
replaced a moment later, and typed keys cannot be taken back), and says what went wrong (no microphone, no
typing, no model) as :class:`Problem` events in plain words. It also keeps the *dictation session*: the runs
since the last :meth:`clear` or :meth:`save`, their audio one after another and their finals on that clock,
which :meth:`save` keeps as one recording and one job.

Threads: every public method may be called from any thread. Each run has a thread of its own (load, start,
wait for the stop, flush), so no caller waits on a model or a decode. Events reach the ``listener`` from the
thread that caused them (the caller's, the run's, the dictation worker's, the typing thread's): the CLI prints
them under a lock; the window carries them to its main thread. For one run they come in order, and
:class:`RunEnded` always last, after every final is out.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from app.core.cancel import CancelToken
from app.core.dictation.commands import DictationEditor, Edit, TextRules, command_table
from app.core.dictation.decoding import Decoder, WhisperDecoder, load_warm_decoder
from app.core.dictation.live import SILENCE_DBFS, Dictation
from app.core.dictation.modes import DEFAULT_MODE, DictationMode
from app.core.dictation.sources import AudioInputError, AudioSource, MicrophoneSource
from app.core.dictation.stream import DictationEvent, DictationOptions
from app.core.engine.audio import SAMPLE_RATE
from app.core.errors import ScribaError
from app.core.transcript.document import Word

if TYPE_CHECKING:
    from app.core.desktop.output import DesktopTextOutput, OutputMode
    from app.core.desktop.x11_hotkey import X11GlobalHotkey
    from app.core.dictation.save import SavedDictation
    from app.core.dictation.sounds import ListeningSounds
    from app.core.queue.jobs import JobStore

log = logging.getLogger(__name__)

InputDevice = int | str | None  # a PortAudio device index or name; None: the system's default input
SourceFactory = Callable[[InputDevice], AudioSource]


class DictationState(Enum):
    IDLE = "idle"
    LOADING = "loading"  # the run's thread loads the model and opens the input
    RUNNING = "running"
    STOPPING = "stopping"  # the last words are being decoded


# ------------------------------------------------------------------------------------------------ events


@dataclass(frozen=True)
class ModelLoading:
    """The model is being loaded (seconds for a large one); :class:`ModelReady` follows, or a Problem."""

    model: str
    final_model: str | None


@dataclass(frozen=True)
class ModelReady:
    model: str


@dataclass(frozen=True)
class RunEvent:
    """Something about run number ``run`` (the first is 1)."""

    run: int


@dataclass(frozen=True)
class RunStarting(RunEvent):
    """A run begins. ``new_session``: the session was saved, so its text and audio are gone from here on."""

    new_session: bool = False


class Listening(RunEvent):
    """The model is loaded and the input is open: what is said from now on is heard."""


class Stopping(RunEvent):
    """Stop was asked for: the words heard so far are being made final."""


@dataclass(frozen=True)
class Heard(RunEvent):
    """A partial, a final or a status line (pacing: the machine cannot keep up) of the run, on the run's clock."""

    event: DictationEvent


@dataclass(frozen=True)
class Speaking(RunEvent):
    """The person began speaking (``active``), or an utterance ended and its finals are out: what may hold the
    file queue meanwhile (app.core.dictation.queue_hold). On the dictation's thread; the end comes after the
    utterance's finals (their Heard and Edited)."""

    active: bool


@dataclass(frozen=True)
class Edited(RunEvent):
    """What a final did to the document typed so far (after the :class:`Heard` that carries it): the text typed,
    the characters taken back first, and the spoken commands carried out ("[comma]", "⌫ scratch that"). Its
    ``edit.shown`` is the final as a face shows it when commands or replacements are on."""

    edit: Edit
    rules_active: bool  # commands, numbers or replacements are on: the text may differ from what was heard


@dataclass(frozen=True)
class Notice(RunEvent):
    """Something the person should know that is not a failure (which route types on Wayland, say)."""

    text: str


ProblemKind = Literal["microphone", "desktop", "typing", "model", "dictation"]
_PROBLEM_LABELS: dict[ProblemKind, str] = {"microphone": "Microphone", "typing": "Typing"}


@dataclass(frozen=True)
class Problem(RunEvent):
    """What went wrong, in words for the person. ``ended``: the run ended (or never began) because of it; else
    it goes on (one final could not be typed)."""

    kind: ProblemKind
    message: str
    ended: bool

    @property
    def text(self) -> str:
        """The message with what it is about in front, where the message alone does not say it."""
        label = _PROBLEM_LABELS.get(self.kind)
        return f"{label}: {self.message}" if label else self.message


@dataclass(frozen=True)
class RunEnded(RunEvent):
    """The run is over: every final is out (and typed), the input is closed. Always a run's last event."""

    listened: bool  # the input was open (False: it failed to open, or Stop came while the model loaded)


ControllerEvent = (
    ModelLoading
    | ModelReady
    | RunStarting
    | Listening
    | Stopping
    | Heard
    | Speaking
    | Edited
    | Notice
    | Problem
    | RunEnded
)
Listener = Callable[[ControllerEvent], None]


class SaveError(ScribaError):
    """The dictation could not be kept; the message says where and why."""


def error_text(error: BaseException) -> str:
    return str(error) or type(error).__name__


def shifted(event: DictationEvent, offset: float) -> DictationEvent:
    """The event on the session's clock: a later run's audio follows the earlier runs' in the recording."""
    if offset == 0:
        return event
    words = tuple(Word(word.start + offset, word.end + offset, word.word, word.probability) for word in event.words)
    return dataclasses.replace(
        event, start=event.start + offset, end=event.end + offset, emitted_at=event.emitted_at + offset, words=words
    )


def text_rules(options: DictationOptions, language: str | None) -> TextRules:
    """What the editor does to a run's finals, from the dictation options."""
    return TextRules(
        commands=options.commands, numbers=options.numbers, replacements=options.replacements, language=language
    )


def microphone_source(device: InputDevice) -> AudioSource:
    return MicrophoneSource(device)


def _model_key(options: DictationOptions) -> tuple[object, ...]:
    """What a loaded decoder depends on: a change of any of these loads the model again."""
    return (
        options.model,
        options.final_model,
        options.language,
        options.device,
        options.compute_type,
        options.cpu_threads,
        options.partial_beam_size,
        options.final_beam_size,
    )


@dataclass
class _Run:
    number: int
    offset: float  # seconds of session audio recorded before this run
    output: DesktopTextOutput | None  # where finals go besides the face
    owns_output: bool  # made for this run: closed when it ends
    editor: DictationEditor  # the document the output has typed (kept with a kept output)
    stop: CancelToken = dataclasses.field(default_factory=CancelToken)
    dictation: Dictation | None = None  # set once the input is open
    thread: threading.Thread | None = None


class DictationController:
    """Start and stop dictation runs and say what happens, through ``listener``.

    ``source_factory`` makes the audio source for an input device (default: the microphone; tests and
    ``--from-file`` give a replay). ``stop_at_end``: a run stops by itself when its source ends (a file);
    otherwise a source that ran out leaves the run listening until :meth:`stop`.

    ``output_mode`` sends finals to other programs too ("type" or "copy"). With ``keep_output`` one output
    serves every run until :meth:`close` (the text of one hotkey press follows the last one's with a space, and
    the clipboard gathers the whole session); without it each run has its own, finished before
    :class:`RunEnded`.
    """

    def __init__(
        self,
        options: DictationOptions,
        listener: Listener,
        *,
        source_factory: SourceFactory | None = None,
        device: InputDevice = None,
        output_mode: OutputMode | None = None,
        keep_output: bool = False,
        stop_at_end: bool = False,
    ) -> None:
        self._options = options
        self._listener = listener
        self.source_factory: SourceFactory = source_factory or microphone_source
        self.device = device
        self.output_mode = output_mode
        self.keep_output = keep_output
        self.stop_at_end = stop_at_end
        self._lock = threading.RLock()
        self._load_lock = threading.Lock()
        self._state = DictationState.IDLE
        self._runs = 0
        self._run: _Run | None = None
        self._start_after_stop = False
        self._decoder: Decoder | None = None
        self._final_decoder: Decoder | None = None
        self._loaded_key: tuple[object, ...] | None = None
        self._kept_output: DesktopTextOutput | None = None
        self._kept_editor: DictationEditor | None = None
        self._hotkey: X11GlobalHotkey | None = None
        self.hotkey_mode: DictationMode = DEFAULT_MODE
        self._key_down = False
        self.sounds: ListeningSounds | None = None  # a tone when listening starts and stops (None: silent)
        self._closed = False
        # The session: every run's audio and its finals on the session clock.
        self._recordings: list[np.ndarray] = []
        self._finals: list[DictationEvent] = []
        self._language: str | None = None
        self._saved = False

    # ---- state

    @property
    def state(self) -> DictationState:
        return self._state

    @property
    def options(self) -> DictationOptions:
        return self._options

    @options.setter
    def options(self, options: DictationOptions) -> None:
        """From the next run; a different model is loaded then."""
        with self._lock:
            self._options = options

    @property
    def run_number(self) -> int:
        """The latest run's number (0 before the first)."""
        return self._runs

    @property
    def level_dbfs(self) -> float:
        """The input's level while a run listens (for a level meter)."""
        run = self._run
        dictation = run.dictation if run is not None else None
        return dictation.level_dbfs if dictation is not None else SILENCE_DBFS

    @property
    def elapsed(self) -> float:
        """Seconds of audio in the session: the runs before this one, and this one so far."""
        run = self._run
        if run is not None and run.dictation is not None:
            return run.offset + run.dictation.clock
        return self.recorded_seconds

    @property
    def recorded_seconds(self) -> float:
        with self._lock:
            return sum(len(recording) for recording in self._recordings) / SAMPLE_RATE

    @property
    def finals(self) -> list[DictationEvent]:
        """The session's finals, on its clock."""
        with self._lock:
            return list(self._finals)

    @property
    def language(self) -> str | None:
        """What the model heard (an English-only model says "en"), else the language asked for."""
        return self._language or self._options.language

    def recording(self) -> np.ndarray:
        """The session's audio, every run one after another (16 kHz mono float32)."""
        with self._lock:
            return np.concatenate(self._recordings) if self._recordings else np.zeros(0, dtype=np.float32)

    @property
    def saved(self) -> bool:
        return self._saved

    # ---- model

    def load(self) -> bool:
        """Load the model now unless it is loaded for these options (call early: the first Start is then
        instant). False when it cannot be loaded (a Problem said why)."""
        try:
            self._load()
        except Exception as error:  # a missing model, a refused compute type: said, never a dead face
            log.exception("the dictation model could not be loaded")
            self._emit(Problem(self._runs, "model", error_text(error), ended=True))
            return False
        return True

    def _load(self) -> tuple[Decoder, Decoder | None]:
        with self._load_lock:
            options = self._options
            key = _model_key(options)
            if self._decoder is None or key != self._loaded_key:
                self._decoder = self._final_decoder = None
                self._emit(ModelLoading(str(options.model), options.final_model))
                decoder = load_warm_decoder(options)
                final_decoder = None
                if options.final_model and options.final_model != options.model:
                    final_decoder = load_warm_decoder(options, options.final_model)
                self._decoder, self._final_decoder, self._loaded_key = decoder, final_decoder, key
                self._emit(ModelReady(str(options.model)))
            return self._decoder, self._final_decoder

    # ---- runs

    def start(self) -> bool:
        """Begin a run (the model loads first if it must). While the last one is still finishing, the new one
        begins right after it. False when nothing starts: one is running, or the output cannot be had."""
        with self._lock:
            if self._closed:
                return False
            if self._state is DictationState.STOPPING:
                self._start_after_stop = True
                return True
            if self._state is not DictationState.IDLE:
                return False
            number = self._runs + 1
            output, owns = self._open_output(number)
            if self.output_mode is not None and output is None:
                return False
            new_session = self._saved
            if new_session:
                self._clear_session()
            self._runs = number
            editor = self._kept_editor if self.keep_output and self._kept_editor is not None else DictationEditor()
            if self.keep_output:
                self._kept_editor = editor
            run = self._run = _Run(number, self.recorded_seconds, output, owns, editor)
            self._state = DictationState.LOADING
            # Emitted here, under the lock, so that it comes before everything the run's thread says.
            self._emit(RunStarting(number, new_session))
            if owns and output is not None and output.notice:
                self._emit(Notice(number, output.notice))
            run.thread = threading.Thread(
                target=self._work,
                args=(run,),
                name="dictation-run",
                daemon=True,  # a wedged audio driver must not keep the process alive after the face closed
            )
            run.thread.start()
            return True

    def stop(self) -> None:
        """Stop listening; the words heard so far become final, then :class:`RunEnded`."""
        with self._lock:
            self._start_after_stop = False
            run = self._run
            if run is None or self._state not in (DictationState.LOADING, DictationState.RUNNING):
                return
            self._state = DictationState.STOPPING
            self._emit(Stopping(run.number))
            run.stop.cancel()
            self._cue("stop")

    def toggle(self) -> None:
        """Start when idle, stop when loading or running (a button, a shortcut, a hotkey in toggle mode)."""
        with self._lock:
            if self._state is DictationState.IDLE:
                self.start()
            elif self._state in (DictationState.LOADING, DictationState.RUNNING):
                self.stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the current run (and one asked for while it finished) to end; whether none is left."""
        while True:
            with self._lock:
                run = self._run
            thread = run.thread if run is not None else None
            if thread is None or thread is threading.current_thread():
                return True
            thread.join(timeout)
            if thread.is_alive():
                return False
            with self._lock:
                if self._run is run:
                    return True

    def close(self, timeout: float | None = None) -> bool:
        """Give the hotkey back, stop and wait for the run (``timeout``), deliver what the kept output holds.
        Whether everything ended in time."""
        self.set_hotkey(None)
        with self._lock:
            self._closed = True
        self.stop()
        ended = self.wait(timeout)
        if not ended:
            log.warning("the dictation run did not stop within %.0f s", timeout or 0)
        with self._lock:
            output, self._kept_output = self._kept_output, None
        if output is not None:
            output.close()
        if self.sounds is not None:
            self.sounds.close()
        return ended

    def _work(self, run: _Run) -> None:
        """The run's thread: load, open, wait for the stop, flush. Reports through the listener only."""
        number = run.number
        options = self._options
        languages_said: set[str | None] = set()

        def deliver(event: DictationEvent) -> None:  # on the dictation worker thread
            if event.type != "final":
                self._emit(Heard(number, event))
                return
            with self._lock:
                self._finals.append(shifted(event, run.offset))
            # The language the commands are in: the one asked for, else the one the model heard.
            language = options.language or getattr(decoder, "language", None)
            rules = text_rules(options, language)
            if options.commands and command_table(language) is None and language not in languages_said:
                languages_said.add(language)
                self._emit(Notice(number, f"spoken commands are not known for {language or 'this language'} yet"))
            run.editor.rules = rules
            edit = run.editor.apply(event.text, event.words, at_pause=event.at_pause)
            if run.output is not None:
                # Finals only: a partial changes many times a second. The editor keeps the typed document, so
                # "scratch that" takes back exactly what an earlier final typed.
                run.output.edit(edit.erase, edit.text)
            self._emit(Heard(number, event))
            self._emit(Edited(number, edit, rules.active))

        problem: Problem | None = None
        dictation: Dictation | None = None
        stage: ProblemKind = "model"
        try:
            decoder, final_decoder = self._load()
            stage = "dictation"
            for loaded in (decoder, final_decoder):
                if isinstance(loaded, WhisperDecoder):
                    loaded.set_vocabulary(options.vocabulary)
                    for note in loaded.hotword_notes:
                        self._emit(Notice(number, f"vocabulary: {note}"))
            if not run.stop.cancelled:  # Stop while the model was loading: the input is never opened
                dictation = Dictation(
                    options,
                    self.source_factory(self.device),
                    deliver,
                    decoder=decoder,
                    final_decoder=final_decoder,
                    on_speech=lambda active: self._emit(Speaking(number, active)),
                )
                try:
                    dictation.start()
                except BaseException:
                    dictation = None
                    raise
                with self._lock:
                    run.dictation = dictation
                    if self._state is DictationState.LOADING:
                        self._state = DictationState.RUNNING
                    self._emit(Listening(number))
                    self._cue("start")
                while not run.stop.wait(0.1):
                    if dictation.failed or (self.stop_at_end and dictation.source_ended):
                        break
        except AudioInputError as error:
            problem = Problem(number, "microphone", error_text(error), ended=True)
        except Exception as error:  # a missing model, a refused compute type, …: said, never a dead face
            log.exception("dictation could not start")
            problem = Problem(number, stage, error_text(error), ended=True)
        finally:
            if dictation is not None:
                try:
                    dictation.stop()  # flushes: every word heard so far becomes final (emitted before it returns)
                except Exception as error:  # the worker failed mid-run; stop() re-raises its error
                    log.exception("dictation failed")
                    problem = problem or Problem(number, "dictation", error_text(error), ended=True)
                self._keep(run, dictation)
            held = run.editor.finish()  # a word held back for a command the next final might have ended
            if held.erase or held.text:
                if run.output is not None:
                    run.output.edit(held.erase, held.text)
                self._emit(Edited(number, held, run.editor.rules.active))
            if run.owns_output and run.output is not None:
                run.output.close()  # the flushed finals are typed before the face hears that the run is over
            if problem is not None:
                self._emit(problem)
            with self._lock:
                self._state = DictationState.IDLE
                restart = self._start_after_stop and not self._closed
                self._start_after_stop = False
                # Under the lock: a start() from another thread cannot say RunStarting before this.
                self._emit(RunEnded(number, listened=dictation is not None))
                if restart:
                    self.start()

    def _keep(self, run: _Run, dictation: Dictation) -> None:
        """The run's audio and language into the session; the run no longer counts as listening."""
        recording = dictation.recording()
        # An English-only model says "en"; a multilingual one says what it detected (None: nothing heard).
        language = getattr(dictation.decoder, "language", None)
        with self._lock:
            if recording.size:
                self._recordings.append(recording)
            self._language = language or self._language
            run.dictation = None

    def _cue(self, cue: Literal["start", "stop"]) -> None:
        if self.sounds is not None:
            self.sounds.play(cue)  # queued: the sound device never holds up the capture or the hotkey

    def _emit(self, event: ControllerEvent) -> None:
        try:
            self._listener(event)
        except Exception:  # a face that fails to show one event must not end the run
            log.exception("the dictation listener failed on %s", type(event).__name__)

    # ---- other programs

    def prepare_output(self) -> bool:
        """With ``keep_output``: make the output now, so that a refusal (no X11, no clipboard tool) is said
        before anything loads. False when it cannot be had (a Problem said why)."""
        if not self.keep_output:
            raise ValueError("prepare_output() is for an output kept across runs (keep_output)")
        with self._lock:
            output, _ = self._open_output(self._runs)
            return self.output_mode is None or output is not None

    def _open_output(self, number: int) -> tuple[DesktopTextOutput | None, bool]:
        """The output for run ``number`` and whether the run owns it; (None, False) with a Problem said when the
        mode asked for cannot be had."""
        if self.output_mode is None:
            return None, False
        if self.keep_output and self._kept_output is not None:
            return self._kept_output, False
        from app.core.desktop.display import DesktopError
        from app.core.desktop.output import DesktopTextOutput

        def failed(text: str) -> None:  # on the output's thread: one final was not typed; the run goes on
            self._emit(Problem(self._runs, "typing", text, ended=False))

        try:
            output = DesktopTextOutput(self.output_mode, on_error=failed)
        except DesktopError as error:
            self._emit(Problem(number, "desktop", error_text(error), ended=True))
            return None, False
        if self._key_down:
            output.hold()  # a push-to-talk key already down holds the typing from the first final on
        if self.keep_output:
            self._kept_output = output
            if output.notice:
                self._emit(Notice(number, output.notice))
            return output, False
        return output, True

    # ---- global hotkey

    @property
    def hotkey(self) -> X11GlobalHotkey | None:
        return self._hotkey

    def set_hotkey(self, keys: str | None, mode: DictationMode = DEFAULT_MODE) -> None:
        """Listen for ``keys`` ("ctrl+alt+d") whichever program has the focus, or for nothing (None or ""),
        in ``mode`` (:mod:`app.core.dictation.modes`). Raises DesktopError, with the reason in words, when the
        hotkey cannot be had (it is then off). In continuous mode, :meth:`begin` starts listening."""
        with self._lock:
            hotkey, self._hotkey = self._hotkey, None
            self._key_down = False
            self.hotkey_mode = mode
        if hotkey is not None:
            hotkey.stop()
        if not keys:
            return
        from app.core.desktop.x11_hotkey import X11GlobalHotkey, check_hotkey_support, parse_hotkey

        check_hotkey_support()
        listener = X11GlobalHotkey(parse_hotkey(keys), self.hotkey_pressed, self.hotkey_released)
        listener.start()  # a key another program holds is refused here
        with self._lock:
            self._hotkey = listener

    def begin(self) -> bool:
        """The hotkey is ready: in continuous mode listening starts now (the hotkey pauses and resumes it); in
        the other modes it waits for the key. Whether a run started."""
        with self._lock:
            return self.hotkey_mode == "continuous" and self._state is DictationState.IDLE and self.start()

    def hotkey_pressed(self) -> None:
        """Hold: a press starts, the release stops. Toggle: a press starts or stops. Continuous: a press
        pauses or resumes (each listening stretch is a run)."""
        with self._lock:
            self._key_down = True
            output = self._current_output()
            if output is not None:
                output.hold()  # the X server gives the keyboard to the hotkey's grab until the key is released
            if self.hotkey_mode == "hold":
                self.start()
            else:
                self.toggle()

    def hotkey_released(self) -> None:
        with self._lock:
            self._key_down = False
            if self.hotkey_mode == "hold":
                self.stop()
            output = self._current_output()
            if output is not None:
                output.release()

    def _current_output(self) -> DesktopTextOutput | None:
        if self._run is not None and self._state is not DictationState.IDLE:
            return self._run.output
        return self._kept_output

    # ---- the session

    def clear(self) -> bool:
        """Forget the session's text and audio (only between runs); whether it was done."""
        with self._lock:
            if self._state is not DictationState.IDLE:
                return False
            self._clear_session()
            return True

    def _clear_session(self) -> None:
        self._recordings.clear()
        self._finals.clear()
        self._language = None
        self._saved = False

    def save(self, directory: Path, store: JobStore | None) -> SavedDictation:
        """Write the session's audio to ``directory`` and, with ``store``, add its text as a finished job. The next
        run then begins a new session. Raises SaveError with what went wrong."""
        import sqlite3

        from app.core.dictation.save import save_dictation

        options = self._options
        # "auto" is resolved inside the engine, which does not say to what: save_dictation's default stands then.
        extra = {"compute_type": options.compute_type} if options.compute_type != "auto" else {}
        try:
            saved = save_dictation(
                self.recording(),
                self.finals,
                directory,
                store=store,
                model=str(options.model),
                language=self.language,
                device=options.device,
                **extra,
            )
        except (OSError, ValueError, sqlite3.Error) as error:  # a full disk, a read-only folder, a locked queue
            raise SaveError(f"Could not save the dictation to {directory}: {error}") from error
        with self._lock:
            self._saved = True
        return saved


def input_device(text: str | None) -> InputDevice:
    """A device as a person writes it: a number is PortAudio's index, anything else a name."""
    return int(text) if text is not None and text.isdigit() else text
