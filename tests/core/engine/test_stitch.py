"""A long recording in pieces and back (app/core/engine/stitch.py): where it is cut, each word kept once, the
speakers joined across pieces, and a node's voice summaries checked before they are believed. The whole path,
with real engines on two hosts, is in tests/cloud/test_fleet.py; the quality on real recordings in
benchmarks/bench_pieces.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from app.core.engine.stitch import (
    Piece,
    PieceResult,
    VoiceStats,
    overlap_links,
    plan_pieces,
    stitch,
)
from app.core.transcript.document import DiarizationInfo, Segment, SpeakerTurn, Transcript, Word

RATE = 16000


def _noise(seconds: float, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(int(seconds * RATE)) * 0.1).astype(np.float32)


def test_a_long_recording_is_cut_in_its_pauses_with_overlap_and_a_short_one_is_not() -> None:
    samples = _noise(300)
    # Pauses near the thirds (100 s and 200 s), a little off the targets.
    for pause in (103.0, 196.0):
        samples[int(pause * RATE) : int((pause + 0.8) * RATE)] = 0
    pieces = plan_pieces(samples, RATE, piece_s=100, overlap_s=10)
    assert len(pieces) == 3
    cuts = [piece.keep_to for piece in pieces[:-1]]
    assert 103.0 <= cuts[0] <= 103.8 and 196.0 <= cuts[1] <= 196.8
    assert pieces[0].keep_from == 0 and pieces[-1].keep_to == pytest.approx(300)
    for left, right in itertools.pairwise(pieces):
        assert left.keep_to == right.keep_from
        assert left.end == pytest.approx(left.keep_to + 10) and right.start == pytest.approx(right.keep_from - 10)
    assert plan_pieces(_noise(140), RATE, piece_s=100, overlap_s=10) == [Piece(0, 0.0, 140.0, 0.0, 140.0)]


def _word(start: float, text: str, speaker: str) -> Word:
    return Word(start, start + 0.4, f" {text}", 0.9, speaker)


def _transcript(words: list[Word], duration: float) -> Transcript:
    segments = tuple(Segment(w.start, w.end, w.word.strip(), (w,), w.speaker) for w in words)
    turns = tuple(SpeakerTurn(w.start, w.end, w.speaker or "?") for w in words)
    return Transcript(
        "piece.flac", duration, "en", "tiny.en", "cpu", "int8", segments, DiarizationInfo("embedded", "test", turns),
        tuple(dict.fromkeys(w.speaker or "?" for w in words)),
    )  # fmt: skip


def _voice(direction: np.ndarray, count: int = 20) -> VoiceStats:
    unit = direction / np.linalg.norm(direction)
    return VoiceStats(unit * count, count, 0.3 * count)


def test_each_word_is_kept_once_in_the_recordings_time_and_the_speakers_are_joined() -> None:
    """Two pieces cut at 10 s with 4 s of shared audio: the words either side of the cut come from the piece
    that owns that side; the shared words are not doubled; the same voice in both pieces is one speaker, in
    order of appearance."""
    a, b = np.eye(192)[0], np.eye(192)[1]
    first = Piece(0, 0.0, 14.0, 0.0, 10.0)
    second = Piece(1, 6.0, 20.0, 10.0, 20.0)
    left = _transcript([_word(1, "one", "S0"), _word(7, "two", "S1"), _word(11, "three", "S1")], 14)
    # The second piece's clock starts at 6 s: "two" (7 s) and "three" (11 s) at 1 s and 5 s.
    right = _transcript([_word(1, "two", "X"), _word(5, "three", "X"), _word(9, "four", "Y")], 14)
    joined = stitch(
        [
            PieceResult(second, right, {"X": _voice(b), "Y": _voice(a)}),
            PieceResult(first, left, {"S0": _voice(a), "S1": _voice(b)}),
        ],
        "/recordings/long.wav",
        20.0,
    )
    assert [(w.word.strip(), w.start, w.speaker) for s in joined.segments for w in s.words] == [
        ("one", 1, "SPEAKER_00"),
        ("two", 7, "SPEAKER_01"),
        ("three", 11, "SPEAKER_01"),
        ("four", 15, "SPEAKER_00"),  # the first piece's first voice, back in the second piece
    ]
    assert joined.speakers == ("SPEAKER_00", "SPEAKER_01") and joined.duration == 20.0
    assert joined.source == "/recordings/long.wav"
    assert joined.diarization is not None and "in 2 pieces" in joined.diarization.reason
    assert all(turn.start >= 10.0 or turn.end <= 10.0 for turn in joined.diarization.turns)


def test_two_speakers_one_piece_told_apart_are_never_joined() -> None:
    """Two close voices of one piece, and a third piece's speaker between them: without the rule, both would
    join the third one's cluster one after the other."""
    a, b = np.eye(192)[0], np.eye(192)[0] * 0.9 + np.eye(192)[1] * 0.436
    between = a + b
    first = Piece(0, 0.0, 14.0, 0.0, 10.0)
    second = Piece(1, 6.0, 20.0, 10.0, 20.0)
    left = _transcript([_word(1, "one", "S0"), _word(3, "two", "S1")], 14)
    right = _transcript([_word(9, "three", "X")], 14)
    joined = stitch(
        [
            PieceResult(first, left, {"S0": _voice(a, 200), "S1": _voice(b, 200)}),
            PieceResult(second, right, {"X": _voice(between, 200)}),
        ],
        "long.wav",
        20.0,
    )
    speakers = [w.speaker for s in joined.segments for w in s.words]
    assert speakers[0] != speakers[1]


