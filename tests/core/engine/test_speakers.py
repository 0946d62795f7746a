"""Known speakers on real recordings: AMI ES2003a and ES2003b share MEE009 and MEE012; EN2002a's four
people are strangers to them. Real CAM++ weights, real speech, human who-spoke-when (RTTM)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.core.engine.audio import decode_audio
from app.core.engine.diarize.encoder import SpeakerEncoder
from app.core.engine.speakers import (
    LIBRARY_FILE,
    SpeakerLibrary,
    SpeakerLibraryError,
    Voiceprint,
    enroll,
    identify,
    reenroll_earlier,
    solo_spans,
    speaker_voiceprints,
    speech_spans,
)
from app.core.transcript.document import Transcript
from tests.metrics import rttm_annotation, transcript_annotation, turns_annotation
from tests.real_speech import real_speech_dir, rttm_turns

ENROLLED = ("MEE009", "MEE012")


@pytest.fixture(scope="module")
def encoder() -> SpeakerEncoder:
    return SpeakerEncoder(threads=1)


@pytest.fixture(scope="module")
def real() -> Path:
    return real_speech_dir()


def enroll_from_reference(library: SpeakerLibrary, encoder: SpeakerEncoder, real: Path, names: tuple[str, ...]) -> None:
    """Enroll each name from every stretch of ES2003a where the RTTM says that person speaks alone."""
    audio = decode_audio(real / "ami_ES2003a_0-30.wav")
    turns = rttm_turns(real / "ami_ES2003a_0-30.rttm")
    for name in names:
        for start, end in solo_spans(turns, name):
            try:
                enroll(library, name, encoder, audio, start, end)
            except SpeakerLibraryError as error:  # a stretch too short for a voiceprint: as a user would see
                assert "Too little speech" in str(error)
        assert library.get(name).seconds >= 5.0  # every solo stretch of the 30 s clip together


@pytest.fixture(scope="module")
def library_dir(tmp_path_factory: pytest.TempPathFactory, encoder: SpeakerEncoder, real: Path) -> Path:
    directory = tmp_path_factory.mktemp("speakers")
    enroll_from_reference(SpeakerLibrary.load(directory), encoder, real, ENROLLED)
    return directory


def diarization_error(reference_rttm: Path, hypothesis: Any) -> float:
    from pyannote.metrics.diarization import DiarizationErrorRate

    return float(DiarizationErrorRate(collar=0.25)(rttm_annotation(reference_rttm), hypothesis))


def identification_error(reference_rttm: Path, hypothesis: Any) -> float:
    from pyannote.metrics.identification import IdentificationErrorRate

    return float(IdentificationErrorRate(collar=0.25)(rttm_annotation(reference_rttm), hypothesis))


def test_a_stretch_starting_before_the_recording_starts_at_its_beginning(real: Path) -> None:
    audio = decode_audio(real / "ami_ES2003a_0-30.wav")
    spans = speech_spans(audio, -3.0, 6.0)
    assert spans == speech_spans(audio, 0.0, 6.0) and spans and spans[0][0] >= 0.0


def test_enrollment_is_stored_as_voiceprints_only(library_dir: Path) -> None:
    library = SpeakerLibrary.load(library_dir)
    assert [known.name for known in library.known()] == list(ENROLLED)
    assert all(len(known.samples) >= 2 for known in library.known())  # repeating enrollment adds samples
    stored = json.loads((library_dir / LIBRARY_FILE).read_text())
    # The encoder is named, so that a library of another encoder's voiceprints is recognised as such.
    assert stored["version"] == 2 and stored["encoder"] == {"name": "cam++", "version": 1}
    sample = stored["speakers"]["MEE009"]["samples"][0]
    assert len(sample["vector"]) == 192 and sample["seconds"] >= 2.0
    assert "ami_ES2003a_0-30.wav" in sample["source"] and sample["recording"].endswith("ami_ES2003a_0-30.wav")
    # Where the speech was (inside the stretch 2.13-13.18 s that MEE009 speaks alone): to make it again later.
    assert sample["spans"] and all(2.0 <= start < end <= 13.3 for start, end in sample["spans"])
    assert not list(library_dir.glob("*.tmp"))  # written to a temporary name, then renamed


def test_reference_turns_of_another_meeting_get_the_enrolled_names(
    library_dir: Path, encoder: SpeakerEncoder, real: Path
) -> None:
    """The identification step alone, on ES2003b's human turns: independent of the diarizer."""
    library = SpeakerLibrary.load(library_dir).known()
    audio = decode_audio(real / "ami_ES2003b_0-30.wav")
    turns = rttm_turns(real / "ami_ES2003b_0-30.rttm")
    anonymous = [(start, end, {"MEE009": "A", "MEE012": "B"}[who]) for start, end, who in turns]
    matches = identify(speaker_voiceprints(encoder, audio, anonymous), library)
    assert {label: match.name for label, match in matches.items()} == {"A": "MEE009", "B": "MEE012"}
    named = turns_annotation((start, end, matches[who].speaker) for start, end, who in anonymous)
    assert identification_error(real / "ami_ES2003b_0-30.rttm", named) == pytest.approx(0.0, abs=0.01)


