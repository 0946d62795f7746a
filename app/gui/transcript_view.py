"""The transcript of the selected job: segments coloured by speaker, click to play, edit, search, rename."""

from __future__ import annotations

import bisect
import html
from pathlib import Path

from PySide6.QtCore import QSignalBlocker, Qt, QUrl, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.transcript import Transcript
from app.gui.queue_model import format_duration

# Light tints that keep black text readable; speakers beyond the list reuse it in order.
SPEAKER_COLOURS = ("#dbeafe", "#fde2e4", "#dcfce7", "#fef3c7", "#ede9fe", "#cffafe", "#fce7f3", "#e5e7eb")
PLAYING_COLOUR = "#ffd54f"

TIME, SPEAKER, TEXT = range(3)


def speaker_colour(speakers: tuple[str, ...], speaker: str | None) -> QColor:
    if speaker is None or speaker not in speakers:
        return QColor("#ffffff")
    return QColor(SPEAKER_COLOURS[speakers.index(speaker) % len(SPEAKER_COLOURS)])


class TranscriptView(QWidget):
    """Shows one transcript. Edits (text, speaker names) are emitted as a whole new :class:`Transcript`."""

    transcript_edited = Signal(object)  # Transcript
    remember_requested = Signal(str)  # a speaker label: enroll that voice in the known-speaker library

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.transcript: Transcript | None = None
        self.job_id: int | None = None
        self._starts: list[float] = []
        self._playing_row: int | None = None
        self._player: object | None = None
        self._audio_output: object | None = None
        self._media_source: Path | None = None
        self._pending_position: int | None = None  # a seek asked for before the media finished loading

        self.title = QLabel("Select a finished job to read its transcript.")
        self.title.setWordWrap(True)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search the transcript (Enter: next match)")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._search_changed)
        self.search.returnPressed.connect(self.find_next)
        self.match_label = QLabel("")
        self.speaker_box = QComboBox()
        self.speaker_box.setToolTip("Speaker to rename")
        self.rename_button = QPushButton("Rename speaker…")
        self.rename_button.clicked.connect(self._ask_rename)
        self.remember_button = QPushButton("Remember this speaker…")
        self.remember_button.setToolTip("Name this voice in new transcripts too (voiceprint kept on this computer)")
        self.remember_button.clicked.connect(lambda: self.remember_requested.emit(self.speaker_box.currentText()))
        self.play_button = QPushButton("Play")
        self.play_button.setToolTip("Play or pause the audio (Ctrl+P)")
        self.play_button.clicked.connect(self.toggle_playback)
        QShortcut(QKeySequence("Ctrl+P"), self, self.toggle_playback)

        self.table = QTableWidget(0, 3)
        self.table.setHorizontalHeaderLabels(["Time", "Speaker", "Text"])
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(TIME, QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(SPEAKER, QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(TEXT, QHeaderView.ResizeMode.Stretch)
        self.table.setWordWrap(True)
        self.table.setEditTriggers(
            QTableWidget.EditTrigger.DoubleClicked
            | QTableWidget.EditTrigger.EditKeyPressed
            | QTableWidget.EditTrigger.AnyKeyPressed
        )
        self.table.cellClicked.connect(self._cell_clicked)
        self.table.itemChanged.connect(self._item_changed)

        tools = QHBoxLayout()
        tools.addWidget(self.search, 3)
        tools.addWidget(self.match_label)
        tools.addWidget(self.speaker_box, 1)
        tools.addWidget(self.rename_button)
        tools.addWidget(self.remember_button)
        tools.addWidget(self.play_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addLayout(tools)
        layout.addWidget(self.table)
        self._set_enabled(False)

    # ------------------------------------------------------------------------------------------- content

    def _set_enabled(self, enabled: bool) -> None:
        for widget in (
            self.search,
            self.speaker_box,
            self.rename_button,
            self.remember_button,
            self.play_button,
            self.table,
        ):
            widget.setEnabled(enabled)

    def clear(self, message: str = "Select a finished job to read its transcript.") -> None:
        self.stop_playback()
        self.transcript, self.job_id = None, None
        self.title.setText(message)
        with QSignalBlocker(self.table):
            self.table.setRowCount(0)
        self.speaker_box.clear()
        self._set_enabled(False)

    def show_transcript(self, job_id: int, transcript: Transcript, media: Path | None = None) -> None:
        if job_id != self.job_id:
            self.stop_playback()
        self.job_id = job_id
        self.transcript = transcript
        self._media_source = media
        speakers = f", {len(transcript.speakers)} speaker(s)" if transcript.speakers else ""
        who = ""
        if transcript.diarization is not None:
            # Which diarizer ran and why, so that a person can tell pyannote from the built-in one.
            name = "pyannote community-1" if transcript.diarization.backend == "pyannote" else "built-in diarizer"
            who = f"<br>Speakers by {name}: {html.escape(transcript.diarization.reason)}"
        self.title.setText(
            f"<b>{html.escape(Path(transcript.source).name)}</b> — {format_duration(transcript.duration)}, "
            f"{transcript.language}, {transcript.model}{speakers}{who}"
        )
        self._fill()
        self._set_enabled(True)
        self.rename_button.setEnabled(bool(transcript.speakers))
        # Enrollment needs the turns and the audio the transcript came from.
        self.remember_button.setEnabled(
            bool(transcript.speakers) and transcript.diarization is not None and media is not None
        )

    def _fill(self) -> None:
        transcript = self.transcript
        assert transcript is not None
        self._starts = [segment.start for segment in transcript.segments]
        bold = QFont()
        bold.setBold(True)
        with QSignalBlocker(self.table):
            self.table.setRowCount(len(transcript.segments))
            for row, segment in enumerate(transcript.segments):
                brush = QBrush(speaker_colour(transcript.speakers, segment.speaker))
                time_item = QTableWidgetItem(format_duration(segment.start))
                time_item.setFlags(time_item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                speaker_item = QTableWidgetItem(segment.speaker or "")
                speaker_item.setFlags(speaker_item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                speaker_item.setFont(bold)
                text_item = QTableWidgetItem(segment.text.strip())
                for item in (time_item, speaker_item, text_item):
                    item.setBackground(brush)
                    item.setForeground(QBrush(QColor("#000000")))
                self.table.setItem(row, TIME, time_item)
                self.table.setItem(row, SPEAKER, speaker_item)
                self.table.setItem(row, TEXT, text_item)
            self.table.resizeRowsToContents()
        current = self.speaker_box.currentText()
        self.speaker_box.clear()
        self.speaker_box.addItems(list(transcript.speakers))
        if current in transcript.speakers:
            self.speaker_box.setCurrentText(current)
        self._playing_row = None
        self._search_changed(self.search.text())

    # ------------------------------------------------------------------------------------------- editing

    def _item_changed(self, item: QTableWidgetItem) -> None:
        if self.transcript is None or item.column() != TEXT:
            return
        row = item.row()
        new_text = item.text().strip()
        old = self.transcript.segments[row].text
        if new_text == old.strip():
            return
        # Whisper's text starts with a space; keep that shape so the exports join segments the same way.
        self.transcript = self.transcript.with_segment_text(row, (" " if old.startswith(" ") else "") + new_text)
        self.transcript_edited.emit(self.transcript)

    def rename_speaker(self, old: str, new: str) -> None:
        new = new.strip()
        if self.transcript is None or not new or new == old:
            return
        # A name already in use merges the two labels: a legitimate correction when the diarizer split one
        # person in two.
        self.transcript = self.transcript.rename_speaker(old, new)
        self._fill()
        self.speaker_box.setCurrentText(new)
        self.transcript_edited.emit(self.transcript)

    def _ask_rename(self) -> None:
        old = self.speaker_box.currentText()
        if not old:
            return
        new, accepted = QInputDialog.getText(self, "Rename speaker", f"New name for {old} (every line and export):")
        if accepted:
            self.rename_speaker(old, new)

    # ------------------------------------------------------------------------------------------- search

    def matching_rows(self, text: str) -> list[int]:
        if self.transcript is None or not text:
            return []
        needle = text.casefold()
        return [
            row
            for row, segment in enumerate(self.transcript.segments)
            if needle in segment.text.casefold() or needle in (segment.speaker or "").casefold()
        ]

    def _search_changed(self, text: str) -> None:
        rows = self.matching_rows(text)
        self.match_label.setText(f"{len(rows)} match(es)" if text else "")
        if rows:
            self.table.selectRow(rows[0])
            self.table.scrollToItem(self.table.item(rows[0], TEXT))

    def find_next(self) -> None:
        rows = self.matching_rows(self.search.text())
        if not rows:
            return
        current = self.table.currentRow()
        following = [row for row in rows if row > current]
        row = following[0] if following else rows[0]
        self.table.selectRow(row)
        self.table.scrollToItem(self.table.item(row, TEXT))

    # ------------------------------------------------------------------------------------------- playback

    def _ensure_player(self) -> object | None:
        if self._media_source is None:
            return None
        if self._player is None:
            # QtMultimedia is loaded on first use: it starts FFmpeg and the audio backend, not needed to open.
            from PySide6.QtMultimedia import QAudioOutput, QMediaPlayer

            player = QMediaPlayer(self)
            output = QAudioOutput(self)
            player.setAudioOutput(output)
            player.positionChanged.connect(self._position_changed)
            player.playbackStateChanged.connect(self._state_changed)
            player.mediaStatusChanged.connect(self._media_status_changed)
            self._player, self._audio_output = player, output
        player = self._player
        wanted = QUrl.fromLocalFile(str(self._media_source))
        if player.source() != wanted:  # type: ignore[attr-defined]
            player.setSource(wanted)  # type: ignore[attr-defined]
        return player

    def _cell_clicked(self, row: int, column: int) -> None:
        if column != TEXT:
            self.play_from(row)

    def play_from(self, row: int) -> None:
        if self.transcript is None or not 0 <= row < len(self.transcript.segments):
            return
        player = self._ensure_player()
        if player is None:
            return
        position = int(self.transcript.segments[row].start * 1000)
        # A seek before the file is loaded is dropped by QMediaPlayer: repeat it once the media is ready.
        self._pending_position = position
        player.setPosition(position)  # type: ignore[attr-defined]
        player.play()  # type: ignore[attr-defined]
        self.highlight_at(self.transcript.segments[row].start)

    def toggle_playback(self) -> None:
        player = self._ensure_player()
        if player is None:
            return
        from PySide6.QtMultimedia import QMediaPlayer

        if player.playbackState() == QMediaPlayer.PlaybackState.PlayingState:  # type: ignore[attr-defined]
            player.pause()  # type: ignore[attr-defined]
        else:
            player.play()  # type: ignore[attr-defined]

    def stop_playback(self) -> None:
        if self._player is not None:
            self._player.stop()  # type: ignore[attr-defined]

    def _media_status_changed(self, status: object) -> None:
        from PySide6.QtMultimedia import QMediaPlayer

        ready = (QMediaPlayer.MediaStatus.LoadedMedia, QMediaPlayer.MediaStatus.BufferedMedia)
        if self._pending_position is not None and status in ready and self._player is not None:
            self._player.setPosition(self._pending_position)  # type: ignore[attr-defined]
            self._pending_position = None

    def _state_changed(self, state: object) -> None:
        from PySide6.QtMultimedia import QMediaPlayer

        playing = state == QMediaPlayer.PlaybackState.PlayingState
        self.play_button.setText("Pause" if playing else "Play")

    def _position_changed(self, position_ms: int) -> None:
        self.highlight_at(position_ms / 1000.0)

    def segment_at(self, seconds: float) -> int | None:
        if not self._starts:
            return None
        row = bisect.bisect_right(self._starts, seconds) - 1
        return max(0, row)

    def highlight_at(self, seconds: float) -> None:
        """Mark the segment being played (and keep it in view); the previous one gets its speaker colour back."""
        row = self.segment_at(seconds)
        if row == self._playing_row or self.transcript is None:
            return
        with QSignalBlocker(self.table):
            if self._playing_row is not None and self._playing_row < self.table.rowCount():
                segment = self.transcript.segments[self._playing_row]
                brush = QBrush(speaker_colour(self.transcript.speakers, segment.speaker))
                for column in (TIME, SPEAKER, TEXT):
                    self.table.item(self._playing_row, column).setBackground(brush)
            if row is not None:
                for column in (TIME, SPEAKER, TEXT):
                    self.table.item(row, column).setBackground(QBrush(QColor(PLAYING_COLOUR)))
                self.table.scrollToItem(self.table.item(row, TEXT))
        self._playing_row = row

    @property
    def playing_row(self) -> int | None:
        return self._playing_row
