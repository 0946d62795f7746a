"""The window, offscreen, with the real engine (tiny.en) running jobs in its child process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QTextCursor
from PySide6.QtWidgets import QApplication, QMessageBox

from app.core.config.settings import Settings, SettingsStore
from app.core.queue.jobs import JobState
from app.gui.queue.model import PROGRESS_COLUMN

LONG_WAIT = 240_000  # ms; a loaded 2-core CI machine runs tiny.en at several x real time


def drop(widget, paths: list[Path]) -> None:  # type: ignore[no-untyped-def]
    """The events a file manager's drag sends: enter (accepted only for URLs), then drop."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path)) for path in paths])
    enter = QDragEnterEvent(
        widget.rect().center(),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    QApplication.sendEvent(widget, enter)
    assert enter.isAccepted()
    event = QDropEvent(
        QPointF(widget.rect().center()),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    QApplication.sendEvent(widget, event)


def states(window) -> list[JobState]:  # type: ignore[no-untyped-def]
    return [job.state for job in window.store.jobs()]


def finished(window) -> bool:  # type: ignore[no-untyped-def]
    return all(state in (JobState.DONE, JobState.FAILED, JobState.CANCELLED) for state in states(window))


def finished_transcript(open_window, qtbot, source: Path):  # type: ignore[no-untyped-def]
    """A window whose one job (``source``) has finished and is selected, its transcript in the view."""
    window = open_window()
    (job,) = window.add_paths([source])
    qtbot.waitUntil(lambda: window.store.get(job.id).state is JobState.DONE, timeout=LONG_WAIT)
    # The rows follow the store on the window's poll timer; a loaded machine can be a tick behind.
    window.refresh()
    window.select_job(job.id)
    view = window.transcript_view
    qtbot.waitUntil(lambda: view.job_id == job.id, timeout=5000)
    return window, job, view


def test_drop_two_files_and_a_corrupt_one(open_window, qtbot, sample_dir: Path, corrupt_file: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    second = tmp_path / "second interview.wav"
    second.write_bytes((sample_dir / "sample.wav").read_bytes())
    window = open_window()
    drop(window.drop_zone, [sample_dir / "sample.wav", corrupt_file, second])
    window.options_sheet.accept()  # the sheet of their options, answered with the defaults
    assert [job.source.name for job in window.store.jobs()] == ["sample.wav", corrupt_file.name, second.name]
    assert window.model.rowCount() == 3

    qtbot.waitUntil(lambda: finished(window), timeout=LONG_WAIT)
    assert states(window) == [JobState.DONE, JobState.FAILED, JobState.DONE]
    # How responsive the window stays meanwhile is measured by benchmarks/bench_window_events.py.
    failed_row = 1
    tooltip = window.model.data(window.model.index(failed_row, 0), Qt.ItemDataRole.ToolTipRole)
    assert str(corrupt_file) in tooltip and "not an audio or video file" in tooltip
    assert window.model.data(window.model.index(0, PROGRESS_COLUMN)) == "100%"
    assert window.model.data(window.model.index(0, 1)) == "0:30"  # duration column
    assert window.model.data(window.model.index(0, 4)).endswith("x")  # speed column
    qtbot.waitUntil(lambda: bool(window.notifications), timeout=5000)
    assert window.notifications[-1] == ("Scriba: queue finished", "2 done, 1 failed")

    # Selecting a finished job shows its diarized transcript: speaker paragraphs, each speaker in a colour.
    window.select_job(window.store.jobs()[2].id)
    view = window.transcript_view
    qtbot.waitUntil(lambda: len(view.paragraphs) > 3, timeout=5000)
    assert view.speaker_box.count() == 2
    assert view.editor.document().blockCount() == len(view.paragraphs)
    colours = {view.editor.colour_of(paragraph.speaker).name() for paragraph in view.paragraphs}
    assert len(colours) == 2
    # Selecting the failed one says why.
    window.select_job(window.store.jobs()[1].id)
    assert "not an audio or video file" in view.title.text()


def test_cancel_a_running_job(open_window, qtbot, long_wav: Path) -> None:  # type: ignore[no-untyped-def]
    window = open_window()
    (job,) = window.add_paths([long_wav])
    qtbot.waitUntil(
        lambda: window.model.jobs[0].state is JobState.RUNNING and window.model.jobs[0].progress > 0.05,
        timeout=LONG_WAIT,
    )
    engine_pid = window.bridge.engine_pid
    assert engine_pid is not None
    window.select_job(job.id)
    window.menu_actions.job_actions["cancel"].trigger()  # the menu action, as Ctrl+. does
    # How fast is measured in docs/benchmarks.md; here only that it happens (a loaded CI machine is slow).
    qtbot.waitUntil(lambda: window.store.get(job.id).state is JobState.CANCELLED, timeout=15000)
    qtbot.waitUntil(lambda: window.model.jobs[0].state is JobState.CANCELLED, timeout=5000)
    assert not psutil.pid_exists(engine_pid) or psutil.Process(engine_pid).status() == psutil.STATUS_ZOMBIE
    window.retry_job(job.id)  # and it can be queued again
    assert window.store.get(job.id).state in (JobState.QUEUED, JobState.RUNNING)


def test_restart_finds_everything_as_it_was(open_window, qtbot, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first = open_window()
    done, queued = first.add_paths([sample_dir / "sample.wav", sample_dir / "sample.wav"])
    qtbot.waitUntil(lambda: first.store.get(done.id).state is JobState.DONE, timeout=LONG_WAIT)
    if first.store.get(queued.id).state is JobState.QUEUED:
        first.cancel_job(queued.id)
    qtbot.waitUntil(lambda: finished(first), timeout=LONG_WAIT)
    first.select_job(done.id)
    qtbot.waitUntil(lambda: first.transcript_view.job_id == done.id, timeout=5000)
    first.transcript_view.rename_speaker("SPEAKER_00", "Host")
    first.resize(760, 540)  # not the default size, and within the offscreen screen (800x600)
    size = (first.width(), first.height())
    assert size != (800, 600)
    before = [(job.id, job.state, job.source, job.progress) for job in first.store.jobs()]
    first.close()

    second = open_window(start_worker=False)
    after = [(job.id, job.state, job.source, job.progress) for job in second.store.jobs()]
    assert after == before
    assert (second.width(), second.height()) == size  # window state remembered
    second.select_job(done.id)
    qtbot.waitUntil(lambda: second.transcript_view.job_id == done.id, timeout=5000)
    assert "Host" in [second.transcript_view.speaker_box.itemText(i) for i in range(2)]


def test_a_job_killed_mid_run_resumes_on_the_next_start(open_window, qtbot, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    source = tmp_path / "three calls.wav"
    import numpy as np
    import soundfile

    samples, rate = soundfile.read(sample_dir / "sample.wav", dtype="float32")
    soundfile.write(source, np.tile(samples, 3), rate)
    base = [sys.executable, "-m", "app", "--data-dir", str(data), "queue"]
    subprocess.run([*base, "add", str(source), "--diarizer", "embedded"], check=True, capture_output=True)
    runner = subprocess.Popen([*base, "run"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while True:
        listed = json.loads(subprocess.run([*base, "list", "--json"], capture_output=True, text=True).stdout)
        if listed[0]["state"] == "running" and listed[0]["progress"] > 0.05:
            break
        assert time.monotonic() < deadline
        time.sleep(0.3)
    os.kill(runner.pid, signal.SIGKILL)  # a crash of the program that was running it
    runner.wait()

    window = open_window(data=data)
    assert window.store.recovered == [1]
    assert "interrupted" in window.statusBar().currentMessage()
    qtbot.waitUntil(lambda: window.store.get(1).state is JobState.DONE, timeout=LONG_WAIT)
    job = window.store.get(1)
    assert job.completions == 1 and job.attempts == 2
    assert window.store.load_transcript(1).duration > 80


def test_rename_a_speaker_and_edit_text_reach_every_export(
    open_window, qtbot, sample_dir: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    window, job, view = finished_transcript(open_window, qtbot, sample_dir / "sample.wav")
    speaker = view.speaker_box.itemText(0)
    view.rename_speaker(speaker, "Interviewer")
    assert "Interviewer" in {paragraph.speaker for paragraph in view.paragraphs}
    assert speaker not in {paragraph.speaker for paragraph in view.paragraphs}
    # The first paragraph retyped as a whole (selected, typed over), then the cursor leaves it.
    editor = view.editor
    cursor = QTextCursor(editor.document().findBlockByNumber(0))
    cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
    editor.setTextCursor(cursor)
    view.edit_button.click()
    qtbot.keyClicks(editor, "Corrected first line.")
    view.commit_pending()

    result = window.export_job(job.id, tmp_path / "out", ("txt", "srt", "vtt", "json"))
    assert not result.failed and len(result.written) == 4
    for path in result.written:
        text = path.read_text()
        assert "Interviewer" in text and speaker not in text, path.name
        assert "Corrected first line." in text, path.name
    stored = json.loads(window.store.transcript_file(job.id).read_text())
    assert "Interviewer" in stored["speakers"]


def test_search_and_click_to_play_highlights_the_paragraph(open_window, qtbot, sample_dir: Path) -> None:  # type: ignore[no-untyped-def]
    _window, _job, view = finished_transcript(open_window, qtbot, sample_dir / "sample.wav")
    editor = view.editor
    paragraphs = view.paragraphs
    word = editor.document().findBlockByNumber(2).text().split()[0].strip(",.?!")
    view.search.setText(word)
    found = view.matching_paragraphs(word)
    assert found and 2 in found and editor.textCursor().blockNumber() == found[0]
    assert editor.textCursor().selectedText().casefold() == word.casefold()

    number = len(paragraphs) // 2
    qtbot.mouseClick(editor.viewport(), Qt.MouseButton.LeftButton, pos=editor.word_rect(number, 0).center())
    assert view.playing_paragraph == number
    player = view._player
    assert player is not None and player.source().toLocalFile() == str(sample_dir / "sample.wav")
    qtbot.waitUntil(lambda: player.position() >= int(editor.spans[number][0].seconds * 1000), timeout=5000)
    view.highlight_at(paragraphs[number + 1].start + 0.01)  # as positionChanged does while the audio advances
    assert view.playing_paragraph == number + 1
    view.stop_playback()


def test_settings_round_trip_with_the_token_in_the_keyring(open_window, qtbot, _test_keyring, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from app.gui.settings.dialog import SettingsDialog

    window = open_window(start_worker=False)
    dialog = SettingsDialog(window.settings, token_stored=False, parent=window)
    qtbot.addWidget(dialog)
    dialog.model.setCurrentText("base.en")
    dialog.language.setText("en")
    dialog.num_speakers.setValue(3)
    dialog.formats["vtt"].setChecked(False)
    dialog.output_dir.setText(str(tmp_path / "exports"))
    dialog.token.setText("hf_secret_value")
    window.apply_settings(dialog.result_settings(), dialog.new_token(), dialog.token_cleared)

    assert _test_keyring == {("scriba", "huggingface-token"): "hf_secret_value"}
    saved = (tmp_path / "config" / "settings.json").read_text()
    assert "hf_secret_value" not in saved  # the token never reaches the settings file
    reloaded = SettingsStore(tmp_path / "config").load()
    assert reloaded.job.model == "base.en" and reloaded.job.language == "en" and reloaded.job.num_speakers == 3
    assert reloaded.job.formats == ("txt", "srt", "json") and reloaded.job.output_dir == str(tmp_path / "exports")
    (job,) = window.add_paths([Path(__file__)])  # jobs added now carry the new options
    assert job.options.model == "base.en" and job.options.num_speakers == 3

    again = SettingsDialog(reloaded, token_stored=window._token_stored(), parent=window)
    qtbot.addWidget(again)
    assert again.token.text() == "" and "stored" in again.token.placeholderText()  # never shown back
    assert again.model.currentText() == "base.en" and again.num_speakers.value() == 3
    again._clear_token()
    window.apply_settings(again.result_settings(), again.new_token(), again.token_cleared)
    assert _test_keyring == {}


def test_damaged_or_old_settings_never_stop_the_start(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    store.path.write_text("{ not json")
    assert store.load() == Settings()
    assert (tmp_path / "settings.damaged.json").exists()
    store.path.write_text(json.dumps({"version": 0, "speakers": 2, "diarize": "yes", "future_key": 1}))
    loaded = store.load()
    assert loaded.job.num_speakers == 2 and loaded.job.diarize is True and loaded.extra == {"future_key": 1}
    store.save(loaded)
    assert json.loads(store.path.read_text())["extra"] == {"future_key": 1}


def test_queue_shortcuts_and_context_menu(open_window, qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    window = open_window(start_worker=False)
    names = ["a.wav", "b.wav", "c.wav"]
    for name in names:
        (tmp_path / name).write_bytes(b"RIFF")
    jobs = window.add_paths([tmp_path / name for name in names])
    window.windowHandle().requestActivate()
    qtbot.waitUntil(window.isActiveWindow, timeout=3000)  # window shortcuts fire in the active window
    window.select_job(jobs[2].id)
    window.table.setFocus()
    qtbot.keyClick(window.table, Qt.Key.Key_Up, Qt.KeyboardModifier.AltModifier)
    assert [job.source.name for job in window.store.jobs()] == ["a.wav", "c.wav", "b.wav"]
    assert window.selected_job_id() == jobs[2].id
    qtbot.keyClick(window.table, Qt.Key.Key_Period, Qt.KeyboardModifier.ControlModifier)
    assert window.store.get(jobs[2].id).state is JobState.CANCELLED
    qtbot.keyClick(window.table, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    assert window.store.get(jobs[2].id).state is JobState.QUEUED
    qtbot.keyClick(window.table, Qt.Key.Key_Delete)
    assert [job.source.name for job in window.store.jobs()] == ["a.wav", "b.wav"]

    window.select_job(jobs[0].id)
    rect = window.table.visualRect(window.model.index(0, 0))
    window._context_menu(rect.center())
    menus = [widget for widget in QApplication.topLevelWidgets() if widget.isVisible() and widget.inherits("QMenu")]
    assert menus and [a.text() for a in menus[-1].actions()] == [
        "Cancel job",
        "Retry job",
        "Remove job",
        "Move up",
        "Move down",
        "Transcribe a part…",
        "",
        "Offload to cloud…",
    ]
    menus[-1].close()


def test_unexpected_error_shows_a_dialog_and_the_window_stays(open_window, qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from app.gui.main import CrashReporter

    window = open_window(start_worker=False)
    reporter = CrashReporter(tmp_path / "crash.log")
    try:
        raise ValueError("a bug in a slot")
    except ValueError as error:
        reporter._excepthook(type(error), error, error.__traceback__)
    qtbot.waitUntil(
        lambda: any(isinstance(w, QMessageBox) and w.isVisible() for w in QApplication.topLevelWidgets()), timeout=3000
    )
    box = next(w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible())
    assert "a bug in a slot" in box.detailedText() and "safe" in box.informativeText()
    assert "ValueError: a bug in a slot" in (tmp_path / "crash.log").read_text()
    assert window.isVisible()
    box.close()


def test_an_error_written_for_the_user_shows_its_line_and_no_crash_report(open_window, qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from app.cloud.remote.transport import TransportError
    from app.gui.main import CrashReporter

    window = open_window(start_worker=False)
    reporter = CrashReporter(tmp_path / "crash.log")
    error = TransportError("ssh://me@host: the host has no SFTP subsystem; enable it in sshd_config")
    reporter._excepthook(type(error), error, None)
    qtbot.waitUntil(
        lambda: any(isinstance(w, QMessageBox) and w.isVisible() for w in QApplication.topLevelWidgets()), timeout=3000
    )
    box = next(w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible())
    assert box.text() == str(error) and box.detailedText() == ""
    assert reporter.reports == [] and not (tmp_path / "crash.log").exists()
    assert window.isVisible()
    box.close()


def test_the_window_appears_before_any_heavy_import(tmp_path: Path) -> None:
    code = f"""
import sys
from pathlib import Path
from app.gui.main import create_application
from app.core.queue.jobs import JobStore
from app.core.config.settings import SettingsStore
from app.gui.window import MainWindow
app = create_application()
window = MainWindow(JobStore(Path({str(tmp_path / "d")!r})), SettingsStore(Path({str(tmp_path / "c")!r})))
window.show()
app.processEvents()
print(window.isVisible(), sorted(m for m in ('torch', 'faster_whisper', 'pyannote', 'ctranslate2', 'torchaudio')
      if m in sys.modules))
window.close()
"""
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "True []"


# ----------------------------------------------------------------------------------------- issue 18


def test_a_partly_decoded_file_shows_as_partial_in_its_row(
    open_window, qtbot, sample_dir: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Issue 18: a file damaged part-way ended "done" with no warning anywhere; the row now says partial."""
    from app.gui.queue.model import PARTIAL_COLOUR
    from tests.damaged_media import truncated_flac

    damaged = truncated_flac(sample_dir / "sample.wav", tmp_path / "interview.flac")
    window, job, _view = finished_transcript(open_window, qtbot, damaged)
    row = window.model.row_of(job.id)
    assert row is not None
    state = window.model.index(row, 2)
    assert state.data() == "done — partial"
    assert state.data(Qt.ItemDataRole.ForegroundRole) == PARTIAL_COLOUR
    tooltip = state.data(Qt.ItemDataRole.ToolTipRole)
    assert "done — partial: decoding stopped at 31.0 s of 91.0 s" in tooltip and "Invalid data found" in tooltip


def test_a_corrupt_queue_opens_a_fresh_one_and_says_so(open_window, qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    data.mkdir()
    (data / "queue.sqlite3").write_bytes(b"half-copied backup, not SQLite " * 500)
    window = open_window(start_worker=False)
    (aside,) = data.glob("queue.sqlite3.corrupt-*")
    box = window.set_aside_box
    assert box is not None and box.isVisible() and str(aside) in box.text() and "nothing was deleted" in box.text()
    assert str(aside) in window.statusBar().currentMessage()
    box.close()
    (media := tmp_path / "a.wav").write_bytes(b"RIFF")
    assert [job.id for job in window.add_paths([media])] == [1]  # the new queue works
    window.close()
    again = open_window(start_worker=False)
    assert again.set_aside_box is None  # said once


def test_a_job_stuck_after_a_restart_is_taken_back_from_the_window(open_window, qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Issue 18: a job left "running" by a process whose pid now belongs to another one (here pid 1 of a pid
    namespace, seen from outside as the machine's init) could not be cancelled, removed or retried."""
    from tests.core.queue.test_jobs import CLAIM_AND_DIE, _in_new_pid_namespace

    window = open_window(start_worker=False)
    for name in ("a.wav", "b.wav"):
        (tmp_path / name).write_bytes(b"RIFF")
    first, second = window.add_paths([tmp_path / "a.wav", tmp_path / "b.wav"])
    for _ in range(2):
        assert _in_new_pid_namespace(CLAIM_AND_DIE, str(tmp_path / "data")).returncode == 0
    window.refresh()
    assert [job.state for job in window.store.jobs()] == [JobState.RUNNING, JobState.RUNNING]

    window.select_job(first.id)
    rect = window.table.visualRect(window.model.index(0, 0))
    window._context_menu(rect.center())
    assert (
        window.menu_actions.job_actions["retry"].isEnabled() and window.menu_actions.job_actions["remove"].isEnabled()
    )
    for widget in QApplication.topLevelWidgets():
        if widget.isVisible() and widget.inherits("QMenu"):
            widget.close()
    window.retry_job(first.id)
    assert window.store.get(first.id).state is JobState.QUEUED
    window.remove_job(second.id)
    assert [job.id for job in window.store.jobs()] == [first.id]
    assert window.model.index(0, 2).data() == "queued"
