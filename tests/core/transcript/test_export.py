"""Exporters: exact formats, hour-long timestamps, atomic writes, speaker renames."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.core import files
from app.core.transcript import formats, save, times
from app.core.transcript.document import DiarizationInfo, Segment, SpeakerTurn, Transcript, Word

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers


def make_transcript() -> Transcript:
    words_a = (Word(0.5, 0.9, " Hello", 0.9, "SPEAKER_00"), Word(0.9, 1.4, " there.", 0.8, "SPEAKER_00"))
    words_b = (Word(3723.25, 3723.6, " Fine,", 0.7, "SPEAKER_01"), Word(3723.6, 3724.0, " <thanks>", 0.6, "SPEAKER_01"))
    return Transcript(
        source="/tmp/talk.wav",
        duration=3725.0,
        language="en",
        model="tiny.en",
        device="cpu",
        compute_type="int8",
        segments=(
            Segment(0.5, 1.4, "Hello there.", words_a, "SPEAKER_00"),
            Segment(2.0, 2.5, "And you?", (), "SPEAKER_00"),
            Segment(3723.25, 3724.0, "Fine, <thanks>", words_b, "SPEAKER_01"),
        ),
        diarization=DiarizationInfo("embedded", "test", (SpeakerTurn(0.4, 2.6, "SPEAKER_00"),)),
        speakers=("SPEAKER_00", "SPEAKER_01"),
        timings={"total": 1.0},
    )


def readable(rendered: str | bytes) -> str:
    """The text of a rendered export; a Word file's as Word would show it."""
    if isinstance(rendered, str):
        return rendered
    import io

    from docx import Document

    return "\n".join(paragraph.text for paragraph in Document(io.BytesIO(rendered)).paragraphs)


def test_timestamps() -> None:
    assert times.timestamp(0, ",") == "00:00:00,000"
    assert times.timestamp(3723.2506, ",") == "01:02:03,251"
    assert times.timestamp(3723.25, ".") == "01:02:03.250"
    assert times.timestamp(360000.0, ",") == "100:00:00,000"
    assert times.timestamp(59.9999, ".") == "00:01:00.000"


def test_srt_uses_comma_milliseconds_and_numbered_cues() -> None:
    text = formats.to_srt(make_transcript())
    assert text.splitlines()[:3] == ["1", "00:00:00,500 --> 00:00:01,400", "[SPEAKER_00] Hello there."]
    assert "3\n01:02:03,250 --> 01:02:04,000\n[SPEAKER_01] Fine, <thanks>\n" in text


def test_vtt_header_voice_tags_and_escaping() -> None:
    text = formats.to_vtt(make_transcript())
    assert text.startswith("WEBVTT\n\n")
    assert "00:00:00.500 --> 00:00:01.400\n<v SPEAKER_00>Hello there.\n" in text
    assert "01:02:03.250 --> 01:02:04.000\n<v SPEAKER_01>Fine, &lt;thanks&gt;\n" in text


def test_txt_groups_a_speakers_segments_into_one_paragraph() -> None:
    text = formats.to_txt(make_transcript())
    assert text == "[00:00:00] SPEAKER_00:\nHello there. And you?\n\n[01:02:03] SPEAKER_01:\nFine, <thanks>\n"


def test_txt_without_diarization_is_plain_text() -> None:
    transcript = make_transcript()
    plain = Transcript(
        **{
            **transcript.__dict__,
            "segments": tuple(Segment(s.start, s.end, s.text, (), None) for s in transcript.segments),
            "diarization": None,
            "speakers": (),
        }
    )
    assert formats.to_txt(plain) == "Hello there. And you? Fine, <thanks>\n"


def test_json_round_trip_keeps_the_contract() -> None:
    transcript = make_transcript()
    data = json.loads(formats.to_json(transcript))
    assert set(data) == {
        "version",
        "source",
        "duration",
        "language",
        "model",
        "device",
        "compute_type",
        "diarization",
        "speakers",
        "identification",  # known-speaker matching (None when it did not run); added within version 1
        "segments",
        "timings",
        "warnings",  # what went wrong with the input without stopping the job (partial audio); within version 1
    }
    assert data["version"] == 1
    assert set(data["segments"][0]) == {"start", "end", "speaker", "text", "words"}
    assert set(data["segments"][0]["words"][0]) == {"start", "end", "word", "probability", "speaker"}
    assert data["diarization"]["backend"] == "embedded" and data["diarization"]["reason"] == "test"
    assert Transcript.from_dict(data) == transcript


def test_long_segments_are_split_into_readable_cues() -> None:
    words = tuple(Word(i * 0.5, i * 0.5 + 0.4, f" word{i}", 0.9, "SPEAKER_00") for i in range(40))
    segment = Segment(0.0, 19.9, "".join(w.word for w in words).strip(), words, "SPEAKER_00")
    transcript = Transcript(**{**make_transcript().__dict__, "segments": (segment,)})
    cues = formats.to_srt(transcript).strip().split("\n\n")
    assert len(cues) >= 3
    assert all(len(cue.splitlines()[2]) <= formats.MAX_CUE_CHARS + len("[SPEAKER_00] ") for cue in cues)
    assert " ".join(cue.splitlines()[2].removeprefix("[SPEAKER_00] ") for cue in cues) == segment.text


def test_rename_speaker_changes_every_line_and_every_format() -> None:
    renamed = make_transcript().rename_speaker("SPEAKER_01", "Dr. Okafor")
    assert renamed.speakers == ("SPEAKER_00", "Dr. Okafor")
    assert all(w.speaker == "Dr. Okafor" for w in renamed.segments[2].words)
    for fmt in formats.FORMATS:
        text = readable(formats.render(renamed, fmt))
        assert "Dr. Okafor" in text and "SPEAKER_01" not in text, fmt


