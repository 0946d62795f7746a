"""Give every word a speaker and cut segments where the speaker changes."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from app.core.engine.diarize.base import Turn
from app.core.transcript.document import Segment, SpeakerTurn, Word

NEAR_TURNS = 64  # the turns looked at on each side of a word: a word overlaps at most a few turns


def long_turns(turns: Sequence[Turn], turn_starts: Sequence[float]) -> tuple[int, ...]:
    """Indices of the turns still running when more than :data:`NEAR_TURNS` later turns have started (a long
    monologue under many back-channels): the window around a word would not reach back to them."""
    return tuple(
        index for index, turn in enumerate(turns) if bisect.bisect_left(turn_starts, turn.end) - index > NEAR_TURNS
    )


def speaker_for_span(
    start: float, end: float, turns: Sequence[Turn], turn_starts: Sequence[float], spanning: Sequence[int]
) -> str | None:
    """The speaker whose turns overlap [start, end] the most; the nearest turn when none overlaps.
    ``spanning``: :func:`long_turns` of ``turns``."""
    if not turns:
        return None
    # Turns are sorted by start; only those starting before ``end`` can overlap.
    last = bisect.bisect_left(turn_starts, end)
    first = max(0, last - NEAR_TURNS)
    # The turns near the word, and the long ones that started before them and may still be running (each once).
    earlier = {index for index in spanning if index < first}
    near = [turns[index] for index in sorted(earlier | set(range(first, last)))]
    overlap: dict[str, float] = {}
    for turn in near:
        shared = min(end, turn.end) - max(start, turn.start)
        if shared > 0:
            overlap[turn.speaker] = overlap.get(turn.speaker, 0.0) + shared
    if overlap:
        return max(overlap, key=lambda name: overlap[name])
    middle = (start + end) / 2
    # The nearest turn starts just before or after the word: look there, not through all of a long recording's
    # turns (a three-hour meeting has thousands, and words in pauses are many).
    around = [turns[index] for index in sorted(earlier | set(range(first, min(len(turns), last + NEAR_TURNS))))]
    # A word the alignment gives no duration ("I" at 12.08-12.08 s) overlaps nothing, yet lies inside a turn:
    # that turn is its speaker (the longest, where two people talk at once), not the nearest turn edge.
    inside = [turn for turn in around if turn.start <= middle <= turn.end]
    if inside:
        return max(inside, key=lambda turn: turn.end - turn.start).speaker
    nearest = min(around, key=lambda turn: min(abs(turn.start - middle), abs(turn.end - middle)))
    return nearest.speaker


def assign_speakers(
    segments: Sequence[Segment], turns: Sequence[Turn]
) -> tuple[tuple[Segment, ...], tuple[str, ...], tuple[SpeakerTurn, ...]]:
    """Label words with speakers, split segments at speaker changes, and rename speakers SPEAKER_00,
    SPEAKER_01 … in order of first appearance in the transcript (then in the turns, for a speaker who
    was heard but said no recognised word). Returns segments, speaker names and the renamed turns."""
    ordered = sorted(turns, key=lambda turn: turn.start)
    starts = [turn.start for turn in ordered]
    spanning = long_turns(ordered, starts)
    names: dict[str, str] = {}

    def public(raw: str | None) -> str | None:
        if raw is None:
            return None
        if raw not in names:
            names[raw] = f"SPEAKER_{len(names):02d}"
        return names[raw]

    # Label every word, across segment borders, then move changes near a sentence end to it. Short runs between
    # two runs of another speaker were once taken for diarization blips and given to the speakers around them;
    # measured on the nine AMI clips and the phone call, all 7 such words that the reference places were
    # interjections said by the short run's speaker ("Hello.", "Neither did I", "No,"), none a blip.
    labels: list[str | None] = []
    for segment in segments:
        for word in segment.words:
            labels.append(speaker_for_span(word.start, word.end, ordered, starts, spanning))
    words = [word for segment in segments for word in segment.words]
    labels = _snap_to_sentences(words, labels)

    result: list[Segment] = []
    index = 0
    for segment in segments:
        if not segment.words:
            speaker = public(speaker_for_span(segment.start, segment.end, ordered, starts, spanning))
            result.append(Segment(segment.start, segment.end, segment.text, (), speaker))
            continue
        labelled = []
        for word in segment.words:
            labelled.append(Word(word.start, word.end, word.word, word.probability, public(labels[index])))
            index += 1
        run: list[Word] = [labelled[0]]
        for word in labelled[1:]:
            if word.speaker != run[-1].speaker:
                result.append(_segment_from_words(run))
                run = []
            run.append(word)
        result.append(_segment_from_words(run))
    renamed = tuple(SpeakerTurn(turn.start, turn.end, public(turn.speaker) or turn.speaker) for turn in ordered)
    return tuple(result), tuple(names.values()), renamed


# A speaker change this many words from a sentence end moves to the sentence end: people hand over the
# word at the end of a sentence far more often than in its middle.
SNAP_WORDS = 2
_SENTENCE_END = (".", "?", "!", "…")


def _runs(labels: list[str | None]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    begin = 0
    for index in range(1, len(labels) + 1):
        if index == len(labels) or labels[index] != labels[begin]:
            runs.append((begin, index))
            begin = index
    return runs


def _snap_to_sentences(words: list[Word], labels: list[str | None]) -> list[str | None]:
    labels = list(labels)
    for begin, _ in _runs(labels)[1:]:
        if labels[begin] == labels[begin - 1]:
            continue  # an earlier snap already moved this border
        if words[begin - 1].word.rstrip().endswith(_SENTENCE_END):
            continue
        # Nearest sentence end within SNAP_WORDS words on either side of the border.
        for distance in range(1, SNAP_WORDS + 1):
            earlier = begin - 1 - distance
            if earlier >= 0 and words[earlier].word.rstrip().endswith(_SENTENCE_END):
                labels[earlier + 1 : begin] = [labels[begin]] * (begin - earlier - 1)
                break
            later = begin - 1 + distance
            if later < len(words) - 1 and words[later].word.rstrip().endswith(_SENTENCE_END):
                labels[begin : later + 1] = [labels[begin - 1]] * (later + 1 - begin)
                break
    return labels


def _segment_from_words(words: list[Word]) -> Segment:
    text = "".join(word.word for word in words).strip()
    return Segment(start=words[0].start, end=words[-1].end, text=text, words=tuple(words), speaker=words[0].speaker)
