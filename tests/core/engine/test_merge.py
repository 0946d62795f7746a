"""Merging words with speaker turns."""

from __future__ import annotations

import pytest

from app.core.engine.diarize.base import Turn
from app.core.engine.merge import assign_speakers
from app.core.transcript.document import Segment, Word

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers


def words(*spec: tuple[float, float, str]) -> tuple[Word, ...]:
    return tuple(Word(start, end, text, 0.9) for start, end, text in spec)


def test_each_word_takes_the_speaker_it_overlaps_most_and_segments_split_there() -> None:
    segment = Segment(
        0.0,
        4.0,
        "Hi there. How are you doing?",
        words(
            (0.0, 0.4, " Hi"),
            (0.4, 0.9, " there."),
            (1.0, 1.3, " How"),
            (1.3, 1.5, " are"),
            (1.5, 1.7, " you"),
            (1.7, 2.2, " doing?"),
        ),
    )
    turns = [Turn(0.0, 0.95, "B"), Turn(0.95, 3.0, "A")]
    segments, speakers, renamed = assign_speakers([segment], turns)
    assert speakers == ("SPEAKER_00", "SPEAKER_01")  # in order of first appearance, whatever the labels
    assert [(s.speaker, s.text) for s in segments] == [
        ("SPEAKER_00", "Hi there."),
        ("SPEAKER_01", "How are you doing?"),
    ]
    assert segments[1].start == 1.0 and segments[1].end == 2.2
    assert [t.speaker for t in renamed] == ["SPEAKER_00", "SPEAKER_01"]


def test_an_interjection_inside_another_speakers_turn_keeps_its_speaker() -> None:
    """Short runs between two runs of another speaker were once given to the speakers around them, as blips;
    on the AMI clips and the phone call every such word the reference places was an interjection ("Hello.",
    "Neither did I", "No,")."""
    segment = Segment(
        0.0,
        2.0,
        "Hello? Hello. Oh, hello.",
        words((0.0, 0.5, " Hello?"), (0.7, 0.9, " Hello."), (1.1, 1.3, " Oh,"), (1.4, 1.8, " hello.")),
    )
    turns = [Turn(0.0, 0.6, "A"), Turn(0.6, 1.0, "B"), Turn(1.0, 2.0, "A")]
    segments, speakers, _ = assign_speakers([segment], turns)
    assert [(s.speaker, s.text) for s in segments] == [
        ("SPEAKER_00", "Hello?"),
        ("SPEAKER_01", "Hello."),
        ("SPEAKER_00", "Oh, hello."),
    ]
    assert speakers == ("SPEAKER_00", "SPEAKER_01")


def test_a_change_near_a_sentence_end_moves_to_it() -> None:
    segment = Segment(
        0.0,
        3.0,
        "Is it ready? Yes it is",
        words(
            (0.0, 0.3, " Is"),
            (0.3, 0.5, " it"),
            (0.5, 0.9, " ready?"),
            (1.0, 1.3, " Yes"),
            (1.3, 1.5, " it"),
            (1.5, 1.8, " is"),
        ),
    )
    # The diarizer hands over one word late: "Yes" still overlaps A.
    turns = [Turn(0.0, 1.35, "A"), Turn(1.35, 2.0, "B")]
    segments, _, _ = assign_speakers([segment], turns)
    assert [(s.speaker, s.text) for s in segments] == [("SPEAKER_00", "Is it ready?"), ("SPEAKER_01", "Yes it is")]


def test_no_turns_leaves_speakers_empty() -> None:
    segment = Segment(0.0, 1.0, "Hello", words((0.0, 1.0, " Hello")))
    segments, speakers, _ = assign_speakers([segment], [])
    assert speakers == () and segments[0].speaker is None


