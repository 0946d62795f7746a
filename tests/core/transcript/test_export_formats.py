"""Exports for reading, spreadsheets and analysis (issue 14 part 4): Markdown, CSV/TSV, HTML, Word, QDA text.

Each is read back the way its reader would: CSV/TSV with the csv module (as a spreadsheet parses it), HTML with
an HTML parser, docx with python-docx (the library LibreOffice-compatible .docx files are checked with here).
"""

from __future__ import annotations

import csv
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from app.core.transcript import formats, save
from app.core.transcript.document import Segment, Transcript
from tests.core.transcript.test_export import make_transcript

pytestmark = pytest.mark.unit


def with_tricky_text() -> Transcript:
    """Text that breaks naive writers: a formula, markup, commas, quotes and a tab."""
    base = make_transcript()
    tricky = Segment(5.0, 6.0, '=SUM(A1) said "Bob", <b>not</b> *bold*\tthen', (), "SPEAKER_01")
    return Transcript(**{**base.__dict__, "segments": (*base.segments, tricky)})


def test_csv_and_tsv_are_one_row_per_segment_with_times_and_speakers() -> None:
    for fmt, delimiter in (("csv", ","), ("tsv", "\t")):
        text = formats.render(with_tricky_text(), fmt)
        assert isinstance(text, str)
        if fmt == "csv":
            assert text.startswith("\ufeff")  # Excel reads UTF-8 only with the mark
        rows = list(csv.DictReader(io.StringIO(text.lstrip("\ufeff")), delimiter=delimiter))
        assert [row["speaker"] for row in rows] == ["SPEAKER_00", "SPEAKER_00", "SPEAKER_01", "SPEAKER_01"]
        assert rows[2]["start"] == "01:02:03.250" and rows[2]["end_seconds"] == "3724.000"
        assert rows[0]["text"] == "Hello there."
        # A cell a spreadsheet would run as a formula is quoted as text; the rest survives as it was.
        assert rows[3]["text"] == "'" + with_tricky_text().segments[3].text


class _TextOf(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_html_is_a_standalone_page_whose_text_is_never_markup() -> None:
    page = formats.render(with_tricky_text(), "html")
    assert isinstance(page, str) and page.startswith("<!DOCTYPE html>")
    parser = _TextOf()
    parser.feed(page)
    assert "b" not in parser.tags  # the spoken "<b>not</b>" is text, not bold
    text = "".join(parser.text)
    assert "<b>not</b>" in text and "SPEAKER_01" in text and "01:02:03" in text and "talk.wav" in text
    assert "prefers-color-scheme:dark" in page


def test_markdown_paragraphs_escape_what_would_be_formatting() -> None:
    text = formats.render(with_tricky_text(), "md")
    assert isinstance(text, str)
    assert text.startswith("# talk.wav\n")
    assert "`00:00:00` **SPEAKER\\_00:** Hello there. And you?" in text  # one paragraph per speaker turn
    assert "\\*bold\\*" in text and "\\<b\\>" in text


def test_word_document_has_title_times_speakers_and_text() -> None:
    from docx import Document

    document = Document(io.BytesIO(formats.to_docx(make_transcript())))
    assert document.core_properties.title == "talk.wav"
    paragraphs = [paragraph for paragraph in document.paragraphs if paragraph.text]
    assert paragraphs[0].text == "talk.wav" and paragraphs[0].style.name == "Heading 1"
    assert paragraphs[1].text == "1:02:05 of audio, tiny.en, language en, 2 speaker(s)"
    turns = paragraphs[2:]
    assert [paragraph.text for paragraph in turns] == [
        "00:00:00  SPEAKER_00: Hello there. And you?",
        "01:02:03  SPEAKER_01: Fine, <thanks>",
    ]
    assert turns[0].runs[1].bold and not turns[0].runs[2].bold  # the speaker stands out, the words do not


def test_qda_text_opens_each_paragraph_with_a_timestamp_and_the_speaker(tmp_path: Path) -> None:
    written = save.save_transcript(
        make_transcript(), tmp_path, "interview", ["qda", "docx", "csv"], record=None
    ).written
    assert [path.name for path in written] == ["interview.qda.txt", "interview.docx", "interview.csv"]
    text = written[0].read_text(encoding="utf-8")
    paragraphs = text.rstrip("\n").split("\n\n")
    assert paragraphs == ["[00:00:00] SPEAKER_00: Hello there. And you?", "[01:02:03] SPEAKER_01: Fine, <thanks>"]
    assert all(re.match(r"^\[\d\d:\d\d:\d\d\] [^:]+: ", paragraph) for paragraph in paragraphs)


def test_a_transcript_without_speakers_or_words() -> None:
    base = make_transcript()
    plain = Transcript(
        **{**base.__dict__, "segments": tuple(Segment(s.start, s.end, s.text) for s in base.segments), "speakers": ()}
    )
    assert formats.to_qda(plain).startswith("[00:00:00] Hello there. And you? Fine, <thanks>")
    empty = Transcript(**{**base.__dict__, "segments": (), "speakers": ()})
    # An empty recording still exports: what a reader needs to open it, and no rows.
    rendered = {fmt: formats.render(empty, fmt) for fmt in formats.FORMATS}
    assert rendered["csv"] == "\ufeffstart,end,start_seconds,end_seconds,speaker,text\n" and rendered["txt"] == ""
    assert rendered["md"].startswith("# talk.wav") and "</html>" in str(rendered["html"])
    assert json.loads(str(rendered["json"]))["segments"] == [] and rendered["qda"] == ""
    from docx import Document

    assert next(p.text for p in Document(io.BytesIO(bytes(rendered["docx"]))).paragraphs if p.text) == "talk.wav"


def test_exports_get_the_users_usual_permissions_and_voiceprints_stay_private(tmp_path: Path) -> None:
    """Issue 14: exports were written owner-only (mkstemp's 0600), so a colleague on a shared folder could not
    open them. They now follow the umask; a file replaced keeps its mode; the voiceprint library stays 0600."""
    import os
    import stat

    from app.core.files import write_atomic
    from app.core.queue.jobs import JobStore

    record = JobStore(tmp_path / "data")
    old = os.umask(0o022)
    try:
        (written,) = save.save_transcript(make_transcript(), tmp_path, "talk", ["txt"], record=record).written
        assert stat.S_IMODE(written.stat().st_mode) == 0o644
        written.chmod(0o600)  # the user made it private: a new export over it keeps that
        again = save.save_transcript(make_transcript(), tmp_path, "talk", ["txt"], record=record)
        assert again.written == (written,)
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
        write_atomic(tmp_path / "speakers.json", "{}", private=True)
        assert stat.S_IMODE((tmp_path / "speakers.json").stat().st_mode) == 0o600
    finally:
        os.umask(old)
