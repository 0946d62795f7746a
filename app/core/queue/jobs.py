"""The persistent job queue: SQLite (WAL) in the data directory, transcripts as JSON files beside it.

Every process that works on the queue (the window, `scriba queue run`, a second terminal running
`scriba queue list`) opens the same database. A job is claimed inside one ``BEGIN IMMEDIATE`` transaction,
so two workers never run the same job. A job left "running" by a process that no longer exists (a crash,
``kill -9``, a power cut) goes back to "queued" the next time any process opens the queue, and a running worker
looks for such jobs every few seconds. The owner is recorded as pid *and* start time: after a reboot or a
container restart the pid is soon another process's, which must not keep the job "running" forever.

A queue file that SQLite cannot read (damaged by a disk fault or a half-copied backup) is renamed aside with a
timestamp, never deleted, and a fresh queue starts; :attr:`JobStore.set_aside` says where the old one went.

A finished transcript is written to ``transcripts/<id>.json`` (temporary name, fsync, rename) *before*
the job is marked done: after a crash the job is either done with a complete transcript, or still to do.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from app.core.engine.audio import MEDIA_EXTENSIONS
from app.core.errors import ScribaError
from app.core.files import write_atomic
from app.core.queue.options import JobOptions as JobOptions
from app.core.queue.sqlite_db import (
    SqliteDatabase,
    is_corruption,
    move_aside,
    owner_alive,
    pid_alive,
    process_started_at,
)
from app.core.queue.transcript_writer import SaveDone, TranscriptWriter, transcript_json
from app.core.transcript.document import PARTIAL_PREFIX, Transcript

# 2: worker_started_at (pid reuse), warnings (partial audio), exports (which files Scriba wrote).
# 3: exports_pending (a done job whose auto-exports are not all written yet: a crash mid-export).
SCHEMA_VERSION = 3
DATABASE_NAME = "queue.sqlite3"

# What a full or read-only disk raises: from SQLite (the queue) and from the file system (transcripts).
STORAGE_ERRORS: tuple[type[BaseException], ...] = (OSError, sqlite3.Error)


def storage_reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


# A worker on another machine (a data directory on a network share) cannot be checked by pid; its job is
# considered abandoned once it has not reported for this long.
STALE_AFTER_SECONDS = 120.0


class JobState(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED_STATES = frozenset({JobState.DONE, JobState.FAILED, JobState.CANCELLED})


@dataclass(frozen=True)
class Job:
    id: int
    source: Path
    options: JobOptions
    state: JobState
    position: int
    progress: float = 0.0
    stage: str = ""
    duration: float | None = None  # seconds of audio, once known
    speed: float | None = None  # x real time of the running (or last) attempt
    eta: float | None = None  # seconds left
    error: str | None = None
    note: str | None = None
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    attempts: int = 0
    completions: int = 0
    cancel_requested: bool = False
    worker: str | None = None
    transcript_path: Path | None = None
    exported: tuple[str, ...] = field(default_factory=tuple)
    warnings: tuple[str, ...] = field(default_factory=tuple)  # the transcript's (partial audio …)
    # Done, but its auto-exports are still being written, or were cut off (the worker finishes them at its start).
    exports_pending: bool = False

    @property
    def partial(self) -> bool:
        """Done, but the transcript misses part of the recording (a file damaged part-way)."""
        return any(warning.startswith(PARTIAL_PREFIX) for warning in self.warnings)

    @property
    def status(self) -> str:
        """The state as the queue shows it: "done — partial: decoding stopped at 30.9 s of 91.0 s …"."""
        if self.state is JobState.DONE and self.partial:
            return f"done — {next(w for w in self.warnings if w.startswith(PARTIAL_PREFIX))}"
        return self.state.value

    def to_dict(self) -> dict[str, Any]:
        """The shape of ``scriba queue list --json``."""
        return {
            "id": self.id,
            "source": str(self.source),
            "state": self.state.value,
            "progress": round(self.progress, 4),
            "stage": self.stage,
            "duration": self.duration,
            "speed": self.speed,
            "eta": self.eta,
            "error": self.error,
            "note": self.note,
            "attempts": self.attempts,
            "completions": self.completions,
            "transcript": str(self.transcript_path) if self.transcript_path else None,
            "exported": list(self.exported),
            "exports_pending": self.exports_pending,
            "warnings": list(self.warnings),
            "partial": self.partial,
            "status": self.status,
            "options": self.options.to_dict(),
        }


class JobNotFoundError(ScribaError, LookupError):
    """A job id the queue does not hold: the user named it (CLI) or it was removed meanwhile (window). Exits
    FAILED, as it did before it had a root: scripts test the number."""

    def __init__(self, job_id: int) -> None:
        super().__init__(f"no job {job_id} in the queue (`scriba queue list` shows the ids)")
        self.job_id = job_id


class JobStateError(ScribaError, RuntimeError):
    """An action that does not apply to the job's current state (retry a running job, …)."""


