"""Edited transcripts written on a thread of their own: saving a three-hour meeting (4.5 MB of JSON and an
fsync, a quarter of a second or more) must not freeze the window that is being typed in.

One writer thread, one file at a time. A save asked for while the last one of the same transcript is still
waiting replaces it (the newest state wins; the states between were never on disk for long anyway), and a
transcript's file only ever moves forward: each write takes the newest state there is when it starts. Every
write is atomic (temporary file, fsync, rename), so a crash leaves the last complete transcript, never half
of one. Readers in this process see the newest state at once (:meth:`TranscriptWriter.latest`); whoever
needs the file itself on disk (another process, a move to the trash, quitting) calls :meth:`flush`.

The thread runs only while there is something to write, and is not a daemon: an interpreter that exits with
saves still waiting finishes them first.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from app.core.files import write_atomic
from app.core.transcript.document import Transcript

log = logging.getLogger(__name__)

# Told how the write that holds a given save went: None when it is on disk, else why not.
SaveDone = Callable[[BaseException | None], None]


def transcript_json(transcript: Transcript) -> str:
    """The stored form of a transcript (what the queue writes when a job finishes, too)."""
    return json.dumps(transcript.to_dict(), ensure_ascii=False, indent=1)


class TranscriptWriter:
    def __init__(self, path_of: Callable[[int], Path]) -> None:
        self._path_of = path_of
        self._condition = threading.Condition()
        self._pending: dict[int, Transcript] = {}  # job id -> newest state not yet being written, oldest first
        self._done: dict[int, list[SaveDone]] = {}  # job id -> who waits on the pending state
        self._writing: tuple[int, Transcript] | None = None
        self._thread: threading.Thread | None = None

    def save(self, job_id: int, transcript: Transcript, done: SaveDone | None = None) -> None:
        """Write ``transcript`` as job ``job_id``'s soon; returns at once. ``done`` is called on the writer's
        thread once a write that holds this state (or a newer one) has ended."""
        with self._condition:
            self._pending[job_id] = transcript
            if done is not None:
                self._done.setdefault(job_id, []).append(done)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="transcript-writer")
                self._thread.start()

    def latest(self, job_id: int) -> Transcript | None:
        """The newest state of job ``job_id``'s transcript not yet on disk (None: the file is up to date)."""
        with self._condition:
            if job_id in self._pending:
                return self._pending[job_id]
            if self._writing is not None and self._writing[0] == job_id:
                return self._writing[1]
            return None

    def flush(self, job_id: int | None = None, timeout: float | None = None) -> bool:
        """Wait until job ``job_id``'s saves (default: every save) are written or have failed, and their
        ``done`` called. False when ``timeout`` seconds passed first."""

        def finished() -> bool:
            if job_id is None:
                return not self._pending and self._writing is None
            return job_id not in self._pending and (self._writing is None or self._writing[0] != job_id)

        with self._condition:
            if self._thread is threading.current_thread():
                return finished()  # a ``done`` callback waiting on its own thread would wait forever
            return self._condition.wait_for(finished, timeout)

    def _run(self) -> None:
        while True:
            with self._condition:
                if not self._pending:
                    self._thread = None
                    return
                job_id = next(iter(self._pending))
                transcript = self._pending.pop(job_id)
                waiting = self._done.pop(job_id, [])
                self._writing = (job_id, transcript)
            error: BaseException | None = None
            try:
                write_atomic(self._path_of(job_id), transcript_json(transcript))
            except OSError as problem:
                log.warning("transcript of job %s not saved: %s", job_id, problem)
                error = problem
            except Exception as problem:  # a bug: reported like a disk error rather than ending the thread
                log.exception("transcript of job %s not saved", job_id)
                error = problem
            for done in waiting:  # before the flush waiting on this write returns
                try:
                    done(error)
                except Exception:
                    log.exception("a transcript save's callback failed")
            with self._condition:
                self._writing = None
                self._condition.notify_all()
