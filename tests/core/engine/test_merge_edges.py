"""Merging words with speaker turns: the edges mutation testing found unpinned (segments without words, words in
silence or of no duration, snaps next to other speaker changes, whitespace after a sentence end)."""

from __future__ import annotations

import pytest

from app.core.engine.diarize.base import Turn
from app.core.engine.merge import assign_speakers
from app.core.transcript.document import Segment, Word

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers


def _speakers(texts: list[str], owners: str) -> list[tuple[str, str]]:
    """Words 0.5 s each; ``owners`` gives each word's diarized speaker, one letter per word ("AABBB"). Returns
    (speaker as its letter, text) per output segment."""
    assert len(texts) == len(owners)
    spec = [Word(0.5 * i, 0.5 * i + 0.5, f" {text}", 0.9) for i, text in enumerate(texts)]
    turns: list[Turn] = []
    for i, owner in enumerate(owners):
        if turns and turns[-1].speaker == owner:
            turns[-1] = Turn(turns[-1].start, 0.5 * i + 0.5, owner)
        else:
            turns.append(Turn(0.5 * i, 0.5 * i + 0.5, owner))
    segments, _, renamed = assign_speakers([Segment(0.0, 0.5 * len(texts), " ".join(texts), tuple(spec))], turns)
    letter = {turn.speaker: original.speaker for turn, original in zip(renamed, turns, strict=True)}
    return [(letter[s.speaker or ""], s.text) for s in segments]


def test_a_segment_without_words_takes_the_speaker_of_its_span_and_keeps_its_text() -> None:
    music = Segment(0.0, 1.0, "[music]", ())
    hello = Segment(2.0, 2.5, "Hello", (Word(2.0, 2.5, " Hello", 0.37),))
    segments, speakers, renamed = assign_speakers([music, hello], [Turn(0.0, 1.5, "B"), Turn(1.5, 4.0, "A")])
    assert [(s.start, s.end, s.text, s.words, s.speaker) for s in segments[:1]] == [
        (0.0, 1.0, "[music]", (), "SPEAKER_00")
    ]
    assert [(s.text, s.speaker) for s in segments[1:]] == [("Hello", "SPEAKER_01")]
    assert segments[1].words[0].probability == 0.37
    assert speakers == ("SPEAKER_00", "SPEAKER_01")
    assert [(t.start, t.end, t.speaker) for t in renamed] == [(0.0, 1.5, "SPEAKER_00"), (1.5, 4.0, "SPEAKER_01")]


@pytest.mark.parametrize(
    ("word", "turns", "expected"),
    [
        # 2.0-2.5 s, between A (ended 0.2 s before) and B (starts 1.5 s after): A.
        ((2.0, 2.5), [Turn(0.0, 1.8, "A"), Turn(4.0, 5.0, "B")], "A"),
        # A ended 1.25 s before its middle, B starts 0.35 s after it: B, though B's end is far.
        ((2.0, 2.5), [Turn(0.0, 1.0, "A"), Turn(2.6, 5.0, "B")], "B"),
        # A ends right where the word starts (0.25 s from its middle), B starts 0.75 s after it: A, though A's
        # start is far.
        ((2.0, 2.5), [Turn(0.0, 2.0, "A"), Turn(3.0, 4.0, "B")], "A"),
    ],
    ids=["earlier-end-nearer", "later-start-nearer", "end-touching"],
)
def test_a_word_in_silence_takes_the_turn_whose_edge_is_nearest(
    word: tuple[float, float], turns: list[Turn], expected: str
) -> None:
    segment = Segment(word[0], word[1], "Right", (Word(word[0], word[1], " Right", 0.9),))
    segments, _, renamed = assign_speakers([segment], turns)
    letter = {turn.speaker: original.speaker for turn, original in zip(renamed, turns, strict=True)}
    assert letter[segments[0].speaker or ""] == expected


