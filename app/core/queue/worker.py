"""Runs the queue: one job at a time, inference in a child process (:mod:`app.core.queue.engine_process`).

The same :class:`QueueWorker` runs under `scriba queue run` (main thread) and in the window (a Python
thread started by the GUI bridge); it reports :class:`JobEvent` objects through a callback.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from app.core.cancel import CancelToken
from app.core.engine.pipeline import PipelineOptions, Progress
from app.core.errors import CancelledError, ScribaError
from app.core.queue.engine_process import (
    EngineCrashedError,
    EngineJobError,
    EngineProcess,
    gpu_crash_note,
    on_the_cpu,
)
from app.core.queue.exports import auto_export
from app.core.queue.jobs import STORAGE_ERRORS, Job, JobState, JobStore, JobTakenOverError, storage_reason
from app.core.queue.lock import QueueLock
from app.core.transcript.document import Transcript

log = logging.getLogger(__name__)

# How often a working (or idle) worker looks for jobs left "running" by a worker that died, so that one of two
# workers takes over the other's job without waiting for a restart.
RECLAIM_INTERVAL = 5.0
# How often the worker tells the queue it is still on a long job (a step without progress): what a worker on
# another machine sharing the queue is judged by (jobs.STALE_AFTER_SECONDS).
HEARTBEAT_INTERVAL = 10.0
# After the queue's disk refused a write (full, read-only), how long the window's worker waits before trying
# again; `queue run --until-empty` stops instead.
STORAGE_RETRY_SECONDS = 30.0

# "held" / "released": dictation holds the queue while the person speaks (QueueWorker.hold); the job, if one
# runs, is frozen meanwhile.
EventKind = Literal[
    "started",
    "progress",
    "done",
    "failed",
    "cancelled",
    "requeued",
    "recovered",
    "taken_over",
    "idle",
    "waiting",
    "error",
    "held",
    "released",
]


class QueueStorageError(ScribaError):
    """The queue's folder refused a write (disk full, read-only, I/O error): the worker cannot go on."""

    def __init__(self, directory: Path, error: BaseException, consequence: str) -> None:
        self.directory = directory
        self.cause = error
        super().__init__(f"the queue folder {directory} cannot be written ({storage_reason(error)}): {consequence}")


@dataclass(frozen=True)
class JobEvent:
    kind: EventKind
    job_id: int | None
    source: Path | None = None
    fraction: float = 0.0
    stage: str = ""
    duration: float | None = None
    speed: float | None = None  # x real time
    eta: float | None = None  # seconds
    message: str | None = None  # failure reason, or a note (exports)
    # A failure's error class by name (e.g. "LanguageMismatchError"), so a window can offer the matching remedy
    # without reading the message.
    error_type: str = ""
    cli_hint: str = ""  # a failure's command-line hint (the command that fixes it); the window has buttons

    @property
    def processed_seconds(self) -> float | None:
        """Audio seconds done so far (the job's fraction of its duration)."""
        return self.fraction * self.duration if self.duration else None


def default_token_provider() -> str | None:
    from app.core.secrets import huggingface_token

    return huggingface_token()[0]


