"""The transcript as an editable document: one paragraph per speaker turn, times and speakers in the margin.

The document is a view of the :class:`Transcript`, never the other way round: typed text is read back per
paragraph when the cursor leaves it (or the typing pauses), handed to the view as "paragraph N now reads …",
and the view renders the edited transcript again. So the word timings live in the transcript and the document
only has to know where each word sits, which it records while rendering.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QMimeData, QRect, QSize, Qt, QTimer, Signal
from PySide6.QtGui import (
    QColor,
    QFocusEvent,
    QFontMetrics,
    QHelpEvent,
    QKeyEvent,
    QKeySequence,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QResizeEvent,
    QTextBlock,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextFormat,
)
from PySide6.QtWidgets import QTextEdit, QToolTip, QWidget

from app.core.transcript.document import Segment, Transcript
from app.core.transcript.edit import Paragraph, paragraph_tokens
from app.core.transcript.times import clock
from app.gui.theme import is_dark
from app.gui.transcript.speaker_rename import InlineRename

# Below this, Whisper's word probability is more often wrong than not worth a second look: marked.
LOW_CONFIDENCE = 0.5
# The margin holds "0:12:34  SPEAKER_00" (longer names are cut with "…"): sized in the font, so that it fits
# on a 4K screen with a large font as on a small one.
MARGIN_SAMPLE = "0:00:00  SPEAKER_00"
# Hues far apart on the colour wheel; lightness comes from the palette so that both themes stay readable.
SPEAKER_HUES = (210, 0, 130, 35, 275, 180, 320, 85)


def speaker_colour(speakers: tuple[str, ...], speaker: str | None, palette: QPalette) -> QColor:
    """A speaker's colour for text on the palette's base: light on a dark theme, dark on a light one."""
    if speaker is None or speaker not in speakers:
        return palette.color(QPalette.ColorRole.Text)
    dark_theme = is_dark(palette)
    hue = SPEAKER_HUES[speakers.index(speaker) % len(SPEAKER_HUES)]
    return QColor.fromHsl(hue, 170, 180 if dark_theme else 80)


@dataclass(frozen=True)
class WordSpan:
    """Where one word sits in its paragraph's block, and from when it is heard."""

    start: int  # position in the block
    end: int
    segment: int
    token: int  # the word's index among its segment's tokens
    seconds: float


def _segment_shows_same(old: Segment, new: Segment) -> bool:
    """Whether two segments put the same words, times and confidences on the page (speakers aside)."""
    if old is new:
        return True
    if old.text != new.text or old.start != new.start or len(old.words) != len(new.words):
        return False
    return old.words is new.words or all(
        a.word == b.word and a.start == b.start and a.probability == b.probability
        for a, b in zip(old.words, new.words, strict=True)
    )


def _shows_same(old: Transcript, old_paragraph: Paragraph, new: Transcript, paragraph: Paragraph, shift: int) -> bool:
    """Whether a paragraph's block shows what it did, its segments now ``shift`` places further on."""
    if len(old_paragraph.segments) != len(paragraph.segments):
        return False
    return all(
        index + shift == new_index and _segment_shows_same(old.segments[index], new.segments[new_index])
        for index, new_index in zip(old_paragraph.segments, paragraph.segments, strict=True)
    )