def test_strangers_on_reference_turns_stay_unnamed(library_dir: Path, encoder: SpeakerEncoder, real: Path) -> None:
    library = SpeakerLibrary.load(library_dir).known()
    audio = decode_audio(real / "ami_EN2002a_0-30.wav")
    matches = identify(speaker_voiceprints(encoder, audio, rttm_turns(real / "ami_EN2002a_0-30.rttm")), library)
    assert len(matches) == 4
    assert all(match.name is None for match in matches.values()), matches
    compared = [match for match in matches.values() if match.similarity is not None]
    assert compared and all(match.similarity < 0.72 for match in compared)  # type: ignore[operator]


def test_one_name_is_never_given_twice(library_dir: Path, encoder: SpeakerEncoder, real: Path) -> None:
    """MEE009's turns split into two diarized speakers: only one of them may be MEE009. On ES2003a, whose solo
    stretches the library learned MEE009's voice from, so that each half alone reaches the threshold (on
    ES2003b half of MEE009's 9 s stays under it by itself, and the rule would not be tested)."""
    library = SpeakerLibrary.load(library_dir).known()
    audio = decode_audio(real / "ami_ES2003a_0-30.wav")
    turns = rttm_turns(real / "ami_ES2003a_0-30.rttm")
    # MEE009's turns dealt alternately to two diarized speakers.
    split: list[tuple[float, float, str]] = []
    dealt = 0
    for start, end, who in turns:
        if who == "MEE009":
            who, dealt = f"MEE009-{dealt % 2}", dealt + 1
        split.append((start, end, who))
    prints = speaker_voiceprints(encoder, audio, split)
    # Each half alone would be named MEE009, so the rule below is what keeps the name off one of them.
    for half in ("MEE009-0", "MEE009-1"):
        assert identify({half: prints[half]}, library)[half].name == "MEE009"
    names = [match.name for match in identify(prints, library).values()]
    assert names.count("MEE009") == 1 and names.count("MEE012") == 1


# The closest pairs of different real people among the real-speech recordings (benchmarks/speaker_similarity.py,
# CAM++ voiceprints from the reference turns): no two different people score above 0.716 there, the same person in
# another meeting 0.83-0.89. The closest pair of women and of men must stay strangers.
# (enrolled recording, person, other recording, another person, their similarity)
CLOSE_STRANGERS = [
    ("ami_EN2005a_0-30", "FEE083", "ami_EN2006b_0-30", "FEE088", 0.716),
    ("ami_ES2003a_0-30", "MEE009", "ami_EN2002a_0-30", "MEE071", 0.631),
]