def test_export_writes_every_format_atomically(tmp_path: Path) -> None:
    paths = save.save_transcript(
        make_transcript(), tmp_path / "out", "talk", ["txt", "srt", "vtt", "json"], record=None
    ).written
    assert [p.name for p in paths] == ["talk.txt", "talk.srt", "talk.vtt", "talk.json"]
    assert sorted(os.listdir(tmp_path / "out")) == ["talk.json", "talk.srt", "talk.txt", "talk.vtt"]


def test_a_failed_write_leaves_the_previous_file_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "talk.txt"
    target.write_text("the good transcript\n")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        files.write_atomic(target, "half")
    assert target.read_text() == "the good transcript\n"
    assert os.listdir(tmp_path) == ["talk.txt"]  # no temporary file left behind


def test_unknown_format() -> None:
    with pytest.raises(ValueError, match="unknown format 'pdf'"):
        formats.render(make_transcript(), "pdf")


# ----------------------------------------------------------------------------------------- issue 18

EXPORT_UNDER_A_FILE_SIZE_LIMIT = """
import json, resource, sys
from pathlib import Path
from app.core.transcript.save import save_transcript
from tests.core.transcript.test_export import make_transcript

limit = int(sys.argv[2])
# The file system refuses to grow any file past the limit (EFBIG), as a full or quota-limited disk refuses to
# grow it at all: Python ignores SIGXFSZ, so the write fails with an OSError.
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
result = save_transcript(make_transcript(), Path(sys.argv[1]), "talk", ["txt", "json", "srt", "vtt"], record=None)
print(json.dumps({"written": [p.name for p in result.written], "failed": sorted(result.lost),
                  "summary": result.summary()}))
"""


def test_one_format_that_cannot_be_written_does_not_lose_the_others(tmp_path: Path) -> None:
    """Issue 18: one export failing part-way lost the formats after it. Here the json (the largest) is refused
    by the operating system for its size, in a child process with a real file-size limit."""
    import subprocess
    import sys

    sizes = {fmt: len(files.to_bytes(formats.render(make_transcript(), fmt))) for fmt in formats.DEFAULT_FORMATS}
    limit = max(sizes[fmt] for fmt in ("txt", "srt", "vtt")) + 16
    assert sizes["json"] > limit
    child = subprocess.run(
        [sys.executable, "-c", EXPORT_UNDER_A_FILE_SIZE_LIMIT, str(tmp_path), str(limit)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])},
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout)
    assert report["written"] == ["talk.txt", "talk.srt", "talk.vtt"] and report["failed"] == ["json"]
    assert "json not written (File too large" in report["summary"]
    assert sorted(os.listdir(tmp_path)) == ["talk.srt", "talk.txt", "talk.vtt"]  # no temporary left behind
    assert (tmp_path / "talk.vtt").read_text() == formats.to_vtt(make_transcript())


def test_a_renderer_that_raises_costs_only_its_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(transcript: Transcript, style: formats.ExportStyle) -> str:
        raise RuntimeError("a bug in the srt cue splitter")

    monkeypatch.setitem(formats.RENDERERS, "srt", broken)
    result = save.save_transcript(make_transcript(), tmp_path, "talk", ["srt", "txt", "json"], record=None)
    assert [path.name for path in result.written] == ["talk.txt", "talk.json"]
    assert list(result.result.failures) == ["srt"] and result.failed and result.lost == ("srt",)
    assert "srt not written (RuntimeError: a bug in the srt cue splitter)" in result.summary()


def test_a_file_edited_by_hand_is_never_overwritten(tmp_path: Path) -> None:
    """Issue 18: exports replaced files the user had edited. Scriba records the hash of what it wrote and only
    replaces a file that still holds exactly that."""
    from app.core.queue.jobs import JobStore

    record = JobStore(tmp_path / "data")
    out = tmp_path / "out"
    first = save.save_transcript(make_transcript(), out, "talk", ["txt", "srt"], record=record)
    again = save.save_transcript(make_transcript(), out, "talk", ["txt", "srt"], record=record)
    assert again.result.stem == "talk" and not again.renamed and again.written == first.written  # its own: replaced

    (out / "talk.txt").write_text("Corrected by hand: Dr. Okafor said it, not SPEAKER_01.\n")
    third = save.save_transcript(make_transcript(), out, "talk", ["txt", "srt"], record=record)
    assert third.renamed and third.result.stem == "talk-2"
    assert [path.name for path in third.written] == ["talk-2.txt", "talk-2.srt"]
    assert (out / "talk.txt").read_text().startswith("Corrected by hand")
    kept = f"talk.* in {out} were not written by Scriba as they are now (edited by hand?): kept them, wrote talk-2.*"
    assert kept in third.summary() and third.lines == (f"note: {kept} instead",)

    (out / "notes.txt").write_text("someone else's file\n")  # never written by Scriba at all
    foreign = save.save_transcript(make_transcript(), out, "notes", ["txt"], record=record)
    assert foreign.result.stem == "notes-2" and (out / "notes.txt").read_text() == "someone else's file\n"
    # Without a record nothing existing is replaced, not even Scriba's own unchanged files.
    blind = save.save_transcript(make_transcript(), out, "talk", ["txt"], record=None)
    assert blind.result.stem == "talk-3"


def test_one_way_to_number_a_name_in_use() -> None:
    from app.core.transcript.save import first_free_stem

    assert first_free_stem("talk", lambda name: False) == "talk"
    assert first_free_stem("talk", {"talk", "talk-2"}.__contains__) == "talk-3"
    assert first_free_stem("talk-2", {"talk-2"}.__contains__) == "talk-2-2"
