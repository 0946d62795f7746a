"""Ctrl-C in the terminal that started the window, and a SIGTERM, close the real `scriba` window the way File >
Quit does: no traceback, exit status 0, the running job back in the queue, its engine process gone, the window's
settings saved."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from app.core.config.settings import SettingsStore
from app.core.paths import config_dir
from app.core.queue.jobs import Job, JobState, JobStore


def wait_for(condition: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting: {what()}"
        time.sleep(0.1)


def the_job(data: Path) -> Job | None:
    store = JobStore(data, recover=False)
    try:
        jobs = store.jobs()
    finally:
        store.close()
    return jobs[0] if jobs else None


@pytest.mark.parametrize(
    ("signum", "whole_group"),
    [(signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGTERM, True)],
    ids=["ctrl-c", "sigterm", "sigterm-to-the-group"],
)
def test_a_signal_closes_the_window_as_quit_does(
    tmp_path: Path, long_wav: Path, signum: signal.Signals, whole_group: bool
) -> None:
    data = tmp_path / "data"
    settings = SettingsStore(config_dir())  # the window's, in this test's own config folder
    assert settings.load().window.geometry is None
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(Path(__file__).parents[2]),
    }
    # Its own process group, as a terminal's foreground job: Ctrl-C there reaches every process in it.
    window = subprocess.Popen(
        [sys.executable, "-m", "app", "--data-dir", str(data), str(long_wav)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(window.stdout or []), daemon=True)
    reader.start()
    try:
        # Up, and transcribing: the job runs in the window's engine process and has made progress.
        def transcribing() -> bool:
            job = the_job(data)
            return job is not None and job.state is JobState.RUNNING and job.progress > 0

        wait_for(transcribing, 180, lambda: "".join(lines))
        engines = psutil.Process(window.pid).children(recursive=True)
        assert engines, "no engine process"
        # A signal to the terminal's group must reach the window alone, which decides (the job requeued): an
        # engine in the group would die of a SIGTERM first, and its job be marked failed, whenever it won that race.
        engine_groups = [os.getpgid(p.pid) for p in engines if "--multiprocessing-fork" in p.cmdline()]
        assert engine_groups and window.pid not in engine_groups, engine_groups
        if whole_group:
            os.killpg(window.pid, signum)  # Ctrl-C in the terminal; a logout's SIGTERM to the session
        else:
            window.send_signal(signum)  # `kill PID`
        code = window.wait(timeout=60)
    finally:
        if window.poll() is None:
            os.killpg(window.pid, signal.SIGKILL)
            window.wait()
    reader.join(10)
    output = "".join(lines)
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    assert code == 0, output
    job = the_job(data)
    assert job is not None and job.state is JobState.QUEUED and job.progress == 0, job
    _, alive = psutil.wait_procs(engines, timeout=10)
    assert alive == [], alive
    assert settings.load().window.geometry is not None  # saved on the way out, as File > Quit does


def test_closing_while_the_first_run_page_reads_the_machine_is_quiet(tmp_path: Path) -> None:
    """The first-run page reads this computer in a child process; the window closed before that child answers
    drops the late answer: no traceback, exit status 0."""
    # The child that reads the machine (a spawned multiprocessing child) made slow, so the window closes first.
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(
        "import sys, time\nif '--multiprocessing-fork' in sys.argv:\n    time.sleep(8)\n", encoding="utf-8"
    )
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(slow), str(Path(__file__).parents[2])]),
    }
    window = subprocess.Popen(
        [sys.executable, "-m", "app", "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(window.stdout or []), daemon=True)
    reader.start()
    try:

        def reading_the_machine() -> list[psutil.Process]:
            return [
                child
                for child in psutil.Process(window.pid).children(recursive=True)
                if "--multiprocessing-fork" in child.cmdline()
            ]

        wait_for(lambda: bool(reading_the_machine()), 120, lambda: "".join(lines))
        (child,) = reading_the_machine()
        window.send_signal(signal.SIGTERM)  # closes the window as File > Quit does
        code = window.wait(timeout=60)
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE  # it answered before the exit
    finally:
        if window.poll() is None:
            os.killpg(window.pid, signal.SIGKILL)
            window.wait()
    reader.join(10)
    output = "".join(lines)
    assert "Traceback" not in output and "RuntimeError" not in output, output
    assert code == 0, output
