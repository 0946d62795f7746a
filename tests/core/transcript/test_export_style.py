"""The export sheet's options in the core: timestamps, speaker names and paragraphs, each only taking something away
from the formats that show it, and carried through save_transcript to the files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.core.transcript import formats
from app.core.transcript.document import Transcript
from app.core.transcript.formats import ExportStyle
from app.core.transcript.save import save_transcript
from tests.core.transcript.test_export import make_transcript, readable

NAMES = {"SPEAKER_00": "Ada", "SPEAKER_01": "Ben"}  # names no format escapes (md escapes an underscore)


def named() -> Transcript:
    transcript = make_transcript()
    segments = tuple(replace(segment, speaker=NAMES[segment.speaker or ""]) for segment in transcript.segments)
    return replace(transcript, segments=segments, speakers=tuple(NAMES.values()))


pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers

BARE = ExportStyle(timestamps=False, speakers=False, paragraphs=False)


def test_all_on_is_each_format_as_it_was() -> None:
    transcript = make_transcript()
    for fmt in formats.FORMATS:
        if fmt != "docx":  # a Word file carries the moment it was made: compared by its text
            assert formats.render(transcript, fmt, ExportStyle()) == formats.render(transcript, fmt)
    assert readable(formats.render(transcript, "docx", ExportStyle())) == readable(formats.render(transcript, "docx"))


def test_txt_without_timestamps_speakers_or_paragraphs() -> None:
    transcript = make_transcript()
    no_times = formats.to_txt(transcript, ExportStyle(timestamps=False))
    assert no_times == "SPEAKER_00:\nHello there. And you?\n\nSPEAKER_01:\nFine, <thanks>\n"
    no_names = formats.to_txt(transcript, ExportStyle(speakers=False))
    # Turns stay apart without the names: only the name goes.
    assert no_names == "[00:00:00]\nHello there. And you?\n\n[01:02:03]\nFine, <thanks>\n"
    segments = formats.to_txt(transcript, ExportStyle(paragraphs=False))
    assert segments == (
        "[00:00:00] SPEAKER_00:\nHello there.\n\n[00:00:02] SPEAKER_00:\nAnd you?\n\n"
        "[01:02:03] SPEAKER_01:\nFine, <thanks>\n"
    )
    assert formats.to_txt(transcript, BARE) == "Hello there.\n\nAnd you?\n\nFine, <thanks>\n"


@pytest.mark.parametrize("fmt", formats.STYLED["speakers"])
def test_no_speaker_names_in_any_format_that_shows_them(fmt: str) -> None:
    transcript = named()
    assert "Ben" in readable(formats.render(transcript, fmt))
    text = readable(formats.render(transcript, fmt, ExportStyle(speakers=False)))
    assert "Ada" not in text and "Ben" not in text
    assert "Hello there." in text and "thanks" in text


@pytest.mark.parametrize("fmt", formats.STYLED["timestamps"])
def test_no_timestamps_in_any_format_that_shows_them(fmt: str) -> None:
    transcript = named()
    assert "01:02:03" in readable(formats.render(transcript, fmt))
    text = readable(formats.render(transcript, fmt, ExportStyle(timestamps=False)))
    assert "01:02:03" not in text and "00:00:00" not in text
    assert "Ben" in text and "Hello there." in text


@pytest.mark.parametrize("fmt", formats.STYLED["paragraphs"])
def test_one_paragraph_per_segment_in_any_format_that_joins_them(fmt: str) -> None:
    transcript = make_transcript()
    joined = readable(formats.render(transcript, fmt))
    assert "Hello there. And you?" in joined
    apart = readable(formats.render(transcript, fmt, ExportStyle(paragraphs=False)))
    assert "Hello there. And you?" not in apart
    assert "Hello there." in apart and "And you?" in apart


@pytest.mark.parametrize("fmt", ["json", "csv", "tsv"])
def test_data_formats_stay_whole(fmt: str) -> None:
    transcript = make_transcript()
    assert formats.render(transcript, fmt, BARE) == formats.render(transcript, fmt)


def test_save_transcript_writes_the_style_asked_for(tmp_path: Path) -> None:
    saved = save_transcript(
        make_transcript(), tmp_path, "talk", ("txt", "srt"), record=None, style=ExportStyle(speakers=False)
    )
    assert not saved.failed
    assert (tmp_path / "talk.txt").read_text(encoding="utf-8").startswith("[00:00:00]\nHello there. And you?")
    assert "SPEAKER" not in (tmp_path / "talk.srt").read_text(encoding="utf-8")
