"""The transcript editor in the real window, on the real engine's transcript of a real phone call."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtGui import QColor, QPalette, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QApplication

from app.core.queue.jobs import JobOptions
from app.core.transcript.edit import paragraph_text


def open_on_call(open_window, qtbot, sample_dir: Path, call_transcript, data: Path | None = None):  # type: ignore[no-untyped-def]
    window = open_window(data=data, start_worker=False)
    job = window.store.add_transcribed(sample_dir / "sample.wav", JobOptions(), call_transcript)
    window.refresh()
    window.select_job(job.id)
    view = window.transcript_view
    qtbot.waitUntil(lambda: view.job_id == job.id, timeout=5000)
    return window, job, view


def select_words(view, paragraph: int, first: int, last: int) -> None:  # type: ignore[no-untyped-def]
    """Select words ``first``..``last`` of a paragraph, as a drag over them would."""
    editor = view.editor
    block = editor.document().findBlockByNumber(paragraph)
    cursor = QTextCursor(block)
    cursor.setPosition(block.position() + editor.spans[paragraph][first].start)
    cursor.setPosition(block.position() + editor.spans[paragraph][last].end, QTextCursor.MoveMode.KeepAnchor)
    editor.setTextCursor(cursor)


def first_wordy_paragraph(view) -> int:  # type: ignore[no-untyped-def]
    """The first paragraph with six words or more (the call opens with one-word turns: "Hello?", "Hello.")."""
    return next(n for n in range(len(view.paragraphs)) if len(view.editor.spans[n]) >= 6)


def stored(window, job_id: int):  # type: ignore[no-untyped-def]
    return window.store.load_transcript(job_id)


def test_the_transcript_reads_as_speaker_paragraphs(open_window, qtbot, sample_dir: Path, call_transcript) -> None:  # type: ignore[no-untyped-def]
    window, _job, view = open_on_call(open_window, qtbot, sample_dir, call_transcript)
    editor = view.editor
    # Consecutive segments of one speaker are one paragraph; the speaker changes from paragraph to paragraph.
    assert 1 < len(view.paragraphs) < len(call_transcript.segments)
    speakers = [paragraph.speaker for paragraph in view.paragraphs]
    assert all(a != b for a, b in itertools.pairwise(speakers))
    assert editor.document().blockCount() == len(view.paragraphs)
    for number, paragraph in enumerate(view.paragraphs):
        assert editor.document().findBlockByNumber(number).text() == paragraph_text(call_transcript, paragraph)
    # Against the transcript itself, not the editor's own helpers: every segment once, in order, under its
    # own speaker, and the blocks hold every word of the transcript in order.
    assert [index for paragraph in view.paragraphs for index in paragraph.segments] == list(
        range(len(call_transcript.segments))
    )
    for paragraph in view.paragraphs:
        assert {call_transcript.segments[index].speaker for index in paragraph.segments} == {paragraph.speaker}
    shown = " ".join(editor.document().findBlockByNumber(n).text() for n in range(len(view.paragraphs))).split()
    spoken = [w.word.strip() for s in call_transcript.segments for w in s.words if w.word.strip()]
    assert shown == spoken
    # Text wraps inside the window instead of being cut off.
    window.resize(800, 600)
    longest = max(range(len(view.paragraphs)), key=lambda n: len(editor.document().findBlockByNumber(n).text()))
    qtbot.waitUntil(lambda: editor.document().findBlockByNumber(longest).layout().lineCount() > 1, timeout=3000)
    assert editor.horizontalScrollBar().maximum() == 0
    # The margin is sized in the font (a large font, a 4K screen): the times and names still fit.
    small = editor.viewportMargins().left()
    font = editor.font()
    font.setPointSizeF(font.pointSizeF() * 2)
    editor.setFont(font)
    assert editor.viewportMargins().left() > 1.5 * small and editor.margin.width() == editor.viewportMargins().left()

    # Words Whisper was unsure of are marked (and say so); sure ones are not.
    doubtful = [
        (number, index)
        for number, spans in enumerate(editor.spans)
        for index, span in enumerate(spans)
        if call_transcript.segments[span.segment].words[span.token].probability < 0.5
    ]
    assert doubtful, "the call has words tiny.en is unsure of"

    def format_at(number: int, index: int) -> QTextCharFormat:
        block = editor.document().findBlockByNumber(number)
        cursor = QTextCursor(block)
        cursor.setPosition(block.position() + editor.spans[number][index].start + 1)
        return cursor.charFormat()

    number, index = doubtful[0]
    assert format_at(number, index).underlineStyle() == QTextCharFormat.UnderlineStyle.WaveUnderline
    assert "confidence" in format_at(number, index).toolTip()
    sure = next(
        (n, i)
        for n, spans in enumerate(editor.spans)
        for i, span in enumerate(spans)
        if call_transcript.segments[span.segment].words[span.token].probability > 0.9
    )
    assert format_at(*sure).underlineStyle() == QTextCharFormat.UnderlineStyle.NoUnderline

    # Speaker colours come from the palette: dark text on a light base, light text on a dark one.
    names = call_transcript.speakers
    light = {editor.colour_of(name).name() for name in names}
    assert len(light) == len(names) and all(editor.colour_of(name).lightness() < 128 for name in names)
    dark = QPalette(editor.palette())
    dark.setColor(QPalette.ColorRole.Base, QColor("#1e1e1e"))
    dark.setColor(QPalette.ColorRole.Text, QColor("#e0e0e0"))
    editor.setPalette(dark)
    assert all(editor.colour_of(name).lightness() > 128 for name in names)


def test_click_a_word_to_play_from_it_and_the_playing_word_is_marked(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, call_transcript
) -> None:
    _window, _job, view = open_on_call(open_window, qtbot, sample_dir, call_transcript)
    editor = view.editor
    number = len(view.paragraphs) // 2
    starts = [span.seconds for span in editor.spans[number]]
    # A word in the middle whose start differs from the next word's (the aligner may give two words one start).
    index = next(n for n in range(len(starts) // 2, len(starts) - 1) if starts[n] < starts[n + 1])
    span = editor.spans[number][index]
    view.speed_box.setCurrentIndex(view.speed_box.findData(1.5))
    qtbot.mouseClick(editor.viewport(), Qt.MouseButton.LeftButton, pos=editor.word_rect(number, index).center())
    assert editor.playing == (number, index)
    word = call_transcript.segments[span.segment].words[span.token]
    assert editor.playing_word() == word.word.strip()
    player = view._player
    assert player is not None and player.source().toLocalFile() == str(sample_dir / "sample.wav")
    assert player.playbackRate() == 1.5
    qtbot.waitUntil(lambda: player.position() >= int(word.start * 1000), timeout=5000)
    view.stop_playback()
    # A click on a paragraph's time in the margin plays that paragraph from its first word.
    margin_y = editor.word_rect(number + 1, 0).center().y()
    qtbot.mouseClick(editor.margin, Qt.MouseButton.LeftButton, pos=QPoint(20, margin_y))
    assert editor.playing == (number + 1, 0)
    view.stop_playback()

    # The strip of speaker turns: each paragraph in its speaker's colour; a click plays from that moment.
    timeline = view.timeline
    paragraph = view.paragraphs[-1]
    middle = (paragraph.start + paragraph.end) / 2
    image = timeline.grab().toImage()
    pixel = QColor(image.pixel(int(timeline.x_of(middle)), timeline.height() // 2))
    assert pixel.name() == editor.colour_of(paragraph.speaker).name()
    qtbot.mouseClick(timeline, Qt.MouseButton.LeftButton, pos=QPoint(int(timeline.x_of(middle)), 5))
    assert view.playing_paragraph == len(view.paragraphs) - 1
    assert abs(timeline.position - middle) < call_transcript.duration / timeline.width() + 0.01
    qtbot.waitUntil(lambda: player.position() >= int(paragraph.start * 1000), timeout=5000)
    view.stop_playback()

    # As the audio advances (positionChanged), the mark moves from word to word.
    following = editor.spans[number][index + 1]
    view.highlight_at(call_transcript.segments[following.segment].words[following.token].start + 0.001)
    assert editor.playing == (number, index + 1)
    marked = [selection for selection in editor.extraSelections() if selection.cursor.hasSelection()]
    assert marked[-1].cursor.selectedText() == editor.playing_word()
    assert marked[-1].format.background().color() == editor.palette().color(QPalette.ColorRole.Highlight)

    # Following playback scrolls the word into view; without it, the page stays where the reader put it.
    view.window().resize(800, 300)
    qtbot.waitUntil(lambda: editor.verticalScrollBar().maximum() > 0, timeout=3000)
    last = len(view.paragraphs) - 1
    editor.verticalScrollBar().setValue(0)
    view.follow_box.setChecked(False)
    view.highlight_at(view.paragraphs[last].start + 0.01)
    assert editor.verticalScrollBar().value() == 0
    view.highlight_at(0.0)
    view.follow_box.setChecked(True)
    view.highlight_at(view.paragraphs[last].start + 0.01)
    assert editor.verticalScrollBar().value() > 0
    assert editor.viewport().rect().contains(editor.word_rect(*editor.playing))


def test_typed_corrections_keep_word_timings_undo_and_survive_a_restart_into_every_export(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, call_transcript, tmp_path: Path
) -> None:
    window, job, view = open_on_call(open_window, qtbot, sample_dir, call_transcript)
    editor = view.editor
    wordy = first_wordy_paragraph(view)
    span = editor.spans[wordy][1]
    old_word = call_transcript.segments[span.segment].words[span.token]
    select_words(view, wordy, 1, 1)
    view.edit_button.click()  # the text takes typing once asked to (a click plays, it does not edit)
    qtbot.keyClicks(editor, "Greetings")
    # Leaving the paragraph reads it back (and saves it).
    cursor = QTextCursor(editor.document().findBlockByNumber(wordy + 1))
    editor.setTextCursor(cursor)
    qtbot.waitUntil(lambda: "Greetings" in stored(window, job.id).segments[span.segment].text, timeout=3000)
    edited = stored(window, job.id)
    words = edited.segments[span.segment].words
    new_word = words[span.token]
    assert new_word.word.strip() == "Greetings" and (new_word.start, new_word.end) == (old_word.start, old_word.end)
    unchanged = [w for n, w in enumerate(call_transcript.segments[span.segment].words) if n != span.token]
    assert [w for n, w in enumerate(words) if n != span.token] == unchanged  # timings and confidence kept
    assert edited.segments[span.segment + 1 :] == call_transcript.segments[span.segment + 1 :]

    assert editor.document().findBlockByNumber(wordy).text().split()[1] == "Greetings"
    # Stray spaces typed and left are tidied when the paragraph is read back; the words are unchanged.
    cursor = QTextCursor(editor.document().findBlockByNumber(wordy))
    cursor.setPosition(cursor.block().position() + editor.spans[wordy][1].end)
    editor.setTextCursor(cursor)
    qtbot.keyClicks(editor, "   ")
    editor.setTextCursor(QTextCursor(editor.document().findBlockByNumber(wordy + 1)))
    qtbot.waitUntil(lambda: "   " not in editor.document().findBlockByNumber(wordy).text(), timeout=3000)
    assert stored(window, job.id) == edited and view.undo_stack.count() == 1

    # Ctrl+Z and Ctrl+Shift+Z in the document go through the transcript's history (and are saved too).
    qtbot.keyClick(editor, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert stored(window, job.id).segments == call_transcript.segments
    assert "Greetings" not in editor.toPlainText()
    qtbot.keyClick(editor, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert stored(window, job.id).segments[span.segment].words[span.token].word.strip() == "Greetings"

    # Typing, then closing the window at once: the words are kept.
    last = len(view.paragraphs) - 1
    block = editor.document().findBlockByNumber(last)
    end = QTextCursor(block)
    end.setPosition(block.position() + block.length() - 1)
    editor.setTextCursor(end)
    qtbot.keyClicks(editor, " Goodbye")
    window.close()

    again = open_window(data=tmp_path / "data", start_worker=False)
    again.select_job(job.id)
    qtbot.waitUntil(lambda: again.transcript_view.job_id == job.id, timeout=5000)
    text = again.transcript_view.editor.toPlainText()
    assert "Greetings" in text and text.rstrip().endswith("Goodbye")
    result = again.export_job(job.id, tmp_path / "out", ("txt", "srt", "vtt", "json"))
    assert not result.failed and len(result.written) == 4
    for path in result.written:
        exported = path.read_text()
        assert "Greetings" in exported and "Goodbye" in exported, path.name
    words = [
        w["word"].strip()
        for s in json.loads((tmp_path / "out" / "sample.json").read_text())["segments"]
        for w in s["words"]
    ]
    assert "Greetings" in words and "Goodbye" in words


def test_move_words_to_a_speaker_split_merge_and_rename_each_undoable(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, call_transcript
) -> None:
    window, job, view = open_on_call(open_window, qtbot, sample_dir, call_transcript)
    editor = view.editor
    wordy = first_wordy_paragraph(view)
    before = [(p.speaker, paragraph_text(call_transcript, p)) for p in view.paragraphs]
    first_words = editor.document().findBlockByNumber(wordy).text().split()

    # Two words from the first paragraph's middle were said by a third person.
    select_words(view, wordy, 2, 3)
    assert view.change_speaker("Guest")  # as "Change the selected words' speaker…" › a new name does
    after = [(p.speaker, paragraph_text(stored(window, job.id), p)) for p in view.paragraphs]
    assert after[wordy : wordy + 3] == [
        (before[wordy][0], " ".join(first_words[:2])),
        ("Guest", " ".join(first_words[2:4])),
        (before[wordy][0], " ".join(first_words[4:])),
    ]
    assert "Guest" in stored(window, job.id).speakers
    assert [view.speaker_box.itemText(i) for i in range(view.speaker_box.count())][-1] == "Guest"

    # Merging the guest's words into the paragraph before gives them that speaker; the guest is gone.
    cursor = QTextCursor(editor.document().findBlockByNumber(wordy + 1))
    editor.setTextCursor(cursor)
    assert view.merge_with_previous()
    assert [(p.speaker, paragraph_text(stored(window, job.id), p)) for p in view.paragraphs] == before
    assert "Guest" not in stored(window, job.id).speakers

    # Split at a word with no selection: the rest of the paragraph goes to the other speaker (Ctrl+Return).
    other = next(name for name in call_transcript.speakers if name != before[wordy][0])
    select_words(view, wordy, 5, 5)
    cursor = editor.textCursor()
    cursor.setPosition(cursor.selectionStart())
    editor.setTextCursor(cursor)
    editor.setFocus()
    qtbot.keyClick(editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)  # asks whose turn the rest is
    qtbot.waitUntil(view.split_menu.isVisible, timeout=3000)
    assert set(view.split_menu.speaker_names()) == set(view.transcript.speakers)
    view.split_menu.pick(other)
    split = [(p.speaker, paragraph_text(stored(window, job.id), p)) for p in view.paragraphs]
    assert split[wordy] == (before[wordy][0], " ".join(first_words[:5]))
    assert split[wordy + 1][0] == other and split[wordy + 1][1].startswith(" ".join(first_words[5:]))
    # A plain Enter never breaks a paragraph in the document (paragraphs are speaker turns).
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    assert editor.document().blockCount() == len(view.paragraphs)

    view.rename_speaker(other, "Sheila")
    assert "Sheila" in stored(window, job.id).speakers and other not in stored(window, job.id).speakers
    assert view.undo_stack.count() == 4  # give, merge, split, rename

    # Ctrl+Z with the keyboard elsewhere in the window (here the speaker list) undoes the last edit too.
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=3000)
    view.speaker_box.setFocus()
    qtbot.keyClick(view.speaker_box, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert other in stored(window, job.id).speakers and "Sheila" not in stored(window, job.id).speakers
    # Undone one by one (Edit › Undo), everything is as the engine made it; redo brings it all back.
    for _ in range(3):
        window.transcript_view.undo_action.trigger()
    assert stored(window, job.id).segments == call_transcript.segments
    assert stored(window, job.id).speakers == call_transcript.speakers
    for _ in range(4):
        window.transcript_view.redo_action.trigger()
    assert "Sheila" in stored(window, job.id).speakers


def test_find_and_replace(open_window, qtbot, sample_dir: Path, call_transcript) -> None:  # type: ignore[no-untyped-def]
    window, job, view = open_on_call(open_window, qtbot, sample_dir, call_transcript)
    editor = view.editor
    view.search.setFocus()
    qtbot.keyClicks(view.search, "chicago")
    paragraphs_with_it = view.matching_paragraphs("chicago")
    assert len(paragraphs_with_it) >= 2  # "originally from Chicago" twice in the call
    assert view.match_label.text() == f"{len(paragraphs_with_it)} match(es)"
    assert editor.textCursor().selectedText() == "Chicago"
    first = editor.textCursor().blockNumber()
    qtbot.keyClick(view.search, Qt.Key.Key_Return)
    assert editor.textCursor().selectedText() == "Chicago" and editor.textCursor().blockNumber() > first

    view.replacement.setText("Houston")
    assert view.replace_all() == len(paragraphs_with_it)
    text = " ".join(segment.text for segment in stored(window, job.id).segments)
    assert "Chicago" not in text and text.count("Houston") == len(paragraphs_with_it)
    view.undo()
    assert stored(window, job.id).segments == call_transcript.segments


def test_words_selected_in_a_paragraph_being_typed_in_go_to_the_speaker_whole(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, call_transcript
) -> None:
    window, job, view = open_on_call(open_window, qtbot, sample_dir, call_transcript)
    editor = view.editor
    wordy = first_wordy_paragraph(view)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=3000)
    block = editor.document().findBlockByNumber(wordy)
    end = QTextCursor(block)
    end.setPosition(block.position() + block.length() - 1)
    view.edit_button.click()
    editor.setTextCursor(end)
    qtbot.keyClicks(editor, " Right")  # typed, not read back yet: the cursor is still in the paragraph
    select_words(view, wordy, 2, 3)
    words = editor.textCursor().selectedText()

    def new_speaker() -> None:
        if QApplication.activePopupWidget() is not view.speaker_menu:
            QTimer.singleShot(20, new_speaker)
            return
        qtbot.keyClicks(view.speaker_menu.new_name, "Guest")
        qtbot.keyClick(view.speaker_menu.new_name, Qt.Key.Key_Return)

    # The menu takes the focus from the document, which reads the typing back first; the selection survives.
    QTimer.singleShot(0, new_speaker)
    qtbot.mouseClick(view.speaker_button, Qt.MouseButton.LeftButton)  # the menu opens once the click is handled
    qtbot.waitUntil(lambda: "Guest" in stored(window, job.id).speakers, timeout=5000)
    saved = stored(window, job.id)
    guest = [paragraph_text(saved, p) for p in view.paragraphs if p.speaker == "Guest"]
    assert guest == [words]
    assert "Right" in " ".join(segment.text for segment in saved.segments)
    assert view.undo_stack.count() == 2  # the typing, then the words given to the guest


def test_edits_reach_the_files_exported_automatically_and_a_hand_edited_one_is_kept(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, call_transcript, tmp_path: Path
) -> None:
    window, job, view = open_on_call(open_window, qtbot, sample_dir, call_transcript)
    # As the worker does for a job with an output folder: exported when it finished, and the files recorded.
    out = tmp_path / "exports"
    result = window.export_job(job.id, out, ("txt", "srt"))
    window.store.set_exported(job.id, list(result.written))
    speaker = call_transcript.speakers[0]

    view.rename_speaker(speaker, "Okafor")
    qtbot.waitUntil(lambda: "Okafor" in (out / "sample.txt").read_text(), timeout=10_000)
    qtbot.waitUntil(lambda: "Okafor" in (out / "sample.srt").read_text(), timeout=10_000)
    assert speaker not in (out / "sample.txt").read_text()

    # A person changed the exported subtitles by hand: the next edit does not overwrite them.
    by_hand = (out / "sample.srt").read_text() + "\n(checked by the editor)\n"
    (out / "sample.srt").write_text(by_hand)
    view.rename_speaker("Okafor", "Okafor Jr")
    qtbot.waitUntil(lambda: (out / "sample-2.srt").exists(), timeout=10_000)
    assert (out / "sample.srt").read_text() == by_hand
    assert "Okafor Jr" in (out / "sample-2.srt").read_text() and "Okafor Jr" in (out / "sample-2.txt").read_text()
    assert [Path(path).name for path in window.store.get(job.id).exported] == ["sample-2.txt", "sample-2.srt"]
