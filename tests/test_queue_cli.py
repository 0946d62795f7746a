"""`scriba queue …` end to end, as separate processes sharing one data directory."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

SCRIBA = [sys.executable, "-m", "app"]


def scriba(data: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*SCRIBA, "--data-dir", str(data), *args], capture_output=True, text=True, timeout=600)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def listing(data: Path) -> list[dict[str, Any]]:
    return json.loads(scriba(data, "queue", "list", "--json").stdout)


def test_batch_with_a_corrupt_file_runs_to_the_end(tmp_path: Path, sample_dir: Path, corrupt_file: Path) -> None:
    data = tmp_path / "data"
    folder = tmp_path / "interviews"
    folder.mkdir()
    (folder / "one.wav").write_bytes((sample_dir / "sample.wav").read_bytes())
    (folder / "notes.txt").write_text("not media")
    added = scriba(
        data, "queue", "add", str(folder), str(corrupt_file), str(folder / "one.wav"), "--diarizer", "embedded"
    )
    assert "also in the queue as job 1; added again" in added.stdout  # the same file twice is allowed and said
    run = scriba(data, "queue", "run", "--until-empty", check=False)
    assert run.returncode == 1  # one job failed
    jobs = listing(data)
    assert [job["state"] for job in jobs] == ["done", "failed", "done"]
    assert jobs[1]["source"] == str(corrupt_file)
    assert str(corrupt_file) in jobs[1]["error"] and "not an audio or video file" in jobs[1]["error"]
    assert jobs[0]["transcript"] and Path(jobs[0]["transcript"]).is_file() and jobs[0]["progress"] == 1
    assert jobs[1]["transcript"] is None
    assert f"failed: job {jobs[1]['id']}" in run.stderr

    out = tmp_path / "exports"
    exported = scriba(data, "queue", "export", str(jobs[0]["id"]), "-f", "srt,txt", "-o", str(out))
    assert sorted(Path(line).name for line in exported.stdout.split()) == ["one.srt", "one.txt"]
    assert "SPEAKER_0" in (out / "one.txt").read_text()
    refused = scriba(data, "queue", "export", str(jobs[1]["id"]), "-o", str(out), check=False)
    assert refused.returncode == 1 and "has no transcript: it is failed" in refused.stderr

    assert "queued again" in scriba(data, "queue", "retry", str(jobs[1]["id"])).stdout
    assert {job["id"]: job["state"] for job in listing(data)}[jobs[1]["id"]] == "queued"
    assert "cancelled" in scriba(data, "queue", "cancel", str(jobs[1]["id"])).stdout
    assert {job["id"]: job["state"] for job in listing(data)}[jobs[1]["id"]] == "cancelled"
    missing = scriba(data, "queue", "cancel", "99", check=False)
    assert missing.returncode == 1 and "no job 99" in missing.stderr


def test_kill_9_during_a_run_and_run_again_finishes_every_job_exactly_once(
    tmp_path: Path, sample_dir: Path, long_wav: Path
) -> None:
    data = tmp_path / "data"
    scriba(
        data,
        "queue",
        "add",
        str(sample_dir / "sample.wav"),
        str(long_wav),
        str(sample_dir / "sample.wav"),
        "--diarizer",
        "embedded",
    )
    runner = subprocess.Popen(
        [*SCRIBA, "--data-dir", str(data), "queue", "run", "--until-empty"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while True:  # kill it in the middle of the long job, after the first job is done
        jobs = listing(data)
        if jobs[1]["state"] == "running" and jobs[1]["progress"] > 0.05:
            break
        assert runner.poll() is None and time.monotonic() < deadline
        time.sleep(0.3)
    engine_processes = psutil.Process(runner.pid).children(recursive=True)
    assert engine_processes  # the inference child
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait()
    # The inference process notices its parent is gone and ends too: no orphan keeps the CPU busy.
    # A deadline for "does it end at all", not a speed: the child polls its parent twice a second.
    _gone, alive = psutil.wait_procs(engine_processes, timeout=60)
    assert not alive
    after_kill = scriba(data, "queue", "list", "--json")
    assert "job 2 was interrupted" in after_kill.stderr  # any process opening the queue puts it back
    jobs = json.loads(after_kill.stdout)
    assert [job["state"] for job in jobs] == ["done", "queued", "queued"]
    assert "interrupted" in jobs[1]["note"]

    scriba(data, "queue", "run", "--until-empty")
    jobs = listing(data)
    assert [job["state"] for job in jobs] == ["done", "done", "done"]
    assert [job["completions"] for job in jobs] == [1, 1, 1]
    assert [job["attempts"] for job in jobs] == [1, 2, 1]
    assert sorted(p.name for p in (data / "transcripts").iterdir()) == ["1.json", "2.json", "3.json"]
    long_transcript = json.loads(Path(jobs[1]["transcript"]).read_text())
    assert long_transcript["duration"] > 200


# ----------------------------------------------------------------------------------------- issue 18


def test_a_file_damaged_part_way_ends_done_but_partial(tmp_path: Path, sample_dir: Path) -> None:
    """Issue 18: a file that decoded only to 30.9 of 91 s gave a plain "done" job and no warning anywhere."""
    from tests.damaged_media import truncated_flac

    damaged = truncated_flac(sample_dir / "sample.wav", tmp_path / "interview.flac")
    data = tmp_path / "data"
    scriba(data, "queue", "add", str(damaged), "--no-diarize")
    run = scriba(data, "queue", "run", "--until-empty")
    assert "partial: decoding stopped at 31.0 s of 91.0 s" in run.stderr
    (job,) = listing(data)
    assert job["state"] == "done" and job["partial"] is True
    assert job["status"].startswith("done — partial: decoding stopped at 31.0 s of 91.0 s")
    assert "Invalid data found" in job["warnings"][0]
    assert json.loads(Path(job["transcript"]).read_text())["warnings"] == job["warnings"]
    table = scriba(data, "queue", "list").stdout
    assert f"{job['id']:>4}  partial" in table and "warning: partial: decoding stopped at 31.0 s of 91.0 s" in table


NAMESPACE = ["unshare", "--pid", "--fork", "--mount-proc"]


def test_a_job_stuck_after_a_container_restart_is_recovered_by_the_cli(tmp_path: Path) -> None:
    """Issue 18: the worker was pid 1 of a container; after a restart pid 1 is alive again and the job stayed
    "running": cancel, remove and retry refused it. Each process here is pid 1 of its own pid namespace."""
    data = tmp_path / "data"
    media = tmp_path / "a.wav"
    media.write_bytes(b"RIFF")
    scriba(data, "queue", "add", str(media), str(media), "--no-diarize")
    claim = (
        "import os, sys, time; from pathlib import Path; from app.core.queue.jobs import JobStore;"
        "s = JobStore(Path(sys.argv[1]), recover=False); s.claim_next(); s.claim_next(); assert os.getpid() == 1;"
        "time.sleep(1.5); os._exit(0)"  # ran a while, then the container stopped
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    subprocess.run([*NAMESPACE, sys.executable, "-c", claim, str(data)], check=True, env=env, timeout=120)
    raw = sqlite3.connect(data / "queue.sqlite3")
    assert [row[0] for row in raw.execute("SELECT state FROM jobs ORDER BY id")] == ["running", "running"]

    restarted = [*NAMESPACE, *SCRIBA, "--data-dir", str(data)]  # the first process after the restart: pid 1
    retry = subprocess.run([*restarted, "queue", "retry", "1"], capture_output=True, text=True, env=env, timeout=120)
    assert retry.returncode == 0, retry.stderr
    assert "job 1 was interrupted" in retry.stderr and "job 1 (a.wav): queued again" in retry.stdout
    assert [job["state"] for job in listing(data)] == ["queued", "queued"]
    assert "cancelled" in scriba(data, "queue", "cancel", "2").stdout
    assert [job["state"] for job in listing(data)] == ["queued", "cancelled"]
    assert "removed" in scriba(data, "queue", "remove", "2").stdout
    assert [job["id"] for job in listing(data)] == [1]


def engine_of(worker_pid: int) -> psutil.Process:
    """The inference child process of the `queue run` with pid ``worker_pid``."""
    children = psutil.Process(worker_pid).children()
    (engine,) = [child for child in children if "--multiprocessing-fork" in child.cmdline()]
    return engine


def peek_states(data: Path) -> list[str]:
    """The jobs' states, read without opening the queue as Scriba does (which would recover stuck jobs)."""
    with sqlite3.connect(f"file:{data / 'queue.sqlite3'}?mode=ro", uri=True) as db:
        return [row[0] for row in db.execute("SELECT state FROM jobs ORDER BY id")]


