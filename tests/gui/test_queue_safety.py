"""Nothing destroyed by one key: remove and retry ask first, keep the transcript in a trash, and a second
launch hands its files to the window already open."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from app.core.queue.jobs import JobOptions, JobState
from app.core.queue.trash import Trash


def answer_next_question(button: str) -> dict[str, str]:
    """Click ``button`` in the next message box that opens (modal: it runs its own event loop); what it said is
    returned in the dict once it has been answered."""
    seen: dict[str, str] = {}

    def answer() -> None:
        box = QApplication.activeModalWidget()
        if not isinstance(box, QMessageBox):
            QTimer.singleShot(20, answer)
            return
        seen["text"] = box.text()
        next(choice for choice in box.buttons() if choice.text().replace("&", "") == button).click()

    QTimer.singleShot(0, answer)
    return seen


def focus_queue(window, qtbot) -> None:  # type: ignore[no-untyped-def]
    """Give the queue the keyboard again (a message box that closed takes the activation with it)."""
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=3000)
    window.table.setFocus()
    qtbot.waitUntil(window.table.hasFocus, timeout=3000)


def window_with_a_finished_job(open_window, qtbot, sample_dir: Path, call_transcript):  # type: ignore[no-untyped-def]
    window = open_window(start_worker=False)
    job = window.store.add_transcribed(sample_dir / "sample.wav", JobOptions(), call_transcript)
    window.refresh()
    window.select_job(job.id)
    qtbot.waitUntil(lambda: window.transcript_view.job_id == job.id, timeout=5000)
    window.windowHandle().requestActivate()
    qtbot.waitUntil(window.isActiveWindow, timeout=3000)  # window shortcuts fire in the active window
    return window, job


def test_delete_acts_only_in_the_queue_asks_first_and_the_trash_gives_it_back(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, call_transcript
) -> None:
    window, job = window_with_a_finished_job(open_window, qtbot, sample_dir, call_transcript)
    speaker = call_transcript.speakers[0]
    window.transcript_view.rename_speaker(speaker, "Interviewer")  # an edit that must survive the trash

    # Delete with the focus outside the queue (a button beside it) removes nothing.
    window.export_button.setFocus()
    qtbot.keyClick(window.export_button, Qt.Key.Key_Delete)
    assert [item.id for item in window.store.jobs()] == [job.id]

    # In the queue it asks, and says what would go; "Cancel" keeps everything.
    focus_queue(window, qtbot)
    seen = answer_next_question("Cancel")
    qtbot.keyClick(window.table, Qt.Key.Key_Delete)
    assert f"{len(call_transcript.segments)} lines" in seen["text"] and "speaker name" in seen["text"]
    assert "trash" in seen["text"]
    assert window.store.get(job.id).state is JobState.DONE

    focus_queue(window, qtbot)
    seen = answer_next_question("Move to trash")
    qtbot.keyClick(window.table, Qt.Key.Key_Delete)
    assert window.store.jobs() == []
    assert window.transcript_view.job_id is None
    (entry,) = Trash(window.store.directory).entries()
    assert entry.reason == "removed" and entry.source == sample_dir / "sample.wav"

    dialog = window.open_trash()
    qtbot.addWidget(dialog)
    assert dialog.entries_list.count() == 1 and "sample.wav" in dialog.entries_list.item(0).text()
    restored = dialog.restore_selected()
    assert restored is not None and restored.state is JobState.DONE
    back = window.store.load_transcript(restored.id)
    assert "Interviewer" in back.speakers and speaker not in back.speakers
    assert [segment.text for segment in back.segments] == [segment.text for segment in call_transcript.segments]
    assert Trash(window.store.directory).entries() == []
    assert window.selected_job_id() == restored.id
    assert not dialog.restore_button.isEnabled() and not dialog.empty_button.isEnabled()

    # Emptying the trash is the one deletion, and it asks first too.
    focus_queue(window, qtbot)
    answer_next_question("Move to trash")
    qtbot.keyClick(window.table, Qt.Key.Key_Delete)
    dialog.reload()
    assert dialog.entries_list.count() == 1
    seen = answer_next_question("Cancel")
    assert dialog.empty_trash() == 0 and "for good" in seen["text"]
    assert len(Trash(window.store.directory).entries()) == 1
    answer_next_question("Delete for good")
    assert dialog.empty_trash() == 1 and Trash(window.store.directory).entries() == []


def test_retry_of_a_finished_job_asks_uses_the_current_settings_and_keeps_the_old_transcript(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, call_transcript
) -> None:
    window, job = window_with_a_finished_job(open_window, qtbot, sample_dir, call_transcript)
    assert job.options.model is None
    window.apply_settings(window.settings.with_job(model="base.en", language="de"))

    focus_queue(window, qtbot)
    seen = answer_next_question("Cancel")
    qtbot.keyClick(window.table, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    assert "model base.en" in seen["text"] and "language de" in seen["text"] and "trash" in seen["text"]
    assert window.store.get(job.id).state is JobState.DONE
    assert window.store.load_transcript(job.id).segments == call_transcript.segments

    focus_queue(window, qtbot)
    answer_next_question("Transcribe again")
    qtbot.keyClick(window.table, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    again = window.store.get(job.id)
    assert again.state is JobState.QUEUED
    assert again.options.model == "base.en" and again.options.language == "de"  # not the options it was added with
    assert "current settings" in window.statusBar().currentMessage()
    (entry,) = Trash(window.store.directory).entries()
    assert entry.reason == "re-transcribed" and entry.load().segments == call_transcript.segments


def test_a_second_launch_hands_its_files_to_the_open_window(open_window, qtbot, sample_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    from app.gui.single_instance import InstanceServer, hand_over, server_name

    data = tmp_path / "data"
    window = open_window(data=data, start_worker=False)
    name = server_name(data)
    assert not hand_over(name, [sample_dir / "sample.wav"])  # nobody listening yet: the launch opens a window
    server = InstanceServer(name, window)
    server.files_received.connect(window.files_from_another_launch)
    assert server.listen()

    # A real second `scriba FILE` process, on the same data folder.
    launch = subprocess.Popen(
        [sys.executable, "-m", "app", "--data-dir", str(data), str(sample_dir / "sample.wav")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    qtbot.waitUntil(lambda: launch.poll() is not None, timeout=60_000)  # the window answers while we wait
    output = launch.stdout.read() if launch.stdout else ""
    assert launch.returncode == 0, output
    assert "already open" in output and "1 file(s) handed" in output
    assert [job.source for job in window.store.jobs()] == [sample_dir / "sample.wav"]
    assert [widget for widget in QApplication.topLevelWidgets() if widget.inherits("QMainWindow")] == [window]

    # Another data folder is another queue: its launch is not handed to this window.
    assert server_name(tmp_path / "other") != name
    assert not hand_over(server_name(tmp_path / "other"), [sample_dir / "sample.wav"])
    assert [job.source for job in window.store.jobs()] == [sample_dir / "sample.wav"]
    server.close()


def test_a_socket_left_by_a_crashed_window_does_not_stop_the_next_one_listening(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import QDir
    from PySide6.QtNetwork import QLocalSocket

    from app.gui.single_instance import InstanceServer, server_name

    name = server_name(tmp_path / "data")
    leftover = Path(QDir.tempPath()) / name  # where Qt puts the socket on Linux; a crash leaves it behind
    leftover.write_text("")
    server = InstanceServer(name)
    try:
        assert server.listen()
        # And it answers a real client: the line of files, then "ok".
        received: list[list[Path]] = []
        server.files_received.connect(received.append)
        client = QLocalSocket()
        client.connectToServer(name)
        qtbot.waitUntil(lambda: client.state() == QLocalSocket.LocalSocketState.ConnectedState, timeout=3000)
        client.write(b'{"files": ["/recordings/a.wav"]}\n')
        qtbot.waitUntil(lambda: client.canReadLine(), timeout=3000)
        assert bytes(client.readLine().data()) == b"ok\n" and received == [[Path("/recordings/a.wav")]]
        client.write(b"not json\n")
        qtbot.waitUntil(lambda: client.canReadLine(), timeout=3000)
        assert bytes(client.readLine().data()) == b"error\n" and len(received) == 1
        client.disconnectFromServer()
    finally:
        server.close()
        leftover.unlink(missing_ok=True)
