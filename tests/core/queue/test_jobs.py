"""The persistent queue: states, ordering, recovery after a crash, atomic transcripts."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from app.core.queue.jobs import (
    JobNotFoundError,
    JobOptions,
    JobState,
    JobStateError,
    JobStore,
    JobTakenOverError,
    media_files,
)
from app.core.transcript.document import Segment, Transcript

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers


def _transcript(text: str = " hello there") -> Transcript:
    return Transcript(
        source="x.wav",
        duration=2.0,
        language="en",
        model="tiny.en",
        device="cpu",
        compute_type="int8",
        segments=(Segment(0.0, 2.0, text, speaker="SPEAKER_00"),),
        speakers=("SPEAKER_00",),
    )


def test_add_claim_finish_and_reopen(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    options = JobOptions(model="tiny.en", language="en", num_speakers=2, formats=("txt", "srt"))
    first = store.add(tmp_path / "a.wav", options, duration=12.5)
    second = store.add(tmp_path / "b.wav", JobOptions(diarize=False))
    assert [job.id for job in store.jobs()] == [first.id, second.id]
    assert first.state is JobState.QUEUED and first.duration == 12.5

    claimed = store.claim_next()
    assert claimed is not None and claimed.id == first.id and claimed.state is JobState.RUNNING
    assert claimed.attempts == 1
    store.report_progress(first.id, 0.5, "transcribe", duration=12.5, speed=3.0, eta=4.0)
    done = store.finish(first.id, _transcript(), speed=3.1)
    assert done.state is JobState.DONE and done.completions == 1
    assert done.transcript_path == store.transcript_file(first.id) and done.transcript_path.is_file()
    store.close()

    reopened = JobStore(tmp_path)
    jobs = {job.id: job for job in reopened.jobs()}
    assert jobs[first.id].state is JobState.DONE
    assert jobs[first.id].options == options  # options survive the round trip exactly
    assert jobs[second.id].state is JobState.QUEUED and jobs[second.id].options.diarize is False
    assert reopened.load_transcript(first.id).text == "hello there"
    listed = jobs[first.id].to_dict()
    assert {"id", "source", "state", "progress", "error", "transcript"} <= listed.keys()
    assert listed["transcript"] == str(reopened.transcript_file(first.id))


def test_same_file_twice_is_two_jobs(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    source = tmp_path / "talk.wav"
    one = store.add(source, JobOptions())
    two = store.add(source, JobOptions(model="base"))
    assert one.id != two.id
    assert [job.id for job in store.find_by_source(source)] == [one.id, two.id]


def test_cancel_retry_remove_and_state_errors(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    queued = store.add(tmp_path / "a.wav", JobOptions())
    running = store.add(tmp_path / "b.wav", JobOptions())
    store.move(running.id, -1)
    assert store.claim_next().id == running.id  # type: ignore[union-attr]

    assert store.cancel(queued.id).state is JobState.CANCELLED
    flagged = store.cancel(running.id)
    assert flagged.state is JobState.RUNNING and flagged.cancel_requested and store.cancel_requested(running.id)
    with pytest.raises(JobStateError, match="cancel it before removing"):
        store.remove(running.id)
    with pytest.raises(JobStateError, match="only a finished job can be retried"):
        store.retry(running.id)
    store.mark_cancelled(running.id)
    with pytest.raises(JobStateError, match="already cancelled"):
        store.cancel(running.id)

    retried = store.retry(queued.id)
    assert retried.state is JobState.QUEUED and retried.position == max(job.position for job in store.jobs())
    store.fail(store.claim_next().id, "a.wav: broken")  # type: ignore[union-attr]
    assert store.get(queued.id).error == "a.wav: broken"
    assert store.retry(queued.id).error is None

    store.remove(running.id)
    with pytest.raises(JobNotFoundError, match="no job"):
        store.get(running.id)
    assert store.cancel_requested(running.id)  # a removed job reads as cancelled for a worker still on it


def test_move_reorders_and_claim_follows_the_order(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    ids = [store.add(tmp_path / f"{name}.wav", JobOptions()).id for name in "abcd"]
    store.move(ids[3], -2)  # d up two: a d b c
    store.move(ids[0], 1)  # a down one: d a b c
    store.move(ids[2], -10)  # c to the top, clamped: c d a b
    assert [job.id for job in store.jobs()] == [ids[2], ids[3], ids[0], ids[1]]
    claimed = [store.claim_next().id for _ in range(4)]  # type: ignore[union-attr]
    assert claimed == [ids[2], ids[3], ids[0], ids[1]]
    assert store.claim_next() is None


def test_running_job_of_a_dead_process_is_queued_again(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.add(tmp_path / "a.wav", JobOptions())
    # Another process claims the job and dies without a word (kill -9).
    code = (
        "import sys; from pathlib import Path; from app.core.queue.jobs import JobStore;"
        "s = JobStore(Path(sys.argv[1])); j = s.claim_next(); s.report_progress(j.id, 0.4, 'transcribe');"
        "import os; os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)
    assert store.get(job.id).state is JobState.RUNNING
    reopened = JobStore(tmp_path)
    assert reopened.recovered == [job.id]
    recovered = reopened.get(job.id)
    assert recovered.state is JobState.QUEUED and recovered.progress == 0 and "interrupted" in (recovered.note or "")


def test_running_job_of_a_live_process_is_left_alone(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.add(tmp_path / "a.wav", JobOptions())
    assert store.claim_next() is not None  # this (live) process runs it
    other = JobStore(tmp_path)
    assert other.recovered == []
    assert other.get(job.id).state is JobState.RUNNING


FINISH_ON_A_FULL_DISK = """
import resource, sys
from pathlib import Path
from app.core.queue.jobs import JobStore
from tests.core.queue.test_jobs import _transcript