def test_a_word_in_silence_takes_the_nearest_turn() -> None:
    segment = Segment(5.0, 5.5, "Right", words((5.0, 5.5, " Right")))
    segments, _, renamed = assign_speakers([segment], [Turn(0.0, 1.0, "A"), Turn(6.0, 7.0, "B")])
    # Speakers are numbered by their first word, so the word's speaker is SPEAKER_00 whichever turn it took:
    # the renamed turns say which one that was (B, 1 s away, not A, 4 s away).
    assert [(turn.start, turn.speaker) for turn in renamed] == [(0.0, "SPEAKER_01"), (6.0, "SPEAKER_00")]
    assert segments[0].speaker == "SPEAKER_00"
    assert segments[0].words[0].speaker == "SPEAKER_00"


def test_a_word_without_duration_takes_the_turn_it_lies_in() -> None:
    """The alignment gives some words no duration ("I" at 12.08-12.08 s on the phone call). Such a word overlaps
    no turn by any length, but it lies inside Diane's turn; the nearest turn edge was a short overlap turn of
    Sheila's over a second away, and the word went to her."""
    segment = Segment(
        11.2, 12.5, "you know, I heard", words((11.2, 12.0, " you know,"), (12.08, 12.08, " I"), (12.1, 12.5, " heard"))
    )
    turns = [Turn(10.41, 14.25, "Diane"), Turn(10.43, 10.99, "Sheila")]
    segments, _, _ = assign_speakers([segment], turns)
    assert [(s.speaker, s.text) for s in segments] == [("SPEAKER_00", "you know, I heard")]
    # Where two people talk at once at that instant, the longer turn is the one it lies in.
    segments, _, _ = assign_speakers([segment], [Turn(10.41, 14.25, "Diane"), Turn(11.9, 12.3, "Sheila")])
    assert segments[0].words[1].speaker == segments[0].words[0].speaker


def one_word_per_sentence(*spec: tuple[float, float, str]) -> Segment:
    """Words that each end a sentence: no speaker change moves to a sentence end, so each word keeps the speaker
    its own overlap gives it."""
    return Segment(spec[0][0], spec[-1][1], " ".join(text for *_, text in spec), words(*spec))


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        # A handover at 1.0 s. "Yes." runs 0.8-1.5 s: 0.2 s in A's turn, 0.5 s in B's, so it is B's word.
        ((0.8, 1.5, " Yes."), "B"),
        # "Right." runs 0.4-1.1 s: 0.6 s in A's turn, 0.1 s in B's, so it is A's.
        ((0.4, 1.1, " Right."), "A"),
    ],
    ids=["later-turn-holds-more", "earlier-turn-holds-more"],
)
def test_a_word_spanning_a_handover_takes_the_turn_holding_more_of_it(
    word: tuple[float, float, str], expected: str
) -> None:
    # "Hi." is A's alone and "Bye." B's alone: they fix which public name is A and which B.
    segment = one_word_per_sentence((0.0, 0.3, " Hi."), word, (2.0, 2.4, " Bye."))
    turns = [Turn(0.0, 1.0, "A"), Turn(1.0, 3.0, "B")]
    segments, _, _ = assign_speakers([segment], turns)
    public = {"A": segments[0].speaker, "B": segments[-1].speaker}
    assert public["A"] != public["B"]
    labelled = [w for s in segments for w in s.words]
    assert labelled[1].speaker == public[expected], [(w.word, w.speaker) for w in labelled]


def test_a_speakers_overlaps_add_up_across_their_turns() -> None:
    """ "Okay." (1.0-2.0 s) lies in A's turn for 0.3 s, B's for 0.4 s, then A's again for 0.3 s: A holds 0.6 s
    of it, more than B's 0.4 s, although B's single turn holds the most."""
    segment = one_word_per_sentence((0.0, 0.5, " Hi."), (1.0, 2.0, " Okay."), (3.0, 3.5, " Bye."))
    turns = [Turn(0.0, 1.3, "A"), Turn(1.3, 1.7, "B"), Turn(1.7, 2.5, "A"), Turn(2.5, 4.0, "B")]
    segments, _, _ = assign_speakers([segment], turns)
    labelled = [w for s in segments for w in s.words]
    assert [w.speaker for w in labelled] == ["SPEAKER_00", "SPEAKER_00", "SPEAKER_01"]


