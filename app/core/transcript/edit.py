"""Edits a person makes to a transcript, as pure functions from one :class:`Transcript` to the next.

The editor shows speaker paragraphs (consecutive segments of one speaker); each function here takes paragraph
or word positions and returns a new transcript, so that undo is keeping the previous one. Word timings survive
every edit that does not touch the word: a corrected paragraph is diffed against its old words, and only the
words that changed get new timings (spread over the time the words they replace took).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from app.core.transcript.document import Segment, Transcript, Word

# A word the user typed is as certain as anything in the transcript: it is never marked as doubtful.
TYPED_PROBABILITY = 1.0


@dataclass(frozen=True)
class Paragraph:
    speaker: str | None
    segments: tuple[int, ...]  # indices into transcript.segments, consecutive
    start: float
    end: float


@dataclass(frozen=True)
class Token:
    """One word of a paragraph as the editor shows it. ``word`` is None in a segment without word timings
    (a dictation, a line corrected by an older Scriba): there the words share their segment's time."""

    segment: int
    index: int  # position within the segment's tokens
    text: str
    word: Word | None

    @property
    def start(self) -> float | None:
        return None if self.word is None else self.word.start


def paragraphs(transcript: Transcript) -> list[Paragraph]:
    found: list[Paragraph] = []
    for index, segment in enumerate(transcript.segments):
        if found and found[-1].speaker == segment.speaker:
            last = found[-1]
            found[-1] = replace(last, segments=(*last.segments, index), end=max(last.end, segment.end))
        else:
            found.append(Paragraph(segment.speaker, (index,), segment.start, segment.end))
    return found


def segment_tokens(transcript: Transcript, segment_index: int) -> list[Token]:
    segment = transcript.segments[segment_index]
    if segment.words:
        return [
            Token(segment_index, position, word.word.strip(), word)
            for position, word in enumerate(item for item in segment.words if item.word.strip())
        ]
    return [Token(segment_index, position, text, None) for position, text in enumerate(segment.text.split())]


def paragraph_tokens(transcript: Transcript, paragraph: Paragraph) -> list[Token]:
    return [token for index in paragraph.segments for token in segment_tokens(transcript, index)]


def paragraph_text(transcript: Transcript, paragraph: Paragraph) -> str:
    return " ".join(token.text for token in paragraph_tokens(transcript, paragraph))


def _spread(texts: list[str], start: float, end: float, speaker: str | None) -> list[Word]:
    """New words over [start, end], each an equal share: the best guess without aligning the audio again."""
    if end < start:
        end = start
    step = (end - start) / len(texts) if texts else 0.0
    return [
        Word(start + step * n, start + step * (n + 1), " " + text, TYPED_PROBABILITY, speaker)
        for n, text in enumerate(texts)
    ]


def _rebuild(transcript: Transcript, segment_indices: Iterable[int], tokens: list[Token]) -> Transcript:
    """Put ``tokens`` back into the segments they belong to; a segment left without words goes."""
    indices = list(segment_indices)
    by_segment: dict[int, list[Token]] = {index: [] for index in indices}
    for token in tokens:
        by_segment[token.segment].append(token)
    rebuilt: dict[int, Segment | None] = {}
    for index in indices:
        segment = transcript.segments[index]
        kept = by_segment[index]
        if not kept:
            rebuilt[index] = None
            continue
        words = tuple(token.word for token in kept if token.word is not None) if segment.words else ()
        rebuilt[index] = replace(segment, text=" ".join(token.text for token in kept), words=words)
    segments = tuple(
        kept_segment
        for index, original in enumerate(transcript.segments)
        if (kept_segment := rebuilt.get(index, original)) is not None
    )
    return replace(transcript, segments=segments)


def _new_words_place(old: list[Token], tag: str, i1: int, i2: int) -> tuple[Token, float, float]:
    """The token whose segment receives new words, and the time they take: that of the words they replace, or
    the gap they were typed into (the segment of the word before them, or after them at the start)."""
    if tag == "replace":
        replaced = [token.word for token in old[i1:i2] if token.word is not None]
        return old[i1], (replaced[0].start if replaced else 0.0), (replaced[-1].end if replaced else 0.0)
    before = old[i1 - 1] if i1 > 0 else None
    after = old[i1] if i1 < len(old) else None
    owner = before if before is not None else after
    assert owner is not None  # a paragraph has words (edit_paragraph returns early when it has none)
    gap_start = before.word.end if before is not None and before.word is not None else None
    gap_end = after.word.start if after is not None and after.word is not None else None
    start = gap_start if gap_start is not None else (gap_end if gap_end is not None else 0.0)
    end = gap_end if gap_end is not None and gap_end >= start else start
    return owner, start, end


