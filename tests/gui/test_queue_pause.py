"""Queue › Pause queue (Ctrl+Shift+P): the window's worker starts no new job until Resume; the job already
running finishes. Real worker, real audio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.core.queue.jobs import JobState
from tests.wake import CountedWake


def test_a_paused_queue_starts_nothing_until_resumed(open_window: Any, qtbot: Any, sample_dir: Path) -> None:
    window = open_window()
    worker = window.bridge.worker
    wake = worker._wake = CountedWake()  # the worker takes the new event at its next look
    window.menu_actions.pause_action.trigger()
    assert worker.paused and window.menu_actions.pause_action.isChecked()
    assert window.menu_actions.pause_action.text() == "Resume queue" and "paused" in window.worker_label.text()
    (job,) = window.add_paths([sample_dir / "sample.wav"])
    # Two more waits: at least one whole look at the queue began after the job was there, and passed it by.
    # (wake() stands in for the one-second poll.)
    seen = wake.waits

    def looked_twice_or_started() -> bool:
        worker.wake()
        return wake.waits >= seen + 2 or window.store.get(job.id).state is not JobState.QUEUED

    qtbot.waitUntil(looked_twice_or_started, timeout=30_000)
    assert window.store.get(job.id).state is JobState.QUEUED
    window.menu_actions.pause_action.trigger()
    assert not window.bridge.worker.paused and "paused" not in window.worker_label.text()
    qtbot.waitUntil(lambda: window.store.get(job.id).state is JobState.DONE, timeout=180_000)