def test_the_overlap_joins_what_it_heard_twice_even_when_the_voice_summaries_differ() -> None:
    first = Piece(0, 0.0, 20.0, 0.0, 10.0)
    second = Piece(1, 0.0, 20.0, 10.0, 20.0)  # all of it shared
    left = _transcript([_word(t, "word", "S0") for t in np.arange(0, 8, 0.5)], 20)
    right = _transcript([_word(t, "word", "X") for t in np.arange(0, 8, 0.5)], 20)
    parts = [
        PieceResult(first, left, {"S0": _voice(np.eye(192)[0])}),
        PieceResult(second, right, {"X": _voice(np.eye(192)[5])}),  # far apart: the voices alone would not join
    ]
    assert overlap_links(parts) == [((0, "S0"), (1, "X"))]


@pytest.mark.parametrize(
    "forged",
    [
        {"sum": [0.0] * 191, "count": 3, "noise": 0.5},  # not a CAM++ vector
        {"sum": [1.0] * 192, "count": 3, "noise": 0.5},  # longer than three unit vectors can add up to
        {"sum": [float("nan")] + [0.0] * 191, "count": 3, "noise": 0.5},
        {"sum": [0.1] * 192, "count": 0, "noise": 0.5},
        {"sum": [0.1] * 192, "count": 3, "noise": -1.0},
        {"sum": [0.1] * 192, "count": 3},
    ],
)
def test_a_voice_summary_no_real_windows_give_is_refused(forged: dict[str, object]) -> None:
    with pytest.raises((ValueError, KeyError)):
        VoiceStats.from_dict(forged)


def test_a_voice_summary_goes_through_json_unchanged() -> None:
    voice = _voice(np.arange(192, dtype=np.float64) + 1, 7)
    again = VoiceStats.from_dict(voice.to_dict())
    assert again.count == 7 and again.noise_sum == pytest.approx(voice.noise_sum)
    assert np.allclose(again.total, voice.total, atol=1e-6)


def test_pieces_are_sized_so_that_every_machine_stays_busy_within_bounds() -> None:
    from app.cloud.fleet.pieces import piece_length

    assert piece_length([600.0, 180.0], 1, 900, 300) == 0  # one machine: nothing to share
    assert piece_length([600.0, 180.0], 2, 900, 300) == 300  # 13 min on two: as short as allowed
    assert piece_length([3 * 3600.0], 2, 900, 300) == 900  # three hours: as long as allowed
    assert piece_length([3600.0, None], 3, 900, 300) == 600  # an hour on three: 10 min (an unreadable file: 0)
