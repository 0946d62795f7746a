"""The transcript editor rewrites only what an edit changed, and saves off the window's thread: the document must
still read exactly as the transcript does, after every kind of edit, undo and redo."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QApplication, QMessageBox

from app.core.files import write_atomic
from app.core.queue.jobs import JobOptions
from app.core.transcript.document import Segment, Transcript, Word
from app.gui.transcript.editor import TranscriptEditor

SPEAKERS = ("SPEAKER_00", "SPEAKER_01", "SPEAKER_02")
PARAGRAPHS = 60


def meeting() -> Transcript:
    """60 turns of three speakers, one or two segments each; every 7th word unsure; one segment without word
    timings (a dictation pasted in); a word outside the Basic Multilingual Plane and one with an accent."""
    segments: list[Segment] = []
    now = 0.0
    for paragraph in range(PARAGRAPHS):
        speaker = SPEAKERS[paragraph % 3]
        for part in range(1 + paragraph % 2):
            if paragraph == 10 and part == 0:
                segments.append(Segment(now, now + 2.0, " untimed words were typed here", (), speaker))
                now += 2.0
                continue
            words = []
            for number in range(4 + (paragraph + part) % 5):
                text = f"p{paragraph}s{part}w{number}"
                if (paragraph, part, number) == (20, 0, 1):
                    text = "𝄞clef"
                if (paragraph, part, number) == (21, 0, 2):
                    text = "café"
                probability = 0.3 if (paragraph + number) % 7 == 0 else 0.9
                words.append(Word(now, now + 0.4, " " + text, probability, speaker))
                now += 0.5
            segments.append(
                Segment(words[0].start, words[-1].end, "".join(w.word for w in words), tuple(words), speaker)
            )
        now += 0.3
    return Transcript("meeting.wav", now + 1.0, "en", "tiny.en", "cpu", "int8", tuple(segments), speakers=SPEAKERS)


def open_meeting(open_window, qtbot, tmp_path: Path):  # type: ignore[no-untyped-def]
    window = open_window(start_worker=False)
    job = window.store.add_transcribed(tmp_path / "meeting.wav", JobOptions(), meeting())
    window.refresh()
    window.select_job(job.id)
    view = window.transcript_view
    qtbot.waitUntil(lambda: view.job_id == job.id, timeout=5000)
    return window, job, view


def utf16_slice(text: str, start: int, end: int) -> str:
    """``text[start:end]`` in the units Qt counts positions in."""
    return text.encode("utf-16-le")[2 * start : 2 * end].decode("utf-16-le")


def words_of(transcript: Transcript, segments: tuple[int, ...]) -> list[str]:
    found: list[str] = []
    for index in segments:
        segment = transcript.segments[index]
        found += [w.word.strip() for w in segment.words if w.word.strip()] if segment.words else segment.text.split()
    return found


def underlines(editor: TranscriptEditor) -> list[list[bool]]:
    marked = []
    for number, spans in enumerate(editor.spans):
        block = editor.document().findBlockByNumber(number)
        row = []
        for span in spans:
            cursor = QTextCursor(block)
            cursor.setPosition(block.position() + span.end)  # the format of the word's last character
            row.append(cursor.charFormat().underlineStyle() == QTextCharFormat.UnderlineStyle.WaveUnderline)
        marked.append(row)
    return marked


def assert_reads_as_transcript(view) -> None:  # type: ignore[no-untyped-def]
    """Every block holds its paragraph's words, each span points at its word, unsure words (and only those) are
    marked, and all of it is what a fresh render of the same transcript gives."""
    editor, transcript = view.editor, view.transcript
    document = editor.document()
    assert document.blockCount() == len(view.paragraphs) == len(editor.spans)
    for number, paragraph in enumerate(view.paragraphs):
        text = document.findBlockByNumber(number).text()
        assert text == " ".join(words_of(transcript, paragraph.segments)), number
        for span in editor.spans[number]:
            segment = transcript.segments[span.segment]
            expected = segment.words[span.token].word.strip() if segment.words else segment.text.split()[span.token]
            assert utf16_slice(text, span.start, span.end) == expected, (number, span)
            assert span.seconds == (segment.words[span.token].start if segment.words else segment.start)
    for number, row in enumerate(underlines(editor)):
        for span, marked in zip(editor.spans[number], row, strict=True):
            segment = transcript.segments[span.segment]
            assert marked == (bool(segment.words) and segment.words[span.token].probability < 0.5), (number, span)
    fresh = TranscriptEditor()
    fresh.set_transcript(transcript, view.paragraphs)
    assert fresh.toPlainText() == editor.toPlainText()
    assert fresh.spans == editor.spans
    assert underlines(fresh) == underlines(editor)
    fresh.deleteLater()


def select_words(view, paragraph: int, first: int, last: int | None = None) -> None:  # type: ignore[no-untyped-def]
    editor = view.editor
    block = editor.document().findBlockByNumber(paragraph)
    cursor = QTextCursor(block)
    cursor.setPosition(block.position() + editor.spans[paragraph][first].start)
    if last is not None:
        cursor.setPosition(block.position() + editor.spans[paragraph][last].end, QTextCursor.MoveMode.KeepAnchor)
    editor.setTextCursor(cursor)


def test_every_kind_of_edit_undo_and_redo_leaves_the_document_reading_as_the_transcript(  # type: ignore[no-untyped-def]
    open_window, qtbot, tmp_path: Path
) -> None:
    window, job, view = open_meeting(open_window, qtbot, tmp_path)
    editor = view.editor
    original = view.transcript
    assert_reads_as_transcript(view)
    view.rename_speaker("SPEAKER_01", "Ana")
    assert_reads_as_transcript(view)
    select_words(view, 30, 1, 2)
    assert view.give_to_speaker("Guest")  # words in the middle: the paragraph becomes three
    assert_reads_as_transcript(view)
    select_words(view, 20, 0, len(editor.spans[20]) - 1)
    assert view.give_to_speaker(view.paragraphs[19].speaker)  # a whole paragraph joins its neighbours' turn
    assert_reads_as_transcript(view)
    select_words(view, 40, 2)
    assert view.give_to_speaker("Guest")  # a split: the rest of paragraph 40 is the guest's
    assert_reads_as_transcript(view)
    editor.setTextCursor(QTextCursor(editor.document().findBlockByNumber(41)))
    assert view.merge_with_previous()
    assert_reads_as_transcript(view)
    select_words(view, 0, 0, len(editor.spans[0]) - 1)
    assert view.give_to_speaker("SPEAKER_02")  # the first paragraph
    assert_reads_as_transcript(view)
    last = len(view.paragraphs) - 1
    editor.setTextCursor(QTextCursor(editor.document().findBlockByNumber(last)))
    assert view.merge_with_previous()  # the last one
    assert_reads_as_transcript(view)

    # Typing: a word replaced, a word removed, stray spaces; read back when the cursor leaves the paragraph.
    view.edit_button.click()
    select_words(view, 10, 1, 1)
    qtbot.keyClicks(editor, "Okafor  ")
    select_words(view, 12, 0, 0)
    qtbot.waitUntil(lambda: "Okafor" in view.transcript.segments[view.paragraphs[10].segments[0]].text, timeout=5000)
    assert_reads_as_transcript(view)
    select_words(view, 25, 0, len(editor.spans[25]) - 1)
    qtbot.keyClick(editor, Qt.Key.Key_Delete)
    editor.setTextCursor(QTextCursor(editor.document().findBlockByNumber(27)))
    qtbot.waitUntil(lambda: editor.document().blockCount() == len(view.paragraphs), timeout=5000)
    qtbot.waitUntil(lambda: not editor.has_pending_edits(), timeout=5000)
    assert_reads_as_transcript(view)

    steps = view.undo_stack.count()
    for _ in range(steps):
        view.undo()
        assert_reads_as_transcript(view)
    assert view.transcript == original
    for _ in range(steps):
        view.redo()
        assert_reads_as_transcript(view)
    window.store.flush_transcripts()
    assert window.store.load_transcript(job.id) == view.transcript


def test_a_rename_changes_that_speakers_labels_and_no_letter_of_the_text(open_window, qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _window, _job, view = open_meeting(open_window, qtbot, tmp_path)
    editor = view.editor
    before_text = editor.toPlainText()
    before_speakers = [paragraph.speaker for paragraph in view.paragraphs]
    changes: list[tuple[int, int, int]] = []
    editor.document().contentsChange.connect(lambda *change: changes.append(change))

    view.rename_speaker("SPEAKER_01", "Ana")
    assert [paragraph.speaker for paragraph in view.paragraphs] == [
        "Ana" if speaker == "SPEAKER_01" else speaker for speaker in before_speakers
    ]
    assert changes == [] and editor.toPlainText() == before_text  # drawn in the margin, not written again

    # A whole paragraph given to a new speaker: the same words, so no text changes either.
    select_words(view, 30, 0, len(editor.spans[30]) - 1)
    assert view.give_to_speaker("Guest")
    assert view.paragraphs[30].speaker == "Guest" and changes == []
    # A split rewrites that paragraph alone: every change lies inside it.
    start = editor.document().findBlockByNumber(40).position()
    end = start + editor.document().findBlockByNumber(40).length()
    select_words(view, 40, 2)
    assert view.give_to_speaker("Guest")
    assert changes and all(start <= position and position + removed <= end for position, removed, _ in changes)
    assert editor.toPlainText().split() == before_text.split()  # the same words, one more paragraph
    assert_reads_as_transcript(view)


def test_the_speaker_strip_follows_edits_and_playback(open_window, qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    window, _job, view = open_meeting(open_window, qtbot, tmp_path)
    window.resize(1000, 700)
    timeline, editor = view.timeline, view.editor
    qtbot.waitUntil(lambda: timeline.width() > 300, timeout=3000)

    def colour_at(seconds: float) -> str:
        image = timeline.grab().toImage()
        return QColor(image.pixel(int(timeline.x_of(seconds)), timeline.height() // 2)).name()

    paragraph = view.paragraphs[30]
    middle = (paragraph.start + paragraph.end) / 2
    assert colour_at(middle) == editor.colour_of(paragraph.speaker).name()
    select_words(view, 30, 0, len(editor.spans[30]) - 1)
    assert view.give_to_speaker("Guest")
    assert editor.colour_of("Guest").name() != editor.colour_of(paragraph.speaker).name()
    assert colour_at(middle) == editor.colour_of("Guest").name()

    # The playback mark moves: drawn where playback is, gone from where it was.
    text = editor.palette().color(QPalette.ColorRole.Text).name()
    here = view.transcript.duration * 100 / timeline.width()
    there = view.transcript.duration * 300 / timeline.width()
    view.highlight_at(here)
    image = timeline.grab().toImage()
    assert text in {QColor(image.pixel(x, 1)).name() for x in (99, 100)}
    view.highlight_at(there)
    image = timeline.grab().toImage()
    assert text in {QColor(image.pixel(x, 1)).name() for x in (299, 300)}
    assert text not in {QColor(image.pixel(x, 1)).name() for x in range(96, 104)}


def test_search_counts_every_match_and_marks_those_in_view_wherever_the_reader_scrolls(  # type: ignore[no-untyped-def]
    open_window, qtbot, tmp_path: Path
) -> None:
    window, _job, view = open_meeting(open_window, qtbot, tmp_path)
    window.resize(900, 500)
    editor = view.editor
    qtbot.waitUntil(lambda: editor.verticalScrollBar().maximum() > 0, timeout=3000)
    transcript = meeting()
    expected = sum(
        " ".join(words_of(transcript, paragraph.segments)).lower().count("w1") for paragraph in view.paragraphs
    )
    view.search.setFocus()
    qtbot.keyClicks(view.search, "W1")
    assert view.match_label.text() == f"{expected} match(es)"

    def marked_blocks() -> set[int]:  # matches are marked translucent (the word being played is opaque)
        return {
            selection.cursor.blockNumber()
            for selection in editor.extraSelections()
            if selection.cursor.selectedText().lower() == "w1" and selection.format.background().color().alpha() < 255
        }

    editor.verticalScrollBar().setValue(0)
    qtbot.waitUntil(lambda: 0 in marked_blocks(), timeout=3000)
    editor.verticalScrollBar().setValue(editor.verticalScrollBar().maximum())
    last = len(view.paragraphs) - 1
    qtbot.waitUntil(lambda: last in marked_blocks(), timeout=3000)
    view.search.clear()
    assert marked_blocks() == set() and view.match_label.text() == ""


def test_an_edit_is_saved_off_the_windows_thread_and_on_disk_when_the_window_closes(  # type: ignore[no-untyped-def]
    open_window, qtbot, tmp_path: Path
) -> None:
    window, job, view = open_meeting(open_window, qtbot, tmp_path)
    window.store.flush_transcripts()
    writers: list[str] = []

    def profile(frame, event, _arg):  # type: ignore[no-untyped-def]
        if event == "call" and frame.f_code is write_atomic.__code__:
            writers.append(threading.current_thread().name)

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        view.rename_speaker("SPEAKER_00", "Okafor")
        qtbot.waitUntil(lambda: window.statusBar().currentMessage() == "Saved.", timeout=10_000)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert writers and threading.main_thread().name not in writers

    view.rename_speaker("Okafor", "Okafor Jr")
    window.close()
    text = (tmp_path / "data" / "transcripts" / f"{job.id}.json").read_text(encoding="utf-8")
    assert "Okafor Jr" in text and '"Okafor"' not in text


def test_a_save_that_fails_says_so_in_the_window(open_window, qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    window, job, view = open_meeting(open_window, qtbot, tmp_path)
    stored = window.store.transcript_file(job.id)
    stored.unlink()
    stored.mkdir()  # a folder where the transcript goes: the rename onto it fails
    view.rename_speaker("SPEAKER_00", "Okafor")

    def box() -> QMessageBox | None:
        return next((w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()), None)

    qtbot.waitUntil(lambda: box() is not None, timeout=10_000)
    shown = box()
    assert shown is not None and "could not be saved" in shown.text() and str(stored) in shown.text()
    shown.close()
    stored.rmdir()
