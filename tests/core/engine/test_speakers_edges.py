"""Naming speakers at the edges mutation testing found unpinned: the one-to-one matching and its threshold, the
solo spans a voiceprint is made from, and the names refused. Voices here are unit vectors written by hand (the
encoder's voiceprints are compared by cosine similarity, so these stand for voices exactly)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.core.engine.speakers import (
    KnownSpeaker,
    Sample,
    SpeakerLibraryError,
    Voiceprint,
    check_name,
    identify,
    solo_spans,
)

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers


def voice(angle_degrees: float, seconds: float = 10.0) -> Voiceprint:
    """A unit vector in a plane: two voices' similarity is the cosine of the angle between them."""
    radians = math.radians(angle_degrees)
    return Voiceprint(np.array([math.cos(radians), math.sin(radians), 0.0], dtype=np.float32), seconds)


def known(name: str, *angles_and_seconds: tuple[float, float]) -> KnownSpeaker:
    samples = tuple(
        Sample(tuple(float(x) for x in voice(angle).vector), seconds, "test", "2025-01-02")
        for angle, seconds in angles_and_seconds
    )
    return KnownSpeaker(name, samples)


def test_each_name_goes_to_the_voice_that_makes_the_best_pairing_overall() -> None:
    # SPEAKER_00 (10 deg) is closest to Ann (0 deg), but SPEAKER_01 (-5 deg) is closer still: pairing 00-Bob and
    # 01-Ann sums cos 30 + cos 5 = 1.862, more than 00-Ann and 01-Bob's cos 10 + cos 45 = 1.692.
    library = [known("Ann", (0.0, 10.0)), known("Bob", (40.0, 10.0))]
    found = identify({"SPEAKER_00": voice(10.0), "SPEAKER_01": voice(-5.0)}, library, threshold=0.5)
    assert {label: identity.name for label, identity in found.items()} == {"SPEAKER_00": "Bob", "SPEAKER_01": "Ann"}
    assert found["SPEAKER_00"].similarity == pytest.approx(math.cos(math.radians(30.0)), abs=1e-5)
    assert (found["SPEAKER_00"].speaker, found["SPEAKER_00"].diarized) == ("Bob", "SPEAKER_00")


def test_a_voice_below_the_threshold_stays_unnamed_but_says_who_it_is_closest_to() -> None:
    library = [known("Ann", (0.0, 10.0)), known("Bob", (90.0, 10.0))]
    # cos 40 = 0.766: just under 0.77.
    found = identify({"SPEAKER_00": voice(40.0, seconds=7.5)}, library)
    identity = found["SPEAKER_00"]
    assert (identity.speaker, identity.name, identity.closest) == ("SPEAKER_00", None, "Ann")
    assert identity.similarity == pytest.approx(math.cos(math.radians(40.0)), abs=1e-5)
    assert identity.speech_seconds == 7.5
    # Exactly at the threshold names it.
    at = identify({"SPEAKER_00": voice(40.0)}, library, threshold=float(np.float32(math.cos(math.radians(40.0)))))
    assert at["SPEAKER_00"].name == "Ann"


def test_a_speaker_without_a_voiceprint_or_without_a_library_keeps_the_label() -> None:
    library = [known("Ann", (0.0, 10.0))]
    found = identify({"SPEAKER_00": None, "SPEAKER_01": voice(0.0, seconds=3.0)}, library)
    silent = found["SPEAKER_00"]
    assert (silent.speaker, silent.diarized, silent.name, silent.similarity, silent.closest) == (
        "SPEAKER_00",
        "SPEAKER_00",
        None,
        None,
        None,
    )
    assert silent.speech_seconds == 0.0
    assert found["SPEAKER_01"].name == "Ann"
    alone = identify({"SPEAKER_01": voice(0.0, seconds=3.0)}, [])
    assert (alone["SPEAKER_01"].name, alone["SPEAKER_01"].speech_seconds) == (None, 3.0)


def test_a_known_voice_is_its_samples_weighted_by_their_speech() -> None:
    # 30 s at 0 deg and 10 s at 90 deg: the centroid leans to 0 deg (atan(10/30) = 18.4 deg).
    ann = known("Ann", (0.0, 30.0), (90.0, 10.0))
    assert ann.seconds == 40.0
    centroid = ann.centroid()
    assert float(np.linalg.norm(centroid)) == pytest.approx(1.0, abs=1e-6)
    assert math.degrees(math.atan2(centroid[1], centroid[0])) == pytest.approx(18.43, abs=0.01)


