"""The persistent queue: states, ordering, recovery after a crash, atomic transcripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.jobs import JobNotFoundError, JobOptions, JobState, JobStateError, JobStore, media_files
from app.core.transcript import Segment, Transcript


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
        "import sys; from pathlib import Path; from app.core.jobs import JobStore;"
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


def test_finish_writes_the_transcript_before_the_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = JobStore(tmp_path)
    job = store.add(tmp_path / "a.wav", JobOptions())
    store.claim_next()
    import app.core.jobs as jobs_module

    def full_disk(path: Path, text: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(jobs_module, "write_atomic", full_disk)
    with pytest.raises(OSError, match="No space"):
        store.finish(job.id, _transcript())
    # Not marked done without its transcript; no partial file either.
    assert store.get(job.id).state is JobState.RUNNING
    assert not store.transcript_file(job.id).exists()


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
        "import sys; from pathlib import Path; from app.core.jobs import JobStore;"
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
    from app.core.sqlite_db import owner_alive, process_started_at

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
