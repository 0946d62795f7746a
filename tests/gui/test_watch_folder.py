"""Settings > Watch folder in the real window: a recording copied into the folder is queued once the copy is
complete (a real writer process that stalls half-way), transcribed whole by the window's worker and exported
beside itself; clearing the setting stops the watch."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import soundfile

from app.core.queue.jobs import JobOptions, JobState, JobStore
from app.gui.queue.watch_folder import FolderWatcher
from app.gui.settings.dialog import SettingsDialog
from tests.slow_writer import SlowWriter, split_wav


def test_a_recording_copied_into_the_watch_folder_is_transcribed_whole_beside_itself(
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

    # A copy that stalls half-way, its file still open: for longer than two looks and the settle time, after
    # which a file unchanged is no longer taken for complete on that alone.
    source = sample_dir / "sample.wav"
    writer = SlowWriter("open", inbox / "call.wav", *split_wav(source, tmp_path)[:2])
    try:
        watch = window.folder_watcher.watch
        looks = watch.looks
        qtbot.waitUntil(lambda: window.model.rowCount() == 1 or watch.looks >= looks + 4, timeout=30_000)
        assert window.model.rowCount() == 0, "queued while still being copied"
        assert watch.waiting[inbox / "call.wav"].startswith(f"it is open for writing by process {writer.pid}")
        writer.finish()
    finally:
        writer.kill()
    # The queue shows it once a look (off the main thread) has found it complete.
    qtbot.waitUntil(lambda: window.model.rowCount() == 1, timeout=30_000)
    (job,) = window.store.jobs()
    qtbot.waitUntil(lambda: window.store.get(job.id).state is JobState.DONE, timeout=180_000)
    done = window.store.get(job.id)
    assert not done.partial and done.duration is not None
    assert abs(done.duration - soundfile.info(source).duration) < 0.05
    qtbot.waitUntil(lambda: (inbox / "call.md").exists(), timeout=10_000)
    assert "chicago" in (inbox / "call.txt").read_text().lower()

    window.apply_settings(window.settings.with_job(watch_folder=None))
    assert window.folder_watcher.watch is None
    window.folder_watcher.look()
    assert not window.folder_watcher.looking
    # The proof that the window's watcher had its chance: one like it, on a folder of its own, has queued a copy
    # dropped there at the same moment.
    control_folder = tmp_path / "control"
    control_folder.mkdir()
    control = FolderWatcher(JobStore(tmp_path / "control-data"), JobOptions)
    control_queued: list[Any] = []
    control.queued.connect(control_queued.extend)
    control.set_folder(str(control_folder))
    shutil.copy(source, inbox / "second.wav")
    shutil.copy(source, control_folder / "second.wav")
    qtbot.waitUntil(lambda: len(control_queued) == 1, timeout=30_000)
    control.stop()
    assert len(window.store.jobs()) == 1  # no longer watched


def test_a_stalled_folder_never_blocks_the_window_and_looks_do_not_pile_up(qtbot: Any, tmp_path: Path) -> None:
    """A share that hangs in its listing: the look runs off the main thread, and the timer's next looks are
    skipped while it is under way rather than queued behind it."""
    import threading

    from app.core.queue.jobs import JobOptions, JobStore
    from app.gui.queue.watch_folder import FolderWatcher

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