@pytest.mark.parametrize(
    ("turns", "expected"),
    [
        # A's turns 0.5 s apart with nobody between: one stretch.
        ([(0.0, 2.0, "A"), (2.5, 4.0, "A")], [(0.0, 4.0)]),
        # 0.6 s apart: two.
        ([(0.0, 2.0, "A"), (2.6, 4.0, "A")], [(0.0, 2.0), (2.6, 4.0)]),
        # B speaks in the gap: not bridged, and B's speech is cut out.
        ([(0.0, 2.0, "A"), (2.1, 2.3, "B"), (2.5, 4.0, "A")], [(0.0, 2.0), (2.5, 4.0)]),
        # B overlaps A: the overlap is cut out of A's span, on either side.
        ([(0.0, 4.0, "A"), (1.0, 1.5, "B"), (3.5, 5.0, "B")], [(0.0, 1.0), (1.5, 3.5)]),
        # B's turn touching A's end only: nothing cut.
        ([(0.0, 2.0, "A"), (2.0, 3.0, "B")], [(0.0, 2.0)]),
        # B's turns overlapping each other merge before the cut; an empty turn of A is ignored.
        ([(0.0, 6.0, "A"), (1.0, 2.0, "B"), (1.5, 3.0, "B"), (5.0, 5.0, "A")], [(0.0, 1.0), (3.0, 6.0)]),
        # B entirely over A: nothing left.
        ([(1.0, 2.0, "A"), (0.0, 3.0, "B")], []),
    ],
)
def test_solo_spans_are_the_speakers_own_turns_bridged_over_short_pauses_minus_everyone_else(
    turns: list[tuple[float, float, str]], expected: list[tuple[float, float]]
) -> None:
    assert solo_spans(turns, "A") == expected


def test_names_are_tidied_and_the_diarizers_labels_refused() -> None:
    assert check_name("  Ann   Lee ") == "Ann Lee"
    with pytest.raises(SpeakerLibraryError, match=r"^A speaker's name cannot be empty\.$"):
        check_name("   ")
    with pytest.raises(SpeakerLibraryError, match=r"^'SPEAKER_03' is the form of the labels"):
        check_name(" SPEAKER_03 ")
    assert check_name("SPEAKER_03b") == "SPEAKER_03b"


@pytest.mark.parametrize(
    ("turns", "expected"),
    [
        # Turns of no length are ignored, first or last.
        ([(0.0, 0.0, "A"), (1.0, 2.0, "A"), (3.0, 3.0, "A")], [(1.0, 2.0)]),
        # A turn inside a longer one of the same speaker does not shorten it.
        ([(0.0, 3.0, "A"), (1.0, 2.0, "A")], [(0.0, 3.0)]),
        # Another speaker's turn far away does not stop a bridge, and every later turn is still looked at.
        ([(0.0, 2.0, "A"), (2.5, 4.0, "A"), (6.0, 7.0, "A"), (10.0, 11.0, "B")], [(0.0, 4.0), (6.0, 7.0)]),
        # B starts where A's next turn starts, or ends where A's turn ends: the gap is nobody's, so it is bridged.
        ([(0.0, 2.0, "A"), (2.5, 4.0, "A"), (2.5, 3.0, "B")], [(0.0, 2.5), (3.0, 4.0)]),
        ([(0.0, 2.0, "A"), (2.5, 4.0, "A"), (1.5, 2.0, "B")], [(0.0, 1.5), (2.0, 4.0)]),
        # B's turn at the very start of A's: no empty piece is left before it.
        ([(0.0, 4.0, "A"), (0.0, 1.0, "B")], [(1.0, 4.0)]),
        # A cut earlier in time that misses A's turn does not stop a later one that hits it.
        ([(5.0, 10.0, "A"), (0.0, 1.0, "B"), (6.0, 7.0, "B")], [(5.0, 6.0), (7.0, 10.0)]),
    ],
)
def test_solo_spans_at_their_edges(turns: list[tuple[float, float, str]], expected: list[tuple[float, float]]) -> None:
    assert solo_spans(turns, "A") == expected


def test_a_known_voice_of_little_or_opposite_speech_is_still_a_unit_vector_or_none() -> None:
    # Half a second of speech: the weighted sum is shorter than 1, and is still scaled to length 1.
    short = known("Ann", (30.0, 0.5)).centroid()
    assert float(np.linalg.norm(short)) == pytest.approx(1.0, abs=1e-6)
    # Two samples that cancel out: no direction at all, and no division by zero.
    opposite = (Sample((1.0, 0.0, 0.0), 5.0, "test", "2025-01-02"), Sample((-1.0, 0.0, 0.0), 5.0, "test", "2025-01-02"))
    nothing = KnownSpeaker("Bob", opposite).centroid()
    assert np.all(np.isfinite(nothing)) and float(np.linalg.norm(nothing)) == pytest.approx(0.0, abs=1e-6)