def reference_print(encoder: SpeakerEncoder, real: Path, stem: str, person: str) -> Voiceprint:
    prints = speaker_voiceprints(encoder, decode_audio(real / f"{stem}.wav"), rttm_turns(real / f"{stem}.rttm"))
    voice = prints[person]
    assert voice is not None
    return voice


@pytest.mark.parametrize(
    ("enrolled_in", "enrolled", "heard_in", "stranger", "measured"), CLOSE_STRANGERS, ids=["women", "men"]
)
def test_a_stranger_whose_voice_is_close_to_a_known_one_stays_unnamed(
    tmp_path: Path,
    encoder: SpeakerEncoder,
    real: Path,
    enrolled_in: str,
    enrolled: str,
    heard_in: str,
    stranger: str,
    measured: float,
) -> None:
    library = SpeakerLibrary.load(tmp_path)
    library.add(enrolled, reference_print(encoder, real, enrolled_in, enrolled), enrolled_in)
    match = identify({"A": reference_print(encoder, real, heard_in, stranger)}, library.known())["A"]
    # The pair is as close as measured (so it tests what it says), and the stranger gets no name.
    assert match.similarity == pytest.approx(measured, abs=0.01)
    assert match.closest == enrolled
    assert match.name is None and match.speaker == "A"


def test_the_same_person_in_another_meeting_is_named_from_reference_turns(
    tmp_path: Path, encoder: SpeakerEncoder, real: Path
) -> None:
    """FEE083 speaks in EN2005a and in EN2009b (0.833 between the two, the lowest same-person pair of the AMI
    clips): the threshold that keeps the close strangers above unnamed still names her."""
    library = SpeakerLibrary.load(tmp_path)
    library.add("FEE083", reference_print(encoder, real, "ami_EN2005a_0-30", "FEE083"), "EN2005a")
    match = identify({"A": reference_print(encoder, real, "ami_EN2009b_0-30", "FEE083")}, library.known())["A"]
    assert match.similarity == pytest.approx(0.833, abs=0.01)
    assert match.name == "FEE083"


@pytest.fixture(scope="module")
def transcripts(engine: Any, library_dir: Path, real: Path) -> dict[str, Transcript]:
    """ES2003b and EN2002a through the whole pipeline (tiny.en, the built-in diarizer), library enrolled."""
    from app.core.engine.diarize import DiarizerOptions
    from app.core.engine.pipeline import PipelineOptions
    from app.core.engine.transcribe import TranscriptionOptions

    options = PipelineOptions(
        transcription=TranscriptionOptions(language="en", cpu_threads=2),
        diarizer=DiarizerOptions(backend="embedded"),
        speaker_library=str(library_dir),
    )
    return {stem: engine.run(real / f"{stem}.wav", options) for stem in ("ami_ES2003b_0-30", "ami_EN2002a_0-30")}


def test_a_transcript_carries_the_enrolled_names(transcripts: dict[str, Transcript], real: Path) -> None:
    transcript = transcripts["ami_ES2003b_0-30"]
    assert set(ENROLLED) <= set(transcript.speakers)
    data = transcript.to_dict()
    segment_speakers = {segment["speaker"] for segment in data["segments"]}
    word_speakers = {word["speaker"] for segment in data["segments"] for word in segment["words"]}
    assert set(ENROLLED) <= segment_speakers and set(ENROLLED) <= word_speakers
    found = {item["name"]: item for item in data["identification"]["speakers"] if item["name"]}
    assert set(found) == set(ENROLLED)
    for item in found.values():
        assert item["speaker"] == item["name"] and item["similarity"] >= data["identification"]["threshold"]
    assert {turn["speaker"] for turn in data["diarization"]["turns"]} >= set(ENROLLED)
    assert Transcript.from_dict(json.loads(json.dumps(data))).to_dict() == data
    # Naming adds no error of its own: the identification error equals the diarization error under the
    # best possible mapping of diarized speakers to people, i.e. every name went to the right speaker.
    error = identification_error(real / "ami_ES2003b_0-30.rttm", transcript_annotation(data))
    assert error <= diarization_error(real / "ami_ES2003b_0-30.rttm", transcript_annotation(data)) + 0.02


