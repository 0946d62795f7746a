"""The transcript of the selected job as a document to read, play and correct, with one undo history.

Every change (typed words, a speaker moved, renamed, split or merged, a replace-all) is a new
:class:`Transcript` pushed on a QUndoStack and emitted as ``transcript_edited`` (the window saves it at once,
so edits survive a restart and reach every export).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QSignalBlocker, Qt, QUrl, Signal
from PySide6.QtGui import QAction, QKeySequence, QShortcut, QTextCursor, QUndoCommand, QUndoStack
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QPushButton,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from app.core.transcript.document import Transcript
from app.core.transcript.edit import (
    Paragraph,
    assign_speaker,
    edit_paragraph,
    merge_with_previous,
    paragraphs,
    replace_all,
    split_paragraph,
)
from app.core.transcript.times import clock
from app.gui.transcript.editor import TranscriptEditor
from app.gui.transcript.speaker_menu import SpeakerMenu
from app.gui.transcript.speaker_timeline import SpeakerTimeline

if TYPE_CHECKING:  # QtMultimedia itself is imported on first playback (it starts FFmpeg and the audio backend)
    from PySide6.QtMultimedia import QAudioOutput, QMediaPlayer

PLAYBACK_SPEEDS = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)


class TranscriptChange(QUndoCommand):
    """One edit: the transcript before and after (transcripts are immutable, so this is all undo needs)."""

    def __init__(self, view: TranscriptView, before: Transcript, after: Transcript, text: str) -> None:
        super().__init__(text)
        self.view, self.before, self.after = view, before, after

    def redo(self) -> None:
        self.view.apply(self.after)

    def undo(self) -> None:
        self.view.apply(self.before)


class TranscriptView(QWidget):
    """Shows one transcript. Every edit is emitted as a whole new :class:`Transcript`."""

    transcript_edited = Signal(object)  # Transcript
    remember_requested = Signal(str)  # a speaker label: enroll that voice in the known-speaker library

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.transcript: Transcript | None = None
        self.paragraphs: list[Paragraph] = []
        self.job_id: int | None = None
        self._player: QMediaPlayer | None = None  # made on first use (see _ensure_player)
        self._audio_output: QAudioOutput | None = None
        self._media_source: Path | None = None
        self._pending_position: int | None = None  # a seek asked for before the media finished loading
        self.undo_stack = QUndoStack(self)

        self.title = QLabel("Select a finished job to read its transcript.")
        self.title.setWordWrap(True)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Find (Enter: next match)")
        self.search.setToolTip("Find words in this transcript (Ctrl+F); Enter goes to the next match")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._search_changed)
        self.search.returnPressed.connect(self.find_next)
        self.match_label = QLabel("")
        self.replacement = QLineEdit()
        self.replacement.setPlaceholderText("Replace with")
        self.replacement.setToolTip("What every match of the search becomes when you press Replace all")
        self.replace_button = QPushButton("Replace all")
        self.replace_button.setToolTip("Replace every match in this transcript (Undo takes it back)")
        self.replace_button.clicked.connect(self.replace_all)

        self.speaker_box = QComboBox()
        self.speaker_box.setToolTip("A speaker of this transcript, to rename or remember (or click a name in the text)")
        # Sized to the longest name whenever the names change (sized once, while empty, it cut "SPEAKER_00").
        self.speaker_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.rename_button = QPushButton("Rename…")
        self.rename_button.setToolTip("Rename this speaker in every paragraph and export")
        self.rename_button.clicked.connect(self._ask_rename)
        self.remember_button = QPushButton("Remember…")
        self.remember_button.setToolTip("Name this voice in new transcripts too (voiceprint kept on this computer)")
        self.remember_button.clicked.connect(lambda: self.remember_requested.emit(self.speaker_box.currentText()))
        # Who said it: the paragraph at the cursor (or the selected words) to a speaker chosen from a menu.
        self.speaker_menu = SpeakerMenu(self)
        self.speaker_menu.chosen.connect(self.change_speaker)
        self.speaker_button = QPushButton("Change this paragraph's speaker…")
        self.speaker_button.setMenu(self.speaker_menu)
        self.speaker_button.setToolTip(
            "Who said this paragraph (or, with words selected, just those words): pick a speaker or type a new name"
        )
        # Ctrl+Return: the rest of the paragraph from the cursor is someone else's turn.
        self.split_menu = SpeakerMenu(self, "The rest of this paragraph is said by")
        self.split_menu.chosen.connect(self.give_to_speaker)
        self.merge_button = QPushButton("Join with the paragraph above")
        self.merge_button.setToolTip(
            "The paragraph at the cursor joins the one above it and takes its speaker (one turn cut in two)"
        )
        self.merge_button.clicked.connect(self.merge_with_previous)
        self.edit_button = QPushButton("Edit text")
        self.edit_button.setCheckable(True)
        self.edit_button.setToolTip(
            "Off: a click on a word plays from it and keys change nothing. On: a click puts the text cursor to "
            "correct words (a double-click on a word turns it on; Esc turns it off)"
        )
        self.legend = QLabel("Wavy underline: a word the recognizer was unsure of (point at it to see how sure).")
        self.legend.setWordWrap(True)
        self.legend.setVisible(False)

        self.play_button = QPushButton("Play")
        self.play_button.setToolTip("Play or pause the audio (Ctrl+P); click a word to play from it")
        self.play_button.clicked.connect(self.toggle_playback)
        QShortcut(QKeySequence("Ctrl+P"), self, self.toggle_playback)
        self.speed_box = QComboBox()
        self.speed_box.setToolTip("Playback speed")
        for speed in PLAYBACK_SPEEDS:
            self.speed_box.addItem(f"{speed:g}×", speed)
        self.speed_box.setCurrentIndex(PLAYBACK_SPEEDS.index(1.0))
        self.speed_box.currentIndexChanged.connect(self._speed_changed)
        self.follow_box = QCheckBox("Follow playback")
        self.follow_box.setToolTip("Keep the word being played in view")
        self.follow_box.setChecked(True)
        self.follow_box.toggled.connect(self._follow_changed)

        self.undo_action = QAction("Undo", self)
        self.undo_action.setShortcut(QKeySequence.StandardKey.Undo)
        self.undo_action.triggered.connect(self.undo)
        self.redo_action = QAction("Redo", self)
        # The platform's Redo keys once each (Ctrl+Shift+Z here): a key bound twice is ambiguous and does nothing.
        self.redo_action.setShortcuts(QKeySequence.StandardKey.Redo)
        self.redo_action.triggered.connect(self.redo)
        self.undo_stack.canUndoChanged.connect(self.undo_action.setEnabled)
        self.undo_stack.canRedoChanged.connect(self.redo_action.setEnabled)
        # The menu says what would be undone ("Undo typing"); the tool bar keeps it short with the same action.
        self.undo_stack.undoTextChanged.connect(lambda text: self.undo_action.setToolTip(f"Undo {text}".strip()))
        self.undo_stack.redoTextChanged.connect(lambda text: self.redo_action.setToolTip(f"Redo {text}".strip()))
        self.undo_action.setEnabled(False)
        self.redo_action.setEnabled(False)

        self.timeline = SpeakerTimeline()
        self.timeline.seek_requested.connect(self.play_from_seconds)
        self.editor = TranscriptEditor()
        self.editor.words_edited.connect(self._words_edited)
        self.editor.word_clicked.connect(self.play_from_seconds)
        self.editor.undo_requested.connect(self.undo)
        self.editor.split_requested.connect(self._offer_split)
        self.editor.redo_requested.connect(self.redo)
        self.editor.speaker_renamed.connect(self.rename_speaker)
        self.editor.editing_changed.connect(self.edit_button.setChecked)
        self.editor.selectionChanged.connect(self._selection_changed)
        self.edit_button.toggled.connect(self.editor.set_editing)

        find_row = QHBoxLayout()
        find_row.addWidget(self.search, 2)
        find_row.addWidget(self.match_label)
        find_row.addWidget(self.replacement, 1)
        find_row.addWidget(self.replace_button)
        # Tool bars rather than rows of buttons: what does not fit a narrow window (800x600, the view beside
        # the queue) goes into a » menu instead of making the window wider than the screen. Two of them, listening
        # and who speaks, so that at 1280x720 the labelled buttons mostly fit.
        self.tools = QToolBar("Transcript")
        self.tools.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        for widget in (self.play_button, self.speed_box, self.follow_box):
            self.tools.addWidget(widget)
        self.tools.addSeparator()
        self.tools.addWidget(self.edit_button)
        self.tools.addAction(self.undo_action)
        self.tools.addAction(self.redo_action)
        self.speaker_tools = QToolBar("Speakers")
        for widget in (self.speaker_button, self.merge_button):
            self.speaker_tools.addWidget(widget)
        self.speaker_tools.addSeparator()
        for widget in (self.speaker_box, self.rename_button, self.remember_button):
            self.speaker_tools.addWidget(widget)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addLayout(find_row)
        bars = QVBoxLayout()
        bars.setSpacing(0)  # each tool bar has margins of its own: together they read as one block of tools
        bars.addWidget(self.tools)
        bars.addWidget(self.speaker_tools)
        layout.addLayout(bars)
        layout.addWidget(self.timeline)
        layout.addWidget(self.editor, 1)
        layout.addWidget(self.legend)
        self._set_enabled(False)

    # ------------------------------------------------------------------------------------------- content

    def _set_enabled(self, enabled: bool) -> None:
        for widget in (
            self.search,
            self.replacement,
            self.replace_button,
            self.speaker_box,
            self.rename_button,
            self.remember_button,
            self.speaker_button,
            self.merge_button,
            self.edit_button,
            self.play_button,
            self.speed_box,
            self.follow_box,
            self.editor,
        ):
            widget.setEnabled(enabled)

    def commit_pending(self) -> None:
        """Typing not yet read back becomes an edit now (before the job changes or the window closes)."""
        self.editor.commit_pending()

    def _forget_reading(self) -> None:
        """What belonged to the transcript being read goes with it: the search, its marks, the played word."""
        self.editor.set_editing(False)
        for field in (self.search, self.replacement):
            with QSignalBlocker(field):
                field.clear()
        self.match_label.clear()
        self.editor.set_matches([])
        self.editor.playing = None
        self.timeline.set_position(None)

    def clear(self, message: str = "Select a finished job to read its transcript.") -> None:
        self.commit_pending()
        self.stop_playback()
        self._forget_reading()
        self.transcript, self.job_id, self.paragraphs = None, None, []
        self.undo_stack.clear()
        self.title.setText(message)
        self.editor.set_transcript(None, [])
        self.timeline.set_paragraphs(0.0, [], self.editor.colour_of)
        self.timeline.set_position(None)
        self.speaker_box.clear()
        self.legend.setVisible(False)
        self._set_enabled(False)

    def show_transcript(self, job_id: int, transcript: Transcript, media: Path | None = None) -> None:
        self.commit_pending()
        if job_id != self.job_id:
            self.stop_playback()
            self._forget_reading()
            self.undo_stack.clear()  # one history per transcript shown: undo never reaches into another job
        elif transcript != self.transcript:
            self.undo_stack.clear()  # the job was transcribed again: the old history describes another text
        self.job_id = job_id
        self._media_source = media
        speakers = f", {len(transcript.speakers)} speaker(s)" if transcript.speakers else ""
        who = ""
        if transcript.diarization is not None:
            # Which diarizer ran and why, so that a person can tell pyannote from the built-in one.
            name = "pyannote community-1" if transcript.diarization.backend == "pyannote" else "built-in diarizer"
            who = f"<br>Speakers by {name}: {html.escape(transcript.diarization.reason)}"
        self.title.setText(
            f"<b>{html.escape(Path(transcript.source).name)}</b> — {clock(transcript.duration)}, "
            f"{transcript.language}, {transcript.model}{speakers}{who}"
        )
        self._show(transcript)
        self._set_enabled(True)
        # Enrollment needs the turns and the audio the transcript came from.
        self.remember_button.setEnabled(
            bool(transcript.speakers) and transcript.diarization is not None and media is not None
        )

    def _show(self, transcript: Transcript) -> None:
        self.transcript = transcript
        self.paragraphs = paragraphs(transcript)
        self.editor.set_transcript(transcript, self.paragraphs)
        self.timeline.set_paragraphs(transcript.duration, self.paragraphs, self.editor.colour_of)
        box = self.speaker_box
        current = box.currentText()
        with QSignalBlocker(box):
            box.clear()
            box.addItems(list(transcript.speakers))
            if current in transcript.speakers:
                box.setCurrentText(current)
        self.rename_button.setEnabled(bool(transcript.speakers))
        self.speaker_menu.set_speakers(transcript.speakers)
        self.split_menu.set_speakers(transcript.speakers)
        self.legend.setVisible(self.editor.has_uncertain_words())
        self._search_changed(self.search.text())

    def apply(self, transcript: Transcript) -> None:
        """Show an edited (or undone) transcript and hand it to be saved."""
        self._show(transcript)
        self.transcript_edited.emit(transcript)

    def edit(self, description: str, changed: Transcript) -> bool:
        """Make ``changed`` the transcript, as one step of the undo history."""
        if self.transcript is None or changed == self.transcript:
            return False
        self.undo_stack.push(TranscriptChange(self, self.transcript, changed, description))
        return True

    def undo(self) -> None:
        self.commit_pending()
        self.undo_stack.undo()

    def redo(self) -> None:
        self.commit_pending()
        self.undo_stack.redo()

    # ------------------------------------------------------------------------------------------- editing

    def _words_edited(self, edited: dict[int, str]) -> None:
        transcript = self.transcript
        if transcript is None:
            return
        # From the last paragraph back: one that loses every word takes its segments with it, and the indices
        # of the paragraphs before it stay right.
        for number in sorted(edited, reverse=True):
            if number < len(self.paragraphs):
                transcript = edit_paragraph(transcript, self.paragraphs[number], edited[number])
        if not self.edit("typing", transcript):
            self.editor.set_transcript(self.transcript, self.paragraphs)  # nothing changed: drop stray formatting

    def rename_speaker(self, old: str, new: str) -> None:
        new = new.strip()
        if self.transcript is None or not new or new == old:
            return
        self.commit_pending()
        # A name already in use merges the two labels: a legitimate correction when the diarizer split one
        # person in two.
        if self.edit(f"rename {old}", self.transcript.rename_speaker(old, new)):
            self.speaker_box.setCurrentText(new)

    def _ask_rename(self) -> None:
        old = self.speaker_box.currentText()
        if not old:
            return
        new, accepted = QInputDialog.getText(self, "Rename speaker", f"New name for {old} (every line and export):")
        if accepted:
            self.rename_speaker(old, new)

    def _selection_changed(self) -> None:
        whose = "the selected words'" if self.editor.textCursor().hasSelection() else "this paragraph's"
        self.speaker_button.setText(f"Change {whose} speaker…")

    def _offer_split(self) -> None:
        """Ctrl+Return: a menu at the cursor asks whose turn the rest of the paragraph is."""
        if self.transcript is None:
            return
        rect = self.editor.cursorRect()
        self.split_menu.popup(self.editor.viewport().mapToGlobal(rect.bottomLeft()))

    def change_speaker(self, speaker: str) -> bool:
        """``speaker`` said the selected words or, with none selected, the whole paragraph at the cursor."""
        self.commit_pending()
        if self.transcript is None or not speaker.strip():
            return False
        if self.editor.textCursor().hasSelection():
            return self.give_to_speaker(speaker)
        number = self.editor.textCursor().blockNumber()
        if not 0 <= number < len(self.paragraphs) or not self.editor.spans[number]:
            return False
        first, last = self.editor.spans[number][0], self.editor.spans[number][-1]
        changed = assign_speaker(self.transcript, (first.segment, first.token), (last.segment, last.token), speaker)
        return self.edit(f"paragraph to {speaker.strip()}", changed)

    def give_to_speaker(self, speaker: str) -> bool:
        """The selected words were said by ``speaker``. Without a selection, the paragraph is split at the cursor
        and its rest given to that speaker."""
        self.commit_pending()
        name = speaker.strip()
        selected = self.editor.selected_words()
        if self.transcript is None or not name or selected is None:
            return False
        (first_paragraph, first), (_, last) = selected
        if self.editor.textCursor().hasSelection():
            changed = assign_speaker(self.transcript, (first.segment, first.token), (last.segment, last.token), name)
            return self.edit(f"words to {name}", changed)
        paragraph = self.paragraphs[first_paragraph]
        return self.edit(
            f"split for {name}", split_paragraph(self.transcript, paragraph, (first.segment, first.token), name)
        )

    def merge_with_previous(self) -> bool:
        self.commit_pending()
        if self.transcript is None:
            return False
        number = self.editor.textCursor().blockNumber()
        return self.edit("merge paragraphs", merge_with_previous(self.transcript, number))

    def replace_all(self) -> int:
        self.commit_pending()
        needle = self.search.text()
        if self.transcript is None or not needle:
            return 0
        changed, count = replace_all(self.transcript, needle, self.replacement.text())
        self.edit(f"replace {needle!r}", changed)
        self.match_label.setText(f"{count} replaced")
        return count

    # ------------------------------------------------------------------------------------------- search

    def _match_ranges(self, text: str) -> list[tuple[int, int, int]]:
        """(paragraph, start, end) of every occurrence in the document's text, case-insensitive."""
        if not text:
            return []
        pattern = re.compile(re.escape(text), re.IGNORECASE)
        found: list[tuple[int, int, int]] = []
        block = self.editor.document().begin()
        while block.isValid():
            found.extend((block.blockNumber(), m.start(), m.end()) for m in pattern.finditer(block.text()))
            block = block.next()
        return found

    def matching_paragraphs(self, text: str) -> list[int]:
        """Paragraphs whose text or speaker contains ``text``."""
        if self.transcript is None or not text:
            return []
        needle = text.casefold()
        in_text = {number for number, _start, _end in self._match_ranges(text)}
        return [
            number
            for number, paragraph in enumerate(self.paragraphs)
            if number in in_text or needle in (paragraph.speaker or "").casefold()
        ]

    def _search_changed(self, text: str) -> None:
        ranges = self._match_ranges(text)
        self.editor.set_matches(ranges)
        self.match_label.setText(f"{len(ranges)} match(es)" if text else "")
        if ranges:
            self._select_match(ranges[0])

    def _select_match(self, match: tuple[int, int, int]) -> None:
        block = self.editor.document().findBlockByNumber(match[0])
        cursor = QTextCursor(block)
        cursor.setPosition(block.position() + match[1])
        cursor.setPosition(block.position() + match[2], QTextCursor.MoveMode.KeepAnchor)
        self.editor.setTextCursor(cursor)
        self.editor.ensureCursorVisible()

    def focus_search(self) -> None:
        """Edit › Find in transcript: the search field, its text selected to be typed over."""
        self.search.setFocus()
        self.search.selectAll()

    def find_next(self) -> None:
        ranges = self._match_ranges(self.search.text())
        if not ranges:
            return
        cursor = self.editor.textCursor()
        here = (cursor.blockNumber(), cursor.selectionEnd() - cursor.block().position())
        following = [match for match in ranges if (match[0], match[1]) >= here]
        self._select_match(following[0] if following else ranges[0])

    # ------------------------------------------------------------------------------------------- playback

    def _ensure_player(self) -> QMediaPlayer | None:
        if self._media_source is None:
            return None
        if self._player is None:
            # QtMultimedia is loaded on first use: it starts FFmpeg and the audio backend, not needed to open.
            from PySide6.QtMultimedia import QAudioOutput, QMediaPlayer

            player = QMediaPlayer(self)
            output = QAudioOutput(self)
            player.setAudioOutput(output)
            player.setPlaybackRate(self.playback_speed)
            player.positionChanged.connect(self._position_changed)
            player.playbackStateChanged.connect(self._state_changed)
            player.mediaStatusChanged.connect(self._media_status_changed)
            self._player, self._audio_output = player, output
        player = self._player
        wanted = QUrl.fromLocalFile(str(self._media_source))
        if player.source() != wanted:
            player.setSource(wanted)
        return player

    @property
    def playback_speed(self) -> float:
        return float(self.speed_box.currentData() or 1.0)

    def _speed_changed(self) -> None:
        if self._player is not None:
            self._player.setPlaybackRate(self.playback_speed)

    def _follow_changed(self, follow: bool) -> None:
        self.editor.follow_playback = follow

    def play_from_seconds(self, seconds: float) -> None:
        player = self._ensure_player()
        if player is None:
            return
        position = int(seconds * 1000)
        # A seek before the file is loaded is dropped by QMediaPlayer: repeat it once the media is ready.
        self._pending_position = position
        player.setPosition(position)
        player.play()
        self.highlight_at(seconds)

    def toggle_playback(self) -> None:
        player = self._ensure_player()
        if player is None:
            return
        from PySide6.QtMultimedia import QMediaPlayer

        if player.playbackState() == QMediaPlayer.PlaybackState.PlayingState:
            player.pause()
        else:
            player.play()

    def stop_playback(self) -> None:
        # pause(), not stop(): Qt's FFmpeg backend (6.x) can hang in stop() right after a seek and play (two
        # clicks on words in quick succession, then another job selected); a paused player holds no device.
        if self._player is not None:
            self._player.pause()

    def _media_status_changed(self, status: object) -> None:
        from PySide6.QtMultimedia import QMediaPlayer

        ready = (QMediaPlayer.MediaStatus.LoadedMedia, QMediaPlayer.MediaStatus.BufferedMedia)
        if self._pending_position is not None and status in ready and self._player is not None:
            self._player.setPosition(self._pending_position)
            self._pending_position = None

    def _state_changed(self, state: object) -> None:
        from PySide6.QtMultimedia import QMediaPlayer

        playing = state == QMediaPlayer.PlaybackState.PlayingState
        self.play_button.setText("Pause" if playing else "Play")

    def _position_changed(self, position_ms: int) -> None:
        self.highlight_at(position_ms / 1000.0)

    def highlight_at(self, seconds: float) -> None:
        """Mark the word being played (and, following playback, keep it in view)."""
        self.editor.show_playing(seconds)
        self.timeline.set_position(seconds)

    @property
    def playing_paragraph(self) -> int | None:
        return None if self.editor.playing is None else self.editor.playing[0]
