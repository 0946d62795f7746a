"""Watch folder: a recording is queued once it has settled, once only (also after a restart), with its exports
going beside it; what is not a recording, hidden, or still being written is left alone. A file still open for
writing, or shorter than its header says, waits; one that changes after its job ran is transcribed again."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

from app.core.queue.jobs import Job, JobOptions, JobState, JobStore
from app.core.queue.watch import WatchFolder, incomplete_reason
from app.core.transcript.document import Transcript

pytestmark = pytest.mark.unit


def test_a_recording_is_queued_once_it_has_settled_and_only_once(tmp_path: Path, sample_dir: Path) -> None:
    folder = tmp_path / "inbox"
    folder.mkdir()
    store = JobStore(tmp_path / "data")
    watch = WatchFolder(folder, JobOptions(formats=("txt", "docx")), store, settle=0)
    assert watch.scan() == []  # empty folder
    # A recorder still writing: the file grows between looks, so it is not queued yet.
    growing = folder / "meeting.wav"
    audio = (sample_dir / "sample.wav").read_bytes()
    growing.write_bytes(audio[: len(audio) // 3])
    (folder / "notes.txt").write_text("not a recording")
    (folder / ".partial.wav").write_bytes(audio)  # hidden: a download or sync in progress
    assert watch.scan() == []
    growing.write_bytes(audio)
    assert watch.scan() == []  # changed since the last look
    (job,) = watch.scan()  # unchanged: settled
    assert job.source == growing and job.options.output_dir == str(folder) and job.options.formats == ("txt", "docx")
    assert watch.scan() == []  # never twice
    # Started again (a new process, the same queue): the folder is not queued a second time.
    again = WatchFolder(folder, JobOptions(), store, settle=0)
    assert again.scan() == [] and again.scan() == []
    # A second recording dropped in later is.
    shutil.copy(sample_dir / "sample.wav", folder / "call.wav")
    assert again.scan() == []
    assert [job.source.name for job in again.scan()] == ["call.wav"]
    assert [job.source.name for job in store.jobs()] == ["meeting.wav", "call.wav"]


def test_sub_folders_only_when_asked_and_a_missing_folder_is_no_error(tmp_path: Path, sample_dir: Path) -> None:
    folder = tmp_path / "inbox"
    (folder / "2026" / "november").mkdir(parents=True)
    shutil.copy(sample_dir / "sample.wav", folder / "2026" / "november" / "interview.wav")
    store = JobStore(tmp_path / "data")
    flat = WatchFolder(folder, JobOptions(), store, settle=0)
    assert flat.scan() == [] and flat.scan() == []
    deep = WatchFolder(folder, JobOptions(), store, recursive=True, settle=0)
    deep.scan()
    (job,) = deep.scan()
    assert job.options.output_dir == str(folder / "2026" / "november")  # beside the recording
    shutil.rmtree(folder)  # an unplugged drive
    assert deep.scan() == []


class Clock:
    """The watch's clock, moved by the test: settle times and the grace pass without waiting for them."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def finish(store: JobStore, job: Job, seconds: float, warnings: tuple[str, ...] = ()) -> Job:
    """What the worker records for a job that ran (the engine is not what these tests are about)."""
    claimed = store.claim_next()
    assert claimed is not None and claimed.id == job.id
    transcript = Transcript(str(job.source), seconds, "en", "tiny.en", "cpu", "int8", (), warnings=warnings)
    return store.finish(job.id, transcript)


def test_a_file_is_taken_only_once_unchanged_for_the_settle_time(tmp_path: Path, sample_dir: Path) -> None:
    folder = tmp_path / "inbox"
    folder.mkdir()
    clock = Clock()
    watch = WatchFolder(folder, JobOptions(), JobStore(tmp_path / "data"), settle=4.0, clock=clock)
    shutil.copy(sample_dir / "sample.wav", folder / "call.wav")
    assert watch.scan() == []
    clock.now += 3.0
    assert watch.scan() == []  # unchanged at two looks, but for 3 s only
    clock.now += 1.5
    assert [job.source.name for job in watch.scan()] == ["call.wav"]
    assert watch.looks == 3