def test_identification_error_of_the_whole_pipeline_on_es2003b(transcripts: dict[str, Transcript], real: Path) -> None:
    data = transcripts["ami_ES2003b_0-30"].to_dict()
    assert identification_error(real / "ami_ES2003b_0-30.rttm", transcript_annotation(data)) <= 0.35


def test_strangers_in_a_transcript_get_no_enrolled_name(transcripts: dict[str, Transcript]) -> None:
    transcript = transcripts["ami_EN2002a_0-30"]
    assert not set(ENROLLED) & set(transcript.speakers)
    assert transcript.identification is not None
    # Every diarized speaker was compared (each has solo speech to make a voiceprint of) and stayed unnamed.
    items = transcript.identification.speakers
    assert len(items) >= 2 and all(item.name is None for item in items)
    assert all(item.similarity is not None and item.similarity < transcript.identification.threshold for item in items)


def test_renaming_a_named_speaker_keeps_the_identification_in_step(transcripts: dict[str, Transcript]) -> None:
    renamed = transcripts["ami_ES2003b_0-30"].rename_speaker("MEE009", "Chair")
    assert renamed.identification is not None
    assert "Chair" in {item.speaker for item in renamed.identification.speakers}
    assert "MEE009" not in renamed.speakers


def test_library_rename_merge_forget_and_errors(tmp_path: Path, encoder: SpeakerEncoder, real: Path) -> None:
    library = SpeakerLibrary.load(tmp_path)
    audio = decode_audio(real / "ami_ES2003a_0-30.wav")
    enroll(library, "Ann", encoder, audio, 2.13, 13.18)
    enroll(library, "Bea", encoder, audio, 13.24, 16.81)
    with pytest.raises(SpeakerLibraryError, match="Too little speech"):
        enroll(library, "Cy", encoder, audio, 18.09, 18.34)
    with pytest.raises(SpeakerLibraryError, match=r"ends .* before it starts"):
        enroll(library, "Cy", encoder, audio, 5.0, 4.0)
    with pytest.raises(SpeakerLibraryError, match="No speaker named 'Zed'"):
        library.rename("Zed", "Ann")
    with pytest.raises(SpeakerLibraryError, match="already in the library"):
        library.rename("Ann", "Bea")
    library.rename("Ann", "Anna")
    assert [k.name for k in SpeakerLibrary.load(tmp_path).known()] == ["Anna", "Bea"]
    merged = library.merge(["Anna", "Bea"], "Both")
    assert len(merged.samples) == 2 and [k.name for k in SpeakerLibrary.load(tmp_path).known()] == ["Both"]
    library.forget("Both")
    assert SpeakerLibrary.load(tmp_path).known() == []
    (tmp_path / LIBRARY_FILE).write_text("{not json")
    with pytest.raises(SpeakerLibraryError, match="cannot be read"):
        SpeakerLibrary.load(tmp_path)