store = JobStore(Path(sys.argv[1]))
job = store.claim_next()
# From here the file system refuses to grow any file past 4 KB (EFBIG; Python ignores SIGXFSZ), as a full
# disk refuses to grow it at all. The transcript is larger than that.
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    store.finish(job.id, _transcript(" hello there" * 2000))
except OSError as error:
    print("refused:", error)
"""


def test_finish_writes_the_transcript_before_the_state(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.add(tmp_path / "a.wav", JobOptions())
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])}
    child = subprocess.run(
        [sys.executable, "-c", FINISH_ON_A_FULL_DISK, str(tmp_path)], capture_output=True, text=True, env=env
    )
    assert child.returncode == 0 and child.stdout.startswith("refused:"), child.stdout + child.stderr
    # Not marked done without its transcript; no partial file either.
    assert store.get(job.id).state is JobState.RUNNING
    assert not store.transcript_file(job.id).exists()
    assert not [path for path in store.transcript_file(job.id).parent.iterdir() if path.name.endswith(".tmp")]


def test_edits_replace_the_stored_transcript_atomically(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.add(tmp_path / "a.wav", JobOptions())
    store.claim_next()
    store.finish(job.id, _transcript())
    edited = store.load_transcript(job.id).rename_speaker("SPEAKER_00", "Ana").with_segment_text(0, " hi there")
    store.save_transcript(job.id, edited)
    again = store.load_transcript(job.id)
    assert again.speakers == ("Ana",) and again.segments[0].text == " hi there"
    assert [p.name for p in store.transcripts_dir.iterdir()] == [f"{job.id}.json"]  # no temporary left behind
    assert json.loads(store.transcript_file(job.id).read_text())["speakers"] == ["Ana"]


def test_a_newer_schema_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    JobStore(tmp_path).close()
    import sqlite3

    with sqlite3.connect(tmp_path / "queue.sqlite3") as db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(RuntimeError, match="newer Scriba"):
        JobStore(tmp_path)


def test_media_files_recurses_into_folders(tmp_path: Path) -> None:
    (tmp_path / "in" / "deep").mkdir(parents=True)
    for name in ("in/a.wav", "in/deep/b.MP3", "in/notes.txt", "in/.hidden.wav", "loose.xyz"):
        (tmp_path / name).write_bytes(b"x")
    found = media_files([tmp_path / "in", tmp_path / "loose.xyz"])
    # Files given one by one are kept whatever their name (FFmpeg decides); folders keep only media.
    assert found == [tmp_path / "in/a.wav", tmp_path / "in/deep/b.MP3", tmp_path / "loose.xyz"]


def test_wal_mode_and_concurrent_claims_never_share_a_job(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    for index in range(30):
        store.add(tmp_path / f"{index}.wav", JobOptions())
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    code = (
        "import sys; from pathlib import Path; from app.core.queue.jobs import JobStore;"
        "s = JobStore(Path(sys.argv[1]), recover=False); ids = [];\n"
        "while (j := s.claim_next()) is not None: ids.append(j.id)\n"
        "print(' '.join(map(str, ids)))"
    )
    workers = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    claimed = [int(item) for worker in workers for item in worker.communicate(timeout=60)[0].split()]
    assert sorted(claimed) == [job.id for job in store.jobs()]  # each job exactly once across processes


def test_add_many_and_change_detection_across_connections(tmp_path: Path) -> None:
    window = JobStore(tmp_path)
    worker = JobStore(tmp_path, recover=False)
    assert window.changed()  # first look
    assert not window.changed()
    jobs = window.add_many([tmp_path / "a.wav", tmp_path / "b.wav"], JobOptions(), [1.0, None])
    assert [job.position for job in jobs] == [1, 2] and jobs[0].duration == 1.0
    assert not window.changed()  # its own commits are not news to it
    worker.claim_next()
    assert window.changed() and not window.changed()


def test_owner_alive_tells_a_reused_pid_from_the_process_that_wrote_the_row() -> None:
    from app.core.queue.sqlite_db import owner_alive, process_started_at

    mine = process_started_at()
    assert mine is not None
    assert owner_alive(os.getpid(), mine)
    # Same pid, another start time: what a container restart or a reboot gives a new process.
    assert not owner_alive(os.getpid(), mine - 3600)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = process_started_at(child.pid)
        assert started is not None and owner_alive(child.pid, started)
    finally:
        child.kill()
        child.wait()
    assert not owner_alive(child.pid, started)
    assert owner_alive(os.getpid(), None)  # rows written before start times were recorded: pid alone


# ----------------------------------------------------------------------------------------- issue 18

NAMESPACE = ["unshare", "--pid", "--fork", "--mount-proc"]


def _in_new_pid_namespace(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run Python as pid 1 of a fresh pid namespace: what a container restart (or a reboot) gives the first
    process, whatever pid an earlier one had. Needs root (unshare), like the CI machines."""
    repository = str(Path(__file__).parents[3])
    return subprocess.run(
        [*NAMESPACE, sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": repository},
    )


# The worker runs a little (longer than the 1 s that start times are allowed to differ by, see sqlite_db) and dies
# without a word, like kill -9 or a container stopped.
CLAIM_AND_DIE = (
    "import os, sys, time; from pathlib import Path; from app.core.queue.jobs import JobStore;"
    "s = JobStore(Path(sys.argv[1]), recover=False); j = s.claim_next(); assert os.getpid() == 1;"
    "s.report_progress(j.id, 0.3, 'transcribe'); time.sleep(1.5); os._exit(0)"
)


def test_a_job_whose_pid_was_reused_is_not_running_forever(tmp_path: Path) -> None:
    """Issue 18: a worker ran as pid 1 of a container and died; after a restart pid 1 is alive again (another
    process). By pid alone the job stayed "running" for ever and cancel, remove and retry refused it."""
    store = JobStore(tmp_path)
    jobs = [store.add(tmp_path / f"{name}.wav", JobOptions()) for name in "abc"]
    for _ in jobs:
        died = _in_new_pid_namespace(CLAIM_AND_DIE, str(tmp_path))
        assert died.returncode == 0, died.stderr
    assert all(store.get(job.id).state is JobState.RUNNING for job in jobs)
    # Seen from this (host) namespace, pid 1 is alive, too: the init process, started long before.
    row = store._db.execute("SELECT worker_pid, worker_started_at FROM jobs WHERE id = ?", (jobs[0].id,)).fetchone()
    assert row["worker_pid"] == 1 and row["worker_started_at"] is not None

    # Cancel, remove and retry in the restarted "container" (its own pid 1 is alive) now act on the stuck job.
    code = (
        "import sys, json; from pathlib import Path; from app.core.queue.jobs import JobStore;"
        "s = JobStore(Path(sys.argv[1]), recover=False); ids = json.loads(sys.argv[2]);"
        "print(s.cancel(ids[0]).state.value); s.remove(ids[1]); print(s.retry(ids[2]).state.value)"
    )
    acted = _in_new_pid_namespace(code, str(tmp_path), json.dumps([job.id for job in jobs]))
    assert acted.returncode == 0, acted.stderr
    assert acted.stdout.split() == ["cancelled", "queued"]
    assert [job.id for job in store.jobs()] == [jobs[0].id, jobs[2].id]
    retried = store.get(jobs[2].id)
    assert retried.state is JobState.QUEUED and "interrupted" in (retried.note or "")


def test_opening_the_queue_after_a_restart_requeues_the_stuck_job(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.add(tmp_path / "a.wav", JobOptions())
    assert _in_new_pid_namespace(CLAIM_AND_DIE, str(tmp_path)).returncode == 0
    opened = _in_new_pid_namespace(
        "import sys; from pathlib import Path; from app.core.queue.jobs import JobStore;"
        "print(JobStore(Path(sys.argv[1])).recovered)",
        str(tmp_path),
    )
    assert opened.returncode == 0, opened.stderr
    assert opened.stdout.strip() == f"[{job.id}]"
    assert store.get(job.id).state is JobState.QUEUED


def test_a_live_owner_in_another_namespace_keeps_its_job(tmp_path: Path) -> None:
    """The start time is compared, not only the pid: a job whose process is still alive is never taken."""
    store = JobStore(tmp_path)
    job = store.add(tmp_path / "a.wav", JobOptions())
    store.claim_next()
    # Same pid, same start time: this process, seen again. Its job stays running through cancel (a flag).
    assert JobStore(tmp_path).recovered == []
    assert store.cancel(job.id).state is JobState.RUNNING
    with pytest.raises(JobStateError, match="cancel it before removing"):
        store.remove(job.id)


def test_a_schema_1_queue_is_upgraded_and_its_rows_fall_back_to_the_pid(tmp_path: Path) -> None:
    import sqlite3

    from app.core.queue import jobs as jobs_module

    old_schema = (
        jobs_module._SCHEMA.replace("    worker_started_at REAL,\n", "")
        .replace(",\n    warnings TEXT NOT NULL DEFAULT '[]'", "")
        .replace(",\n    exports_pending INTEGER NOT NULL DEFAULT 0", "")
    )
    old_schema = old_schema[: old_schema.index("CREATE TABLE IF NOT EXISTS exports")]
    with sqlite3.connect(tmp_path / "queue.sqlite3") as db:
        db.executescript(old_schema)
        db.execute("PRAGMA user_version = 1")
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            db.execute(
                "INSERT INTO jobs (source, options, state, position, created_at, heartbeat_at, worker_host, "
                "worker_pid) VALUES ('/a.wav', '{}', 'running', 1, 0, ?, ?, ?)",
                (time.time(), socket.gethostname(), child.pid),
            )
            db.execute(
                "INSERT INTO jobs (source, options, state, position, created_at, heartbeat_at, worker_host, "
                "worker_pid) VALUES ('/b.wav', '{}', 'running', 2, 0, ?, ?, ?)",
                (time.time() - 3600, socket.gethostname(), child.pid),
            )
            db.commit()
            store = JobStore(tmp_path)
            # An old row with a live pid that reports: left alone; one silent for an hour: taken back.
            assert store.recovered == [2]
            assert store._db.execute("PRAGMA user_version").fetchone()[0] == jobs_module.SCHEMA_VERSION
            assert store.get(1).warnings == () and store.get(1).state is JobState.RUNNING
        finally:
            child.kill()
            child.wait()
    assert JobStore(tmp_path).recovered == [1]


def test_a_partial_transcript_marks_the_job_partial(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.add(tmp_path / "a.wav", JobOptions())
    store.claim_next()
    warning = "partial: decoding stopped at 30.9 s of 91.0 s (Invalid data found when processing input)"
    from dataclasses import replace

    done = store.finish(job.id, replace(_transcript(), warnings=(warning,)))
    assert done.state is JobState.DONE and done.partial and done.warnings == (warning,)
    assert done.status == f"done — {warning}"
    assert done.to_dict()["partial"] is True and done.to_dict()["warnings"] == [warning]
    assert JobStore(tmp_path).get(job.id).partial  # in the database, not only in memory
    assert store.load_transcript(job.id).warnings == (warning,)  # and in the transcript's JSON
    assert json.loads(store.transcript_file(job.id).read_text())["warnings"] == [warning]
    store.retry(job.id)
    again = store.claim_next()  # a new attempt starts without the last one's warnings
    assert again is not None and again.warnings == ()


def _corrupt_queue(directory: Path, how: str) -> bytes:
    path = directory / "queue.sqlite3"
    if how == "garbage":
        path.write_bytes(b"this is not a database, a half-copied backup " * 200)
    else:  # a damaged page inside a real queue: the header is fine, the jobs table is not
        store = JobStore(directory)
        store.add_many([directory / f"{index}.wav" for index in range(300)], JobOptions())
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.close()
        data = bytearray(path.read_bytes())
        page = 4096
        data[2 * page : 2 * page + 2048] = np.random.default_rng(18).bytes(2048)
        path.write_bytes(bytes(data))
    return path.read_bytes()


@pytest.mark.parametrize("how", ["garbage", "damaged page"])
def test_a_corrupt_queue_is_set_aside_and_a_new_one_starts(tmp_path: Path, how: str) -> None:
    (tmp_path / "transcripts").mkdir()
    (tmp_path / "transcripts" / "7.json").write_text("{}")
    damaged = _corrupt_queue(tmp_path, how)
    store = JobStore(tmp_path)
    assert store.set_aside is not None and store.set_aside.parent == tmp_path
    assert store.set_aside.name.startswith("queue.sqlite3.corrupt-")
    assert store.set_aside.read_bytes() == damaged  # kept as it was, never deleted
    assert store.jobs() == []
    # New ids continue after the old transcripts: the old job 7's transcript is never overwritten by a new job 7.
    assert store.add(tmp_path / "new.wav", JobOptions()).id == 8
    assert (tmp_path / "transcripts" / "7.json").read_text() == "{}"
    assert JobStore(tmp_path).set_aside is None  # said once: the next opening finds the new queue fine


def test_a_locked_queue_is_not_taken_for_a_corrupt_one(tmp_path: Path) -> None:
    import sqlite3

    from app.core.queue.sqlite_db import is_corruption

    # Real errors from sqlite, which carry its error code: a queue another process holds locked ...
    JobStore(tmp_path).add(tmp_path / "a.wav", JobOptions())
    holder = sqlite3.connect(tmp_path / "queue.sqlite3", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    with pytest.raises(sqlite3.OperationalError) as locked:  # a write (in WAL mode readers are not blocked)
        sqlite3.connect(tmp_path / "queue.sqlite3", timeout=0, isolation_level=None).execute("BEGIN IMMEDIATE")
    holder.execute("ROLLBACK")
    assert locked.value.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
    assert not is_corruption(locked.value)
    # ... and a file that is not a database.
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(b"not a database, " * 256)
    with pytest.raises(sqlite3.DatabaseError) as damaged:
        sqlite3.connect(garbage).execute("SELECT * FROM sqlite_master").fetchall()
    assert is_corruption(damaged.value)
    # Errors without a code (raised by other layers) are judged by their kind and words.
    assert not is_corruption(sqlite3.OperationalError("database is locked"))
    assert not is_corruption(sqlite3.OperationalError("database or disk is full"))
    assert is_corruption(sqlite3.DatabaseError("file is not a database"))


# ----------------------------------------------------------------------------------------- state changes, one by one

CLAIM_ALL_AND_DIE = (
    "import os, sys; from pathlib import Path; from app.core.queue.jobs import JobStore;"
    "s = JobStore(Path(sys.argv[1]), recover=False)\n"
    "while s.claim_next() is not None: pass\n"
    "os._exit(0)"
)


def _left_running_by_a_dead_process(directory: Path, names: str) -> tuple[JobStore, list[int]]:
    """Jobs a worker claimed before it was killed, and a store that has not looked for such jobs yet."""
    store = JobStore(directory, recover=False)
    ids = [store.add(directory / f"{name}.wav", JobOptions()).id for name in names]
    subprocess.run([sys.executable, "-c", CLAIM_ALL_AND_DIE, str(directory)], check=True)
    assert [store.get(job_id).state for job_id in ids] == [JobState.RUNNING] * len(ids)
    return store, ids


def test_claim_takes_one_queued_job_for_a_named_worker(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    first, second = (store.add(tmp_path / f"{name}.wav", JobOptions()).id for name in "ab")
    before = time.time()
    taken = store.claim(second, "offload:lambda")
    assert (taken.id, taken.state, taken.worker, taken.attempts) == (second, JobState.RUNNING, "offload:lambda", 1)
    assert taken.started_at is not None and before <= taken.started_at <= time.time()
    assert store.get(second) == taken
    # The local worker leaves it alone and takes the other one.
    assert store.claim_next().id == first  # type: ignore[union-attr]
    assert store.claim_next() is None
    with pytest.raises(JobStateError, match=r"^job 2 \(b\.wav\) is running, not queued: it cannot be taken$"):
        store.claim(second, "offload:vast")
    assert store.get(second).worker == "offload:lambda" and store.get(second).attempts == 1


def test_claim_starts_a_retried_job_afresh(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.add(tmp_path / "a.wav", JobOptions()).id
    store.claim(job, "offload:lambda")
    store.report_progress(job, 0.7, "transcribe", speed=2.0, eta=9.0)
    store.fail(job, "the machine went away")
    store.set_note(job, "retried by hand")
    store.retry(job)
    again = store.claim(job, "offload:runpod")
    assert (again.progress, again.stage, again.speed, again.eta, again.error, again.note) == (
        0,
        "",
        None,
        None,
        None,
        None,
    )
    assert (again.finished_at, again.attempts, again.worker) == (None, 2, "offload:runpod")


def test_claim_next_names_the_worker(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    for name in "ab":
        store.add(tmp_path / f"{name}.wav", JobOptions())
    before = time.time()
    named = store.claim_next("window")
    unnamed = store.claim_next()
    assert named is not None and unnamed is not None
    assert named.worker == "window"
    assert unnamed.worker == f"{socket.gethostname()}:{os.getpid()}"  # this host and process
    assert unnamed.started_at is not None and before <= unnamed.started_at <= time.time()


def test_finish_leaves_no_exports_pending_unless_asked(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    plain, exporting = (store.add(tmp_path / f"{name}.wav", JobOptions()).id for name in "ab")
    store.claim_next()
    store.claim_next()
    assert not store.finish(plain, _transcript(), speed=4.0).exports_pending
    assert store.finish(exporting, _transcript(), exports_pending=True).exports_pending
    assert [job.id for job in store.pending_exports()] == [exporting]
    done = store.get(plain)
    assert (done.speed, done.eta, done.progress, done.worker) == (4.0, 0, 1, None)


def test_requeue_gives_a_running_job_back_from_the_start(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.add(tmp_path / "a.wav", JobOptions()).id
    store.claim_next()
    store.report_progress(job, 0.6, "diarize", eta=30.0)
    store.cancel(job)  # flagged; the worker stops and hands it back instead
    back = store.requeue(job, "the window closed while it ran")
    assert (back.state, back.progress, back.stage, back.eta) == (JobState.QUEUED, 0, "", None)
    assert (back.note, back.worker, back.cancel_requested) == ("the window closed while it ran", None, False)
    # Only a running job is handed back: a queued or finished one is left as it is.
    assert store.requeue(job, "again") == back
    store.claim_next()
    store.fail(job, "broken")
    assert store.requeue(job).state is JobState.FAILED and store.get(job).error == "broken"


def test_an_unknown_id_is_named_in_the_error(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    store.add(tmp_path / "a.wav", JobOptions())
    for action in (store.cancel, store.remove, store.retry, lambda job_id: store.move(job_id, 1)):
        with pytest.raises(JobNotFoundError, match=r"^no job 41 in the queue") as raised:
            action(41)
        assert raised.value.job_id == 41


def test_remove_deletes_the_jobs_transcript_only(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    gone, kept = (store.add(tmp_path / f"{name}.wav", JobOptions()).id for name in "ab")
    for job in (gone, kept):
        store.claim(job, "test")
        store.finish(job, _transcript())
    store.remove(gone)
    assert sorted(path.name for path in store.transcripts_dir.iterdir()) == [f"{kept}.json"]
    assert [job.id for job in store.jobs()] == [kept]


def test_retry_puts_the_job_last_with_new_options(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    first, second, third = (store.add(tmp_path / f"{name}.wav", JobOptions(model="tiny")).id for name in "abc")
    store.claim(first, "test")
    store.fail(first, "wrong model")
    retried = store.retry(first, JobOptions(model="small", language="de"))
    assert retried.position == 4 and (retried.options.model, retried.options.language) == ("small", "de")
    assert store.get(second).options.model == "tiny"  # only the retried job's options change
    assert [store.claim_next().id for _ in range(3)] == [second, third, first]  # type: ignore[union-attr]


def test_move_numbers_the_positions_from_one(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    ids = [store.add(tmp_path / f"{name}.wav", JobOptions()).id for name in "abcd"]
    store.move(ids[0], 10)  # the first to the bottom, clamped
    assert [(job.id, job.position) for job in store.jobs()] == [(ids[1], 1), (ids[2], 2), (ids[3], 3), (ids[0], 4)]
    store.move(ids[1], 2)
    assert [job.id for job in store.jobs()] == [ids[2], ids[3], ids[1], ids[0]]


def test_acting_on_one_job_of_a_dead_process_leaves_its_other_jobs_alone(tmp_path: Path) -> None:
    """Cancel, remove and retry take back the job they name; the dead worker's other jobs wait for the sweep."""
    store, (cancelled, removed, retried, untouched) = _left_running_by_a_dead_process(tmp_path, "abcd")
    assert store.cancel(cancelled).state is JobState.CANCELLED
    store.remove(removed)
    back = store.retry(retried)
    assert back.state is JobState.QUEUED and back.position == 3 and "interrupted" in (back.note or "")
    assert store.get(untouched).state is JobState.RUNNING
    assert store.recover_interrupted() == [untouched]


def test_retry_of_a_finished_job_while_a_dead_process_holds_another(tmp_path: Path) -> None:
    store, [stuck] = _left_running_by_a_dead_process(tmp_path, "a")
    failed = store.add(tmp_path / "b.wav", JobOptions()).id
    store.claim(failed, "test")
    store.fail(failed, "broken")
    again = store.retry(failed)
    assert (again.state, again.error, again.position) == (JobState.QUEUED, None, 3)
    assert store.get(stuck).state is JobState.RUNNING


def test_a_job_of_another_machine_is_taken_back_once_it_stops_reporting(tmp_path: Path) -> None:
    """A data folder on a network share: a worker on another host cannot be checked by pid (the same pid may be
    alive here), only by how long ago it last reported."""
    store = JobStore(tmp_path, recover=False)
    silent, reporting = (store.add(tmp_path / f"{name}.wav", JobOptions()).id for name in "ab")
    store.claim_next()
    store.claim_next()
    # The rows as a worker on "render-box" writes them; it has this process's pid and start time by chance.
    with sqlite3.connect(tmp_path / "queue.sqlite3") as db:
        db.execute("UPDATE jobs SET worker_host = 'render-box'")
        db.execute("UPDATE jobs SET heartbeat_at = ? WHERE id = ?", (time.time() - 3600, silent))
        db.execute("UPDATE jobs SET heartbeat_at = ? WHERE id = ?", (time.time() - 5, reporting))
    assert store.recover_interrupted() == [silent]
    assert store.get(silent).state is JobState.QUEUED and store.get(reporting).state is JobState.RUNNING


def test_a_worker_taken_over_while_it_slept_cannot_replace_the_other_workers_edited_transcript(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A laptop sleeps in the middle of a job of a queue on a network share; a worker on another computer takes the
    job back, finishes it, and the user corrects the transcript. When the laptop wakes and its run ends, that run
    must neither replace the corrected transcript nor count the job done a second time."""
    laptop = JobStore(tmp_path, recover=False)
    job = laptop.add(tmp_path / "interview.wav", JobOptions()).id
    assert laptop.claim_next() is not None
    with sqlite3.connect(tmp_path / "queue.sqlite3") as db:  # the laptop has not reported for an hour
        db.execute("UPDATE jobs SET heartbeat_at = ? WHERE id = ?", (time.time() - 3600, job))

    with monkeypatch.context() as on_render_box:
        on_render_box.setattr(socket, "gethostname", lambda: "render-box")
        render_box = JobStore(tmp_path, recover=False)
        assert render_box.recover_interrupted() == [job]
        assert render_box.claim_next() is not None
    with pytest.raises(JobTakenOverError):  # nor while the other computer is still on it
        laptop.finish(job, _transcript(" the laptop's words"))
    assert not laptop.transcript_file(job).exists()
    with monkeypatch.context() as on_render_box:
        on_render_box.setattr(socket, "gethostname", lambda: "render-box")
        render_box.finish(job, _transcript(" the render box's words"))
        render_box.save_transcript(job, _transcript(" the words as the user corrected them"))

    with pytest.raises(JobTakenOverError, match=f"job {job} was taken back"):
        laptop.finish(job, _transcript(" the laptop's words"))
    reopened = JobStore(tmp_path, recover=False)
    assert reopened.load_transcript(job).text == "the words as the user corrected them"
    assert (reopened.get(job).state, reopened.get(job).completions) == (JobState.DONE, 1)
