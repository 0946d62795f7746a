"""The dictation panel on the real microphone path: PortAudio (sounddevice) recording from a private PulseAudio
server's null-sink monitor while paplay speaks into the sink. PulseAudio itself says when a recording stream is
open (``pactl list short source-outputs``), so the test can see that the panel opens the microphone only on
Start and closes it on Stop, that the chosen input is the one recorded, and that the level meter moves."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.core.dictation.stream import DictationOptions
from app.gui.dictation.panel import DictationPanel, PanelState
from tests import metrics, synth
from tests.pulse import missing_tools, play, pulse_loopback

WAIT = 120_000  # ms
SAID = [(0, "Please send the quarterly report to the finance team.")]


@pytest.fixture()
def pulse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    missing = missing_tools()
    # Not a skip: `make test` installs PulseAudio; without it the capture path would go untested.
    assert not missing, f"{', '.join(missing)} missing: run `make test` (it installs the Debian packages)"
    with pulse_loopback(tmp_path / "pulse") as env:
        for key, value in env.items():
            monkeypatch.setenv(key, value)  # libpulse reads these when PortAudio opens the "pulse" device
        yield env


@pytest.fixture(scope="module")
def spoken_wav(tmp_path_factory: pytest.TempPathFactory, espeak: str) -> Path:
    samples, _ = synth.conversation(SAID, pause=1.0)
    return synth.write_wav(tmp_path_factory.mktemp("microphone") / "said.wav", samples)


def recording_streams(env: dict[str, str]) -> list[str]:
    """PulseAudio's open recording streams (source outputs), one line each."""
    listed = subprocess.run(
        ["pactl", "list", "short", "source-outputs"], env=env, capture_output=True, text=True, check=True
    )
    return [line for line in listed.stdout.splitlines() if line.strip()]


def test_the_microphone_opens_on_start_only_and_the_meter_follows_it(  # type: ignore[no-untyped-def]
    qtbot, pulse: dict[str, str], spoken_wav: Path
) -> None:
    import os

    env = {**os.environ, **pulse}
    panel = DictationPanel(DictationOptions())
    qtbot.addWidget(panel)
    try:
        panel.show()  # lists the inputs (PortAudio starts), which must not open one
        qtbot.waitExposed(panel)
        # The sound server started after this process's PortAudio may have taken its list of devices (an earlier
        # test's panel): the refresh button lists them again, as for a microphone plugged in after the start.
        qtbot.mouseClick(panel.refresh_button, Qt.MouseButton.LeftButton)
        labels = [panel.device_combo.itemText(index) for index in range(panel.device_combo.count())]
        pulse_index = next((i for i, label in enumerate(labels) if label.startswith("pulse")), None)
        assert pulse_index is not None, labels
        panel.device_combo.setCurrentIndex(pulse_index)
        assert recording_streams(env) == []
        # Speech before Start is not recorded (nothing listens yet).
        assert play(spoken_wav, pulse).wait(timeout=60) == 0
        assert recording_streams(env) == []

        panel.start()
        qtbot.waitUntil(lambda: panel.state is PanelState.RUNNING, timeout=WAIT)
        assert len(recording_streams(env)) == 1
        meter_values: list[int] = []
        panel._meter_timer.timeout.connect(lambda: meter_values.append(panel.level_meter.value()))
        player = play(spoken_wav, pulse)
        qtbot.waitUntil(lambda: player.poll() is not None, timeout=WAIT)
        qtbot.wait(1000)  # the last words reach the capture stream (PulseAudio's buffering)
        panel.stop()
        qtbot.waitUntil(lambda: panel.state is PanelState.IDLE, timeout=WAIT)
        assert recording_streams(env) == []
    finally:
        panel.shutdown()
    text = panel.final_text()
    assert metrics.wer(SAID[0][1], text) <= 0.25, text  # one playback heard: the one after Start
    assert meter_values and max(meter_values) > 20 and min(meter_values) < max(meter_values) - 10
    assert panel.level_meter.value() == panel.level_meter.minimum()  # empty again once stopped
