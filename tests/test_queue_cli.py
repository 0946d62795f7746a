"""`scriba queue …` end to end, as separate processes sharing one data directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

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
    assert "cancelled" in scriba(data, "queue", "cancel", str(jobs[1]["id"])).stdout
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
    _gone, alive = psutil.wait_procs(engine_processes, timeout=5)
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
