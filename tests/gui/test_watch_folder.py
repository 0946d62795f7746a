"""Settings > Watch folder in the real window: a recording dropped into the folder is queued, transcribed by the
window's worker and exported beside itself; clearing the setting stops the watch."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from app.core.queue.jobs import JobState
from app.gui.settings_dialog import SettingsDialog
from app.gui.watch_folder import INTERVAL_MS


def test_a_recording_dropped_into_the_watch_folder_is_transcribed_beside_itself(
    open_window: Any, qtbot: Any, tmp_path: Path, sample_dir: Path
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    window = open_window()
    dialog = SettingsDialog(window.settings, token_stored=False, parent=window)
    qtbot.addWidget(dialog)
    dialog.watch_folder.setText(str(inbox))
    dialog.diarize.setChecked(False)
    for fmt, box in dialog.formats.items():
        box.setChecked(fmt in ("txt", "md"))
    window.apply_settings(dialog.result_settings())
    assert window.folder_watcher.watch is not None and window.folder_watcher.watch.folder == inbox

    shutil.copy(sample_dir / "sample.wav", inbox / "call.wav")
    # Settled after two looks; the queue shows it once the look (off the main thread) has reported.
    qtbot.waitUntil(lambda: window.model.rowCount() == 1, timeout=20_000)
    (job,) = window.store.jobs()
    qtbot.waitUntil(lambda: window.store.get(job.id).state is JobState.DONE, timeout=180_000)
    qtbot.waitUntil(lambda: (inbox / "call.md").exists(), timeout=10_000)
    assert "chicago" in (inbox / "call.txt").read_text().lower()

    window.apply_settings(window.settings.with_job(watch_folder=None))
    assert window.folder_watcher.watch is None
    shutil.copy(sample_dir / "sample.wav", inbox / "second.wav")
    window.folder_watcher.look()
    assert not window.folder_watcher.looking
    qtbot.wait(2 * INTERVAL_MS + 500)  # long enough for a watched file to be seen twice and queued
    assert len(window.store.jobs()) == 1  # no longer watched


def test_a_stalled_folder_never_blocks_the_window_and_looks_do_not_pile_up(qtbot: Any, tmp_path: Path) -> None:
    """A share that hangs in its listing: the look runs off the main thread, and the timer's next looks are
    skipped while it is under way rather than queued behind it."""
    import threading

    from app.core.queue.jobs import JobOptions, JobStore
    from app.gui.watch_folder import FolderWatcher

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    watcher = FolderWatcher(JobStore(tmp_path / "data"), JobOptions)
    released = threading.Event()
    calls: list[int] = []
    watcher.set_folder(str(inbox))
    qtbot.waitUntil(lambda: not watcher.looking, timeout=5_000)
    assert watcher.watch is not None
    real_scan = watcher.watch.scan

    def stalled_scan() -> list[Any]:
        calls.append(1)
        released.wait(10)
        return real_scan()

    watcher.watch.scan = stalled_scan  # type: ignore[method-assign]
    watcher.look()
    assert watcher.looking  # returned at once, the look still under way
    watcher.look()
    watcher.look()
    released.set()
    qtbot.waitUntil(lambda: not watcher.looking, timeout=5_000)
    assert calls == [1]
    watcher.stop()