def test_a_voiceprint_that_cannot_be_compared_is_set_aside_and_kept(tmp_path: Path) -> None:
    """D8: wrong length, NaN, zero seconds: each such sample is set aside with a sentence naming it; the good ones
    load; saving writes the set-aside ones back as they were, and forgetting a name removes them with it."""
    good = {"vector": [0.0625] * 192, "seconds": 4.0, "source": "a.wav", "added": "2026-01-01T00:00:00+00:00"}
    speakers = {
        "Ann": {"samples": [good, {**good, "vector": [0.1] * 191}]},
        "Bob": {"samples": [{**good, "vector": [float("nan")] * 192}]},
        "Cy": {"samples": [{**good, "seconds": 0}]},
    }
    encoder = {"name": "cam++", "version": 1}
    (tmp_path / LIBRARY_FILE).write_text(json.dumps({"version": 2, "encoder": encoder, "speakers": speakers}))
    library = SpeakerLibrary.load(tmp_path)
    assert [known.name for known in library.known()] == ["Ann"] and len(library.get("Ann").samples) == 1
    assert len(library.problems) == 3
    assert "'Ann' (sample 2 of 2)" in library.problems[0] and "191 numbers, not 192" in library.problems[0]
    assert "'Bob'" in library.problems[1] and "NaN" in library.problems[1]
    assert "'Cy'" in library.problems[2] and "positive number" in library.problems[2]
    library.rename("Ann", "Anna")
    stored = json.loads((tmp_path / LIBRARY_FILE).read_text())["speakers"]
    assert len(stored["Anna"]["samples"]) == 2 and stored["Anna"]["samples"][1]["vector"] == [0.1] * 191
    bob = stored["Bob"]["samples"][0]["vector"]
    assert len(bob) == 192 and all(x != x for x in bob)  # NaN, written back as read
    library.forget("Bob")
    assert "Bob" not in json.loads((tmp_path / LIBRARY_FILE).read_text())["speakers"]
    assert len(SpeakerLibrary.load(tmp_path).problems) == 2  # Anna's short one and Cy's


def ge2e_sample(source: str, value: float) -> dict[str, object]:
    """A sample as Scriba's format-1 library stored it: a 256-number GE2E voiceprint and where it came from."""
    return {"vector": [value] * 256, "seconds": 6.5, "source": source, "added": "2026-01-01T00:00:00+00:00"}


def write_ge2e_library(directory: Path, real: Path) -> dict[str, object]:
    """MEE009 enrolled by `scriba speakers enroll` from a stretch of ES2003a; Gone from a stretch of a recording
    since deleted; Chair with "Remember this speaker" (a transcript's speaker: its turns were not stored)."""
    library = {
        "version": 1,
        "speakers": {
            "MEE009": {"samples": [ge2e_sample(f"{real / 'ami_ES2003a_0-30.wav'} [2.1-13.2 s]", 0.0625)]},
            "Gone": {"samples": [ge2e_sample(f"{directory / 'deleted.wav'} [0.0-9.0 s]", 0.05)]},
            "Chair": {"samples": [ge2e_sample(f"{real / 'ami_ES2003a_0-30.wav'} (SPEAKER_00)", 0.04)]},
        },
    }
    directory.mkdir(parents=True, exist_ok=True)
    (directory / LIBRARY_FILE).write_text(json.dumps(library))
    return library


