"""Settings > Watch folder in the real window: a recording dropped into the folder is queued, transcribed by the
window's worker and exported beside itself; clearing the setting stops the watch."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from app.core.queue.jobs import JobState
from app.gui.settings_dialog import SettingsDialog


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
    qtbot.waitUntil(lambda: len(window.store.jobs()) == 1, timeout=20_000)  # settled after two looks
    (job,) = window.store.jobs()
    assert window.model.rowCount() == 1  # the queue shows it
    qtbot.waitUntil(lambda: window.store.get(job.id).state is JobState.DONE, timeout=180_000)
    qtbot.waitUntil(lambda: (inbox / "call.md").exists(), timeout=10_000)
    assert "chicago" in (inbox / "call.txt").read_text().lower()

    window.apply_settings(window.settings.with_job(watch_folder=None))
    assert window.folder_watcher.watch is None
    shutil.copy(sample_dir / "sample.wav", inbox / "second.wav")
    window.folder_watcher.look()
    window.folder_watcher.look()
    assert len(window.store.jobs()) == 1  # no longer watched
