"""Queue › Transcribe a part…: a queued job's time range from the window (the CLI's --start/--end), checked
as typed, refused for a job that is no longer queued; the worker then transcribes only that stretch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.core.queue.jobs import JobState


def test_a_queued_job_gets_a_part_of_its_recording(open_window: Any, qtbot: Any, sample_dir: Path) -> None:
    window = open_window(start_worker=False)
    (job,) = window.add_paths([sample_dir / "sample.wav"])
    dialog = window.choose_time_range(job.id)
    assert dialog is not None and dialog.isVisible()
    dialog.start.setText("0:22")
    dialog.end.setText("14")
    dialog.accept()
    assert dialog.isVisible() and "is not after the start" in dialog.error.text()  # nothing changed yet
    dialog.start.setText("0:14")
    dialog.end.setText("0:75")
    dialog.accept()
    assert dialog.isVisible() and "'0:75' is not a time" in dialog.error.text()
    dialog.end.setText("22")
    dialog.accept()
    options = window.store.get(job.id).options
    assert (options.start, options.end) == (14.0, 22.0)

    window.bridge.start()  # the worker runs it: only that stretch, in the recording's time
    qtbot.waitUntil(lambda: window.store.get(job.id).state is JobState.DONE, timeout=180_000)
    transcript = window.store.load_transcript(job.id)
    assert transcript.segments and all(s.start >= 14.0 and s.end <= 22.5 for s in transcript.segments)
    assert window.choose_time_range(job.id) is None  # done: only a queued job's part can change