def test_when_one_of_two_workers_is_killed_the_other_finishes_its_job(tmp_path: Path, long_wav: Path) -> None:
    """Issue 18: two `queue run` on one queue; kill -9 the one running a job: the other one takes it over."""
    data = tmp_path / "data"
    scriba(data, "queue", "add", str(long_wav), "--no-diarize")
    first = subprocess.Popen([*SCRIBA, "--data-dir", str(data), "queue", "run"], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not (listing(data)[0]["state"] == "running" and listing(data)[0]["progress"] > 0.05):
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.3)
    # Its engine held where it is (its worker still beats), so the job cannot end before the kill below however
    # long the second worker takes to start; the kill ends the stopped engine too.
    engine_of(first.pid).suspend()
    second = subprocess.Popen(
        [*SCRIBA, "--data-dir", str(data), "queue", "run"], stderr=subprocess.PIPE, text=True
    )  # waits: one job at a time per queue
    # Its stderr read as it comes: the note that it found the queue busy is the proof it looked.
    lines: list[str] = []
    stream = second.stderr
    assert stream is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(stream.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while not any("running a job from this queue; waiting for it" in line for line in lines):
            assert second.poll() is None and time.monotonic() < deadline, lines
            time.sleep(0.1)
        assert listing(data)[0]["state"] == "running"
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        deadline = time.monotonic() + 400
        # Read the database directly from here on: `scriba queue list` would itself take the job back (any
        # process opening the queue does), and the point is that the live worker does it.
        while peek_states(data) != ["done"]:
            assert second.poll() is None and time.monotonic() < deadline
            time.sleep(0.5)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
        reader.join(10)
    errors = "".join(lines)
    (job,) = listing(data)
    assert job["attempts"] == 2 and job["completions"] == 1
    assert "job 1 was interrupted (the process running it stopped); queued again" in errors
    assert "Traceback" not in errors


def test_ctrl_z_stops_the_running_job_too_and_fg_finishes_it(tmp_path: Path, long_wav: Path) -> None:
    """Ctrl-Z (the terminal's SIGTSTP to `queue run`) stops the engine process with it, though the engine is in a
    process group of its own; `fg` (SIGCONT) lets both go on and the job ends done, in one attempt."""
    data = tmp_path / "data"
    scriba(data, "queue", "add", str(long_wav), "--no-diarize")
    # A group of its own in this session, as a shell's job is: a stop is not discarded as in an orphaned group.
    runner = subprocess.Popen(
        [*SCRIBA, "--data-dir", str(data), "queue", "run", "--until-empty"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,
    )
    try:
        deadline = time.monotonic() + 300
        while not (peek_states(data) == ["running"] and listing(data)[0]["progress"] > 0.05):
            assert runner.poll() is None and time.monotonic() < deadline
            time.sleep(0.3)
        parent, engine = psutil.Process(runner.pid), engine_of(runner.pid)
        assert os.getpgid(engine.pid) != os.getpgid(runner.pid)
        os.kill(runner.pid, signal.SIGTSTP)
        deadline = time.monotonic() + 60
        while not (parent.status() == psutil.STATUS_STOPPED and engine.status() == psutil.STATUS_STOPPED):
            assert time.monotonic() < deadline, (parent.status(), engine.status())
            time.sleep(0.1)
        os.kill(runner.pid, signal.SIGCONT)
        deadline = time.monotonic() + 60
        while engine.is_running() and engine.status() == psutil.STATUS_STOPPED:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        _, errors = runner.communicate(timeout=600)
    finally:
        if runner.poll() is None:
            os.kill(runner.pid, signal.SIGCONT)
            runner.kill()
    assert runner.returncode == 0, errors
    (job,) = listing(data)
    assert job["state"] == "done" and job["attempts"] == 1, job


def test_a_full_disk_stops_queue_run_with_one_line_and_loses_nothing(tmp_path: Path, long_wav: Path) -> None:
    """Issue 18: a full disk crashed `queue run` with a traceback. The data folder is a real 4 MB tmpfs that
    fills up while the job runs."""
    from tests.damaged_media import can_mount, fill, small_disk

    if not can_mount():
        pytest.skip("mounting a tmpfs needs root (the CI machines are root)")
    with small_disk(tmp_path / "disk") as disk:
        data = disk / "data"
        scriba(data, "queue", "add", str(long_wav), "--no-diarize")
        runner = subprocess.Popen(
            [*SCRIBA, "--data-dir", str(data), "queue", "run", "--until-empty"], stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 300
        while listing(data)[0]["state"] != "running":
            assert runner.poll() is None and time.monotonic() < deadline
            time.sleep(0.3)
        filler = fill(disk)
        _, errors = runner.communicate(timeout=600)
        assert runner.returncode == 1
        assert "Traceback" not in errors, errors
        error_lines = [line for line in errors.splitlines() if line.startswith("scriba: error:")]
        assert len(error_lines) == 1 and "cannot be written" in error_lines[0]
        # The file system's words, or SQLite's for the same ENOSPC, whichever write came first.
        assert "No space left on device" in error_lines[0] or "database or disk is full" in error_lines[0]
        filler.unlink()
        (job,) = listing(data)
        # Failed with the reason, or (if even that could not be written) queued again: never lost, never "running".
        assert job["state"] in ("failed", "queued")
        if job["state"] == "failed":
            assert "could not be saved" in job["error"] and "No space left on device" in job["error"]
            scriba(data, "queue", "retry", str(job["id"]))
        scriba(data, "queue", "run", "--until-empty")
        (job,) = listing(data)
        assert job["state"] == "done" and Path(job["transcript"]).is_file()


def test_a_corrupt_queue_file_is_set_aside_once_and_every_command_works(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    damaged = b"half-copied backup, not SQLite " * 500
    (data / "queue.sqlite3").write_bytes(damaged)
    first = scriba(data, "queue", "list")
    assert "the queue is empty" in first.stdout
    notes = [line for line in first.stderr.splitlines() if "could not be read (damaged)" in line]
    assert len(notes) == 1 and "moved to" in notes[0] and "not deleted" in notes[0]
    (aside,) = data.glob("queue.sqlite3.corrupt-*")
    assert aside.read_bytes() == damaged and aside.name in notes[0]
    second = scriba(data, "queue", "list")
    assert "damaged" not in second.stderr  # said once


# ----------------------------------------------------------------------------------------- issue 38

# Loaded by every Python process started with this folder first on PYTHONPATH: the process stops itself (SIGSTOP)
# just before it renames a finished temporary file onto the name in STOP_BEFORE_REPLACING, so that the test kills
# it there and nowhere else. Nothing in Scriba knows of it.
_STOP_HOOK = """
import os, signal, sys

_name = os.environ.get("STOP_BEFORE_REPLACING")
if _name:
    def _stop(event, args):
        if event == "os.rename" and os.path.basename(os.fsdecode(args[1])) == _name:
            os.kill(os.getpid(), signal.SIGSTOP)

    sys.addaudithook(_stop)
"""

ALL_FORMATS = ("txt", "srt", "vtt", "json", "md", "csv", "tsv", "html", "docx", "qda")


def test_a_kill_during_the_auto_export_is_finished_at_the_next_start(tmp_path: Path, espeak: str) -> None:
    """Issue 38, D6: a job was stored done before its exports were written; killed while writing them, it kept one
    format and a stray .tmp, exported=[], and nothing ever wrote the nine others or said they were missing."""
    from tests import synth

    data, out, hooks = tmp_path / "data", tmp_path / "out", tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_STOP_HOOK)
    memo = synth.write_wav(tmp_path / "memo.wav", synth.conversation([(2, "Remember to buy milk.")])[0])
    options = ("--model", "tiny.en", "--language", "en", "--no-diarize", "-f", ",".join(ALL_FORMATS))
    scriba(data, "queue", "add", str(memo), *options, "-o", str(out))
    repository = Path(__file__).resolve().parents[1]
    runner = subprocess.Popen(
        [*SCRIBA, "--data-dir", str(data), "queue", "run", "--until-empty"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={
            **os.environ,
            "PYTHONPATH": f"{hooks}{os.pathsep}{repository}",
            "STOP_BEFORE_REPLACING": "memo.srt",
        },
    )
    try:
        process = psutil.Process(runner.pid)
        deadline = time.monotonic() + 300
        while process.status() != psutil.STATUS_STOPPED:  # the srt is written, not yet renamed into place
            assert runner.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        engine_processes = process.children(recursive=True)
    finally:
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
    psutil.wait_procs(engine_processes, timeout=60)
    names = sorted(path.name for path in out.iterdir())
    assert len(names) == 2 and names[1] == "memo.txt" and names[0].startswith(".memo.srt.")
    assert names[0].endswith(".tmp")
    written_before = (out / "memo.txt").read_bytes()
    (job,) = listing(data)
    assert job["state"] == "done"

    again = scriba(data, "queue", "run", "--until-empty")
    expected = sorted(f"memo{'.qda.txt' if fmt == 'qda' else '.' + fmt}" for fmt in ALL_FORMATS)
    assert sorted(path.name for path in out.iterdir()) == expected  # the stray .tmp is gone, nothing numbered
    assert (out / "memo.txt").read_bytes() == written_before
    assert "milk" in (out / "memo.srt").read_text().lower()
    (job,) = listing(data)
    assert sorted(Path(path).name for path in job["exported"]) == expected
    assert job["exports_pending"] is False
    assert "its exports were cut off" in again.stderr and "Traceback" not in again.stderr


def test_a_read_only_data_folder_is_named_with_what_to_do(tmp_path: Path, espeak: str) -> None:
    """Issue 38: a data folder that cannot be written, found before a run, is one line naming it and saying what
    to do, for the queue's commands and `offload run`; `transcribe` warns and still writes to -o."""
    from tests import synth
    from tests.damaged_media import can_mount, small_disk

    if not can_mount():
        pytest.skip("mounting a read-only tmpfs needs root (the CI machines are root)")
    memo = synth.write_wav(tmp_path / "memo.wav", synth.conversation([(2, "Remember to buy milk.")])[0])
    out = tmp_path / "out"
    with small_disk(tmp_path / "data", read_only=True) as data:
        said = (
            f"Scriba's data folder {data} cannot be written (Read-only file system): make it writable, or choose "
            "another folder with --data-dir or SCRIBA_DATA_DIR"
        )
        unused_host = "ssh://nobody@127.0.0.1:9"  # never reached: the folder is checked first
        for command in (
            ("queue", "list"),
            ("queue", "add", str(memo)),
            ("queue", "run", "--until-empty"),
            ("offload", "run", str(memo), "--provider", "ssh", "--host", unused_host),
            ("offload", "run", str(memo), "--provider", "ssh", "--host", unused_host, "--host", unused_host),
        ):
            run = scriba(data, *command, check=False)
            assert run.returncode == 1, (command, run.stderr)
            assert f"scriba: error: {said}" in run.stderr, (command, run.stderr)
            assert "unexpected error" not in run.stderr and "Traceback" not in run.stderr
            assert "refused the connection" not in run.stderr
        local = scriba(
            data, "transcribe", str(memo), "--model", "tiny.en", "--no-diarize", "-f", "txt", "-o", str(out), "-q"
        )
        assert f"scriba: warning: {said}" in local.stderr
        assert "milk" in (out / "memo.txt").read_text().lower()