def test_a_file_open_for_writing_waits_until_its_writer_closes_it(tmp_path: Path, sample_dir: Path) -> None:
    folder = tmp_path / "inbox"
    folder.mkdir()
    target = folder / "call.wav"
    shutil.copy(sample_dir / "sample.wav", target)  # complete already: only the open file says otherwise
    writer = subprocess.Popen(
        [sys.executable, "-c", "import sys; f = open(sys.argv[1], 'ab'); print('open', flush=True); input()", target],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdin is not None
    assert writer.stdout.readline() == "open\n"
    clock = Clock()
    notices: list[str] = []
    watch = WatchFolder(
        folder, JobOptions(), JobStore(tmp_path / "data"), settle=0, grace=60, on_notice=notices.append, clock=clock
    )
    try:
        for _ in range(4):
            assert watch.scan() == []
            clock.now += 100  # past the grace too: an open file is never taken
        reason = f"it is open for writing by process {writer.pid} (python"
        assert watch.waiting[target].startswith(reason)
        assert len(notices) == 1 and notices[0].startswith(f"waiting for call.wav: {reason}")  # said once
    finally:
        writer.stdin.close()
        writer.wait(timeout=30)
    assert [job.source for job in watch.scan()] == [target]
    assert watch.waiting == {}


def test_a_wav_shorter_than_its_header_waits_and_its_partial_job_is_redone_once_complete(
    tmp_path: Path, sample_dir: Path
) -> None:
    folder = tmp_path / "inbox"
    folder.mkdir()
    target = folder / "call.wav"
    whole = (sample_dir / "sample.wav").read_bytes()
    start = whole.index(b"data", 12) + 8
    target.write_bytes(whole[: start + 32000 * 12])  # 12 s of the 30 s the header states (16 kHz, 16-bit)
    clock = Clock()
    notices: list[str] = []
    store = JobStore(tmp_path / "data")
    watch = WatchFolder(folder, JobOptions(), store, settle=0, grace=60, on_notice=notices.append, clock=clock)
    assert watch.scan() == [] and watch.scan() == []
    assert watch.waiting == {target: "it holds 12.0 s of the 30.0 s its header states"}
    clock.now += 30
    assert watch.scan() == []
    # Unchanged past the grace (a copy from another machine that died): queued as it is, saying so.
    clock.now += 31
    (job,) = watch.scan()
    assert "has not changed for 61 s, though it holds 12.0 s" in notices[-1]
    done = finish(store, job, 12.0, ("partial: only 12.0 s of 30.0 s could be decoded",))
    assert done.partial and watch.scan() == []

    target.write_bytes(whole)  # the copy completes after all
    assert watch.scan() == []  # changed: judged again once settled
    (again,) = watch.scan()
    assert again.id == job.id and again.state is JobState.QUEUED and again.completions == 1
    assert again.note is not None and "changed after it was transcribed" in again.note
    assert f"call.wav changed after job {job.id} took it ({start + 32000 * 12} → {len(whole)} bytes)" in notices[-1]
    assert "partial" in notices[-1]
    assert watch.scan() == [] and watch.scan() == []  # once
    assert len(store.jobs()) == 1


def test_a_change_waits_for_a_running_job_and_a_cancelled_one_is_left_alone(tmp_path: Path, sample_dir: Path) -> None:
    folder = tmp_path / "inbox"
    folder.mkdir()
    audio, rate = soundfile.read(sample_dir / "sample.wav", dtype="int16")
    soundfile.write(folder / "call.wav", audio[: rate * 10], rate)
    soundfile.write(folder / "memo.wav", audio[: rate * 10], rate)
    store = JobStore(tmp_path / "data")
    watch = WatchFolder(folder, JobOptions(), store, settle=0)
    watch.scan()
    call, memo = watch.scan()
    running = store.claim_next()
    assert running is not None and running.id == call.id
    store.cancel(memo.id)
    soundfile.write(folder / "call.wav", audio, rate)
    soundfile.write(folder / "memo.wav", audio, rate)
    assert watch.scan() == [] and watch.scan() == [] and watch.scan() == []  # running: it may read either
    transcript = Transcript(str(call.source), 10.0, "en", "tiny.en", "cpu", "int8", ())
    store.finish(call.id, transcript)  # it had read the short one
    (again,) = watch.scan()
    assert again.id == call.id and again.state is JobState.QUEUED
    assert watch.scan() == [] and store.get(memo.id).state is JobState.CANCELLED
    # Whole this time; then only touched (a sync rewrote it as it was): not transcribed a third time.
    finish(store, again, 30.0)
    status = (folder / "call.wav").stat()
    os.utime(folder / "call.wav", ns=(status.st_atime_ns, status.st_mtime_ns + 5_000_000_000))
    assert watch.scan() == [] and watch.scan() == [] and watch.scan() == []
    assert store.get(call.id).completions == 2


def test_a_partial_job_of_an_earlier_run_is_redone_when_its_file_changed_after_it_started(
    tmp_path: Path, sample_dir: Path
) -> None:
    folder = tmp_path / "inbox"
    folder.mkdir()
    store = JobStore(tmp_path / "data")
    first = WatchFolder(folder, JobOptions(), store, settle=0, grace=0)
    whole = (sample_dir / "sample.wav").read_bytes()
    (folder / "call.wav").write_bytes(whole[: len(whole) // 2])
    (folder / "damaged.wav").write_bytes(whole[: len(whole) // 2])
    first.scan()
    call, damaged = first.scan()
    call = finish(store, call, 15.0, ("partial: only 15.0 s of 30.0 s could be decoded",))
    damaged = finish(store, damaged, 15.0, ("partial: only 15.0 s of 30.0 s could be decoded",))
    assert call.started_at is not None and damaged.started_at is not None
    # No watch runs while the copy of call.wav completes; damaged.wav stays as its job read it.
    (folder / "call.wav").write_bytes(whole)
    os.utime(folder / "call.wav", (call.started_at + 60, call.started_at + 60))
    os.utime(folder / "damaged.wav", (damaged.started_at - 60, damaged.started_at - 60))
    notices: list[str] = []
    later = WatchFolder(folder, JobOptions(), store, settle=0, on_notice=notices.append)
    assert later.scan() == []
    (again,) = later.scan()
    assert again.id == call.id and again.state is JobState.QUEUED
    assert notices == [
        f"call.wav changed after job {call.id} took it (its transcript was partial): job {call.id} "
        "is queued again for the whole file"
    ]
    assert later.scan() == [] and store.get(damaged.id).state is JobState.DONE


def test_other_containers_that_state_their_length_are_checked_against_their_audio(
    tmp_path: Path, sample_dir: Path
) -> None:
    audio, rate = soundfile.read(sample_dir / "sample.wav", dtype="float32")
    whole = tmp_path / "call.flac"
    soundfile.write(whole, audio, rate)
    assert incomplete_reason(whole) is None
    half = tmp_path / "half.flac"
    half.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    reason = incomplete_reason(half)
    assert (
        reason is not None and reason.startswith("its audio stops at ") and "of the 30.0 s its header states" in reason
    )
    noise = tmp_path / "noise.m4a"
    noise.write_bytes(np.random.default_rng(3).bytes(4000))
    assert (incomplete_reason(noise) or "").startswith("it cannot be read as media yet")