def test_a_ge2e_library_is_made_again_from_its_recordings_and_nothing_is_deleted(
    tmp_path: Path, encoder: SpeakerEncoder, real: Path
) -> None:
    """Voiceprints of the earlier encoder (GE2E, 256 numbers, library format 1) cannot be compared with CAM++'s.
    Each is made again from the stretch of the recording it came from where that is on record and still there;
    the others' names are said, with why and what to do; every earlier voiceprint stays in the file."""
    directory = tmp_path / "library"
    write_ge2e_library(directory, real)
    library = SpeakerLibrary.load(directory)
    assert library.known() == [] and library.problems == []  # not damaged: of another encoder
    waiting = library.waiting()
    assert sorted(waiting) == ["Chair", "Gone", "MEE009"]
    assert "made again from the recordings" in waiting["MEE009"]
    assert "deleted.wav is no longer there" in waiting["Gone"] and "Enroll one new sample of Gone" in waiting["Gone"]
    assert (
        "(SPEAKER_00), whose turns were not kept" in waiting["Chair"]
        and "Enroll one new sample of Chair" in waiting["Chair"]
    )
    assert [name for name, _ in library.remakeable()] == ["MEE009"]

    remade = reenroll_earlier(library, encoder)
    assert remade.names == ("MEE009",) and sorted(remade.waiting) == ["Chair", "Gone"]
    assert any("'Gone' cannot be named" in line for line in remade.messages())
    reloaded = SpeakerLibrary.load(directory)
    assert [known.name for known in reloaded.known()] == ["MEE009"]
    assert reloaded.remakeable() == []  # made once: not again
    stored = json.loads((directory / LIBRARY_FILE).read_text())
    assert stored["version"] == 2 and stored["encoder"] == {"name": "cam++", "version": 1}
    new_sample = stored["speakers"]["MEE009"]["samples"][0]
    assert len(new_sample["vector"]) == 192 and new_sample["seconds"] >= 5.0
    # The earlier voiceprints are all kept, as they were, with the encoder that made them.
    for name, value in (("MEE009", 0.0625), ("Gone", 0.05), ("Chair", 0.04)):
        (earlier,) = stored["speakers"][name]["earlier"]
        assert earlier["vector"] == [value] * 256 and earlier["encoder"] == {"name": "ge2e", "version": 1}
    assert stored["speakers"]["MEE009"]["earlier"][0]["remade"]

    # The voiceprint made again names MEE009 in another meeting; the one still waiting names nobody.
    audio = decode_audio(real / "ami_ES2003b_0-30.wav")
    prints = speaker_voiceprints(encoder, audio, rttm_turns(real / "ami_ES2003b_0-30.rttm"))
    matches = identify(prints, reloaded.known())
    assert matches["MEE009"].name == "MEE009" and matches["MEE012"].name is None
    # Forgetting a waiting name removes its earlier voiceprint (the user asked); the others stay.
    reloaded.forget("Gone")
    assert sorted(json.loads((directory / LIBRARY_FILE).read_text())["speakers"]) == ["Chair", "MEE009"]


def test_a_library_of_another_encoder_version_is_not_compared(tmp_path: Path) -> None:
    """Format 2 names its encoder: voiceprints of another one (here an older CAM++ recipe) wait to be made again
    instead of being compared in the wrong space."""
    sample = {"vector": [0.0625] * 192, "seconds": 4.0, "source": "talk.wav [0.0-4.0 s]", "added": "2026-01-01"}
    older = {"version": 2, "encoder": {"name": "cam++", "version": 0}, "speakers": {"Ann": {"samples": [sample]}}}
    (tmp_path / LIBRARY_FILE).write_text(json.dumps(older))
    library = SpeakerLibrary.load(tmp_path)
    assert library.known() == [] and list(library.waiting()) == ["Ann"]
    library.save()
    stored = json.loads((tmp_path / LIBRARY_FILE).read_text())
    assert stored["speakers"]["Ann"]["samples"] == []
    assert stored["speakers"]["Ann"]["earlier"] == [{**sample, "encoder": {"name": "cam++", "version": 0}}]


def test_a_job_names_who_waits_for_a_new_sample_and_leaves_the_library_as_it_is(
    tmp_path: Path, transcripts: dict[str, Transcript], real: Path
) -> None:
    """A job only reads the library: with GE2E voiceprints in it, its notes say which names cannot be given and
    why, and the file is not rewritten (making them again is for `scriba speakers` and the window)."""
    from app.core.engine.pipeline import Engine

    directory = tmp_path / "library"
    write_ge2e_library(directory, real)
    before = (directory / LIBRARY_FILE).read_bytes()
    audio = decode_audio(real / "ami_ES2003b_0-30.wav")
    named = Engine().identify(transcripts["ami_ES2003b_0-30"], audio, directory)
    notes = [note for note in named.warnings if "cannot be named" in note]
    assert len(notes) == 3 and any("'Gone' cannot be named" in note and "no longer there" in note for note in notes)
    assert (directory / LIBRARY_FILE).read_bytes() == before
