"""Transcript edits: timings of untouched words survive, speakers move in stretches, paragraphs split and merge."""

from __future__ import annotations

from app.core.transcript.document import Segment, Transcript, Word
from app.core.transcript.edit import (
    assign_speaker,
    edit_paragraph,
    merge_with_previous,
    paragraph_text,
    paragraphs,
    replace_all,
    split_paragraph,
)
from app.core.transcript.formats import to_srt, to_txt


def timed(start: float, speaker: str, *texts: str) -> Segment:
    words = tuple(
        Word(start + n, start + n + 0.8, " " + text, 0.3 if text == "weather" else 0.9, speaker)
        for n, text in enumerate(texts)
    )
    return Segment(start, start + len(texts), " ".join(texts), words, speaker)


def call() -> Transcript:
    segments = (
        timed(0.0, "A", "hello", "how", "are", "you"),
        timed(4.0, "A", "nice", "weather", "today"),
        timed(7.0, "B", "yes", "it", "is"),
        Segment(10.0, 12.0, "no timings here", (), "B"),
    )
    return Transcript("call.wav", 12.0, "en", "tiny.en", "cpu", "int8", segments, speakers=("A", "B"))


def test_paragraphs_merge_consecutive_segments_of_one_speaker() -> None:
    found = paragraphs(call())
    assert [(p.speaker, p.segments, p.start, p.end) for p in found] == [
        ("A", (0, 1), 0.0, 7.0),
        ("B", (2, 3), 7.0, 12.0),
    ]
    assert paragraph_text(call(), found[0]) == "hello how are you nice weather today"


def test_a_corrected_word_keeps_every_other_words_timing() -> None:
    transcript = call()
    first = paragraphs(transcript)[0]
    edited = edit_paragraph(transcript, first, "hello how are you nice feather today indeed")
    old_words = transcript.segments[0].words + transcript.segments[1].words
    new_words = edited.segments[0].words + edited.segments[1].words
    assert [w.word.strip() for w in new_words] == ["hello", "how", "are", "you", "nice", "feather", "today", "indeed"]
    kept = [w for w in new_words if w.word.strip() not in ("feather", "indeed")]
    assert kept == [w for w in old_words if w.word.strip() != "weather"]  # same objects: timing and confidence
    feather = new_words[5]
    assert (feather.start, feather.end, feather.probability) == (5.0, 5.8, 1.0)  # the time "weather" took
    assert edited.segments[1].text == "nice feather today indeed"
    assert edited.segments[2:] == transcript.segments[2:]
    assert "nice feather today indeed" in to_txt(edited)


def test_a_segment_without_timings_is_edited_as_text() -> None:
    transcript = call()
    second = paragraphs(transcript)[1]
    edited = edit_paragraph(transcript, second, "yes it is no timings at all")
    assert edited.segments[3] == Segment(10.0, 12.0, "no timings at all", (), "B")


def test_deleting_every_word_of_a_segment_removes_it() -> None:
    transcript = call()
    edited = edit_paragraph(transcript, paragraphs(transcript)[0], "nice weather today")
    assert len(edited.segments) == 3 and edited.segments[0] == transcript.segments[1]


def test_a_stretch_moves_to_another_speaker_and_a_new_name_joins_the_list() -> None:
    transcript = call()
    moved = assign_speaker(transcript, (0, 2), (1, 0), "Carol")  # "are you nice"
    assert [(p.speaker, paragraph_text(moved, p)) for p in paragraphs(moved)] == [
        ("A", "hello how"),
        ("Carol", "are you nice"),
        ("A", "weather today"),
        ("B", "yes it is no timings here"),
    ]
    assert moved.speakers == ("A", "B", "Carol")
    carol = [s for s in moved.segments if s.speaker == "Carol"]
    assert all(word.speaker == "Carol" for segment in carol for word in segment.words)
    assert carol[0].start == 2.0 and carol[-1].end == 5.0  # cut at the words' own times
    assert "are you" in to_srt(moved)


def test_split_then_merge_gives_the_paragraph_back() -> None:
    transcript = call()
    first = paragraphs(transcript)[0]
    split = split_paragraph(transcript, first, (1, 1), "B")  # "weather today" is B's
    assert [(p.speaker, paragraph_text(split, p)) for p in paragraphs(split)] == [
        ("A", "hello how are you nice"),
        ("B", "weather today yes it is no timings here"),
    ]
    merged = merge_with_previous(assign_speaker(split, (2, 0), (2, 1), "C"), 1)  # "weather today" is C's
    assert next((p.speaker, paragraph_text(merged, p)) for p in paragraphs(merged)) == (
        "A",
        "hello how are you nice weather today",
    )
    assert "C" not in merged.speakers  # a name left without words leaves the list


def test_replace_all_counts_and_keeps_timings() -> None:
    transcript = call()
    replaced, count = replace_all(transcript, "WEATHER", "sunshine")
    assert count == 1 and replaced.segments[1].text == "nice sunshine today"
    assert replaced.segments[1].words[0] == transcript.segments[1].words[0]
    assert replace_all(transcript, "absent", "x") == (transcript, 0)


def test_a_word_typed_between_two_others_takes_the_gap_between_them() -> None:
    transcript = call()
    edited = edit_paragraph(transcript, paragraphs(transcript)[0], "well hello there how are you nice weather today")
    words = edited.segments[0].words
    assert [w.word.strip() for w in words] == ["well", "hello", "there", "how", "are", "you"]
    assert (words[0].start, words[0].end) == (0.0, 0.0)  # before the first word: no time of its own
    assert (words[2].start, words[2].end) == (0.8, 1.0)  # between "hello" (ends 0.8) and "how" (starts 1.0)
    assert words[1] == transcript.segments[0].words[0] and words[3] == transcript.segments[0].words[1]