class QueueWorker:
    """Takes queued jobs from the store one at a time and runs them in an :class:`EngineProcess`."""

    def __init__(
        self,
        store: JobStore,
        engine: EngineProcess | None = None,
        on_event: Callable[[JobEvent], None] | None = None,
        token_provider: Callable[[], str | None] = default_token_provider,
        store_interval: float = 1.0,
    ) -> None:
        self.store = store
        self.engine = engine or EngineProcess()
        self._on_event = on_event or (lambda event: None)
        self._token_provider = token_provider
        self._store_interval = store_interval
        self._stop = CancelToken()  # the worker stops; the running job goes back to the queue
        self._wake = threading.Event()
        self._paused = threading.Event()
        self._pause_lock = threading.Lock()
        # Apart from the user's pause: a hold (dictation) freezes the running job too, and its release never
        # resumes a queue the user paused.
        self._held = threading.Event()
        self._hold_lock = threading.Lock()
        self.hold_reason = ""
        # Time the running job's process spent frozen (held, or stopped with the terminal's Ctrl-Z): left out of
        # its speed and ETA, which are the engine's, not the pauses'.
        self._frozen_s = 0.0
        self._frozen_since: float | None = None
        self.current_job_id: int | None = None
        # A job whose end could not be recorded (the queue's disk was full): still "running" under this live
        # process, so nothing else would ever take it back. Requeued as soon as the queue can be written.
        self._unrecorded_job_id: int | None = None

    def wake(self) -> None:
        """Jobs were added: look at the queue now instead of at the next poll."""
        self._wake.set()

    def pause(self) -> None:
        """From any thread: start no new job (the running one finishes) until :meth:`resume`. Waits for a
        claim under way, so that no job starts after this returns."""
        with self._pause_lock:
            self._paused.set()

    def resume(self) -> None:
        self._paused.clear()
        self._wake.set()

    @property
    def paused(self) -> bool:
        return self._paused.is_set()

    def hold(self, reason: str) -> None:
        """From any thread: claim no new job and freeze the running job's process until :meth:`release_hold`
        (dictation while the person speaks: the job's decoding would slow dictation's). Once this returns no
        job is claimed. The job's heartbeat and cancel go on meanwhile. Does nothing when already held."""
        with self._pause_lock, self._hold_lock:
            if self._held.is_set():
                return
            self._held.set()
            self.hold_reason = reason
            self._frozen_since = time.monotonic()
            self.engine.suspend()
        self._on_event(JobEvent("held", self.current_job_id, message=reason))

    def release_hold(self) -> None:
        """From any thread: the frozen job goes on and jobs are claimed again (unless the user paused the
        queue). Does nothing when not held."""
        with self._hold_lock:
            if not self._held.is_set():
                return
            self._held.clear()
            self.hold_reason = ""
            self.engine.resume()
            if self._frozen_since is not None:
                self._frozen_s += time.monotonic() - self._frozen_since
                self._frozen_since = None
        self._wake.set()
        self._on_event(JobEvent("released", self.current_job_id))

    @property
    def held(self) -> bool:
        return self._held.is_set()

    def frozen_seconds(self) -> float:
        """Seconds this worker's engine has been frozen so far (holds, and stops :meth:`add_frozen` was told of)."""
        since = self._frozen_since
        return self._frozen_s + (time.monotonic() - since if since is not None else 0.0)

    def add_frozen(self, seconds: float) -> None:
        """The engine was stopped for ``seconds`` by other means (the terminal's Ctrl-Z): not the job's time."""
        self._frozen_s += seconds

    def stop(self) -> None:
        """From any thread: the running job goes back to the queue (it starts again next time)."""
        self._stop.cancel()
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stop.cancelled

    def run(self, until_empty: bool = False, idle_poll: float = 1.0) -> None:
        """Run jobs until stopped (or, with ``until_empty``, until nothing is queued). Never raises for a job."""
        announced_idle = announced_waiting = False
        lock = QueueLock(self.store.directory)
        last_reclaim = -RECLAIM_INTERVAL
        try:
            while not self._stop.cancelled:
                if self._held.is_set() and not self._paused.is_set():
                    # Held for a moment (dictation): even `--until-empty` waits, the queue is not done.
                    self._wake.wait(idle_poll)
                    self._wake.clear()
                    continue
                if self._paused.is_set():
                    # Not even the lock is taken: another Scriba on this queue may run jobs meanwhile.
                    if until_empty:
                        break
                    self._wake.wait(idle_poll)
                    self._wake.clear()
                    continue
                # One job at a time per queue, across processes too (the window and `scriba queue run`
                # side by side must not run two models on one GPU). The lock is held per job, so two
                # workers take turns and `--until-empty` ends when the other one has emptied the queue.
                if not lock.acquire():
                    if until_empty and not self.store.counts()[JobState.QUEUED]:
                        break
                    if not announced_waiting:
                        holder = lock.holder()
                        self._on_event(
                            JobEvent(
                                "waiting",
                                None,
                                message=f"another Scriba process{f' (pid {holder})' if holder else ''} is "
                                "running a job from this queue; waiting for it",
                            )
                        )
                        announced_waiting = True
                    self._wake.wait(idle_poll)
                    self._wake.clear()
                    continue
                announced_waiting = False
                try:
                    if self._unrecorded_job_id is not None:
                        self._requeue_unrecorded()
                    if time.monotonic() - last_reclaim >= RECLAIM_INTERVAL:
                        last_reclaim = time.monotonic()
                        self._reclaim()
                        self._finish_cut_off_exports()
                    # Checked again under the pause lock: once pause() has returned, no job is claimed.
                    with self._pause_lock:
                        job = None if self._paused.is_set() or self._held.is_set() else self._claim_next()
                    if job is not None:
                        announced_idle = False
                        self.run_job(job)
                        continue
                except QueueStorageError as error:
                    self._on_event(JobEvent("error", self.current_job_id, message=str(error)))
                    self.current_job_id = None
                    if until_empty:
                        break
                    self._wake.wait(STORAGE_RETRY_SECONDS)
                    self._wake.clear()
                    continue
                finally:
                    lock.release()
                if until_empty:
                    break
                if not announced_idle:
                    self._on_event(JobEvent("idle", None))
                    announced_idle = True
                self._wake.wait(idle_poll)
                self._wake.clear()
        finally:
            self.engine.close()
            if until_empty or self._stop.cancelled:
                self._on_event(JobEvent("idle", None))

    def _requeue_unrecorded(self) -> None:
        job_id = self._unrecorded_job_id
        assert job_id is not None
        try:
            self.store.requeue(job_id, "the queue's disk was full when this job ended; queued again")
        except STORAGE_ERRORS as error:
            raise QueueStorageError(self.store.directory, error, f"job {job_id} is still to do") from error
        self._unrecorded_job_id = None
        self._on_event(JobEvent("requeued", job_id, message=f"job {job_id} is queued again"))

    def _reclaim(self) -> None:
        """Requeue jobs whose worker died (another `queue run`, a window killed): they run here next."""
        try:
            recovered = self.store.recover_interrupted()
        except STORAGE_ERRORS as error:
            raise QueueStorageError(self.store.directory, error, "no job was started") from error
        for job_id in recovered:
            self._on_event(
                JobEvent(
                    "recovered",
                    job_id,
                    message=f"job {job_id} was interrupted (the process running it stopped); queued again",
                )
            )

    def _claim_next(self) -> Job | None:
        try:
            return self.store.claim_next()
        except STORAGE_ERRORS as error:
            raise QueueStorageError(
                self.store.directory, error, "no job was started; the queued jobs stay queued"
            ) from error

    def run_job(self, job: Job) -> None:
        """Run one claimed job to its end state. Raises only :class:`QueueStorageError` (the queue's disk refused
        a write); every other failure is the job's."""
        self.current_job_id = job.id
        started = time.monotonic()
        frozen_before = self.frozen_seconds()
        last_stored = 0.0
        duration = job.duration
        self._on_event(JobEvent("started", job.id, job.source, duration=duration))

        def working_seconds() -> float:
            return time.monotonic() - started - (self.frozen_seconds() - frozen_before)

        def on_progress(update: Progress) -> None:
            nonlocal last_stored, duration
            if update.audio_seconds:
                duration = update.audio_seconds
            elapsed = working_seconds()
            speed = eta = None
            if duration and update.fraction > 0.02 and elapsed > 0:
                speed = duration * update.fraction / elapsed
                eta = elapsed * (1.0 - update.fraction) / update.fraction
            now = time.monotonic()
            if now - last_stored >= self._store_interval:
                last_stored = now
                try:
                    self.store.report_progress(
                        job.id, update.fraction, update.stage, duration=duration, speed=speed, eta=eta
                    )
                except STORAGE_ERRORS as error:  # progress in the queue is for show: the job goes on
                    log.warning("progress of job %s not stored: %s", job.id, storage_reason(error))
            self._on_event(
                JobEvent("progress", job.id, job.source, update.fraction, update.stage, duration, speed, eta)
            )

        last_checked = 0.0
        last_heartbeat = time.monotonic()
        cancelled_by_user = False

        def should_cancel() -> bool:
            nonlocal last_checked, last_heartbeat, cancelled_by_user
            if self._stop.cancelled:
                return True
            now = time.monotonic()
            try:
                if now - last_checked >= 0.25:  # the flag lives in the database: a cancel from any process counts
                    last_checked = now
                    cancelled_by_user = self.store.cancel_requested(job.id)
                if now - last_heartbeat >= HEARTBEAT_INTERVAL:
                    last_heartbeat = now
                    self.store.heartbeat(job.id)
            except STORAGE_ERRORS as error:  # a full disk must not stop a job that may still be saved
                log.warning("job %s: queue not reachable: %s", job.id, storage_reason(error))
            return cancelled_by_user

        try:
            options = job.options.to_pipeline(self._token_provider(), self.store.directory)
            transcript = self._run_engine(job, options, on_progress, should_cancel)
        except CancelledError:
            self._store_end(job, lambda: self._cancelled_or_requeued(job, cancelled_by_user))
            return
        except ScribaError as error:
            # The stored reason is the error's words: the window and `queue list` both show it.
            message, hint = error.words, error.cli_hint
            kind = error.failure.error_type if isinstance(error, EngineJobError) else type(error).__name__
            self._store_end(job, lambda: self.store.fail(job.id, message))
            self._on_event(JobEvent("failed", job.id, job.source, message=message, error_type=kind, cli_hint=hint))
            return
        except Exception as error:  # a bug on our side fails this job, never the worker
            log.exception("job %s failed unexpectedly", job.id)
            reason = f"{job.source}: unexpected error ({type(error).__name__}: {error})"
            self._store_end(job, lambda: self.store.fail(job.id, reason))
            self._on_event(JobEvent("failed", job.id, job.source, message=reason))
            return
        elapsed = working_seconds()
        speed = transcript.duration / elapsed if elapsed > 0 else None
        try:
            self.store.finish(job.id, transcript, speed, exports_pending=bool(job.options.output_dir))
        except JobTakenOverError as error:  # another worker holds the job now: its result stands, not this one
            log.warning("job %s: %s", job.id, error)
            self.current_job_id = None
            self._on_event(JobEvent("taken_over", job.id, job.source, message=str(error)))
            return
        except STORAGE_ERRORS as error:
            # The transcript could not be saved (a full disk): the job must say why, not stay "running", and
            # the next job would fail the same way, so the worker stops here.
            reason = (
                f"{job.source}: transcribed, but the transcript could not be saved in {self.store.directory} "
                f"({storage_reason(error)}); free some space, then retry the job"
            )
            self._store_end(job, lambda: self.store.fail(job.id, reason))
            self._on_event(JobEvent("failed", job.id, job.source, message=reason))
            raise QueueStorageError(
                self.store.directory, error, f"job {job.id} is marked failed; free some space, then retry it"
            ) from error
        self.current_job_id = None
        note = self._export(job, transcript)
        if transcript.warnings:
            warning = "; ".join(transcript.warnings)
            note = f"{warning}; {note}" if note else warning
        self._on_event(JobEvent("done", job.id, job.source, 1.0, "", transcript.duration, speed, 0.0, message=note))

    def _run_engine(
        self,
        job: Job,
        options: PipelineOptions,
        on_progress: Callable[[Progress], None],
        should_cancel: Callable[[], bool],
    ) -> Transcript:
        """The job in the engine process; if a GPU library crashes that process, the job again on the CPU.

        A missing or mismatched cuDNN often aborts the process from inside the library instead of raising, so
        the engine's own fallback (app/core/gpu/faults.py) never sees it: the job's second run is on the CPU."""
        stage = ["decode"]

        def remember(update: Progress) -> None:
            stage[0] = update.stage
            on_progress(update)

        try:
            return self.engine.run(job.source, options, remember, should_cancel)
        except EngineCrashedError as crash:
            note = gpu_crash_note(options, crash, stage[0])
            if note is None:
                raise
            exitcode = crash.exitcode
        log.warning("job %s: %s", job.id, note)
        from app.core.gpu.faults import record_gpu_crash

        record_gpu_crash(note, f"the transcription process ended with {exitcode}")
        transcript = self.engine.run(job.source, on_the_cpu(options), on_progress, should_cancel)
        return replace(transcript, warnings=(*transcript.warnings, note))

    def _cancelled_or_requeued(self, job: Job, cancelled_by_user: bool) -> None:
        if cancelled_by_user:
            self.store.mark_cancelled(job.id)
            self._on_event(JobEvent("cancelled", job.id, job.source))
        else:
            self.store.requeue(job.id, "stopped before it finished; queued again")
            self._on_event(JobEvent("requeued", job.id, job.source))

    def _store_end(self, job: Job, write: Callable[[], object]) -> None:
        """Record how a job ended. When the queue cannot be written the job stays "running" under this process,
        and goes back to the queue as soon as this process ends (or another one reclaims it)."""
        try:
            write()
        except STORAGE_ERRORS as error:
            self._unrecorded_job_id = job.id
            raise QueueStorageError(
                self.store.directory,
                error,
                f"job {job.id} ({job.source.name}) goes back to the queue once its disk has room again (at the "
                "latest when Scriba next starts)",
            ) from error
        finally:
            self.current_job_id = None

    def _finish_cut_off_exports(self) -> None:
        """Done jobs whose auto-exports were cut off (the worker writing them was killed; the lock it held while
        writing is free now, so nobody is writing them): the temporary files it left go, and the exports are
        written again. The files it had finished are its own and unchanged: replaced by the same text, never
        numbered beside."""
        from app.core.transcript.save import stray_temporaries

        try:
            jobs = self.store.pending_exports()
        except STORAGE_ERRORS as error:
            raise QueueStorageError(self.store.directory, error, "no job was started") from error
        for job in jobs:
            if job.options.output_dir:
                directory = Path(job.options.output_dir).expanduser()
                for stray in stray_temporaries(directory, job.source.stem, job.options.formats):
                    with contextlib.suppress(OSError):
                        stray.unlink()
            try:
                transcript = self.store.load_transcript(job.id)
            except Exception as error:  # a transcript file removed or damaged by hand: say so, once
                log.warning("job %s: exports not finished: %s", job.id, error)
                self._store_note(job, f"the exports were cut off and cannot be finished: {error}")
                with contextlib.suppress(*STORAGE_ERRORS):
                    self.store.exports_finished(job.id)
                continue
            note = self._export(job, transcript)
            self._on_event(
                JobEvent(
                    "recovered",
                    job.id,
                    job.source,
                    message=f"job {job.id}: its exports were cut off (the program writing them stopped); "
                    f"finished them now{f': {note}' if note else ''}",
                )
            )

    def _export(self, job: Job, transcript: Transcript) -> str | None:
        return auto_export(self.store, job, transcript)

    def _store_note(self, job: Job, note: str) -> None:
        try:
            self.store.set_note(job.id, note)
        except STORAGE_ERRORS as error:
            log.warning("note of job %s not stored: %s", job.id, storage_reason(error))