def edit_paragraph(transcript: Transcript, paragraph: Paragraph, new_text: str) -> Transcript:
    """The paragraph now reads ``new_text``. Words that stayed keep their timings and confidence; changed and
    new words get the time of what they replace (or of the gap they were typed into)."""
    old = paragraph_tokens(transcript, paragraph)
    new = new_text.split()
    if [token.text for token in old] == new:
        return transcript
    if not old:
        return transcript  # nothing to anchor words to (an empty paragraph is never shown)
    result: list[Token] = []
    matcher = difflib.SequenceMatcher(None, [token.text for token in old], new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            result.extend(old[i1:i2])
            continue
        if tag == "delete":
            continue
        texts = new[j1:j2]
        owner, start, end = _new_words_place(old, tag, i1, i2)
        timed = bool(transcript.segments[owner.segment].words)
        speaker = transcript.segments[owner.segment].speaker
        words: list[Word | None] = list(_spread(texts, start, end, speaker)) if timed else [None] * len(texts)
        result.extend(Token(owner.segment, -1, text, word) for text, word in zip(texts, words, strict=True))
    return _rebuild(transcript, paragraph.segments, result)


def split_segment(transcript: Transcript, segment_index: int, token_index: int) -> Transcript:
    """Cut one segment before its ``token_index``-th word (no change at either end)."""
    tokens = segment_tokens(transcript, segment_index)
    if not 0 < token_index < len(tokens):
        return transcript
    segment = transcript.segments[segment_index]
    head, tail = tokens[:token_index], tokens[token_index:]
    if segment.words:
        cut = tail[0].word.start  # type: ignore[union-attr]
    else:  # no word timings: cut the segment's time in proportion to its words
        cut = segment.start + (segment.end - segment.start) * token_index / len(tokens)
    first = replace(
        segment,
        end=cut,
        text=" ".join(token.text for token in head),
        words=tuple(token.word for token in head if token.word is not None),
    )
    second = replace(
        segment,
        start=cut,
        text=" ".join(token.text for token in tail),
        words=tuple(token.word for token in tail if token.word is not None),
    )
    segments = (*transcript.segments[:segment_index], first, second, *transcript.segments[segment_index + 1 :])
    return replace(transcript, segments=segments)


def _with_speakers_in_use(transcript: Transcript, added: str | None) -> Transcript:
    in_use = {segment.speaker for segment in transcript.segments}
    names = [name for name in transcript.speakers if name in in_use]
    if added is not None and added not in names:
        names.append(added)
    return replace(transcript, speakers=tuple(names))


def assign_speaker(transcript: Transcript, first: tuple[int, int], last: tuple[int, int], speaker: str) -> Transcript:
    """Give the words from ``first`` to ``last`` (inclusive; each a (segment, word) position) to ``speaker``,
    cutting the segments at either end. A new name joins the speaker list; a name left without words leaves it."""
    speaker = speaker.strip()
    if not speaker:
        return transcript
    (first_segment, first_token), (last_segment, last_token) = sorted((first, last))
    # Cut after the last word first: cutting at the start shifts the indices after it by one.
    transcript = split_segment(transcript, last_segment, last_token + 1)
    before = len(transcript.segments)
    transcript = split_segment(transcript, first_segment, first_token)
    shift = len(transcript.segments) - before
    begin, end = first_segment + shift, last_segment + shift
    segments = tuple(
        replace(
            segment,
            speaker=speaker,
            words=tuple(replace(word, speaker=speaker) for word in segment.words),
        )
        if begin <= index <= end
        else segment
        for index, segment in enumerate(transcript.segments)
    )
    return _with_speakers_in_use(replace(transcript, segments=segments), speaker)


def split_paragraph(transcript: Transcript, paragraph: Paragraph, at: tuple[int, int], speaker: str) -> Transcript:
    """From the word ``at`` to the paragraph's end is said by ``speaker``: a paragraph of its own."""
    last_segment = paragraph.segments[-1]
    last_token = len(segment_tokens(transcript, last_segment)) - 1
    return assign_speaker(transcript, at, (last_segment, last_token), speaker)


def merge_with_previous(transcript: Transcript, paragraph_index: int) -> Transcript:
    """The paragraph joins the one before it (and takes its speaker): the diarizer cut one turn in two."""
    found = paragraphs(transcript)
    if not 0 < paragraph_index < len(found):
        return transcript
    previous, paragraph = found[paragraph_index - 1], found[paragraph_index]
    if previous.speaker is None:
        segments = tuple(
            replace(segment, speaker=None, words=tuple(replace(word, speaker=None) for word in segment.words))
            if index in paragraph.segments
            else segment
            for index, segment in enumerate(transcript.segments)
        )
        return _with_speakers_in_use(replace(transcript, segments=segments), None)
    last_segment = paragraph.segments[-1]
    last_token = max(0, len(segment_tokens(transcript, last_segment)) - 1)
    return assign_speaker(transcript, (paragraph.segments[0], 0), (last_segment, last_token), previous.speaker)


def replace_all(transcript: Transcript, needle: str, replacement: str) -> tuple[Transcript, int]:
    """Replace every occurrence (case-insensitive) in the text, paragraph by paragraph, keeping the timings of
    the words it does not touch. Returns the new transcript and how many were replaced."""
    if not needle:
        return transcript, 0
    pattern = re.compile(re.escape(needle), re.IGNORECASE)
    count = 0
    for paragraph in reversed(paragraphs(transcript)):  # from the end: earlier paragraphs keep their indices
        text = paragraph_text(transcript, paragraph)
        changed, found = pattern.subn(replacement, text)
        if found:
            count += found
            transcript = edit_paragraph(transcript, paragraph, changed)
    return transcript, count