class ParagraphMargin(QWidget):
    """Paints each paragraph's start time and speaker beside it, in the speaker's colour."""

    def __init__(self, editor: TranscriptEditor) -> None:
        super().__init__(editor)
        self.editor = editor
        self.setCursor(Qt.CursorShape.PointingHandCursor)  # every time and name in it is something to click

    def sizeHint(self) -> QSize:
        return QSize(self.editor.margin_width(), 0)

    def paragraph_at(self, y: float) -> int | None:
        """The paragraph whose first line is at ``y`` (the margin's coordinates), if any."""
        editor = self.editor
        block = editor.block_at(y + editor.verticalScrollBar().value() - editor.document_margin())
        number = block.blockNumber() if block.isValid() else -1
        return number if 0 <= number < len(editor.paragraphs) else None

    def name_rect(self, number: int) -> QRect:
        """Where paragraph ``number``'s speaker name is drawn, in the margin's coordinates (what a click hits)."""
        editor = self.editor
        block = editor.document().findBlockByNumber(number)
        layout = editor.document().documentLayout()
        top = int(layout.blockBoundingRect(block).top()) - editor.verticalScrollBar().value() + editor.document_margin()
        left = 6 + editor.fontMetrics().horizontalAdvance(clock(editor.paragraphs[number].start) + "  ")
        return QRect(left, top, editor.margin_width() - 6 - left, editor.fontMetrics().height())

    def _hit(self, x: float, y: float) -> tuple[int, bool] | None:
        """(paragraph, on its speaker's name) under a point of the margin."""
        number = self.paragraph_at(y)
        if number is None:
            return None
        on_name = self.editor.paragraphs[number].speaker is not None and x >= self.name_rect(number).left() - 2
        return number, on_name

    def mousePressEvent(self, event: QMouseEvent) -> None:
        """A click on a paragraph's time plays it from its start; a click on its speaker's name renames them."""
        editor = self.editor
        hit = self._hit(event.position().x(), event.position().y())
        if hit is None:
            return
        number, on_name = hit
        if on_name:
            editor.start_rename(number)
        elif number < len(editor.spans) and editor.spans[number]:
            editor.word_clicked.emit(editor.spans[number][0].seconds)  # its first word, as heard

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            hit = self._hit(event.pos().x(), event.pos().y())
            if hit is None:
                QToolTip.hideText()
            else:
                number, on_name = hit
                paragraph = self.editor.paragraphs[number]
                QToolTip.showText(
                    event.globalPos(),
                    f"{paragraph.speaker}: click to rename (every paragraph and export)"
                    if on_name
                    else f"Click to play from {clock(paragraph.start)}",
                    self,
                )
            return True
        return super().event(event)

    def paintEvent(self, event: QPaintEvent) -> None:
        editor = self.editor
        painter = QPainter(self)
        painter.fillRect(event.rect(), editor.palette().color(QPalette.ColorRole.AlternateBase))
        margin_width = editor.margin_width()
        layout = editor.document().documentLayout()
        offset = editor.verticalScrollBar().value()
        line = editor.fontMetrics().height()
        bold = editor.font()
        bold.setBold(True)
        block = editor.block_at(offset - editor.document_margin())  # the first one in view
        while block.isValid():
            number = block.blockNumber()
            top = int(layout.blockBoundingRect(block).top()) - offset + editor.document_margin()
            if top > self.height():
                break
            if top + line >= 0 and number < len(editor.paragraphs):
                # Time and speaker on the paragraph's first line: a one-line paragraph has room for both.
                paragraph = editor.paragraphs[number]
                time_text = clock(paragraph.start)
                painter.setFont(editor.font())
                painter.setPen(editor.palette().color(QPalette.ColorRole.PlaceholderText))
                painter.drawText(QRect(6, top, margin_width - 10, line), Qt.AlignmentFlag.AlignLeft, time_text)
                if paragraph.speaker is not None:
                    left = 6 + painter.fontMetrics().horizontalAdvance(time_text + "  ")
                    painter.setFont(bold)
                    painter.setPen(editor.colour_of(paragraph.speaker))
                    width = margin_width - 6 - left
                    name = painter.fontMetrics().elidedText(paragraph.speaker, Qt.TextElideMode.ElideRight, width)
                    painter.drawText(QRect(left, top, width, line), Qt.AlignmentFlag.AlignLeft, name)
            block = block.next()