class JobTakenOverError(JobStateError):
    """This process ran the job but it is no longer this process's to finish: it went quiet too long (a sleeping
    laptop, Ctrl-Z) and a worker elsewhere took the job back, or it was removed. Its result is set aside."""

    def __init__(self, job_id: int) -> None:
        super().__init__(
            f"job {job_id} was taken back by the queue while this worker was not heard from; this run's result is "
            "set aside and the queue keeps the other worker's"
        )
        self.job_id = job_id


_COLUMNS = (
    "id, source, options, state, position, progress, stage, duration, speed, eta, error, note, created_at, "
    "started_at, finished_at, attempts, completions, cancel_requested, worker, exported, warnings, exports_pending"
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    source TEXT NOT NULL,
    options TEXT NOT NULL,
    state TEXT NOT NULL,
    position INTEGER NOT NULL,
    progress REAL NOT NULL DEFAULT 0,
    stage TEXT NOT NULL DEFAULT '',
    duration REAL,
    speed REAL,
    eta REAL,
    error TEXT,
    note TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    heartbeat_at REAL,
    attempts INTEGER NOT NULL DEFAULT 0,
    completions INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    worker TEXT,
    worker_host TEXT,
    worker_pid INTEGER,
    worker_started_at REAL,
    exported TEXT NOT NULL DEFAULT '[]',
    warnings TEXT NOT NULL DEFAULT '[]',
    exports_pending INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_state_position ON jobs (state, position);
CREATE INDEX IF NOT EXISTS jobs_source ON jobs (source);
CREATE TABLE IF NOT EXISTS exports (
    path TEXT PRIMARY KEY,
    sha256 TEXT NOT NULL,
    written_at REAL NOT NULL
);
"""

# Rows of a schema-1 file keep worker_started_at NULL: their owner is then judged by pid alone.
_UPGRADES = {
    2: "ALTER TABLE jobs ADD COLUMN worker_started_at REAL; "
    "ALTER TABLE jobs ADD COLUMN warnings TEXT NOT NULL DEFAULT '[]'",
    3: "ALTER TABLE jobs ADD COLUMN exports_pending INTEGER NOT NULL DEFAULT 0",
}

INTERRUPTED_NOTE = "interrupted (the program running it stopped); queued again"


def _own_identity() -> tuple[str, int, float | None]:
    """(host, pid, start time) of this process, as recorded with a job it claims."""
    return socket.gethostname(), os.getpid(), process_started_at()


def data_folder_problem(directory: Path) -> str | None:
    """Why Scriba cannot write its data folder (read-only, a file in the way, full), in words that name the folder
    and say what to do; None when it can (the folder is made when missing)."""
    import tempfile

    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory, prefix=".scriba-write-check-"):
            pass
    except OSError as error:
        reason = error.strerror or str(error)
        return (
            f"Scriba's data folder {directory} cannot be written ({reason}): make it writable, or choose another "
            "folder with --data-dir or SCRIBA_DATA_DIR"
        )
    return None


def media_files(paths: Iterable[Path]) -> list[Path]:
    """Files as given; folders replaced by the media files inside them (recursively, sorted by path)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(
                sorted(
                    child
                    for child in path.rglob("*")
                    if child.is_file() and child.suffix.lower() in MEDIA_EXTENSIONS and not child.name.startswith(".")
                )
            )
        else:
            found.append(path)
    return found


class JobStore(SqliteDatabase):
    """The queue. Safe to share between threads of one process, and between processes."""

    def __init__(self, directory: Path, *, recover: bool = True) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.transcripts_dir = self.directory / "transcripts"
        self.transcripts_dir.mkdir(exist_ok=True)
        self._writer = TranscriptWriter(self._transcript_path)  # edits saved off the caller's thread
        self._seen_data_version: int | None = None
        # Where an unreadable queue file was moved (None: the queue opened normally). Whoever opened it says so.
        self.set_aside: Path | None = None
        path = self.directory / DATABASE_NAME
        try:
            self._open(path, recover)
        except sqlite3.DatabaseError as error:
            if not is_corruption(error):
                raise
            # The file is damaged: every command and the window would fail on it forever. Keep it (the user
            # or a bug report may want it), start an empty queue; the transcripts folder is untouched.
            with contextlib.suppress(Exception):
                self.close()
            self.set_aside = move_aside(path)
            self._open(path, recover)
            self._continue_ids_after_stored_transcripts()

    def _continue_ids_after_stored_transcripts(self) -> None:
        """A new queue numbers its jobs after the transcripts the old one left (``transcripts/<id>.json``): a new
        job 1 must not overwrite the old job 1's transcript."""
        highest = max(
            (int(path.stem) for path in self.transcripts_dir.glob("*.json") if path.stem.isdigit()), default=0
        )
        if highest:
            with self._transaction() as db:
                db.execute("DELETE FROM sqlite_sequence WHERE name = 'jobs'")
                db.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('jobs', ?)", (highest,))

    def _open(self, path: Path, recover: bool) -> None:
        super().__init__(path, _SCHEMA, SCHEMA_VERSION, "queue", _UPGRADES, check=True)
        self.recovered: list[int] = self.recover_interrupted() if recover else []

    # ----------------------------------------------------------------------------------------- reading

    def _job(self, row: sqlite3.Row) -> Job:
        transcript = self._transcript_path(row["id"])
        state = JobState(row["state"])
        return Job(
            id=row["id"],
            source=Path(row["source"]),
            options=JobOptions.from_dict(json.loads(row["options"])),
            state=state,
            position=row["position"],
            progress=row["progress"],
            stage=row["stage"],
            duration=row["duration"],
            speed=row["speed"],
            eta=row["eta"],
            error=row["error"],
            note=row["note"],
            created_at=row["created_at"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            attempts=row["attempts"],
            completions=row["completions"],
            cancel_requested=bool(row["cancel_requested"]),
            worker=row["worker"],
            transcript_path=transcript if state is JobState.DONE else None,
            exported=tuple(json.loads(row["exported"])),
            warnings=tuple(json.loads(row["warnings"] or "[]")),
            exports_pending=bool(row["exports_pending"]) and state is JobState.DONE,
        )

    def jobs(self) -> list[Job]:
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM jobs ORDER BY position, id").fetchall()
        return [self._job(row) for row in rows]

    def get(self, job_id: int) -> Job:
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise JobNotFoundError(job_id)
        return self._job(row)

    def find_by_source(self, source: Path) -> list[Job]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM jobs WHERE source = ? ORDER BY id", (str(Path(source).absolute()),)
            ).fetchall()
        return [self._job(row) for row in rows]

    def counts(self) -> dict[JobState, int]:
        with self._lock:
            rows = self._db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
        counts = dict.fromkeys(JobState, 0)
        for state, count in rows:
            counts[JobState(state)] = count
        return counts

    def cancel_requested(self, job_id: int) -> bool:
        with self._lock:
            row = self._db.execute("SELECT cancel_requested FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return row is None or bool(row[0])  # a removed job counts as cancelled

    def _transcript_path(self, job_id: int) -> Path:
        return self.transcripts_dir / f"{job_id}.json"

    def transcript_file(self, job_id: int) -> Path:
        """The job's transcript file, holding its latest saved state (a save still being written is waited
        for: whoever asks for the file moves, reads or deletes it)."""
        self._writer.flush(job_id)
        return self._transcript_path(job_id)

    def load_transcript(self, job_id: int) -> Transcript:
        pending = self._writer.latest(job_id)
        if pending is not None:
            return pending  # saved, still being written: what the file will hold
        path = self._transcript_path(job_id)
        if not path.is_file():
            job = self.get(job_id)
            raise JobStateError(f"job {job_id} ({job.source.name}) has no transcript: it is {job.state.value}")
        return Transcript.from_dict(json.loads(path.read_text(encoding="utf-8")))

    # ----------------------------------------------------------------------------------------- changing

    def add(self, source: Path, options: JobOptions, duration: float | None = None) -> Job:
        """Queue one file. The same file may be queued twice (other options, a second take); callers say so."""
        return self.add_many([source], options, [duration])[0]

    def add_many(
        self, sources: list[Path], options: JobOptions, durations: list[float | None] | None = None
    ) -> list[Job]:
        """Queue many files in one transaction (one fsync for a dropped folder, not one per file)."""
        now = time.time()
        encoded = json.dumps(options.to_dict())
        ids = []
        with self._transaction() as db:
            (last,) = db.execute("SELECT COALESCE(MAX(position), 0) FROM jobs").fetchone()
            for offset, source in enumerate(sources):
                duration = durations[offset] if durations else None
                cursor = db.execute(
                    "INSERT INTO jobs (source, options, state, position, duration, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (str(Path(source).absolute()), encoded, JobState.QUEUED.value, last + 1 + offset, duration, now),
                )
                assert cursor.lastrowid is not None
                ids.append(cursor.lastrowid)
        return [self.get(job_id) for job_id in ids]

    def add_transcribed(
        self, source: Path, options: JobOptions, transcript: Transcript, note: str | None = None
    ) -> Job:
        """A job whose transcript exists already (a saved dictation), so that it can be exported, edited, or
        retried with diarization like any other.

        It is stored as running in this process first and finished through :meth:`finish`, so the transcript file
        is complete before the row says done; a crash in between leaves a job the next start queues again (and
        transcribes from the audio), never a done job without its transcript.
        """
        now = time.time()
        with self._transaction() as db:
            (last,) = db.execute("SELECT COALESCE(MAX(position), 0) FROM jobs").fetchone()
            cursor = db.execute(
                "INSERT INTO jobs (source, options, state, position, duration, created_at, started_at, heartbeat_at, "
                "attempts, worker, worker_host, worker_pid, worker_started_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)",
                (
                    str(Path(source).absolute()),
                    json.dumps(options.to_dict()),
                    JobState.RUNNING.value,
                    last + 1,
                    transcript.duration,
                    now,
                    now,
                    now,
                    f"{socket.gethostname()}:{os.getpid()}",
                    *_own_identity(),
                ),
            )
            assert cursor.lastrowid is not None
            job_id = cursor.lastrowid
        self.finish(job_id, transcript)
        if note:
            self.set_note(job_id, note)
        return self.get(job_id)

    def changed(self) -> bool:
        """True when another connection (another process, the worker thread) committed since the last call.

        Lets the window poll the queue cheaply: SQLite's data_version moves only on other connections' commits.
        """
        with self._lock:
            (version,) = self._db.execute("PRAGMA data_version").fetchone()
        changed = version != self._seen_data_version
        self._seen_data_version = version
        return bool(changed)

    def claim_next(self, worker: str | None = None) -> Job | None:
        """Atomically take the first queued job for this process; None when nothing is queued."""
        worker = worker or f"{socket.gethostname()}:{os.getpid()}"
        now = time.time()
        with self._transaction() as db:
            row = db.execute(
                "SELECT id FROM jobs WHERE state = ? ORDER BY position, id LIMIT 1", (JobState.QUEUED.value,)
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE jobs SET state = ?, progress = 0, stage = '', speed = NULL, eta = NULL, error = NULL, "
                "note = NULL, warnings = '[]', started_at = ?, finished_at = NULL, heartbeat_at = ?, "
                "attempts = attempts + 1, cancel_requested = 0, worker = ?, worker_host = ?, worker_pid = ?, "
                "worker_started_at = ? WHERE id = ?",
                (JobState.RUNNING.value, now, now, worker, *_own_identity(), row["id"]),
            )
        return self.get(row["id"])

    def claim(self, job_id: int, worker: str) -> Job:
        """Take one particular queued job (the window offloading it); the local worker then leaves it alone."""
        now = time.time()
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE jobs SET state = ?, progress = 0, stage = '', speed = NULL, eta = NULL, error = NULL, "
                "note = NULL, warnings = '[]', started_at = ?, finished_at = NULL, heartbeat_at = ?, "
                "attempts = attempts + 1, cancel_requested = 0, worker = ?, worker_host = ?, worker_pid = ?, "
                "worker_started_at = ? WHERE id = ? AND state = ?",
                (
                    JobState.RUNNING.value,
                    now,
                    now,
                    worker,
                    *_own_identity(),
                    job_id,
                    JobState.QUEUED.value,
                ),
            )
        job = self.get(job_id)
        if cursor.rowcount != 1:
            raise JobStateError(
                f"job {job_id} ({job.source.name}) is {job.state.value}, not queued: it cannot be taken"
            )
        return job

    def report_progress(
        self,
        job_id: int,
        progress: float,
        stage: str,
        *,
        duration: float | None = None,
        speed: float | None = None,
        eta: float | None = None,
    ) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET progress = ?, stage = ?, duration = COALESCE(?, duration), speed = ?, eta = ?, "
                "heartbeat_at = ? WHERE id = ? AND state = ?",
                (progress, stage, duration, speed, eta, time.time(), job_id, JobState.RUNNING.value),
            )

    def heartbeat(self, job_id: int) -> None:
        """The worker is still on this job (a long step without progress): what a worker on another machine,
        and a row written before start times were recorded, are judged by."""
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET heartbeat_at = ? WHERE id = ? AND state = ?",
                (time.time(), job_id, JobState.RUNNING.value),
            )

    def finish(
        self, job_id: int, transcript: Transcript, speed: float | None = None, *, exports_pending: bool = False
    ) -> Job:
        """Store the transcript (complete file first), then mark the job done: exactly once per job, and only by
        the process that claimed it (:class:`JobTakenOverError` otherwise, with nothing written).
        ``exports_pending``: its auto-exports come next; until :meth:`exports_finished` says they are written, a
        crash leaves the job marked so, and the next worker to start finishes them."""
        with self._transaction() as db:
            # Only the claim's owner finishes: a worker that was taken over must not replace the transcript that
            # the one now running it (or done with it, and perhaps edited since) keeps in the same file.
            owner = db.execute("SELECT state, worker_host, worker_pid FROM jobs WHERE id = ?", (job_id,)).fetchone()
            host, pid, _started = _own_identity()
            if (
                owner is None
                or owner["state"] != JobState.RUNNING.value
                or (owner["worker_host"], owner["worker_pid"]) != (host, pid)
            ):
                raise JobTakenOverError(job_id)
            write_atomic(self.transcript_file(job_id), transcript_json(transcript))
            db.execute(
                "UPDATE jobs SET state = ?, progress = 1, stage = '', duration = ?, speed = ?, eta = 0, "
                "error = NULL, warnings = ?, finished_at = ?, completions = completions + 1, worker = NULL, "
                "worker_pid = NULL, exports_pending = ? WHERE id = ? AND state = ?",
                (
                    JobState.DONE.value,
                    transcript.duration,
                    speed,
                    json.dumps(list(transcript.warnings)),
                    time.time(),
                    int(exports_pending),
                    job_id,
                    JobState.RUNNING.value,
                ),
            )
        return self.get(job_id)

    def exports_finished(self, job_id: int) -> None:
        """The job's auto-exports are written (or failed with a note): nothing is left to finish."""
        with self._lock:
            self._db.execute("UPDATE jobs SET exports_pending = 0 WHERE id = ?", (job_id,))

    def pending_exports(self) -> list[Job]:
        """Done jobs whose auto-exports were cut off (the worker writing them was killed), oldest first."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM jobs WHERE state = ? AND exports_pending = 1 ORDER BY finished_at, id",
                (JobState.DONE.value,),
            ).fetchall()
        return [self._job(row) for row in rows]

    def fail(self, job_id: int, reason: str) -> Job:
        return self._end(job_id, JobState.FAILED, reason)

    def mark_cancelled(self, job_id: int) -> Job:
        return self._end(job_id, JobState.CANCELLED, None)

    def _end(self, job_id: int, state: JobState, reason: str | None) -> Job:
        with self._transaction() as db:
            db.execute(
                "UPDATE jobs SET state = ?, error = ?, eta = NULL, finished_at = ?, worker = NULL, worker_pid = NULL "
                "WHERE id = ? AND state = ?",
                (state.value, reason, time.time(), job_id, JobState.RUNNING.value),
            )
        return self.get(job_id)

    def requeue(self, job_id: int, note: str | None = None) -> Job:
        """Give a running job back (the worker is stopping); it starts from the beginning next time."""
        with self._transaction() as db:
            db.execute(
                "UPDATE jobs SET state = ?, progress = 0, stage = '', eta = NULL, note = ?, worker = NULL, "
                "worker_pid = NULL, cancel_requested = 0 WHERE id = ? AND state = ?",
                (JobState.QUEUED.value, note, job_id, JobState.RUNNING.value),
            )
        return self.get(job_id)

    def set_note(self, job_id: int, note: str | None) -> None:
        with self._lock:
            self._db.execute("UPDATE jobs SET note = ? WHERE id = ?", (note, job_id))

    def set_exported(self, job_id: int, paths: list[Path]) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET exported = ? WHERE id = ?", (json.dumps([str(path) for path in paths]), job_id)
            )

    def add_exported(self, job_id: int, path: Path) -> None:
        """One more file of the job's, the moment it is written: an export cut off half-way still knows its own
        files (finishing it replaces them, never numbers a second set beside them)."""
        with self._transaction() as db:
            row = db.execute("SELECT exported FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                return
            exported = json.loads(row["exported"])
            if str(path) not in exported:
                db.execute("UPDATE jobs SET exported = ? WHERE id = ?", (json.dumps([*exported, str(path)]), job_id))

    def set_duration(self, job_id: int, duration: float | None) -> None:
        with self._lock:
            self._db.execute("UPDATE jobs SET duration = ? WHERE id = ?", (duration, job_id))

    def probe_durations(self, job_ids: Iterable[int]) -> None:
        """Read the length of each of these jobs' files that has none yet (jobs removed meanwhile are passed by).
        Reading container headers is quick, but a folder of hundreds of files is not: call it off a GUI thread."""
        from app.core.engine.audio import probe_duration

        for job_id in job_ids:
            with contextlib.suppress(JobNotFoundError):
                job = self.get(job_id)
                if job.duration is None:
                    self.set_duration(job_id, probe_duration(job.source))

    @staticmethod
    def _state_in(db: sqlite3.Connection, job_id: int) -> JobState:
        row = db.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise JobNotFoundError(job_id)
        return JobState(row["state"])

    def cancel(self, job_id: int) -> Job:
        """Queued: cancelled at once. Running: flagged; the worker stops it within a fraction of a second.
        Running in a process that is gone (killed, a reboot): cancelled at once, nobody else would."""
        with self._transaction() as db:
            self._recover_in(db, job_id)
            state = self._state_in(db, job_id)
            if state is JobState.QUEUED:
                db.execute(
                    "UPDATE jobs SET state = ?, finished_at = ? WHERE id = ?",
                    (JobState.CANCELLED.value, time.time(), job_id),
                )
            elif state is JobState.RUNNING:
                db.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (job_id,))
            else:
                raise JobStateError(f"job {job_id} is already {state.value}; nothing to cancel")
        return self.get(job_id)

    def set_options(self, job_id: int, options: JobOptions) -> Job:
        """Change what a queued job will do (a time range, another model) before it starts."""
        with self._transaction() as db:
            state = self._state_in(db, job_id)
            if state is not JobState.QUEUED:
                raise JobStateError(f"job {job_id} is {state.value}; only a queued job's options can change")
            db.execute("UPDATE jobs SET options = ? WHERE id = ?", (json.dumps(options.to_dict()), job_id))
        return self.get(job_id)

    def retry(self, job_id: int, options: JobOptions | None = None, keep_place: bool = False) -> Job:
        """Failed, cancelled or done: queue it again (at the end of the queue; ``keep_place``: where it is, as the
        window does, so the row stays under the person's eyes). "Running" in a process that is gone: queued again
        (where it is). ``options``: run it with these instead of the ones it was added with (the window passes the
        current settings, so a retry after fixing them does not fail the same way)."""
        with self._transaction() as db:
            if options is not None:
                db.execute("UPDATE jobs SET options = ? WHERE id = ?", (json.dumps(options.to_dict()), job_id))
            if self._recover_in(db, job_id):
                return self.get(job_id)
            state = self._state_in(db, job_id)
            if state not in FINISHED_STATES:
                raise JobStateError(f"job {job_id} is {state.value}; only a finished job can be retried")
            (last,) = db.execute("SELECT COALESCE(MAX(position), 0) FROM jobs").fetchone()
            db.execute(
                "UPDATE jobs SET state = ?, progress = 0, stage = '', error = NULL, note = NULL, eta = NULL, "
                "finished_at = NULL, cancel_requested = 0, position = COALESCE(?, position) WHERE id = ?",
                (JobState.QUEUED.value, None if keep_place else last + 1, job_id),
            )
        return self.get(job_id)

    def remove(self, job_id: int) -> None:
        """Forget a job that is not running (cancel it first), and its stored transcript."""
        with self._transaction() as db:
            self._recover_in(db, job_id)
            if self._state_in(db, job_id) is JobState.RUNNING:
                raise JobStateError(f"job {job_id} is running; cancel it before removing it")
            db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
        self.transcript_file(job_id).unlink(missing_ok=True)

    def move(self, job_id: int, offset: int) -> None:
        """Move a job up (negative) or down (positive) in the queue order by swapping with its neighbours."""
        with self._transaction() as db:
            ids = [row[0] for row in db.execute("SELECT id FROM jobs ORDER BY position, id")]
            if job_id not in ids:
                raise JobNotFoundError(job_id)
            index = ids.index(job_id)
            target = max(0, min(len(ids) - 1, index + offset))
            ids.insert(target, ids.pop(index))
            db.executemany("UPDATE jobs SET position = ? WHERE id = ?", [(i + 1, job) for i, job in enumerate(ids)])

    def save_transcript(self, job_id: int, transcript: Transcript) -> None:
        """Keep the user's edits (segment text, speaker names), on disk when this returns; atomic like every
        other write, and after any save of the job still waiting (the file never goes back to an older state)."""
        failed: list[BaseException] = []
        self._writer.save(job_id, transcript, lambda error: failed.extend([error] if error is not None else []))
        self._writer.flush(job_id)
        if failed:
            raise failed[0]

    def save_transcript_later(self, job_id: int, transcript: Transcript, done: SaveDone | None = None) -> None:
        """:meth:`save_transcript` on the store's writer thread, for the window: returns at once, ``done`` is
        called (on that thread) with None once it is on disk or with the error that kept it off. Until then
        :meth:`load_transcript` in this process already returns it; :meth:`flush_transcripts` waits for it."""
        self._writer.save(job_id, transcript, done)

    def flush_transcripts(self, timeout: float | None = None) -> bool:
        """Wait for every save still being written (before quitting). False when ``timeout`` passed first."""
        return self._writer.flush(timeout=timeout)

    def close(self) -> None:
        self.flush_transcripts()  # an edit saved a moment before quitting is on disk when the queue closes
        super().close()

    def recover_interrupted(self) -> list[int]:
        """Put back jobs whose worker is gone (crash, kill, power cut, reboot). Returns their ids.

        Run when a process opens the queue and, by a running worker, every few seconds: a second worker must
        not wait for a restart to take over the job of one that died."""
        with self._transaction() as db:
            return self._recover_in(db)

    def _recover_in(self, db: sqlite3.Connection, job_id: int | None = None) -> list[int]:
        """Inside a transaction: requeue running jobs (all, or ``job_id``) whose owner is gone."""
        host = socket.gethostname()
        now = time.time()
        query = "SELECT id, worker_host, worker_pid, worker_started_at, heartbeat_at FROM jobs WHERE state = ?"
        parameters: tuple[object, ...] = (JobState.RUNNING.value,)
        if job_id is not None:
            query += " AND id = ?"
            parameters += (job_id,)
        recovered = []
        for row in db.execute(query, parameters).fetchall():
            stale = now - (row["heartbeat_at"] or 0) > STALE_AFTER_SECONDS
            if row["worker_host"] == host and row["worker_pid"] is not None:
                if row["worker_started_at"] is not None:
                    gone = not owner_alive(row["worker_pid"], row["worker_started_at"])
                else:
                    # Written by a Scriba that did not record start times: a live pid may be a reused one, so a
                    # job that has not reported for minutes counts as abandoned too.
                    gone = not pid_alive(row["worker_pid"]) or stale
            else:
                gone = stale
            if gone:
                db.execute(
                    "UPDATE jobs SET state = ?, progress = 0, stage = '', eta = NULL, worker = NULL, "
                    "worker_pid = NULL, worker_started_at = NULL, cancel_requested = 0, note = ? WHERE id = ?",
                    (JobState.QUEUED.value, INTERRUPTED_NOTE, row["id"]),
                )
                recovered.append(row["id"])
        return recovered

    # ----------------------------------------------------------------------------------------- exports

    def record_export(self, path: Path, sha256: str) -> None:
        """Scriba wrote ``path`` with this content: it may replace it later (unless someone edits it)."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO exports (path, sha256, written_at) VALUES (?, ?, ?)",
                (str(Path(path).absolute()), sha256, time.time()),
            )

    def exported_sha256(self, path: Path) -> str | None:
        """The content hash Scriba recorded when it last wrote ``path``; None if it never did."""
        with self._lock:
            row = self._db.execute(
                "SELECT sha256 FROM exports WHERE path = ?", (str(Path(path).absolute()),)
            ).fetchone()
        return None if row is None else str(row[0])