@pytest.mark.parametrize(
    ("turns", "expected"),
    [
        # An instant at 1.0 s, where A (0-1 s) ends and the longer B (1-5 s) starts: B.
        ([Turn(0.0, 1.0, "A"), Turn(1.0, 5.0, "B")], "B"),
        # A (0-1 s) ends there and the shorter B (1-1.5 s) starts there: A, the longer.
        ([Turn(0.0, 1.0, "A"), Turn(1.0, 1.5, "B")], "A"),
        # A (0-1 s) ends there, inside B (0.5-3 s) where both talk at once: B, the longer, though A's overlap
        # with a zero-length word (0 s) is no smaller than B's.
        ([Turn(0.0, 1.0, "A"), Turn(0.5, 3.0, "B")], "B"),
    ],
    ids=["longer-starts-there", "longer-ends-there", "inside-an-overlap"],
)
def test_a_word_without_duration_on_a_turn_edge_takes_the_longer_turn_it_touches(
    turns: list[Turn], expected: str
) -> None:
    segment = Segment(1.0, 1.0, "I", (Word(1.0, 1.0, " I", 0.9),))
    segments, _, renamed = assign_speakers([segment], turns)
    letter = {turn.speaker: original.speaker for turn, original in zip(renamed, turns, strict=True)}
    assert letter[segments[0].speaker or ""] == expected


def test_a_change_after_the_first_word_snaps_forward_to_the_sentence_end() -> None:
    texts = ["Well", "yes.", "Then", "we", "go"]
    assert _speakers(texts, "ABBBB") == [("A", "Well yes."), ("B", "Then we go")]


def test_a_snap_next_to_another_change_leaves_the_later_speakers_words_in_place() -> None:
    # Back to "there." (two words before the change to B); C's change is at a sentence end and stays.
    texts = ["Hi", "there.", "so", "we", "go", "on", "well.", "Bye", "now"]
    assert _speakers(texts, "AAAABBBCC") == [("A", "Hi there."), ("B", "so we go on well."), ("C", "Bye now")]
    # Forward to "today." (two words after the change to B); the same for C.
    texts = ["we", "will", "go", "there", "today.", "Fine", "indeed.", "Bye", "then"]
    assert _speakers(texts, "AAABBBBCC") == [("A", "we will go there today."), ("B", "Fine indeed."), ("C", "Bye then")]


def test_every_change_is_snapped_not_only_the_first() -> None:
    # B's one word "go." goes to A (the change moves forward to its sentence end); the change back to A then has
    # nothing left to move, and C's change, one word after "fine.", still moves back to it.
    texts = ["we", "will", "go.", "so", "fine.", "then", "Good", "by", "me"]
    assert _speakers(texts, "AABAAACCC") == [("A", "we will go. so fine."), ("C", "then Good by me")]
    # A change at a sentence end stays, and a later one is still snapped.
    texts = ["Hi.", "so", "we", "go", "on", "then", "okay.", "Fine", "by"]
    assert _speakers(texts, "ABBBBBCCC") == [("A", "Hi."), ("B", "so we go on then okay."), ("C", "Fine by")]


def test_a_forward_snap_gives_the_words_to_the_speaker_just_before_the_change() -> None:
    # B says one word ("and") between A and C; C's change moves forward to "stop.", whose words go to B, not A.
    texts = ["so", "we", "can", "go", "and", "then", "stop.", "Right", "on"]
    assert _speakers(texts, "AAAABCCCC") == [("A", "so we can go"), ("B", "and then stop."), ("C", "Right on")]


def test_the_snap_reaches_the_word_before_the_last() -> None:
    assert _speakers(["we", "will", "go", "now.", "ok"], "AAABB") == [("A", "we will go now."), ("B", "ok")]


def test_whitespace_after_a_sentence_end_still_ends_the_sentence() -> None:
    # The change is right after "okay. ": it stays, though "No." is one word later.
    assert _speakers(["Yes", "okay. ", "No.", "fine"], "AABB") == [("A", "Yes okay."), ("B", "No. fine")]
    # Back to "Right. " and forward to "today. ".
    texts = ["Right. ", "so", "we", "go", "on", "now", "then", "okay"]
    assert _speakers(texts, "AAABBBBB") == [("A", "Right."), ("B", "so we go on now then okay")]
    texts = ["we", "will", "go", "there", "today. ", "Fine", "by", "me", "then"]
    assert _speakers(texts, "AAABBBBBB") == [("A", "we will go there today."), ("B", "Fine by me then")]
