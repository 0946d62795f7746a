"""The window holds its queue worker while the person dictates (Settings › Dictation › Pause the file queue while
I speak), and says so in the queue's status line; with the setting off it never holds."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from app.core.dictation.sources import ArraySource
from app.core.engine.audio import SAMPLE_RATE, decode_audio
from app.core.queue.worker import JobEvent
from app.gui.dictation.panel import DictationPanel, PanelState
from tests.real_speech import real_speech_dir

WAIT = 120_000


def _dictate(qtbot, panel: DictationPanel, samples: np.ndarray) -> None:  # type: ignore[no-untyped-def]
    panel.source_factory = lambda _device: ArraySource(samples, realtime=True)
    panel.controller.stop_at_end = True
    panel.start()
    qtbot.waitUntil(lambda: panel.state is PanelState.RUNNING, timeout=WAIT)
    qtbot.waitUntil(lambda: panel.state is PanelState.IDLE, timeout=WAIT)


def test_speech_holds_the_queue_only_with_the_setting_on(qtbot, open_window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    reading = decode_audio(real_speech_dir() / "mfa_en_spontaneous_a.wav").samples
    silence = np.zeros(SAMPLE_RATE, dtype=np.float32)
    samples = np.concatenate([silence, reading[: 3 * SAMPLE_RATE], silence])
    window = open_window(start_worker=False)
    window.dictation_dock.show()
    assert window.settings.dictation.pause_queue  # on unless turned off
    worker = window.bridge.worker
    seen: list[tuple[str, str]] = []

    def record(event: JobEvent) -> None:
        if event.kind in ("held", "released"):
            seen.append((event.kind, window.worker_label.text()))

    window.bridge.job_event.connect(record)
    _dictate(qtbot, window.dictation_panel, samples)
    qtbot.waitUntil(lambda: not worker.held, timeout=WAIT)
    qtbot.waitUntil(lambda: len(seen) == 2, timeout=WAIT)
    assert [kind for kind, _label in seen] == ["held", "released"]
    assert "waiting while you dictate" in seen[0][1] and "waiting while you dictate" not in seen[1][1]
    assert "waiting while you dictate" not in window.worker_label.text()

    seen.clear()
    window.apply_settings(window.settings.with_dictation(pause_queue=False))
    _dictate(qtbot, window.dictation_panel, samples)
    assert window.dictation_panel.final_text().strip()  # it heard the words, and held nothing
    assert seen == [] and not worker.held
