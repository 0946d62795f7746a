"""The transcript editor as a newcomer meets it (issue 40, point 6): every control says what it does, a click on a
name renames, playing and editing are distinct, switching jobs leaves nothing of the last one behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QEvent, QPoint, QRect, Qt, QTimer
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QComboBox,
    QLabel,
    QLineEdit,
    QMenu,
    QStyle,
    QStyleOptionComboBox,
    QToolTip,
    QWidget,
)

from app.core.queue.jobs import JobOptions, JobState
from app.core.transcript.document import Transcript
from app.core.transcript.edit import paragraph_text
from tests.gui.test_transcript_editor import first_wordy_paragraph, open_on_call, stored
from tests.xserver import xvfb


def activate(window, qtbot) -> None:  # type: ignore[no-untyped-def]
    """Window shortcuts (Undo, Redo) reach only the active window."""
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=3000)


def visible_fields(widget: QWidget) -> list[QLineEdit]:
    return [field for field in widget.findChildren(QLineEdit) if field.isVisible()]


def choose_from_menu(qtbot, button: QAbstractButton, pick: Callable[[QMenu], None]) -> None:  # type: ignore[no-untyped-def]
    """Click ``button`` and, once its menu is open, let ``pick`` choose in it (the menu runs its own loop)."""
    seen: list[QMenu] = []

    def when_open() -> None:
        menu = QApplication.activePopupWidget()
        if not isinstance(menu, QMenu):
            QTimer.singleShot(20, when_open)
            return
        seen.append(menu)
        pick(menu)

    QTimer.singleShot(0, when_open)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(seen) and not seen[0].isVisible(), timeout=5000)


def entry(menu: QMenu, text: str):  # type: ignore[no-untyped-def]
    return next(action for action in menu.actions() if action.text() == text)


def test_a_click_on_a_speakers_name_renames_them_there(open_window, qtbot, sample_dir: Path, call_transcript) -> None:  # type: ignore[no-untyped-def]
    window, job, view = open_on_call(open_window, qtbot, sample_dir, call_transcript)
    editor = view.editor
    number = first_wordy_paragraph(view)
    old = view.paragraphs[number].speaker
    assert old is not None
    theirs = [n for n, paragraph in enumerate(view.paragraphs) if paragraph.speaker == old]
    y = editor.word_rect(number, 0).center().y()

    # Pointing at the margin says what a click does there.
    for x, words in ((8, "play"), (editor.margin.width() - 12, f"{old}: click to rename")):
        QToolTip.hideText()
        point = QPoint(x, y)
        QApplication.sendEvent(editor.margin, QHelpEvent(QEvent.Type.ToolTip, point, editor.margin.mapToGlobal(point)))
        qtbot.waitUntil(lambda words=words: words in QToolTip.text(), timeout=3000)
    # The name sits at the margin's right end, after the time: a click there opens a field holding the name.
    qtbot.mouseClick(editor.margin, Qt.MouseButton.LeftButton, pos=QPoint(editor.margin.width() - 12, y))
    fields = visible_fields(editor)
    assert len(fields) == 1 and fields[0].text() == old and fields[0].selectedText() == old
    assert editor.playing is None  # a click on the name renames, it does not play
    qtbot.keyClicks(fields[0], "Nobody")
    qtbot.keyClick(fields[0], Qt.Key.Key_Escape)  # Esc: nothing renamed
    assert not visible_fields(editor) and stored(window, job.id).speakers == call_transcript.speakers

    qtbot.mouseClick(editor.margin, Qt.MouseButton.LeftButton, pos=QPoint(editor.margin.width() - 12, y))
    field = visible_fields(editor)[0]
    qtbot.keyClicks(field, "Dr Okafor")
    qtbot.keyClick(field, Qt.Key.Key_Return)
    assert not visible_fields(editor)
    saved = stored(window, job.id)
    assert "Dr Okafor" in saved.speakers and old not in saved.speakers
    assert [n for n, paragraph in enumerate(view.paragraphs) if paragraph.speaker == "Dr Okafor"] == theirs
    assert view.undo_stack.count() == 1

    # A click on the time, left of the name, still plays the paragraph and opens no field.
    qtbot.mouseClick(editor.margin, Qt.MouseButton.LeftButton, pos=QPoint(8, y))
    assert editor.playing == (number, 0) and not visible_fields(editor)
    view.stop_playback()


def test_every_control_says_what_it_does_and_the_speaker_of_a_paragraph_is_changed_from_a_menu(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, call_transcript
) -> None:
    window, job, view = open_on_call(open_window, qtbot, sample_dir, call_transcript)
    window.resize(1920, 1080)
    qtbot.waitUntil(lambda: view.width() > 900, timeout=3000)
    editor = view.editor
    controls = [
        widget
        for widget in view.findChildren(QWidget)
        if isinstance(widget, QAbstractButton | QComboBox | QLineEdit)
        and widget.isVisibleTo(view)
        and not widget.objectName().startswith("qt_")  # Qt's own parts (a tool bar's » button)
        and not isinstance(widget.parent(), QLineEdit | QComboBox)  # a field's clear button, a combo's field
    ]
    assert len(controls) >= 10
    for widget in controls:
        label = widget.placeholderText() if isinstance(widget, QLineEdit) else getattr(widget, "text", lambda: "")()
        if isinstance(widget, QComboBox):
            label = widget.currentText()
        assert widget.toolTip().strip(), f"{type(widget).__name__} {label!r} has no tooltip"
        assert label.strip(), f"{type(widget).__name__} with tooltip {widget.toolTip()!r} is blank"
    texts = {widget.text() for widget in controls if isinstance(widget, QAbstractButton)}
    assert "Give to" not in texts and "Merge up" not in texts
    assert "Join with the paragraph above" in texts

    # The speaker box shows a long name whole (it was sized once, while empty: "SPEAKEF").
    long_name = "Margaret Thompson-Okafor"
    view.rename_speaker(call_transcript.speakers[0], long_name)
    box = view.speaker_box
    box.setCurrentText(long_name)
    option = QStyleOptionComboBox()
    box.initStyleOption(option)
    option.rect = QRect(0, 0, box.sizeHint().width(), box.sizeHint().height())
    field = box.style().subControlRect(
        QStyle.ComplexControl.CC_ComboBox, option, QStyle.SubControl.SC_ComboBoxEditField, box
    )
    assert field.width() >= box.fontMetrics().horizontalAdvance(long_name)

    # "Change this paragraph's speaker…": with the cursor in a paragraph, a menu of the speakers; the one chosen
    # takes the whole paragraph.
    number = first_wordy_paragraph(view)
    words = paragraph_text(view.transcript, view.paragraphs[number])
    other = next(name for name in view.transcript.speakers if name != view.paragraphs[number].speaker)
    editor.setTextCursor(editor.cursorForPosition(editor.word_rect(number, 2).center()))
    button = next(widget for widget in controls if isinstance(widget, QAbstractButton) and "speaker…" in widget.text())
    assert button.text() == "Change this paragraph's speaker…"
    offered: list[str] = []

    def pick_other(menu: QMenu) -> None:
        offered.extend(action.text() for action in menu.actions() if action.text())
        entry(menu, other).trigger()
        menu.close()

    choose_from_menu(qtbot, button, pick_other)
    assert set(view.transcript.speakers) <= set(offered)
    saved = stored(window, job.id)
    # Whole: all its words in one paragraph of that speaker (joined with a turn of theirs next to it, if any).
    assert [p.speaker for p in view.paragraphs if words in paragraph_text(saved, p)] == [other]

    # A new name typed in the menu's field adds that speaker for the selected words only.
    start = editor.document().findBlockByNumber(number).position()
    cursor = editor.textCursor()
    cursor.setPosition(start)
    cursor.setPosition(start + editor.spans[number][0].end, cursor.MoveMode.KeepAnchor)
    editor.setTextCursor(cursor)
    first_word = cursor.selectedText()
    assert button.text() == "Change the selected words' speaker…"

    def type_new(menu: QMenu) -> None:
        field = next(field for field in menu.findChildren(QLineEdit) if field.isVisible())
        qtbot.keyClicks(field, "Visitor")
        qtbot.keyClick(field, Qt.Key.Key_Return)

    choose_from_menu(qtbot, button, type_new)
    saved = stored(window, job.id)
    assert "Visitor" in saved.speakers
    assert [paragraph_text(saved, p) for p in view.paragraphs if p.speaker == "Visitor"] == [first_word]


def uncertain_at(transcript: Transcript, segment: int, word: int, probability: float) -> Transcript:
    """Every word sure (0.95) but one."""
    segments = [
        replace(
            s,
            words=tuple(
                replace(w, probability=probability if (n, m) == (segment, word) else 0.95)
                for m, w in enumerate(s.words)
            ),
        )
        for n, s in enumerate(transcript.segments)
    ]
    return replace(transcript, segments=tuple(segments))


def test_uncertain_words_are_explained_by_a_legend_and_their_tooltip(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, call_transcript
) -> None:
    window = open_window(start_worker=False)
    segment = next(n for n, s in enumerate(call_transcript.segments) if len(s.words) >= 4)
    doubtful = window.store.add_transcribed(
        sample_dir / "sample.wav", JobOptions(), uncertain_at(call_transcript, segment, 2, 0.23)
    )
    sure = window.store.add_transcribed(
        sample_dir / "sample.wav", JobOptions(), uncertain_at(call_transcript, -1, -1, 0.0)
    )
    window.refresh()
    view, editor = window.transcript_view, window.transcript_view.editor

    def legends() -> list[QLabel]:
        return [label for label in view.findChildren(QLabel) if "underline" in label.text() and label.isVisible()]

    window.select_job(sure.id)
    qtbot.waitUntil(lambda: view.job_id == sure.id, timeout=5000)
    assert legends() == []  # nothing underlined, nothing to explain

    window.select_job(doubtful.id)
    qtbot.waitUntil(lambda: view.job_id == doubtful.id, timeout=5000)
    assert len(legends()) == 1 and "unsure" in legends()[0].text()
    # Pointing at the underlined word says how sure the recognizer was.
    number, index = next(
        (n, i)
        for n, spans in enumerate(editor.spans)
        for i, span in enumerate(spans)
        if (span.segment, span.token) == (segment, 2)
    )
    point = editor.word_rect(number, index).center()
    QToolTip.hideText()
    event = QHelpEvent(QEvent.Type.ToolTip, point, editor.viewport().mapToGlobal(point))
    QApplication.sendEvent(editor.viewport(), event)
    qtbot.waitUntil(lambda: "23%" in QToolTip.text(), timeout=3000)
    assert "confidence" in QToolTip.text()


def test_a_click_that_plays_leaves_no_cursor_for_a_stray_key_and_editing_is_asked_for(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, call_transcript
) -> None:
    window, job, view = open_on_call(open_window, qtbot, sample_dir, call_transcript)
    activate(window, qtbot)
    editor = view.editor
    number = first_wordy_paragraph(view)
    before = editor.toPlainText()
    qtbot.mouseClick(editor.viewport(), Qt.MouseButton.LeftButton, pos=editor.word_rect(number, 2).center())
    assert editor.playing == (number, 2)  # the click played the word
    assert editor.viewport().cursor().shape() == Qt.CursorShape.PointingHandCursor  # the pointer said it would
    view.stop_playback()
    for key in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace, Qt.Key.Key_X, Qt.Key.Key_Space):
        qtbot.keyClick(editor, key)
    view.commit_pending()  # as switching jobs or closing would
    window.store.flush_transcripts()
    assert editor.toPlainText() == before
    assert stored(window, job.id) == call_transcript and view.undo_stack.count() == 0
    # Reading still copies: words selected with the mouse, Ctrl+C.
    start = editor.document().findBlockByNumber(number).position()
    qtbot.mouseClick(editor.viewport(), Qt.MouseButton.LeftButton, pos=editor.word_rect(number, 0).center())
    selection = editor.textCursor()
    selection.setPosition(start)
    selection.setPosition(start + editor.spans[number][1].end, selection.MoveMode.KeepAnchor)
    editor.setTextCursor(selection)
    QApplication.clipboard().clear()
    qtbot.keyClick(editor, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.clipboard().text() == selection.selectedText()
    view.stop_playback()

    # A double-click on a word asks to edit it: the word is selected and typing replaces it.
    text = editor.document().findBlockByNumber(number).text()
    words = [text[span.start : span.end] for span in editor.spans[number]]
    index = next(n for n, word in enumerate(words) if n != 2 and word.isalpha())  # a word Qt selects whole
    word = words[index]
    qtbot.mouseDClick(editor.viewport(), Qt.MouseButton.LeftButton, pos=editor.word_rect(number, index).center())
    assert editor.textCursor().selectedText() == word
    assert editor.viewport().cursor().shape() == Qt.CursorShape.IBeamCursor
    qtbot.keyClicks(editor, "Zebra")
    # While editing, a click puts the cursor and does not play.
    view.highlight_at(0.0)
    playing = editor.playing
    qtbot.mouseClick(editor.viewport(), Qt.MouseButton.LeftButton, pos=editor.word_rect(number + 1, 1).center())
    assert editor.playing == playing
    qtbot.waitUntil(lambda: "Zebra" in paragraph_text(stored(window, job.id), view.paragraphs[number]), timeout=3000)
    # Esc ends editing: keys are stray again.
    qtbot.keyClick(editor, Qt.Key.Key_Escape)
    edited = editor.toPlainText()
    qtbot.keyClick(editor, Qt.Key.Key_Delete)
    view.commit_pending()
    assert editor.toPlainText() == edited and view.undo_stack.count() == 1


def test_a_finished_job_opens_when_nothing_else_is_being_read(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, tmp_path: Path
) -> None:
    paths = [tmp_path / f"{name} call.wav" for name in ("first", "second", "third")]
    for path in paths:
        shutil.copy(sample_dir / "sample.wav", path)
    window = open_window()
    jobs = window.add_paths(paths)
    view, table, model = window.transcript_view, window.table, window.model

    def finished_here(job_id: int) -> bool:  # the window has heard (its row says done)
        row = model.row_of(job_id)
        return row is not None and model.jobs[row].state is JobState.DONE

    # The person looks at the second row while the first is transcribed: a line saying it is queued.
    window.select_job(jobs[1].id)
    qtbot.waitUntil(lambda: "queued" in view.title.text(), timeout=5000)
    qtbot.waitUntil(lambda: view.job_id == jobs[0].id, timeout=120_000)
    assert window.selected_job_id() == jobs[0].id
    # Now a transcript is being read: the second job finishing does not take its place.
    qtbot.waitUntil(lambda: finished_here(jobs[1].id), timeout=120_000)
    assert view.job_id == jobs[0].id

    # Rows picked to act on (a click, a Ctrl+click): the third finishing leaves them picked and opens nothing.
    def point(job_id: int) -> QPoint:
        return table.visualRect(model.index(model.row_of(job_id), 0)).center()

    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=point(jobs[1].id))
    qtbot.mouseClick(
        table.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier, point(jobs[2].id)
    )
    assert set(table.selected_job_ids()) == {jobs[1].id, jobs[2].id} and view.job_id is None
    qtbot.waitUntil(lambda: finished_here(jobs[2].id), timeout=120_000)
    assert set(table.selected_job_ids()) == {jobs[1].id, jobs[2].id} and view.job_id is None


def test_switching_jobs_leaves_no_search_or_highlight_behind(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, call_transcript, qtlog
) -> None:
    window, job, view = open_on_call(open_window, qtbot, sample_dir, call_transcript)
    editor = view.editor
    short = replace(call_transcript, segments=call_transcript.segments[:3])
    other = window.store.add_transcribed(sample_dir / "sample.wav", JobOptions(), short)
    window.refresh()
    needle = editor.toPlainText().split()[-2]
    view.search.setText(needle)
    assert view.match_label.text()
    last = len(view.paragraphs) - 1
    qtbot.mouseClick(editor.viewport(), Qt.MouseButton.LeftButton, pos=editor.word_rect(last, 1).center())
    assert editor.playing is not None and editor.playing[0] == last

    window.select_job(other.id)
    qtbot.waitUntil(lambda: view.job_id == other.id, timeout=5000)
    assert view.search.text() == "" and view.match_label.text() == ""
    assert [s for s in editor.extraSelections() if s.cursor.hasSelection()] == []
    assert editor.playing is None and view.timeline.position is None
    view.find_next()
    window.select_job(job.id)
    qtbot.waitUntil(lambda: view.job_id == job.id, timeout=5000)
    assert view.search.text() == ""
    problems = [record.message for record in qtlog.records if "out of range" in record.message]
    assert problems == []


def test_redo_on_its_standard_key_after_an_undo(open_window, qtbot, sample_dir: Path, call_transcript, qtlog) -> None:  # type: ignore[no-untyped-def]
    window, job, view = open_on_call(open_window, qtbot, sample_dir, call_transcript)
    activate(window, qtbot)
    old = call_transcript.speakers[0]
    view.rename_speaker(old, "Ana")
    redo = (Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    # With the keyboard in the queue, then in the document: Ctrl+Z undoes, Ctrl+Shift+Z redoes.
    for widget in (window.table, view.editor):
        widget.setFocus()
        qtbot.waitUntil(widget.hasFocus, timeout=3000)
        qtbot.keyClick(widget, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
        assert old in stored(window, job.id).speakers and "Ana" not in stored(window, job.id).speakers
        qtbot.keyClick(widget, *redo)
        assert "Ana" in stored(window, job.id).speakers, type(widget).__name__
    assert [record.message for record in qtlog.records if "Ambiguous" in record.message] == []


def test_redo_is_one_key_on_an_x_desktop(sample_dir: Path, call_transcript, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """On X (GNOME, KDE, a bare X server) Redo's standard key is Ctrl+Shift+Z, which the offscreen platform
    does not use (Ctrl+Y there): the window runs on a private Xvfb in a child process, which reports back."""
    saved = tmp_path / "call.json"
    saved.write_text(json.dumps(call_transcript.to_dict()))
    with xvfb() as display:
        env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb"}
        child = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).with_name("redo_on_x11.py")),
                str(tmp_path),
                str(sample_dir / "sample.wav"),
                str(saved),
            ],
            env=env,
            cwd=Path(__file__).parents[2],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert child.returncode == 0, child.stderr[-2000:]
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert report["platform"] == "xcb" and report["redo keys"] == "Ctrl+Shift+Z"
    assert report["active"] and report["undone"]
    assert report["redone"] and report["ambiguous"] == []


def test_playback_over_a_paragraph_being_typed_in_warns_nothing(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, call_transcript, qtlog
) -> None:
    """The word being heard is marked where the document last put it: in a paragraph shortened by typing not
    read back yet, the last words' places lie past its end (Qt: "QTextCursor::setPosition: Position … out of
    range")."""
    window, job, view = open_on_call(open_window, qtbot, sample_dir, call_transcript)
    editor = view.editor
    number = max(n for n, spans in enumerate(editor.spans) if len(spans) >= 3)  # past its end: the document's
    last = editor.spans[number][-1]
    heard = call_transcript.segments[last.segment].words[last.token].start
    view.edit_button.click()
    block = editor.document().findBlockByNumber(number)
    cursor = editor.textCursor()
    cursor.setPosition(block.position() + block.length() - 1)
    editor.setTextCursor(cursor)
    for _ in range(last.end - editor.spans[number][1].start):
        qtbot.keyClick(editor, Qt.Key.Key_Backspace)  # the paragraph down to its first word, still being typed
    assert editor.has_pending_edits()
    view.highlight_at(heard + 0.001)  # as the player's position update would
    view.highlight_at(heard + 0.002)
    assert [record.message for record in qtlog.records if "out of range" in record.message] == []
    # Nothing marked outside the paragraph's text as it is now (no other paragraph's words).
    block = editor.document().findBlockByNumber(number)
    marked = [s.cursor for s in editor.extraSelections() if s.cursor.hasSelection()]
    assert all(
        block.position() <= c.selectionStart() and c.selectionEnd() < block.position() + block.length() for c in marked
    )
    qtbot.keyClick(editor, Qt.Key.Key_Escape)  # read back: the paragraph is one word now
    qtbot.waitUntil(lambda: not editor.has_pending_edits(), timeout=3000)
    assert len(paragraph_text(stored(window, job.id), view.paragraphs[number]).split()) == 1
