"""Queue › Pause queue (Ctrl+Shift+P): the window's worker starts no new job until Resume; the job already
running finishes. Real worker, real audio."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from app.core.queue.jobs import JobState


def test_a_paused_queue_starts_nothing_until_resumed(open_window: Any, qtbot: Any, sample_dir: Path) -> None:
    window = open_window()
    window.pause_action.trigger()
    assert window.bridge.worker.paused and window.pause_action.isChecked()
    assert window.pause_action.text() == "Resume queue" and "paused" in window.worker_label.text()
    (job,) = window.add_paths([sample_dir / "sample.wav"])
    deadline = time.monotonic() + 4  # several of the worker's looks at the queue
    while time.monotonic() < deadline:
        qtbot.wait(200)
        assert window.store.get(job.id).state is JobState.QUEUED
    window.pause_action.trigger()
    assert not window.bridge.worker.paused and "paused" not in window.worker_label.text()
    qtbot.waitUntil(lambda: window.store.get(job.id).state is JobState.DONE, timeout=180_000)
