"""The queue worker with the real engine (tiny.en) in its child process: finish, fail, cancel, crash, stop."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from app.core.queue.jobs import JobOptions, JobState, JobStore
from app.core.queue.worker import JobEvent, QueueWorker

FAST = JobOptions(diarizer="embedded", formats=("txt", "json"))


def _worker(store: JobStore, events: list[JobEvent]) -> QueueWorker:
    return QueueWorker(store, on_event=events.append, token_provider=lambda: None)


def test_batch_with_a_corrupt_file_finishes_the_good_ones(tmp_path: Path, sample_dir: Path, corrupt_file: Path) -> None:
    store = JobStore(tmp_path / "data")
    output = tmp_path / "out"
    options = JobOptions(diarizer="embedded", formats=("txt", "json"), output_dir=str(output))
    first = store.add(sample_dir / "sample.wav", options)
    bad = store.add(corrupt_file, options)
    second = store.add(sample_dir / "sample.wav", options)
    events: list[JobEvent] = []
    engine_pids: dict[int, int | None] = {}
    worker = _worker(store, events)

    def record(event: JobEvent) -> None:
        events.append(event)
        if event.kind == "progress" and event.job_id is not None:
            engine_pids.setdefault(event.job_id, worker.engine.pid)

    worker._on_event = record
    worker.run(until_empty=True)

    assert store.get(first.id).state is JobState.DONE
    assert store.get(second.id).state is JobState.DONE
    failed = store.get(bad.id)
    assert failed.state is JobState.FAILED
    assert str(corrupt_file) in (failed.error or "") and "not an audio or video file" in (failed.error or "")
    # The model stayed loaded: both good jobs ran in the same inference process.
    assert engine_pids[first.id] is not None and engine_pids[first.id] == engine_pids[second.id]
    transcript = store.load_transcript(first.id)
    assert "SPEAKER_00" in transcript.speakers and len(transcript.speakers) == 2
    # Exports: the second job with the same name does not overwrite the first one's files.
    assert sorted(path.name for path in output.iterdir()) == [
        "sample-2.json",
        "sample-2.txt",
        "sample.json",
        "sample.txt",
    ]
    kinds = [event.kind for event in events]
    assert kinds.count("done") == 2 and kinds.count("failed") == 1 and kinds[-1] == "idle"
    progress = [event for event in events if event.kind == "progress" and event.job_id == first.id]
    assert progress and progress[-1].duration == pytest.approx(30.0, abs=0.5)
    assert any(event.speed and event.speed > 0 and event.eta is not None for event in progress)
    assert progress[-1].processed_seconds == pytest.approx(progress[-1].fraction * 30.0, abs=0.5)
    assert store.get(first.id).speed and store.get(first.id).completions == 1


def _run_in_thread(worker: QueueWorker) -> threading.Thread:
    thread = threading.Thread(target=worker.run, kwargs={"until_empty": True}, daemon=True)
    thread.start()
    return thread


def _wait_for(condition, timeout: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_cancel_stops_the_job_and_frees_the_model(tmp_path: Path, long_wav: Path) -> None:
    store = JobStore(tmp_path)
    job = store.add(long_wav, FAST)
    events: list[JobEvent] = []
    worker = _worker(store, events)
    thread = _run_in_thread(worker)
    _wait_for(lambda: any(e.kind == "progress" and e.stage == "transcribe" and e.fraction > 0.05 for e in events))
    engine_pid = worker.engine.pid
    assert engine_pid is not None
    rss_mb = psutil.Process(engine_pid).memory_info().rss / 2**20
    assert rss_mb > 100  # the model and audio are really in there

    # How fast a cancel lands is a latency, measured by benchmarks/bench_queue.py, not asserted here.
    store.cancel(job.id)  # what `scriba queue cancel` and the window do: a flag in the database
    _wait_for(lambda: any(e.kind == "cancelled" for e in events))
    thread.join(60)
    assert not thread.is_alive()
    assert store.get(job.id).state is JobState.CANCELLED
    # Stopped part-way: transcription never reached its end, and no transcript was written.
    transcribing = [e.fraction for e in events if e.kind == "progress" and e.stage == "transcribe"]
    assert transcribing and max(transcribing) < 1.0
    assert not any(e.kind == "done" for e in events) and store.get(job.id).completions == 0
    assert not psutil.pid_exists(engine_pid) or psutil.Process(engine_pid).status() == psutil.STATUS_ZOMBIE


def test_a_crash_in_inference_fails_that_job_only(tmp_path: Path, long_wav: Path, sample_dir: Path) -> None:
    store = JobStore(tmp_path)
    doomed = store.add(long_wav, FAST)
    after = store.add(sample_dir / "sample.wav", FAST)
    events: list[JobEvent] = []
    worker = _worker(store, events)
    thread = _run_in_thread(worker)
    _wait_for(lambda: any(e.kind == "progress" and e.stage == "transcribe" for e in events))
    pid = worker.engine.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # what the kernel's out-of-memory killer does
    thread.join(180)
    failed = store.get(doomed.id)
    assert failed.state is JobState.FAILED
    assert "killed (SIGKILL)" in (failed.error or "") and "memory" in (failed.error or "")
    assert str(long_wav) in (failed.error or "")
    assert store.get(after.id).state is JobState.DONE  # a fresh inference process took the next job


def test_stop_puts_the_running_job_back(tmp_path: Path, long_wav: Path) -> None:
    store = JobStore(tmp_path)
    job = store.add(long_wav, FAST)
    events: list[JobEvent] = []
    worker = _worker(store, events)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    _wait_for(lambda: any(e.kind == "progress" for e in events))
    worker.stop()
    thread.join(10)
    assert not thread.is_alive()
    requeued = store.get(job.id)
    assert requeued.state is JobState.QUEUED and requeued.attempts == 1 and requeued.completions == 0
    assert [e.kind for e in events][-2:] == ["requeued", "idle"]


def test_two_workers_on_one_queue_take_turns(tmp_path: Path, sample_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window and `scriba queue run` side by side: never two jobs (two models) at once."""
    from app.core.queue.lock import QueueLock

    store = JobStore(tmp_path)
    jobs = [store.add(sample_dir / "sample.wav", FAST) for _ in range(2)]
    other = QueueLock(tmp_path)
    assert other.acquire()  # another process is running a job from this queue
    # Every time the worker asks for the queue's lock and is refused, counted: proof that it looked again.
    refusals: list[bool] = []
    acquire = QueueLock.acquire

    def counted(lock: QueueLock) -> bool:
        taken = acquire(lock)
        if lock is not other and not taken:
            refusals.append(True)
        return taken

    monkeypatch.setattr(QueueLock, "acquire", counted)
    events: list[JobEvent] = []
    worker = _worker(store, events)
    thread = threading.Thread(target=worker.run, kwargs={"until_empty": True}, daemon=True)
    thread.start()
    _wait_for(lambda: any(e.kind == "waiting" for e in events), timeout=10)
    waiting = next(e for e in events if e.kind == "waiting")
    assert f"pid {os.getpid()}" in (waiting.message or "")
    # Three more looks at the queue, each refused the lock (wake() instead of its one-second poll).
    seen = len(refusals)

    def looked_again() -> bool:
        worker.wake()
        return len(refusals) >= seen + 3

    _wait_for(looked_again, timeout=30)
    assert all(store.get(job.id).state is JobState.QUEUED for job in jobs)  # it waited
    monkeypatch.undo()
    other.release()
    thread.join(180)
    assert all(store.get(job.id).state is JobState.DONE for job in jobs)


