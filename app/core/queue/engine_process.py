"""The inference child process: started with "spawn" on first use, kept (with its loaded model) between jobs,
stopped and continued for a held queue, killed to cancel; and what its crashes mean.

Why a child process (and not a thread in the window's process):
- cancel: faster-whisper and pyannote cannot be interrupted inside a native call (a batch of segments on a
  slow CPU, a pyannote embedding pass). Killing the child cancels within the 2 seconds promised, always, and
  the operating system (and the CUDA driver) take back every byte the model held;
- crash isolation: a segfault in a native library, an abort in CUDA or the kernel's out-of-memory killer ends
  the child only; the job is marked failed with the reason, and the next job starts a fresh child;
- the window never imports torch, so it opens at once and its event loop never waits on the GIL held by
  Python parts of inference.
The child lives across jobs and keeps the model loaded while jobs use the same model; it is started with
"spawn" (fork would copy Qt's and torch's threads in an undefined state).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from app.core.cancel import CancelToken
from app.core.engine.pipeline import PipelineOptions, Progress
from app.core.errors import CancelledError, ScribaError
from app.core.transcript.document import Transcript

# How often the child sends progress (the parent turns each into a store update and a GUI event).
PROGRESS_INTERVAL = 0.2
# How often the parent checks for a cancel request while the child works.
CANCEL_POLL_INTERVAL = 0.1
# Nice value of the inference process: the window (and the rest of the desktop) stays responsive on a
# machine whose every core is busy transcribing; it costs nothing when the machine is otherwise idle.
INFERENCE_NICENESS = 5


@dataclass(frozen=True)
class EngineFailure:
    """An error raised inside the child, sent to the parent as data (the exception class may not pickle)."""

    error_type: str
    message: str  # the error's words (ScribaError.words)
    details: str = ""
    cli_hint: str = ""  # the command line's hint (ScribaError.cli_hint)


class EngineJobError(ScribaError):
    """The engine reported a failure for the job (bad file, missing model, …); ``str()`` is for the user."""

    def __init__(self, failure: EngineFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.cli_hint = failure.cli_hint


class EngineCrashedError(ScribaError):
    """The inference process died (native crash, out of memory) without reporting an error."""

    def __init__(self, source: Path | str, exitcode: int | None) -> None:
        self.exitcode = exitcode
        if exitcode is not None and exitcode < 0:
            name = signal.Signals(-exitcode).name
            if -exitcode == signal.SIGKILL:
                cause = (
                    f"the transcription process was killed ({name}); the usual cause is the system running out "
                    "of memory. Try a smaller model, or close other programs, then retry"
                )
            else:
                cause = (
                    f"the transcription process crashed ({name}) inside a native library. Retry; if it happens "
                    "again, try another device or compute type in Settings"
                )
        else:
            cause = f"the transcription process exited unexpectedly (exit code {exitcode}). Retry the job"
        super().__init__(f"{source}: {cause}.")


def _watch_parent(parent_pid: int) -> None:
    # An orphaned inference process (the window or `queue run` was killed) must not go on using the machine.
    while True:
        if os.getppid() != parent_pid:
            os._exit(0)
        time.sleep(0.5)


# prctl(2) option: the signal this process gets when the thread that started it ends.
_PR_SET_PDEATHSIG = 1
# The child's first message: it will die with its parent (die_with_parent), so it may be stopped.
READY = ("ready", None)


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel kill this process when its parent dies, even while it is stopped (SIGSTOP, a held
    queue): the parent-watch thread cannot run then, and the kernel's SIGHUP+SIGCONT to an orphaned stopped
    process group does not come where the group is not orphaned (the window started without job control, the
    group's other members alive). The signal follows the thread that started the child: the queue worker's
    thread, which closes the engine before it ends."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the request above was in place
        os._exit(0)


def engine_process_main(connection: Connection, parent_pid: int, niceness: int) -> None:
    """Body of the child process: receive (source, options), send progress and the result, repeat."""
    # Ctrl-C or a logout's SIGTERM reaches a terminal's whole process group: the parent decides what it means
    # (stop, cancel, requeue) and tells this process through the pipe. In the group, this process would die of
    # the SIGTERM first and its job be marked failed; so it leaves the group (it still dies with its parent).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(os, "setpgid"):
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
    die_with_parent(parent_pid)
    connection.send(READY)  # from now on it may be stopped (a held queue): it dies with its parent all the same
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True, name="parent-watch").start()
    if niceness:
        with contextlib.suppress(OSError):
            os.nice(niceness)
    from app.core.engine.pipeline import Engine

    engine = Engine()
    while True:
        try:
            request = connection.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        source, options = request
        last_sent = 0.0

        def progress(update: Progress) -> None:
            nonlocal last_sent
            now = time.monotonic()
            if now - last_sent >= PROGRESS_INTERVAL or update.fraction >= 1.0:
                last_sent = now
                connection.send(("progress", update))

        try:
            transcript = engine.run(source, options, progress=progress, cancel=CancelToken())
            connection.send(("done", transcript.to_dict()))
        except ScribaError as error:
            connection.send(("error", EngineFailure(type(error).__name__, error.words, cli_hint=error.cli_hint)))
        except MemoryError:
            connection.send(
                (
                    "error",
                    EngineFailure(
                        "MemoryError",
                        f"{source}: not enough memory to transcribe this file. Try a smaller model, or close "
                        "other programs, then retry.",
                    ),
                )
            )
        except Exception as error:  # anything else still ends as this job's failure, not the process's
            connection.send(
                (
                    "error",
                    EngineFailure(
                        type(error).__name__,
                        f"{source}: unexpected error in the engine ({type(error).__name__}: {error})",
                        traceback.format_exc(),
                    ),
                )
            )


ChildMain = Callable[[Connection, int, int], None]


class EngineProcess:
    """The inference child process, started on first use and kept (with its loaded model) between jobs."""

    def __init__(self, niceness: int = INFERENCE_NICENESS, child_main: ChildMain = engine_process_main) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._niceness = niceness
        self._child_main = child_main
        self._process: Any = None
        self._connection: Connection | None = None
        self._lock = threading.Lock()
        # Held (dictation is speaking): the child is stopped, and a child started meanwhile is stopped as soon as
        # it says it is ready (it then dies with this process even while stopped; before, it might not).
        self._suspended = False
        self._ready = False

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.is_alive() else None

    def _ensure_started(self) -> Connection:
        if self._process is not None and self._process.is_alive() and self._connection is not None:
            return self._connection
        self._discard()
        parent_end, child_end = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=self._child_main,
            args=(child_end, os.getpid(), self._niceness),
            name="scriba-engine",
            daemon=True,
        )
        process.start()
        child_end.close()
        self._process, self._connection = process, parent_end
        self._ready = False
        return parent_end

    @property
    def suspended(self) -> bool:
        return self._suspended

    def suspend(self) -> None:
        """From any thread: stop the child where it is (SIGSTOP); it keeps its memory and its place in the job.
        A child started before :meth:`resume` is stopped as soon as it is ready (READY)."""
        with self._lock:
            self._suspended = True
            if self._ready:
                self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """From any thread: let the child go on (SIGCONT)."""
        with self._lock:
            self._suspended = False
            self._signal(signal.SIGCONT)

    def _signal(self, signum: int) -> None:
        process = self._process
        if process is not None and process.pid is not None and process.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signum)

    def run(
        self,
        source: Path | str,
        options: PipelineOptions,
        on_progress: Callable[[Progress], None],
        should_cancel: Callable[[], bool],
    ) -> Transcript:
        """Run one job in the child. Raises CancelledError, EngineJobError or EngineCrashedError."""
        with self._lock:
            connection = self._ensure_started()
            process = self._process
            connection.send((str(source), options))
        while True:
            if should_cancel():
                self.kill()
                raise CancelledError()
            try:
                ready = connection.poll(CANCEL_POLL_INTERVAL)
                message = connection.recv() if ready else None
            except (EOFError, OSError):
                process.join(2.0)
                exitcode = process.exitcode
                self._discard()
                raise EngineCrashedError(source, exitcode) from None
            if message is None:
                if not process.is_alive():
                    exitcode = process.exitcode
                    self._discard()
                    raise EngineCrashedError(source, exitcode)
                continue
            kind, payload = message
            if kind == "ready":
                with self._lock:
                    self._ready = True
                    if self._suspended:
                        self._signal(signal.SIGSTOP)
            elif kind == "progress":
                on_progress(payload)
            elif kind == "done":
                return Transcript.from_dict(payload)
            elif kind == "error":
                raise EngineJobError(payload)

    def kill(self) -> None:
        """End the child now (cancel, quit): every byte of model memory goes back to the system."""
        with self._lock:
            process = self._process
            if process is not None and process.is_alive():
                process.terminate()
                # A stopped child (held) may keep a SIGTERM pending instead of acting on it: let it run to it.
                self._signal(signal.SIGCONT)
                process.join(1.0)
                if process.is_alive():
                    process.kill()
                    process.join(1.0)
            self._discard()

    def close(self) -> None:
        """Ask the child to exit after its current request; kill it if it does not within 2 seconds."""
        with self._lock:
            process, connection = self._process, self._connection
            if process is not None and connection is not None and process.is_alive():
                self._signal(signal.SIGCONT)  # a stopped child cannot read the request
                with contextlib.suppress(OSError):
                    connection.send(None)
                process.join(2.0)
        self.kill()

    def _discard(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self._process, self._connection = None, None


def gpu_crash_note(options: PipelineOptions, crash: EngineCrashedError, stage: str) -> str | None:
    """The job's note when ``crash`` is a native crash of a job on the GPU (worth a run on the CPU); else None.
    SIGKILL is left out: that is the system out of memory, which a second run would meet again."""
    on_gpu = options.transcription.device == "cuda" or (options.diarize and options.diarizer.device == "cuda")
    code = crash.exitcode
    if not on_gpu or code is None or code >= 0 or -code == signal.SIGKILL:
        return None
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return (
        f"a GPU library crashed the transcription process ({name} during {stage}), as a GPU library that cannot "
        "be loaded does (cuDNN most often); the job ran on the CPU instead"
    )


def on_the_cpu(options: PipelineOptions) -> PipelineOptions:
    """``options`` with both stages on the CPU, the compute type left to the CPU's own choice."""
    return replace(
        options,
        transcription=replace(options.transcription, device="cpu", compute_type="auto"),
        diarizer=replace(options.diarizer, device="cpu"),
    )
