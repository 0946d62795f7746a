"""Dictation holds the queue (QueueWorker.hold): the running job's process is stopped with a real SIGSTOP while
held and goes on after; no job is claimed meanwhile; cancel, the user's pause and a killed parent still work."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import psutil
import pytest

from app.core.engine.pipeline import Progress
from app.core.queue import worker as worker_module
from app.core.queue.engine_process import READY, EngineProcess, die_with_parent
from app.core.queue.jobs import DATABASE_NAME, JobOptions, JobState, JobStore
from app.core.queue.worker import JobEvent, QueueWorker
from app.core.transcript.document import Transcript
from tests.wake import CountedWake

FAST = JobOptions(diarizer="embedded", formats=("txt", "json"))


def spinning_child(connection: Connection, parent_pid: int, niceness: int) -> None:
    """A stand-in inference process (fast to start): ready, then progress on its one request, never done."""
    die_with_parent(parent_pid)
    connection.send(READY)
    connection.recv()
    fraction = 0.0
    while True:
        fraction = min(fraction + 0.001, 0.99)
        connection.send(("progress", Progress("transcribe", fraction, fraction, 60.0)))
        time.sleep(0.02)


def proc_state(pid: int) -> str:
    """The kernel's one-letter state of ``pid`` ('T': stopped), '' once it is gone (or a zombie, 'Z')."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return ""
    state = stat[stat.rindex(")") + 2]
    return "" if state == "Z" else state