# The sentence snap reaches SNAP_WORDS = 2 words from a speaker change. The expectations below are written out:
# a change two words after a sentence end moves back to it, three words after it stays; the same forwards.
def _labelled(texts: list[str], handover: int) -> list[tuple[str, str | None]]:
    """Words 0.5 s each; A's turn covers the first ``handover`` words, B's the rest."""
    spec = tuple((0.5 * i, 0.5 * i + 0.5, f" {text}") for i, text in enumerate(texts))
    segment = Segment(0.0, 0.5 * len(texts), " ".join(texts), words(*spec))
    turns = [Turn(0.0, 0.5 * handover, "A"), Turn(0.5 * handover, 0.5 * len(texts), "B")]
    segments, _, _ = assign_speakers([segment], turns)
    return [(s.speaker or "", s.text) for s in segments]


def test_a_change_two_words_after_a_sentence_end_moves_back_to_it() -> None:
    texts = ["Right.", "so", "we", "go", "on", "now", "then", "okay"]
    assert _labelled(texts, handover=3) == [("SPEAKER_00", "Right."), ("SPEAKER_01", "so we go on now then okay")]


def test_a_change_three_words_after_a_sentence_end_stays() -> None:
    texts = ["Right.", "so", "we", "all", "go", "on", "now", "then", "okay"]
    assert _labelled(texts, handover=4) == [("SPEAKER_00", "Right. so we all"), ("SPEAKER_01", "go on now then okay")]


def test_a_change_two_words_before_a_sentence_end_moves_forward_to_it() -> None:
    texts = ["we", "will", "go", "there", "today.", "Fine", "by", "me", "then"]
    expected = [("SPEAKER_00", "we will go there today."), ("SPEAKER_01", "Fine by me then")]
    assert _labelled(texts, handover=3) == expected


def test_a_change_three_words_before_a_sentence_end_stays() -> None:
    texts = ["we", "will", "go", "out", "there", "today.", "Fine", "by", "me", "then"]
    expected = [("SPEAKER_00", "we will go"), ("SPEAKER_01", "out there today. Fine by me then")]
    assert _labelled(texts, handover=3) == expected


def test_the_snap_reaches_the_first_word_but_not_past_the_last() -> None:
    # A sentence end at the very first word is one to snap to.
    assert _labelled(["Yes.", "we", "can", "go"], handover=2) == [("SPEAKER_00", "Yes."), ("SPEAKER_01", "we can go")]
    # The transcript's last word is not: the new speaker's whole run would vanish into the old one.
    assert _labelled(["we", "will", "go", "now."], handover=3) == [("SPEAKER_00", "we will go"), ("SPEAKER_01", "now.")]


def _monologue_under_backchannels(count: int) -> list[Turn]:
    # A chair talks for two minutes while another person says "mm-hmm" every second, 0.2 s each.
    return [Turn(0.0, 120.0, "chair")] + [Turn(float(second), second + 0.2, "listener") for second in range(1, count)]


@pytest.mark.parametrize("backchannels", [10, 100])
def test_a_long_turn_under_many_backchannels_keeps_its_words(backchannels: int) -> None:
    turns = _monologue_under_backchannels(backchannels)
    # Words late in the monologue: one between two back-channels, one that a back-channel overlaps by 0.2 s of
    # its 0.5 s, one after the last back-channel. Each is the chair's, however many back-channels came before.
    late = float(backchannels) - 4.0
    opening = Segment(0.1, 0.6, "Right.", words((0.1, 0.6, " Right.")))  # the chair alone: SPEAKER_00
    segment = Segment(
        late - 0.6,
        110.0,
        "so we agree today",
        words((late - 0.6, late - 0.2, " so"), (late - 0.1, late + 0.4, " we"), (105.0, 105.5, " agree")),
    )
    segments, _, _ = assign_speakers([opening, segment], turns)
    assert [(w.word, s.speaker) for s in segments for w in s.words] == [
        (" Right.", "SPEAKER_00"),
        (" so", "SPEAKER_00"),
        (" we", "SPEAKER_00"),  # 0.5 s of the chair against 0.2 s of the listener
        (" agree", "SPEAKER_00"),
    ]
