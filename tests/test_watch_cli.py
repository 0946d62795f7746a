"""`scriba watch` and a recording that arrives slowly: a real writer process copies half of a real recording into
the watched folder, stalls for longer than the watch's looks would take to call it settled, then finishes. The
recording is transcribed whole, once it is complete; a file that changes after its job ran is transcribed again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import soundfile

from app.core.queue.jobs import Job, JobState, JobStore
from tests.slow_writer import SlowWriter, split_wav


def wait_for(condition: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting: {what()}"
        time.sleep(0.1)


class Watch:
    """A running `scriba watch`, its stderr collected line by line."""

    def __init__(self, data: Path, folder: Path) -> None:
        command = [sys.executable, "-m", "app", "--data-dir", str(data), "watch", str(folder)]
        command += ["--interval", "0.3", "--no-diarize", "-f", "txt"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(Path(__file__).parents[1])}
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=60)
        self._reader.join(10)
        return code


def jobs_for(data: Path, source: Path) -> list[Job]:
    store = JobStore(data, recover=False)
    try:
        return store.find_by_source(source)
    finally:
        store.close()


@pytest.mark.parametrize("mode", ["open", "reopened"])
def test_a_copy_that_stalls_is_transcribed_whole_once_it_completes(tmp_path: Path, sample_dir: Path, mode: str) -> None:
    source = sample_dir / "sample.wav"
    info = soundfile.info(source)
    assert info.subtype == "PCM_16" and info.channels == 1 and info.samplerate == 16000
    first, rest, start = split_wav(source, tmp_path)
    inbox, data = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    target = inbox / "call.wav"
    watch = Watch(data, inbox)
    writer: SlowWriter | None = None
    try:
        wait_for(lambda: "watching" in watch.stderr, 60, lambda: watch.stderr)
        writer = SlowWriter(mode, target, first, rest)
        # The stall lasts until the watch has judged the half file: it either queued it (what it did before)
        # or said why it waits. Both come after the file has been unchanged for two looks and more.
        wait_for(
            lambda: "queued: job" in watch.stderr or "waiting for call.wav" in watch.stderr,
            60,
            lambda: watch.stderr,
        )
        assert jobs_for(data, target) == [], f"queued while still being copied:\n{watch.stderr}"
        if mode == "open":
            assert f"it is open for writing by process {writer.pid}" in watch.stderr, watch.stderr
        else:
            half_seconds = (first.stat().st_size - start) / 32000  # 16 kHz, 16-bit mono
            assert f"it holds {half_seconds:.1f} s of the {info.duration:.1f} s its header states" in watch.stderr
        writer.finish()
        assert target.read_bytes() == source.read_bytes()

        wait_for(
            lambda: any(job.state in (JobState.DONE, JobState.FAILED) for job in jobs_for(data, target)),
            240,
            lambda: watch.stderr,
        )
        (job,) = jobs_for(data, target)
        assert job.state is JobState.DONE and not job.partial, (job.status, watch.stderr)
        assert job.duration is not None and abs(job.duration - info.duration) < 0.05, job
        assert (inbox / "call.txt").exists()
    finally:
        if writer is not None:
            writer.kill()
        code = watch.stop()
    assert code == 143 and "Traceback" not in watch.stderr, watch.stderr


def test_a_recording_that_changes_after_its_job_ran_is_transcribed_again(tmp_path: Path, sample_dir: Path) -> None:
    source = sample_dir / "sample.wav"
    seconds = soundfile.info(source).duration
    # The first part as a recording of its own (a header stating its own length), later the whole call.
    audio, rate = soundfile.read(source, dtype="int16")
    short = tmp_path / "short.wav"
    soundfile.write(short, audio[: len(audio) // 2], rate, subtype="PCM_16")
    inbox, data = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    target = inbox / "call.wav"
    watch = Watch(data, inbox)
    writer = SlowWriter("rewritten", target, short, source)
    try:
        wait_for(lambda: any(job.state is JobState.DONE for job in jobs_for(data, target)), 240, lambda: watch.stderr)
        (job,) = jobs_for(data, target)
        assert job.duration is not None and abs(job.duration - len(audio) // 2 / rate) < 0.05
        writer.finish()

        wait_for(
            lambda: jobs_for(data, target)[0].completions >= 2,
            240,
            lambda: f"{jobs_for(data, target)}\n{watch.stderr}",
        )
        (again,) = jobs_for(data, target)
        assert again.id == job.id and again.state is JobState.DONE and not again.partial
        assert again.duration is not None and abs(again.duration - seconds) < 0.05
        assert f"call.wav changed after job {job.id} took it" in watch.stderr
        assert f"queued again: job {job.id}" in watch.stderr
    finally:
        writer.kill()
        code = watch.stop()
    assert code == 143 and "Traceback" not in watch.stderr, watch.stderr