def _wait_for(condition: Callable[[], object], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _start(worker: QueueWorker, until_empty: bool = True) -> threading.Thread:
    thread = threading.Thread(target=worker.run, kwargs={"until_empty": until_empty, "idle_poll": 0.05}, daemon=True)
    thread.start()
    return thread


def _heartbeat(store: JobStore, job_id: int) -> float:
    with sqlite3.connect(store.directory / DATABASE_NAME) as db:
        return float(db.execute("SELECT heartbeat_at FROM jobs WHERE id = ?", (job_id,)).fetchone()[0] or 0.0)


def test_a_held_job_is_frozen_then_ends_as_it_would_have(
    tmp_path: Path, sample_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real engine on the real call: held mid-transcription, stopped ('T'); released, it runs on and its
    transcript is the one the same file gets without a hold."""
    monkeypatch.setattr(worker_module, "HEARTBEAT_INTERVAL", 0.2)  # so that a heartbeat comes while held
    store = JobStore(tmp_path)
    held = store.add(sample_dir / "sample.wav", FAST)
    free = store.add(sample_dir / "sample.wav", FAST)
    events: list[JobEvent] = []
    worker = QueueWorker(store, on_event=events.append, token_provider=lambda: None)
    thread = _start(worker)
    _wait_for(lambda: any(e.kind == "progress" and e.stage == "transcribe" and e.job_id == held.id for e in events))
    worker.hold("dictation")
    pid = worker.engine.pid
    assert pid is not None and worker.held
    _wait_for(lambda: proc_state(pid) == "T", timeout=10)
    # While held the worker still says it is alive: a second worker would not take the job for an orphan.
    beat = _heartbeat(store, held.id)
    _wait_for(lambda: _heartbeat(store, held.id) > beat, timeout=30)
    assert proc_state(pid) == "T"
    assert store.recover_interrupted() == []
    assert store.get(held.id).state is JobState.RUNNING and store.get(free.id).state is JobState.QUEUED
    worker.release_hold()
    _wait_for(lambda: proc_state(pid) != "T", timeout=10)
    thread.join(300)
    assert not thread.is_alive()
    assert store.get(held.id).state is JobState.DONE and store.get(free.id).state is JobState.DONE
    frozen, unfrozen = store.load_transcript(held.id), store.load_transcript(free.id)
    assert frozen.text and [(s.start, s.end, s.speaker, s.text) for s in frozen.segments] == [
        (s.start, s.end, s.speaker, s.text) for s in unfrozen.segments
    ]
    kinds = [e.kind for e in events]
    assert kinds.count("held") == 1 and kinds.count("released") == 1 and kinds.index("held") < kinds.index("released")
    assert next(e for e in events if e.kind == "held").job_id == held.id


def finishing_child(connection: Connection, parent_pid: int, niceness: int) -> None:
    """A stand-in inference process: 40 steps of progress over about 2 s of work, then a 60 s transcript."""
    die_with_parent(parent_pid)
    connection.send(READY)
    source, _options = connection.recv()
    for step in range(1, 41):
        connection.send(("progress", Progress("transcribe", step / 40, step / 40, 60.0)))
        time.sleep(0.05)
    connection.send(("done", Transcript(str(source), 60.0, "en", "tiny.en", "cpu", "int8", ()).to_dict()))
    connection.recv()


def test_a_holds_time_is_left_out_of_the_jobs_speed(tmp_path: Path) -> None:
    """A job held for at least 2.5 s of its run: its speed is its audio over the time it worked, not over the time
    it was frozen too (a queue held while the person dictates would otherwise show a slow job)."""
    store = JobStore(tmp_path)
    job = store.add(tmp_path / "talk.wav", FAST, 60.0)
    seen: list[tuple[float, JobEvent]] = []
    worker = QueueWorker(
        store,
        EngineProcess(child_main=finishing_child),
        on_event=lambda event: seen.append((time.monotonic(), event)),
        token_provider=lambda: None,
    )
    thread = _start(worker)
    _wait_for(lambda: any(event.kind == "progress" for _, event in seen))
    worker.hold("dictation")
    frozen_from = time.monotonic()
    _wait_for(lambda: time.monotonic() - frozen_from >= 2.5 and worker.frozen_seconds() >= 2.5, timeout=30)
    worker.release_hold()
    thread.join(60)
    assert not thread.is_alive()
    started = next(when for when, event in seen if event.kind == "started")
    ended, done = next((when, event) for when, event in seen if event.kind == "done")
    assert done.speed is not None and store.get(job.id).speed == pytest.approx(done.speed)
    working = 60.0 / done.speed
    assert ended - started - working >= 2.0, (ended - started, working)  # the hold, 2.5 s or more, is not in it
    assert working >= 40 * 0.05 * 0.9  # the child's own work is


def test_no_job_is_claimed_while_held_and_hold_and_pause_leave_each_other_alone(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    worker = QueueWorker(store, EngineProcess(child_main=spinning_child), token_provider=lambda: None)
    wake = worker._wake = CountedWake()
    worker.hold("dictation")
    worker.hold("dictation")  # idempotent: one release ends it
    job = store.add(tmp_path / "talk.wav", FAST)
    thread = _start(worker, until_empty=False)
    try:
        seen = wake.waits
        _wait_for(lambda: wake.waits >= seen + 5, timeout=30)
        assert store.get(job.id).state is JobState.QUEUED and worker.engine.pid is None
        # The user resumes a queue they never paused: the hold stays.
        worker.resume()
        seen = wake.waits
        _wait_for(lambda: wake.waits >= seen + 5, timeout=30)
        assert store.get(job.id).state is JobState.QUEUED and worker.held

        worker.release_hold()
        _wait_for(lambda: worker.engine.pid is not None and store.get(job.id).state is JobState.RUNNING, timeout=60)
        pid = worker.engine.pid
        assert pid is not None
        worker.pause()  # the user's pause, then a hold, then its release: still paused
        worker.hold("dictation")
        _wait_for(lambda: proc_state(pid) == "T", timeout=10)
        worker.resume()  # the user's resume does not un-freeze a held job
        assert worker.held and not worker.paused and proc_state(pid) == "T"
        worker.pause()
        worker.release_hold()
        _wait_for(lambda: proc_state(pid) not in ("T", ""), timeout=10)
        assert worker.paused and not worker.held
    finally:
        worker.stop()
        thread.join(30)
    assert not thread.is_alive()


def test_a_held_job_cancelled_ends_cancelled_and_its_process_is_gone(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.add(tmp_path / "talk.wav", FAST)
    events: list[JobEvent] = []
    worker = QueueWorker(
        store, EngineProcess(child_main=spinning_child), on_event=events.append, token_provider=lambda: None
    )
    thread = _start(worker)
    _wait_for(lambda: any(e.kind == "progress" for e in events), timeout=60)
    pid = worker.engine.pid
    assert pid is not None
    worker.hold("dictation")
    _wait_for(lambda: proc_state(pid) == "T", timeout=10)
    store.cancel(job.id)
    _wait_for(lambda: any(e.kind == "cancelled" for e in events), timeout=30)
    assert store.get(job.id).state is JobState.CANCELLED
    _wait_for(lambda: proc_state(pid) == "", timeout=10)
    worker.release_hold()
    thread.join(30)
    assert not thread.is_alive()


def test_a_child_started_while_held_is_stopped_once_ready(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.add(tmp_path / "talk.wav", FAST)
    store.claim_next()
    engine = EngineProcess(child_main=spinning_child)
    engine.suspend()
    cancel = threading.Event()
    ended: list[BaseException] = []

    def run() -> None:
        try:
            engine.run(job.source, FAST.to_pipeline(None, tmp_path), lambda update: None, cancel.is_set)
        except BaseException as error:  # CancelledError, looked at below
            ended.append(error)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    _wait_for(lambda: engine.pid is not None and proc_state(engine.pid) == "T", timeout=60)
    pid = engine.pid
    assert pid is not None
    engine.resume()
    _wait_for(lambda: proc_state(pid) not in ("T", ""), timeout=10)
    cancel.set()
    runner.join(30)
    assert [type(error).__name__ for error in ended] == ["CancelledError"] and proc_state(pid) == ""


PARENT = """
import sys, threading, time
from app.core.queue.engine_process import EngineProcess
from app.core.queue.jobs import JobOptions
from tests.core.queue.test_hold import spinning_child

engine = EngineProcess(child_main=spinning_child)
engine.suspend()
options = JobOptions(diarizer="embedded").to_pipeline(None, None)
threading.Thread(target=engine.run, args=("talk.wav", options, lambda p: None, lambda: False), daemon=True).start()
while engine.pid is None:
    time.sleep(0.02)
print(engine.pid, flush=True)
time.sleep(600)
"""


def test_a_stopped_child_dies_with_its_killed_parent(tmp_path: Path) -> None:
    """A window (or `queue run`) killed with SIGKILL while dictation holds its job: the stopped inference process
    must not stay behind holding the model's memory."""
    root = Path(__file__).resolve().parents[3]
    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=root, stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        _wait_for(lambda: proc_state(child) == "T", timeout=60)
        assert psutil.Process(child).ppid() == parent.pid
        parent.kill()
        parent.wait()
        _wait_for(lambda: proc_state(child) == "", timeout=30)
    finally:
        parent.kill()
        parent.wait()
        if child and proc_state(child):
            psutil.Process(child).kill()
