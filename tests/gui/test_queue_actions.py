"""The Queue menu's job actions (issue 40, point 8): Retry and Remove act on every selected row, a retried job
keeps its row, and with nothing selected no job action is offered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.core.queue.jobs import Job, JobOptions, JobState
from app.core.transcript.document import Segment, Transcript
from tests.gui.test_queue_safety import answer_next_question, focus_queue


def failed_jobs(window: Any, tmp_path: Path, names: list[str]) -> list[Job]:
    paths = []
    for name in names:
        (path := tmp_path / name).write_bytes(b"RIFF")
        paths.append(path)
    jobs = window.add_paths(paths)
    for job in jobs:
        window.store.claim(job.id, "test")
        window.store.fail(job.id, f"{job.source.name} could not be decoded")
    window.refresh()
    return list(jobs)


def click_row(window: Any, row: int, modifier: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:
    rect = window.table.visualRect(window.model.index(row, 0))
    QTest.mouseClick(window.table.viewport(), Qt.MouseButton.LeftButton, modifier, rect.center())


def test_with_nothing_selected_no_job_action_is_offered(open_window: Any, qtbot: Any, tmp_path: Path) -> None:
    window = open_window(start_worker=False)
    actions = window.menu_actions.job_actions
    assert not any(action.isEnabled() for action in actions.values())  # an empty queue
    failed_jobs(window, tmp_path, ["one.wav", "two.wav"])
    click_row(window, 0)
    qtbot.waitUntil(lambda: actions["retry"].isEnabled(), timeout=3000)
    assert actions["remove"].isEnabled() and not actions["part"].isEnabled()  # a failed job has no part to choose
    click_row(window, 0, Qt.KeyboardModifier.ControlModifier)  # the row unselected again: none is selected
    qtbot.waitUntil(lambda: not any(action.isEnabled() for action in actions.values()), timeout=3000)
    focus_queue(window, qtbot)
    QTest.keyClick(window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)  # Retry's shortcut does nothing
    assert [job.state for job in window.store.jobs()] == [JobState.FAILED, JobState.FAILED]


def test_retry_queues_every_selected_job_again_where_it_is(open_window: Any, qtbot: Any, tmp_path: Path) -> None:
    window = open_window(start_worker=False)
    jobs = failed_jobs(window, tmp_path, ["a.wav", "b.wav", "c.wav", "d.wav"])
    click_row(window, 0)
    click_row(window, 2, Qt.KeyboardModifier.ControlModifier)
    focus_queue(window, qtbot)
    QTest.keyClick(window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.store.get(jobs[0].id).state is JobState.QUEUED, timeout=3000)
    states = {job.source.name: job.state for job in window.store.jobs()}
    assert states == {
        "a.wav": JobState.QUEUED,
        "b.wav": JobState.FAILED,
        "c.wav": JobState.QUEUED,
        "d.wav": JobState.FAILED,
    }
    # Each keeps its row: the order is the one they were added in, and the rows shown say so.
    assert [job.source.name for job in window.store.jobs()] == ["a.wav", "b.wav", "c.wav", "d.wav"]
    assert [window.model.job_at(row).source.name for row in range(4)] == ["a.wav", "b.wav", "c.wav", "d.wav"]
    assert "2 jobs (a.wav, c.wav) queued again" in window.statusBar().currentMessage()


def test_remove_takes_every_selected_job_and_asks_once(open_window: Any, qtbot: Any, tmp_path: Path) -> None:
    window = open_window(start_worker=False)
    failed_jobs(window, tmp_path, ["keep.wav", "gone.wav"])
    finished = []
    for name, words in (("memo.wav", "Buy milk today."), ("call.wav", "The red bicycle is sold.")):
        (path := tmp_path / name).write_bytes(b"RIFF")
        transcript = Transcript(name, 3.0, "en", "tiny.en", "cpu", "int8", (Segment(0.0, 2.5, words),))
        finished.append(window.store.add_transcribed(path, JobOptions(), transcript))
    window.refresh()
    click_row(window, 1)  # gone.wav
    click_row(window, 2, Qt.KeyboardModifier.ControlModifier)  # memo.wav
    click_row(window, 3, Qt.KeyboardModifier.ControlModifier)  # call.wav
    focus_queue(window, qtbot)
    asked = answer_next_question("Move to trash")
    QTest.keyClick(window.table, Qt.Key.Key_Delete)
    qtbot.waitUntil(lambda: len(window.store.jobs()) == 1, timeout=5000)
    assert [job.source.name for job in window.store.jobs()] == ["keep.wav"]
    assert "memo.wav" in asked["text"] and "call.wav" in asked["text"]  # one question names both transcripts
    assert "Their transcripts are in the trash" in window.statusBar().currentMessage()
