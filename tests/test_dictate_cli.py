"""`scriba dictate` as a user runs it: a file replayed in real time, saving a session into the queue, and the
microphone path through real PortAudio (sounddevice) capturing what PulseAudio plays into a null sink."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import soundfile

from tests import metrics, synth
from tests.pulse import missing_tools, play, pulse_loopback
from tests.test_cli import scriba

SAID = [
    (0, "Please send the quarterly report to the finance team."),
    (0, "The meeting moves to Thursday afternoon."),
    (0, "Thank you for your help with the budget."),
]
TRUTH = " ".join(text for _, text in SAID)


@pytest.fixture(scope="module")
def dictation_wav(tmp_path_factory: pytest.TempPathFactory, espeak: str) -> Path:
    samples, _ = synth.conversation(SAID, pause=1.5)
    return synth.write_wav(tmp_path_factory.mktemp("dictation") / "said.wav", samples)


def _events(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_realtime_replay_streams_partials_then_finals(dictation_wav: Path, tmp_path: Path) -> None:
    result = scriba("dictate", "--from-file", str(dictation_wav), "--realtime", "--jsonl")
    assert result.returncode == 0, result.stderr
    events = _events(result.stdout)
    assert {tuple(sorted(event)) for event in events} == {("emitted_at", "end", "start", "text", "type")}
    finals = [event for event in events if event["type"] == "final"]
    partials = [event for event in events if event["type"] == "partial"]
    assert partials, "a real-time replay shows words while they are spoken"
    final_text = " ".join(str(event["text"]) for event in finals)
    offline = scriba("transcribe", str(dictation_wav), "--no-diarize", "-f", "txt", "-o", str(tmp_path), "-q")
    assert offline.returncode == 0, offline.stderr
    offline_text = (tmp_path / "said.txt").read_text()
    # The bar is 5 points of WER over the offline transcript, measured by benchmarks/bench_dictation.py
    # on a minute of speech; on these 23 words one word is 4.3 points and real-time windows vary run to run,
    # so two words of slack here.
    assert metrics.wer(TRUTH, final_text) <= metrics.wer(TRUTH, offline_text) + 0.10, (final_text, offline_text)
    duration = soundfile.info(dictation_wav).duration
    for event in events:
        assert isinstance(event["emitted_at"], float) and isinstance(event["start"], float)
        # An event is produced after the audio of its words has arrived, on the same clock.
        assert float(event["start"]) <= float(event["end"]) <= float(event["emitted_at"]) <= duration + 0.01
    ends = [float(event["end"]) for event in finals]
    assert ends == sorted(ends)
    # Words show while they are spoken: the first partial comes before the first utterance is final. How soon
    # it comes is a latency, measured by benchmarks/bench_dictation.py, never asserted against the clock here.
    assert float(partials[0]["emitted_at"]) < float(finals[0]["emitted_at"])


def test_saved_session_is_a_done_job_that_exports(tmp_path: Path, dictation_wav: Path) -> None:
    data = tmp_path / "data"
    result = scriba("--data-dir", str(data), "dictate", "--from-file", str(dictation_wav), "--save", str(tmp_path))
    assert result.returncode == 0, result.stderr
    printed = result.stdout.strip()
    [wav] = list(tmp_path.glob("dictation-*.wav"))
    assert f"saved {wav}" in result.stderr and "queued as job 1" in result.stderr
    assert soundfile.info(wav).duration == pytest.approx(soundfile.info(dictation_wav).duration, abs=0.05)
    [job] = json.loads(scriba("--data-dir", str(data), "queue", "list", "--json").stdout)
    assert job["state"] == "done" and job["note"] == "dictation; retry to diarize"
    assert Path(job["source"]) == wav
    export = scriba("--data-dir", str(data), "queue", "export", "1", "-f", "txt", "-o", str(tmp_path / "out"))
    assert export.returncode == 0, export.stderr
    exported = (tmp_path / "out" / f"{wav.stem}.txt").read_text()
    assert metrics.wer(TRUTH, exported) <= 0.15
    assert metrics.wer(printed, exported) == 0.0  # the queue keeps exactly what was shown


def test_saving_where_a_file_stands_is_refused_in_words(tmp_path: Path, dictation_wav: Path) -> None:
    blocker = tmp_path / "taken"
    blocker.write_text("a file, not a folder")
    data = tmp_path / "data"
    result = scriba("--data-dir", str(data), "dictate", "--from-file", str(dictation_wav), "--save", str(blocker))
    assert result.returncode == 1, result.stderr
    assert f"scriba: error: Could not save the dictation to {blocker}:" in result.stderr, result.stderr
    assert "unexpected" not in result.stderr and "Traceback" not in result.stderr
    assert blocker.read_text() == "a file, not a folder"  # nothing replaced it
    assert result.stdout.strip(), "the text was still shown as it was spoken"


def test_realtime_needs_a_file() -> None:
    result = scriba("dictate", "--realtime")
    assert result.returncode == 2 and "--from-file" in result.stderr


@pytest.fixture()
def pulse(tmp_path: Path) -> dict[str, str]:
    missing = missing_tools()
    # Not a skip: `make test` installs PulseAudio; without it the capture path would go untested.
    assert not missing, f"{', '.join(missing)} missing: run `make test` (it installs the Debian packages)"
    with pulse_loopback(tmp_path / "pulse") as env:
        yield env


def test_list_devices_through_portaudio(pulse: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app", "dictate", "--list-devices", "--jsonl"],
        capture_output=True,
        text=True,
        env={**os.environ, **pulse, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert result.returncode == 0, result.stderr
    devices = _events(result.stdout)
    assert "pulse" in [device["name"] for device in devices]
    assert all(int(str(device["channels"])) > 0 for device in devices)


def test_microphone_capture_through_portaudio_and_pulseaudio(
    pulse: dict[str, str], dictation_wav: Path, tmp_path: Path
) -> None:
    """sounddevice opens PulseAudio's null-sink monitor as its input; paplay speaks into the sink; Ctrl+C."""
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "dictate", "--device", "pulse", "--jsonl", "--save", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **pulse, "PYTHONPATH": str(Path(__file__).parents[1]), "SCRIBA_DATA_DIR": str(tmp_path)},
        # Ctrl+C as at a terminal, even when the suite itself was started in the background (which hands
        # children SIGINT ignored).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 60
        heard = ""
        while "Listening" not in heard and time.monotonic() < deadline and process.poll() is None:
            heard += process.stderr.readline()
        assert "Listening" in heard, heard
        player = play(dictation_wav, pulse)
        assert player.wait(timeout=60) == 0
        time.sleep(1.0)  # the last words reach the capture stream (PulseAudio's buffering)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, heard + stderr
    finals = [event for event in _events(stdout) if event["type"] == "final"]
    text = " ".join(str(event["text"]) for event in finals)
    assert metrics.wer(TRUTH, text) <= 0.25, text
    [wav] = list(tmp_path.glob("dictation-*.wav"))
    assert soundfile.info(wav).duration >= soundfile.info(dictation_wav).duration - 0.5