class TranscriptEditor(QTextEdit):
    words_edited = Signal(object)  # dict[int, str]: {paragraph index: its text as the user left it}
    word_clicked = Signal(float)  # seconds: play from there
    undo_requested = Signal()
    split_requested = Signal()  # Ctrl+Return: the rest of the paragraph from the cursor is another speaker's
    redo_requested = Signal()
    speaker_renamed = Signal(str, str)  # old, new: typed over the name in the margin
    editing_changed = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAcceptRichText(False)
        # Undo belongs to the transcript's undo stack (every kind of edit, one history), not to the text.
        self.setUndoRedoEnabled(False)
        self.setLineWrapMode(QTextEdit.LineWrapMode.WidgetWidth)
        self.setTabChangesFocus(True)  # a tab is not a word: Tab leaves the document like any other field
        # Reading until the person asks to edit (Edit text, or a double-click on a word): a click that plays
        # a word leaves no text cursor behind, so a stray key afterwards changes nothing.
        self.editing = False
        self.transcript: Transcript | None = None
        self.paragraphs: list[Paragraph] = []
        self.spans: list[list[WordSpan]] = []
        self._timeline: list[tuple[float, int, int]] = []  # (seconds, block, index in spans[block]), by time
        self._dirty: set[int] = set()  # blocks typed in since they were last read back
        self._typed: set[int] = set()  # blocks read back: written again on the next render, changed or not
        self._rendering = False
        self.playing: tuple[int, int] | None = None  # (block, index in spans[block]) being heard
        self.follow_playback = True
        self._matches: list[tuple[int, int, int]] = []  # (block, start, end) of search matches, in order
        self._shown_blocks: tuple[int, int] | None = None  # the blocks in view when the matches were marked
        self.margin = ParagraphMargin(self)
        self.setViewportMargins(self.margin_width(), 0, 0, 0)
        self._rename = InlineRename(self)
        self._rename.renamed.connect(self.speaker_renamed)
        self._apply_mode()
        self.verticalScrollBar().valueChanged.connect(self._scrolled)
        self.document().contentsChange.connect(self._contents_changed)
        self.cursorPositionChanged.connect(self._cursor_moved)

    # ------------------------------------------------------------------------------------------- rendering

    def margin_width(self) -> int:
        bold = self.font()
        bold.setBold(True)
        return QFontMetrics(bold).horizontalAdvance(MARGIN_SAMPLE) + 16

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self.setViewportMargins(self.margin_width(), 0, 0, 0)
            area = self.contentsRect()
            self.margin.setGeometry(QRect(area.left(), area.top(), self.margin_width(), area.height()))

    def document_margin(self) -> int:
        return int(self.document().documentMargin())

    def block_at(self, y: float) -> QTextBlock:
        """The first block whose bottom is at or below ``y`` (document coordinates; invalid when none is): found
        by halving, so that painting the margin at the end of a long meeting does not walk every block above."""
        document = self.document()
        layout = document.documentLayout()
        low, high = 0, document.blockCount()
        while low < high:
            middle = (low + high) // 2
            if layout.blockBoundingRect(document.findBlockByNumber(middle)).bottom() >= y:
                high = middle
            else:
                low = middle + 1
        return document.findBlockByNumber(low)  # invalid past the last block

    def colour_of(self, speaker: str | None) -> QColor:
        speakers = self.transcript.speakers if self.transcript is not None else ()
        return speaker_colour(speakers, speaker, self.palette())

    def set_transcript(self, transcript: Transcript | None, paragraphs: list[Paragraph]) -> None:
        """Show ``transcript``; the cursor and the scroll position stay where they were.

        Only the paragraphs that read differently are written again: the longest run of paragraphs at either end
        that show the same words (a renamed or reassigned speaker is drawn in the margin, not written in the
        text) keeps its blocks, so that a rename, a split or an edit in a three-hour meeting rewrites a few
        paragraphs, not 26,000 words. A paragraph typed in is always written again (its spaces normalised)."""
        # The selection too (as block and offset, which survive rewriting other paragraphs): selecting words
        # and then choosing a speaker for them reads the typed paragraph back first, and must not lose the selection.
        anchor, position = self._place(self.textCursor().anchor()), self._place(self.textCursor().position())
        scroll = self.verticalScrollBar().value()
        previous, previous_paragraphs = self.transcript, self.paragraphs
        document = self.document()
        self._rendering = True
        self.transcript, self.paragraphs = transcript, paragraphs
        shown = paragraphs if transcript is not None else []
        kept = document.blockCount() == len(previous_paragraphs) == len(self.spans) and previous is not None
        if transcript is None or previous is None or not kept or not shown or not previous_paragraphs:
            first, old_end, new_end = 0, document.blockCount(), len(shown)
            spans_before: list[list[WordSpan]] = []
            spans_after: list[list[WordSpan]] = []
        else:
            first, old_end, new_end = self._changed_range(previous, previous_paragraphs, transcript, shown)
            shift = len(transcript.segments) - len(previous.segments)
            spans_before = self.spans[:first]
            spans_after = [
                spans if not shift else [WordSpan(s.start, s.end, s.segment + shift, s.token, s.seconds) for s in spans]
                for spans in self.spans[old_end:]
            ]
        # Nothing to write when every paragraph shows what it did (a rename): the margin draws the new names.
        if first < max(old_end, new_end) or not shown:
            middle = self._rewrite(first, old_end, transcript, shown[first:new_end])
            self.spans = [*spans_before, *middle, *spans_after]
            self._timeline = sorted(
                (span.seconds, number, index)
                for number, spans in enumerate(self.spans)
                for index, span in enumerate(spans)
            )
        self._typed.clear()
        self._dirty.clear()
        self.playing = None
        restored = QTextCursor(document)
        restored.setPosition(self._position_of(*anchor))
        restored.setPosition(self._position_of(*position), QTextCursor.MoveMode.KeepAnchor)
        self.setTextCursor(restored)
        self.verticalScrollBar().setValue(scroll)
        self._rendering = False
        self._refresh_selections()
        self.margin.update()

    def _changed_range(
        self,
        previous: Transcript,
        previous_paragraphs: list[Paragraph],
        transcript: Transcript,
        paragraphs: list[Paragraph],
    ) -> tuple[int, int, int]:
        """(first, old end, new end): blocks ``first`` to ``old end`` become paragraphs ``first`` to ``new end``;
        the blocks before and after show the same words as before (the range may be empty)."""
        stale = self._typed | self._dirty
        shift = len(transcript.segments) - len(previous.segments)
        limit = min(len(previous_paragraphs), len(paragraphs))
        first = 0
        while (
            first < limit
            and first not in stale
            and _shows_same(previous, previous_paragraphs[first], transcript, paragraphs[first], 0)
        ):
            first += 1
        after = 0
        while (
            after < limit - first
            and len(previous_paragraphs) - 1 - after not in stale
            and _shows_same(previous, previous_paragraphs[-1 - after], transcript, paragraphs[-1 - after], shift)
        ):
            after += 1
        return first, len(previous_paragraphs) - after, len(paragraphs) - after

    def _rewrite(
        self, first: int, old_end: int, transcript: Transcript | None, paragraphs: list[Paragraph]
    ) -> list[list[WordSpan]]:
        """Replace blocks ``first`` to ``old_end`` with ``paragraphs``, as one edit of the document (laid out
        once); where each word went."""
        document = self.document()
        writer = QTextCursor(document)
        writer.beginEditBlock()
        block_format = QTextBlockFormat()
        block_format.setTopMargin(10)  # paragraphs (speaker turns) apart
        if old_end <= first:  # nothing removed: new blocks go in before block ``first`` (or at the end)
            if first < document.blockCount():
                writer.setPosition(document.findBlockByNumber(first).position())
                if paragraphs:
                    writer.insertBlock(block_format, QTextCharFormat())
                    writer.movePosition(QTextCursor.MoveOperation.PreviousBlock)
            else:
                writer.movePosition(QTextCursor.MoveOperation.End)
                if paragraphs and first > 0:
                    writer.insertBlock(block_format, QTextCharFormat())
        else:
            start = document.findBlockByNumber(first)
            last = document.findBlockByNumber(old_end - 1)
            if not paragraphs:  # the blocks go, with the line break before (or after) them
                begin = start.position() - 1 if first > 0 else start.position()
                end = last.position() + last.length() - (1 if first > 0 or old_end >= document.blockCount() else 0)
                writer.setPosition(max(0, begin))
                writer.setPosition(min(end, document.characterCount() - 1), QTextCursor.MoveMode.KeepAnchor)
                writer.removeSelectedText()
                writer.endEditBlock()
                return []
            writer.setPosition(start.position())
            writer.setPosition(last.position() + last.length() - 1, QTextCursor.MoveMode.KeepAnchor)
            writer.removeSelectedText()
        writer.setBlockFormat(block_format)
        spans: list[list[WordSpan]] = []
        assert transcript is not None or not paragraphs
        for number, paragraph in enumerate(paragraphs):
            assert transcript is not None
            if number:
                writer.insertBlock(block_format, QTextCharFormat())
            spans.append(self._write_paragraph(writer, transcript, paragraph))
        writer.endEditBlock()
        return spans

    def _place(self, position: int) -> tuple[int, int]:
        block = self.document().findBlock(position)
        return block.blockNumber(), position - block.position()

    def _position_of(self, number: int, offset: int) -> int:
        """A (block, offset) place as a document position, kept inside the document as it is now."""
        document = self.document()
        block = document.findBlockByNumber(min(number, max(0, document.blockCount() - 1)))
        return block.position() + min(offset, max(0, block.length() - 1))

    def _write_paragraph(self, writer: QTextCursor, transcript: Transcript, paragraph: Paragraph) -> list[WordSpan]:
        """Write one paragraph's words at ``writer`` (the start of an empty block); where each word went.

        Plain words go in one piece; only a doubtful word is a piece of its own (its format and tooltip)."""
        plain = QTextCharFormat()
        doubtful = QTextCharFormat()
        doubtful.setUnderlineStyle(QTextCharFormat.UnderlineStyle.WaveUnderline)
        doubtful.setUnderlineColor(self.palette().color(QPalette.ColorRole.Highlight))
        spans: list[WordSpan] = []
        pending: list[str] = []  # plain text not written yet
        at = 0  # the block position the next character goes to, in UTF-16 units as Qt counts
        for position, token in enumerate(paragraph_tokens(transcript, paragraph)):
            if position:
                pending.append(" ")
                at += 1
            length = len(token.text) if token.text.isascii() else len(token.text.encode("utf-16-le")) // 2
            if token.word is not None and token.word.probability < LOW_CONFIDENCE:
                if pending:
                    writer.insertText("".join(pending), plain)
                    pending.clear()
                doubtful.setToolTip(
                    f"Uncertain word ({token.word.probability:.0%} confidence): the recognizer was unsure of it. "
                    "Listen to check it."
                )
                writer.insertText(token.text, doubtful)
            else:
                pending.append(token.text)
            seconds = token.start if token.start is not None else transcript.segments[token.segment].start
            spans.append(WordSpan(at, at + length, token.segment, token.index, seconds))
            at += length
        if pending:
            writer.insertText("".join(pending), plain)
        return spans

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        area = self.contentsRect()
        self.margin.setGeometry(QRect(area.left(), area.top(), self.margin_width(), area.height()))
        self._scrolled()

    def _scrolled(self, _value: int = 0) -> None:
        self.margin.update()
        if self._matches and not self._rendering and self._visible_blocks() != self._shown_blocks:
            self._refresh_selections()  # the matches now in view are marked

    # ------------------------------------------------------------------------------------------- editing

    def set_editing(self, editing: bool) -> None:
        """Editing: the text takes a cursor and typing; reading: a click on a word plays it, keys change nothing."""
        if editing == self.editing:
            return
        if not editing:
            self.commit_pending()
        self.editing = editing
        self._apply_mode()
        if editing:
            self.setFocus(Qt.FocusReason.OtherFocusReason)
        self.editing_changed.emit(editing)

    def _apply_mode(self) -> None:
        self.setReadOnly(not self.editing)
        if not self.editing:
            # Selectable with the mouse (words to give to a speaker), but no caret and nothing typed.
            self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # The pointer says what a click does: a hand plays the word, the text beam puts the cursor.
        self.viewport().setCursor(Qt.CursorShape.IBeamCursor if self.editing else Qt.CursorShape.PointingHandCursor)

    def start_rename(self, number: int) -> None:
        """A field over paragraph ``number``'s speaker name, to type the new name in."""
        speaker = self.paragraphs[number].speaker if number < len(self.paragraphs) else None
        if speaker is None:
            return
        self.commit_pending()
        self._rename.start(speaker, self.margin.name_rect(number).translated(self.margin.pos()))

    @property
    def rename_field(self) -> InlineRename:
        return self._rename

    def _contents_changed(self, position: int, removed: int, added: int) -> None:
        if self._rendering:
            return
        document = self.document()
        for at in (position, position + added):
            block = document.findBlock(min(at, max(0, document.characterCount() - 1)))
            if block.isValid():
                self._dirty.add(block.blockNumber())

    def _cursor_moved(self) -> None:
        if self._rendering or not self._dirty:
            return
        if self.textCursor().blockNumber() not in self._dirty:
            # Read the paragraph the cursor left once this event is handled (it re-renders the document).
            QTimer.singleShot(0, self.commit_pending)

    def has_pending_edits(self) -> bool:
        return bool(self._dirty)

    def commit_pending(self) -> None:
        """Hand the typed changes to the view (which re-renders): {paragraph: text} for each touched one.

        Called when the cursor leaves the paragraph, the editor loses the focus, before any other edit, undo,
        another job or closing; never on a pause in the typing: the re-rendered paragraph has its spaces
        normalised, which would join the word being typed to the one before it."""
        if not self._dirty or self._rendering:
            return
        document = self.document()
        if document.blockCount() != len(self.paragraphs):
            # The paragraph structure changed under us (it should not: Enter and joining keys are refused);
            # the transcript wins and the typing is dropped rather than given to the wrong paragraph.
            self.set_transcript(self.transcript, self.paragraphs)
            return
        edited = {number: document.findBlockByNumber(number).text() for number in sorted(self._dirty)}
        self._typed |= self._dirty
        self._dirty.clear()
        self.words_edited.emit(edited)

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        self.commit_pending()

    def _joins_paragraphs(self, event: QKeyEvent) -> bool:
        """Keys that would join two paragraphs (or change the text of several at once) in the document."""
        cursor = self.textCursor()
        if cursor.hasSelection():
            document = self.document()
            spans_blocks = (
                document.findBlock(cursor.selectionStart()).blockNumber()
                != document.findBlock(cursor.selectionEnd()).blockNumber()
            )
            changes_text = bool(event.text()) or event.key() in (Qt.Key.Key_Backspace, Qt.Key.Key_Delete)
            return spans_blocks and (changes_text or event.matches(QKeySequence.StandardKey.Cut))
        if event.key() == Qt.Key.Key_Backspace and cursor.atBlockStart():
            return True
        return event.key() == Qt.Key.Key_Delete and cursor.atBlockEnd()

    @staticmethod
    def _would_type(event: QKeyEvent) -> bool:
        """A key that changes text where text is editable (not a shortcut such as Ctrl+C, nor a move)."""
        commands = (
            Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier | Qt.KeyboardModifier.MetaModifier
        )
        if event.modifiers() & commands:
            return False
        text = event.text()
        return (bool(text) and text.isprintable()) or event.key() in (Qt.Key.Key_Backspace, Qt.Key.Key_Delete)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.matches(QKeySequence.StandardKey.Undo):
            self.commit_pending()
            self.undo_requested.emit()
            return
        if event.matches(QKeySequence.StandardKey.Redo):
            self.commit_pending()
            self.redo_requested.emit()
            return
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
                self.commit_pending()
                self.split_requested.emit()
                return
            event.ignore()  # paragraphs are speaker turns: split one with "Split here" (Ctrl+Return in the view)
            return
        if self.editing and event.key() == Qt.Key.Key_Escape:
            self.set_editing(False)
            return
        if not self.editing and self._would_type(event):
            QToolTip.showText(
                self.viewport().mapToGlobal(self.cursorRect().bottomLeft()),
                "Reading: double-click a word, or press Edit text, to correct the transcript.",
                self,
            )
            return
        if self._joins_paragraphs(event):
            return
        super().keyPressEvent(event)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        # Files dragged over the transcript are for the queue (the window takes them), not text to insert.
        return source.hasText() and not source.hasUrls()

    def insertFromMimeData(self, source: QMimeData) -> None:
        cursor = self.textCursor()
        document = self.document()
        if document.findBlock(cursor.selectionStart()) != document.findBlock(cursor.selectionEnd()):
            return
        cursor.insertText(" ".join(source.text().split()))  # a pasted line break would make a new paragraph

    # ------------------------------------------------------------------------------------------- words

    def word_at(self, position: int) -> tuple[int, WordSpan] | None:
        """The paragraph and word at a document position (the nearest word before it, in the gaps)."""
        block = self.document().findBlock(position)
        number = block.blockNumber()
        if not block.isValid() or number >= len(self.spans) or not self.spans[number]:
            return None
        offset = position - block.position()
        spans = self.spans[number]
        index = max(0, bisect.bisect_right([span.start for span in spans], offset) - 1)
        return number, spans[index]

    def word_rect(self, paragraph: int, index: int) -> QRect:
        """Where a word is drawn, in the viewport's coordinates (what a click there hits)."""
        span = self.spans[paragraph][index]
        cursor = QTextCursor(self.document().findBlockByNumber(paragraph))
        cursor.setPosition(cursor.block().position() + (span.start + span.end) // 2)
        return self.cursorRect(cursor)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        super().mouseReleaseEvent(event)
        # While editing, a click puts the text cursor and only that; playing is the time stamps' and Play's.
        if self.editing or event.button() != Qt.MouseButton.LeftButton or self.textCursor().hasSelection():
            return
        position = self.cursorForPosition(event.position().toPoint()).position()
        found = self.word_at(position)
        if found is not None and found[0] not in self._dirty:  # positions in a paragraph being typed are stale
            self.word_clicked.emit(found[1].seconds)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        """A double-click on a word starts editing there, the word selected to be typed over."""
        if not self.editing and event.button() == Qt.MouseButton.LeftButton:
            self.set_editing(True)
        super().mouseDoubleClickEvent(event)

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            # An uncertain word says so (and how sure the recognizer was) under the pointer.
            cursor = self.cursorForPosition(event.pos())
            cursor.movePosition(QTextCursor.MoveOperation.Right)
            tip = cursor.charFormat().toolTip()
            if tip:
                QToolTip.showText(event.globalPos(), tip, self.viewport())
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)

    def has_uncertain_words(self) -> bool:
        transcript = self.transcript
        return transcript is not None and any(
            word.probability < LOW_CONFIDENCE for segment in transcript.segments for word in segment.words
        )

    def selected_words(self) -> tuple[tuple[int, WordSpan], tuple[int, WordSpan]] | None:
        """The first and last word the selection touches (or the word at the cursor)."""
        cursor = self.textCursor()
        first = self.word_at(cursor.selectionStart())
        last = self.word_at(max(cursor.selectionStart(), cursor.selectionEnd() - 1))
        if first is None or last is None:
            return None
        return first, last

    # ------------------------------------------------------------------------------------------- playback

    def show_playing(self, seconds: float) -> None:
        """Mark the word being heard; with "follow playback" on, keep it in view (the cursor stays put)."""
        index = bisect.bisect_right(self._timeline, (seconds, float("inf"), 0)) - 1
        while index > 0 and self._timeline[index - 1][0] == self._timeline[index][0]:
            index -= 1  # words the aligner gave one start time: the first of them is heard first
        playing = None if index < 0 else (self._timeline[index][1], self._timeline[index][2])
        if playing == self.playing:
            return
        self.playing = playing
        self._refresh_selections()
        if playing is not None and self.follow_playback and playing[0] not in self._dirty:
            rect = self.word_rect(*playing)
            if not self.viewport().rect().contains(rect):
                bar = self.verticalScrollBar()
                bar.setValue(bar.value() + rect.top() - self.viewport().height() // 3)

    def playing_word(self) -> str | None:
        if self.playing is None:
            return None
        block, index = self.playing
        span = self.spans[block][index]
        return self.document().findBlockByNumber(block).text()[span.start : span.end]

    # ------------------------------------------------------------------------------------------- search

    def set_matches(self, matches: list[tuple[int, int, int]]) -> None:
        self._matches = sorted(matches)
        self._refresh_selections()

    def _visible_blocks(self) -> tuple[int, int]:
        """The first and last block (numbers) at least partly in view."""
        top = self.verticalScrollBar().value() - self.document_margin()
        first = self.block_at(top)
        last = self.block_at(top + self.viewport().height())
        count = self.document().blockCount()
        return (
            first.blockNumber() if first.isValid() else count - 1,
            last.blockNumber() if last.isValid() else count - 1,
        )

    def _refresh_selections(self) -> None:
        """The search matches in view and the word being heard, as extra selections. Only those in view: a
        one-letter search in a long meeting finds tens of thousands, and Qt looks at every extra selection on
        every paint (each position update while playing)."""
        palette = self.palette()
        selections: list[QTextEdit.ExtraSelection] = []
        found = QColor(palette.color(QPalette.ColorRole.Highlight))
        found.setAlpha(70)
        self._shown_blocks = self._visible_blocks() if self._matches else None
        if self._shown_blocks is not None:
            first, last = self._shown_blocks
            begin = bisect.bisect_left(self._matches, (first, -1, -1))
            end = bisect.bisect_left(self._matches, (last + 1, -1, -1))
            document = self.document()
            for block, start, stop in self._matches[begin:end]:
                # Matches of the text before an edit are looked for again after it; until then, one that no
                # longer fits its paragraph is not drawn.
                if stop < document.findBlockByNumber(block).length():
                    selections.append(self._selection(block, start, stop, background=found))
        # Not in a paragraph being typed in: its words' places are those from before the typing, and a shortened
        # last paragraph puts them past the document's end.
        if self.playing is not None and self.playing[0] not in self._dirty:
            block, index = self.playing
            span = self.spans[block][index]
            selections.append(
                self._selection(
                    block,
                    span.start,
                    span.end,
                    background=palette.color(QPalette.ColorRole.Highlight),
                    foreground=palette.color(QPalette.ColorRole.HighlightedText),
                )
            )
        self.setExtraSelections(selections)

    def _selection(
        self, block: int, start: int, end: int, background: QColor, foreground: QColor | None = None
    ) -> QTextEdit.ExtraSelection:
        selection = QTextEdit.ExtraSelection()
        cursor = QTextCursor(self.document().findBlockByNumber(block))
        base = cursor.block().position()
        cursor.setPosition(base + start)
        cursor.setPosition(base + end, QTextCursor.MoveMode.KeepAnchor)
        selection.cursor = cursor
        selection.format.setBackground(background)
        if foreground is not None:
            selection.format.setForeground(foreground)
        selection.format.setProperty(QTextFormat.Property.FullWidthSelection, False)
        return selection