# ----------------------------------------------------------------------------------------- issue 18


def test_auto_export_a_crash_in_one_format_keeps_the_others_and_says_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.core.transcript import formats
    from tests.core.transcript.test_export import make_transcript

    store = JobStore(tmp_path / "data")
    output = tmp_path / "out"
    job = store.add(tmp_path / "talk.wav", JobOptions(formats=("txt", "srt", "vtt", "json"), output_dir=str(output)))
    store.claim_next()
    store.finish(job.id, make_transcript())

    def broken(transcript: object, style: object) -> str:
        raise RuntimeError("a bug in the srt cue splitter")

    monkeypatch.setitem(formats.RENDERERS, "srt", broken)
    worker = _worker(store, [])
    note = worker._export(store.get(job.id), make_transcript())
    assert sorted(path.name for path in output.iterdir()) == ["talk.json", "talk.txt", "talk.vtt"]
    assert note is not None and "srt not written (RuntimeError: a bug in the srt cue splitter)" in note
    assert "exported talk.txt, talk.vtt, talk.json" in note
    done = store.get(job.id)
    assert done.note == note and [Path(path).name for path in done.exported] == ["talk.txt", "talk.vtt", "talk.json"]


def test_auto_export_of_a_retry_keeps_a_file_edited_since(tmp_path: Path) -> None:
    from tests.core.transcript.test_export import make_transcript

    store = JobStore(tmp_path / "data")
    output = tmp_path / "out"
    job = store.add(tmp_path / "talk.wav", JobOptions(formats=("txt", "srt"), output_dir=str(output)))
    worker = _worker(store, [])
    store.claim_next()
    store.finish(job.id, make_transcript())
    worker._export(store.get(job.id), make_transcript())
    store.retry(job.id)
    store.claim_next()
    store.finish(job.id, make_transcript())
    worker._export(store.get(job.id), make_transcript())  # its own unchanged files: replaced, no -2
    assert sorted(path.name for path in output.iterdir()) == ["talk.srt", "talk.txt"]

    (output / "talk.srt").write_text("1\n00:00:00,500 --> 00:00:01,400\nHello there, fixed by hand.\n")
    store.retry(job.id)
    store.claim_next()
    store.finish(job.id, make_transcript())
    note = worker._export(store.get(job.id), make_transcript())
    assert (output / "talk.srt").read_text().endswith("fixed by hand.\n")
    assert sorted(path.name for path in output.iterdir()) == ["talk-2.srt", "talk-2.txt", "talk.srt", "talk.txt"]
    assert note is not None and "wrote talk-2.* instead" in note and store.get(job.id).note == note


