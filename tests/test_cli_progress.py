"""The CLI's progress line: a bar with speed and time left on a terminal, plain lines in a log, only the last line
with --quiet."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.progress import DownloadBar, ProgressBar
from app.core.engine.pipeline import Progress
from app.core.queue.worker import JobEvent
from tests import synth


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.unit
def test_a_terminal_gets_a_bar_with_speed_and_time_left() -> None:
    stream, clock = Terminal(), Clock()
    bar = ProgressBar("talk.wav", stream, True, clock=clock)
    bar.update(Progress(stage="decode", stage_fraction=0.0, fraction=0.0, audio_seconds=20.0))
    clock.now += 5  # half the job in 5 s of a 20 s recording: 2x real time, 5 s to go
    bar.update(Progress(stage="transcribe", stage_fraction=0.5, fraction=0.5, audio_seconds=20.0))
    drawn = stream.getvalue().split("\r")[-1]
    assert drawn.startswith("talk.wav") and " 50%|" in drawn and "transcribe" in drawn
    assert "00:05<00:05, 2.0x real time" in drawn

    bar.finish("done: talk.wav")
    assert stream.getvalue().endswith("\rdone: talk.wav\n")  # the bar is wiped, the last line stays


@pytest.mark.unit
def test_a_job_run_again_gets_a_fresh_bar() -> None:
    stream, clock = Terminal(), Clock()
    bar = ProgressBar("[1] talk.wav", stream, True, clock=clock)
    bar.update(JobEvent(kind="progress", job_id=1, fraction=0.3, stage="transcribe", duration=60.0))
    bar.finish("stopped: job 1 talk.wav goes back to the queue")
    stream.seek(0)
    stream.truncate()
    bar.update(JobEvent(kind="progress", job_id=1, fraction=0.0, stage="decode", duration=60.0))
    clock.now += 10  # a quarter of a minute's recording in 10 s: 1.5x real time
    bar.update(JobEvent(kind="progress", job_id=1, fraction=0.25, stage="transcribe", duration=60.0))
    drawn = stream.getvalue().split("\r")[-1]
    assert " 25%|" in drawn and "00:10<00:30, 1.5x real time" in drawn


@pytest.mark.unit
def test_a_log_gets_a_plain_line_per_tenth() -> None:
    stream, clock = io.StringIO(), Clock()
    bar = ProgressBar("talk.wav", stream, True, clock=clock)
    for fraction, stage in ((0.0, "decode"), (0.04, "decode"), (0.12, "transcribe"), (0.15, "transcribe")):
        bar.update(Progress(stage=stage, stage_fraction=0.0, fraction=fraction, audio_seconds=0.0))
    clock.now += 10  # half of a 40 s recording in 10 s
    bar.update(Progress(stage="diarize", stage_fraction=0.0, fraction=0.5, audio_seconds=40.0))
    bar.finish("done: talk.wav")
    assert "\r" not in stream.getvalue()
    assert stream.getvalue().splitlines() == [
        "talk.wav:   0% decode, 00:00 elapsed, ? left",
        "talk.wav:  12% transcribe, 00:00 elapsed, ? left",
        "talk.wav:  50% diarize, 00:10 elapsed, 00:10 left, 2.0x real time",
        "done: talk.wav",
    ]


@pytest.mark.unit
def test_quiet_prints_only_the_last_line() -> None:
    stream = Terminal()
    bar = ProgressBar("talk.wav", stream, False)
    bar.update(Progress(stage="transcribe", stage_fraction=0.5, fraction=0.5, audio_seconds=20.0))
    bar.finish("done: talk.wav")
    assert stream.getvalue() == "done: talk.wav\n"


@pytest.mark.unit
def test_a_download_in_a_log_gets_a_line_per_tenth_with_speed_and_time_left() -> None:
    stream, clock = io.StringIO(), Clock()
    with DownloadBar("downloading small", stream, clock=clock) as bar:
        bar(100_000_000, 500_000_000)  # resumed: a fifth was already there, and is not speed
        clock.now += 10
        bar(150_000_000, 500_000_000)
        clock.now += 10
        bar(200_000_000, 500_000_000)  # 100 MB in 20 s: 5 MB/s, 300 MB to go
    assert stream.getvalue().splitlines() == [
        "downloading small:  20% 100MB of 500MB, ?B/s, ? left",
        "downloading small:  30% 150MB of 500MB, 5.00MB/s, 01:10 left",
        "downloading small:  40% 200MB of 500MB, 5.00MB/s, 01:00 left",
    ]


@pytest.mark.unit
def test_a_download_on_a_terminal_gets_a_bar_that_stays_when_done() -> None:
    stream, clock = Terminal(), Clock()
    with DownloadBar("downloading pyannote", stream, clock=clock) as bar:
        bar(10_000_000, 40_000_000)  # resumed with a quarter already there
        clock.now += 4
        bar(30_000_000, 40_000_000)  # 20 MB in 4 s: 5 MB/s, 2 s to go
        drawn = stream.getvalue().split("\r")[-1]
        assert drawn.startswith("downloading pyannote:  75%") and "30.0M/40.0M [00:04<00:02, 5.00MB/s]" in drawn
        clock.now += 2
        bar(40_000_000, 40_000_000)
    assert stream.getvalue().endswith("40.0M/40.0M [00:06<00:00, 5.00MB/s]\n")


def test_transcribe_on_a_terminal_draws_the_bar(tmp_path: Path, espeak: str) -> None:
    """The real command under a pseudo-terminal: what a person at a shell sees."""
    audio = synth.write_wav(tmp_path / "memo.wav", synth.conversation([(0, "Remember to buy milk and bread.")])[0])
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "transcribe", str(audio), "--no-diarize", "-f", "txt", "-o", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=terminal,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), "COLUMNS": "120"},
    )
    os.close(terminal)
    shown = b""
    while True:
        ready, _, _ = select.select([controller], [], [], 120)
        assert ready, "no output from scriba transcribe for 120 s"
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the terminal's other end closed: the process is done
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert process.wait(timeout=60) == 0, shown
    text = shown.decode("utf-8", "replace")
    assert "\rmemo.wav" in text and "x real time" in text and "<" in text  # redrawn in place, speed, time left
    assert text.rstrip().splitlines()[-1].lstrip("\r").startswith("done: ")
    assert (tmp_path / "memo.txt").read_text().strip()