def test_a_worker_reclaims_the_job_of_a_worker_that_died(tmp_path: Path, sample_dir: Path) -> None:
    """Issue 18: with two workers on one queue, the job of one killed mid-run stayed "running" until something
    restarted; the live worker now takes it back while it runs (here: while it waits for the queue)."""
    store = JobStore(tmp_path)
    job = store.add(sample_dir / "sample.wav", FAST)
    code = (
        "import os, sys, time; from pathlib import Path; from app.core.queue.jobs import JobStore;"
        "from app.core.queue.lock import QueueLock;"
        "s = JobStore(Path(sys.argv[1]), recover=False); lock = QueueLock(Path(sys.argv[1])); assert lock.acquire();"
        "s.claim_next(); print('claimed', flush=True); time.sleep(600)"
    )
    import subprocess
    import sys

    other = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "claimed"
        events: list[JobEvent] = []
        worker = _worker(store, events)
        thread = threading.Thread(target=worker.run, daemon=True)  # a long-running worker (the window's)
        thread.start()
        _wait_for(lambda: any(e.kind == "waiting" for e in events), timeout=30)
        assert store.get(job.id).state is JobState.RUNNING  # the other worker has it
        os.kill(other.pid, signal.SIGKILL)
        other.wait()
        _wait_for(lambda: store.get(job.id).state is JobState.DONE, timeout=240)
        worker.stop()
        thread.join(30)
    finally:
        other.kill()
        other.wait()
    kinds = [event.kind for event in events]
    assert "recovered" in kinds and kinds.index("recovered") < kinds.index("done")
    assert store.get(job.id).attempts == 2 and store.get(job.id).completions == 1


def test_the_windows_worker_survives_a_full_disk_and_takes_the_job_back(tmp_path: Path, long_wav: Path) -> None:
    """Issue 18: the queue's folder on a real 4 MB tmpfs fills up while a job runs. The long-running worker (the
    window's) reports one error event, never raises, and once there is room again the job is not left "running"
    under the live process: it is failed with the reason, or queued again and finished."""
    from tests.damaged_media import can_mount, fill, small_disk

    if not can_mount():
        pytest.skip("mounting a tmpfs needs root (the CI machines are root)")
    with small_disk(tmp_path / "disk") as disk:
        store = JobStore(disk / "data")
        job = store.add(long_wav, JobOptions(diarize=False, formats=("txt",)))
        events: list[JobEvent] = []
        worker = _worker(store, events)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                worker.run()
            except BaseException as error:  # the test fails below if anything escapes
                errors.append(error)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        _wait_for(lambda: any(e.kind == "progress" and e.stage == "transcribe" for e in events))
        filler = fill(disk)
        _wait_for(lambda: any(e.kind == "error" for e in events), timeout=400)
        error = next(e for e in events if e.kind == "error")
        assert "cannot be written" in (error.message or "") and thread.is_alive()
        filler.unlink()
        worker.wake()
        _wait_for(
            lambda: (
                store.get(job.id).state is JobState.DONE
                or (
                    store.get(job.id).state is JobState.FAILED
                    and "could not be saved" in (store.get(job.id).error or "")
                )
            ),
            timeout=400,
        )
        worker.stop()
        thread.join(30)
        assert not errors and not thread.is_alive()
        store.close()


def test_a_job_taken_over_by_another_computer_meanwhile_is_set_aside_with_nothing_written(
    tmp_path: Path, sample_dir: Path
) -> None:
    """The queue's folder is shared; while this worker ran the job, a worker on another computer took it (this
    one had not been heard from). This run's result replaces neither the job's transcript nor its exports."""
    import sqlite3

    store = JobStore(tmp_path / "data")
    output = tmp_path / "out"
    job = store.add(sample_dir / "sample.wav", JobOptions(diarize=False, formats=("txt",), output_dir=str(output)))
    events: list[JobEvent] = []

    def record(event: JobEvent) -> None:
        events.append(event)
        if event.kind == "progress" and [e.kind for e in events].count("progress") == 1:
            with sqlite3.connect(tmp_path / "data" / "queue.sqlite3") as db:  # as render-box's claim writes it
                db.execute("UPDATE jobs SET worker = 'render-box:4242', worker_host = 'render-box', worker_pid = 4242")

    worker = _worker(store, [])
    worker._on_event = record
    worker.run(until_empty=True)

    (taken,) = [event for event in events if event.kind == "taken_over"]
    assert taken.job_id == job.id and f"job {job.id} was taken back" in (taken.message or "")
    assert not any(event.kind in ("done", "failed") for event in events)
    row = store.get(job.id)
    assert (row.state, row.worker, row.completions) == (JobState.RUNNING, "render-box:4242", 0)
    assert not store.transcript_file(job.id).exists()
    assert not output.exists() or list(output.iterdir()) == []
