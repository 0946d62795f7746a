"""Exports written out in full (issue 42): each format's exact text for small transcripts built here, with
timestamps at rounding edges, a speaker and no speaker, an empty segment between two of one speaker's, names and
words with markup characters, and subtitle cues split exactly at (and not before) their limits."""

from __future__ import annotations

import io
import json
import re

import pytest

from app.core.transcript import formats
from app.core.transcript.document import Segment, Transcript, Word

pytestmark = pytest.mark.unit


def transcript(*segments: Segment, **fields: object) -> Transcript:
    values: dict[str, object] = {
        "source": "/rec/Zoë & Kai.wav",
        "duration": 3725.4,
        "language": "de",
        "model": "small",
        "device": "cpu",
        "compute_type": "int8",
        "segments": segments,
        "speakers": ("Zoë", "Dr. <K>"),
        "warnings": ("partial: decoding stopped at 3724.0 s of 3725.4 s",),
    }
    values.update(fields)
    return Transcript(**values)  # type: ignore[arg-type]


def meeting() -> Transcript:
    """Rounding edges (0.9995 s is 1.000, 59.9999 s a minute, 3599.9996 s an hour), an empty segment inside
    Zoë's turn, a formula-like and a markup-like phrase, and a last segment nobody was assigned to."""
    return transcript(
        Segment(0.9995, 2.0, " Grüß Gott, & X-ray. ", (), "Zoë"),
        Segment(2.0, 2.5, "   ", (), "Zoë"),
        Segment(59.9999, 61.0, "=1+1 <b>", (), "Zoë"),
        Segment(3599.9996, 3601.25, "Ja.", (), "Dr. <K>"),
        Segment(3602.0, 3603.0, "No speaker here", (), None),
    )


def test_txt_in_full() -> None:
    assert formats.to_txt(meeting()) == (
        "[00:00:01] Zoë:\nGrüß Gott, & X-ray. =1+1 <b>\n\n[01:00:00] Dr. <K>:\nJa.\n\nNo speaker here\n"
    )


def test_srt_in_full() -> None:
    assert formats.to_srt(meeting()) == (
        "1\n00:00:01,000 --> 00:00:02,000\n[Zoë] Grüß Gott, & X-ray.\n"
        "\n"
        "2\n00:01:00,000 --> 00:01:01,000\n[Zoë] =1+1 <b>\n"
        "\n"
        "3\n01:00:00,000 --> 01:00:01,250\n[Dr. <K>] Ja.\n"
        "\n"
        "4\n01:00:02,000 --> 01:00:03,000\nNo speaker here\n"
    )


def test_vtt_in_full() -> None:
    assert formats.to_vtt(meeting()) == (
        "WEBVTT\n"
        "\n"
        "00:00:01.000 --> 00:00:02.000\n<v Zoë>Grüß Gott, &amp; X-ray.\n"
        "\n"
        "00:01:00.000 --> 00:01:01.000\n<v Zoë>=1+1 &lt;b&gt;\n"
        "\n"
        "01:00:00.000 --> 01:00:01.250\n<v Dr. &lt;K&gt;>Ja.\n"
        "\n"
        "01:00:02.000 --> 01:00:03.000\nNo speaker here\n"
    )


def test_markdown_in_full() -> None:
    assert formats.to_md(meeting()) == (
        "# Zoë & Kai.wav\n"
        "\n"
        "*1:02:05 of audio, small, language de, 2 speaker(s)*\n"
        "\n"
        "> **Warning:** partial: decoding stopped at 3724.0 s of 3725.4 s\n"
        "\n"
        "`00:00:01` **Zoë:** Grüß Gott, & X-ray. =1+1 \\<b\\>\n"
        "\n"
        "`01:00:00` **Dr. \\<K\\>:** Ja.\n"
        "\n"
        "`01:00:02` No speaker here\n"
    )


def test_markdown_without_speakers_a_source_or_warnings() -> None:
    plain = transcript(Segment(5.0, 6.0, "a_b [c]", (), None), source="", speakers=(), warnings=())
    assert formats.to_md(plain) == (
        "# Transcript\n\n*1:02:05 of audio, small, language de*\n\n`00:00:05` a\\_b \\[c\\]\n"
    )


def test_qda_in_full() -> None:
    assert formats.to_qda(meeting()) == (
        "[00:00:01] Zoë: Grüß Gott, & X-ray. =1+1 <b>\n\n[01:00:00] Dr. <K>: Ja.\n\n[01:00:02] No speaker here\n"
    )


def test_csv_and_tsv_in_full() -> None:
    assert formats.to_csv(meeting()) == (
        "\ufeffstart,end,start_seconds,end_seconds,speaker,text\n"
        '00:00:01.000,00:00:02.000,1.000,2.000,Zoë,"Grüß Gott, & X-ray."\n'
        "00:01:00.000,00:01:01.000,60.000,61.000,Zoë,'=1+1 <b>\n"
        "01:00:00.000,01:00:01.250,3600.000,3601.250,Dr. <K>,Ja.\n"
        "01:00:02.000,01:00:03.000,3602.000,3603.000,,No speaker here\n"
    )
    assert formats.to_tsv(meeting()) == (
        "start\tend\tstart_seconds\tend_seconds\tspeaker\ttext\n"
        "00:00:01.000\t00:00:02.000\t1.000\t2.000\tZoë\tGrüß Gott, & X-ray.\n"
        "00:01:00.000\t00:01:01.000\t60.000\t61.000\tZoë\t'=1+1 <b>\n"
        "01:00:00.000\t01:00:01.250\t3600.000\t3601.250\tDr. <K>\tJa.\n"
        "01:00:02.000\t01:00:03.000\t3602.000\t3603.000\t\tNo speaker here\n"
    )


def test_every_formula_opening_is_quoted_and_nothing_else() -> None:
    texts = ("+49 30 1234", "-minus", "@home", "=A1", "plain - text", "1+1")
    table = formats.to_tsv(transcript(*(Segment(float(i), i + 0.5, text, (), None) for i, text in enumerate(texts))))
    cells = [line.split("\t")[-1] for line in table.splitlines()[1:]]
    assert cells == ["'+49 30 1234", "'-minus", "'@home", "'=A1", "plain - text", "1+1"]


HTML_STYLE = (
    "body{font:16px/1.6 system-ui,sans-serif;max-width:46em;margin:2em auto;padding:0 1em}"
    ".time{color:#777;font:13px monospace;margin-right:.5em}.speaker{font-weight:600}"
    ".about{color:#777}.warning{color:#b35900}"
    "@media(prefers-color-scheme:dark){body{background:#1e1e1e;color:#ddd}}"
)


def test_html_in_full() -> None:
    assert formats.to_html(meeting()) == (
        '<!DOCTYPE html>\n<html lang="de">\n<head><meta charset="utf-8"><title>Zoë &amp; Kai.wav</title>'
        f"<style>{HTML_STYLE}</style></head>\n<body>\n"
        "<h1>Zoë &amp; Kai.wav</h1>\n"
        '<p class="about">1:02:05 of audio, small, language de, 2 speaker(s)</p>\n'
        '<p class="warning">partial: decoding stopped at 3724.0 s of 3725.4 s</p>\n'
        '<p><span class="time" data-start="1.00">00:00:01</span> '
        '<span class="speaker" style="color:#1f77b4">Zoë</span> Grüß Gott, &amp; X-ray. =1+1 &lt;b&gt;</p>\n'
        '<p><span class="time" data-start="3600.00">01:00:00</span> '
        '<span class="speaker" style="color:#d62728">Dr. &lt;K&gt;</span> Ja.</p>\n'
        '<p><span class="time" data-start="3602.00">01:00:02</span> No speaker here</p>\n'
        "</body>\n</html>\n"
    )


def test_html_gives_eight_speakers_eight_colours_then_starts_again() -> None:
    names = [f"P{i}" for i in range(9)]
    page = formats.to_html(transcript(*(Segment(float(i), i + 0.5, "hi", (), name) for i, name in enumerate(names))))
    colours = re.findall(r'style="color:([^"]+)">(P\d)<', page)
    assert colours == [
        ("#1f77b4", "P0"),
        ("#d62728", "P1"),
        ("#2ca02c", "P2"),
        ("#9467bd", "P3"),
        ("#8c564b", "P4"),
        ("#e377c2", "P5"),
        ("#17becf", "P6"),
        ("#bcbd22", "P7"),
        ("#1f77b4", "P8"),
    ]


def test_json_in_full_keeps_accents_readable() -> None:
    small = transcript(Segment(0.0, 1.0, "Grüß", (), "Zoë"), duration=1.5, speakers=("Zoë",), warnings=())
    assert formats.to_json(small) == (
        "{\n"
        '  "version": 1,\n'
        '  "source": "/rec/Zoë & Kai.wav",\n'
        '  "duration": 1.5,\n'
        '  "language": "de",\n'
        '  "model": "small",\n'
        '  "device": "cpu",\n'
        '  "compute_type": "int8",\n'
        '  "diarization": null,\n'
        '  "speakers": [\n'
        '    "Zoë"\n'
        "  ],\n"
        '  "identification": null,\n'
        '  "segments": [\n'
        "    {\n"
        '      "start": 0.0,\n'
        '      "end": 1.0,\n'
        '      "speaker": "Zoë",\n'
        '      "text": "Grüß",\n'
        '      "words": []\n'
        "    }\n"
        "  ],\n"
        '  "timings": {},\n'
        '  "warnings": []\n'
        "}\n"
    )


def test_word_document_styles_the_about_line_the_warning_and_the_times() -> None:
    from docx import Document

    document = Document(io.BytesIO(formats.to_docx(meeting())))
    paragraphs = [paragraph for paragraph in document.paragraphs if paragraph.text]
    assert [paragraph.text for paragraph in paragraphs] == [
        "Zoë & Kai.wav",
        "1:02:05 of audio, small, language de, 2 speaker(s)",
        "Warning: partial: decoding stopped at 3724.0 s of 3725.4 s",
        "00:00:01  Zoë: Grüß Gott, & X-ray. =1+1 <b>",
        "01:00:00  Dr. <K>: Ja.",
        "01:00:02  No speaker here",
    ]
    assert paragraphs[1].runs[0].italic is True
    assert paragraphs[2].runs[0].bold is True
    for turn in paragraphs[3:]:
        time = turn.runs[0]
        assert time.font.size is not None and time.font.size.pt == 9.0
        assert str(time.font.color.rgb) == "777777"
    assert [run.text for run in paragraphs[5].runs] == ["01:00:02  ", "No speaker here"]


def test_file_names_split_into_stem_and_format() -> None:
    assert formats.stem_and_format("talk.qda.txt") == ("talk", "qda")
    assert formats.stem_and_format("talk.txt") == ("talk", "txt")
    assert formats.stem_and_format("my.talk.srt") == ("my.talk", "srt")
    assert formats.stem_and_format("a.docx") == ("a", "docx")
    assert formats.stem_and_format(".qda.txt") == (".qda", "txt")
    assert formats.stem_and_format(".txt") is None  # a suffix alone names no export
    assert formats.stem_and_format("talk.pdf") is None
    assert formats.stem_and_format("talk") is None


def test_an_unknown_format_names_every_known_one() -> None:
    with pytest.raises(ValueError) as raised:
        formats.render(meeting(), "pdf")
    assert str(raised.value) == "unknown format 'pdf': choose from txt, srt, vtt, json, md, csv, tsv, html, docx, qda"


def words(*spans: tuple[float, float, str]) -> tuple[Word, ...]:
    return tuple(Word(start, end, text, 0.9, None) for start, end, text in spans)


def test_subtitle_cues_are_split_at_their_limits_and_not_before() -> None:
    a, b = " " + "a" * 41, " " + "b" * 41  # 84 characters together: at the limit, not over it
    c, d = " " + "c" * 40, " " + "d" * 42  # 84 together, then " e" goes over
    segments = (
        # Exactly 7 s and exactly 84 characters: one cue, with the segment's own times.
        Segment(100.0, 107.0, a + b, words((100.2, 103.0, a), (103.0, 106.8, b)), "S"),
        Segment(107.0, 108.0, " ", (), "S"),  # empty: no cue, and the ones after it still come
        # 10 s: split where the next word would end more than 7 s after the cue's start (7.0 s is allowed).
        Segment(
            200.0, 210.0, " one two three", words((200, 204, " one"), (204, 207, " two"), (207, 210, " three")), "S"
        ),
        # 86 characters in 2 s: split where the text would pass 84 characters (84 is allowed).
        Segment(250.0, 252.0, c + d + " e", words((250, 251, c), (251, 251.5, d), (251.5, 252, " e")), "S"),
        # Two words are enough to split; no speaker, no label.
        Segment(300.0, 310.0, " left right", words((300, 305, " left"), (305, 310, " right")), None),
        # Short: one cue with the segment's times, not its words'.
        Segment(400.0, 401.0, " hi there", words((400.1, 400.5, " hi"), (400.5, 400.9, " there")), "S"),
        # Cues of three and four words, each ending where its last word ends.
        Segment(
            500.0,
            520.0,
            " a b c d e f g",
            words(
                (500, 501, " a"),
                (501, 502, " b"),
                (502, 503, " c"),
                (503, 508, " d"),
                (508, 509, " e"),
                (509, 509.5, " f"),
                (509.5, 510, " g"),
            ),
            "S",
        ),
        # Too long but a single word: nothing to split at.
        Segment(600.0, 609.0, " long", words((600, 609, " long")), "S"),
    )
    assert formats.to_srt(transcript(*segments)) == (
        f"1\n00:01:40,000 --> 00:01:47,000\n[S] {'a' * 41} {'b' * 41}\n"
        "\n"
        "2\n00:03:20,000 --> 00:03:27,000\n[S] one two\n"
        "\n"
        "3\n00:03:27,000 --> 00:03:30,000\n[S] three\n"
        "\n"
        f"4\n00:04:10,000 --> 00:04:11,500\n[S] {'c' * 40} {'d' * 42}\n"
        "\n"
        "5\n00:04:11,500 --> 00:04:12,000\n[S] e\n"
        "\n"
        "6\n00:05:00,000 --> 00:05:05,000\nleft\n"
        "\n"
        "7\n00:05:05,000 --> 00:05:10,000\nright\n"
        "\n"
        "8\n00:06:40,000 --> 00:06:41,000\n[S] hi there\n"
        "\n"
        "9\n00:08:20,000 --> 00:08:23,000\n[S] a b c\n"
        "\n"
        "10\n00:08:23,000 --> 00:08:30,000\n[S] d e f g\n"
        "\n"
        "11\n00:10:00,000 --> 00:10:09,000\n[S] long\n"
    )


def test_an_empty_transcript_in_every_plain_format() -> None:
    empty = transcript(Segment(1.0, 2.0, "  ", (), "Zoë"))
    assert formats.to_txt(empty) == "" and formats.to_qda(empty) == "" and formats.to_srt(empty) == ""
    assert formats.to_vtt(empty) == "WEBVTT\n"
    assert formats.to_tsv(empty) == "start\tend\tstart_seconds\tend_seconds\tspeaker\ttext\n"
    assert json.loads(formats.to_json(empty))["segments"][0]["text"] == "  "


# The export sheet's switches (timestamps, speaker names, paragraphs), each format's exact text with them off.
NO_TIMES = formats.ExportStyle(timestamps=False)
NO_NAMES = formats.ExportStyle(speakers=False)
SEGMENTS = formats.ExportStyle(paragraphs=False)
BARE = formats.ExportStyle(timestamps=False, speakers=False, paragraphs=False)


def test_txt_with_each_switch_off() -> None:
    assert formats.to_txt(meeting(), NO_TIMES) == (
        "Zoë:\nGrüß Gott, & X-ray. =1+1 <b>\n\nDr. <K>:\nJa.\n\nNo speaker here\n"
    )
    assert formats.to_txt(meeting(), NO_NAMES) == (
        "[00:00:01]\nGrüß Gott, & X-ray. =1+1 <b>\n\n[01:00:00]\nJa.\n\nNo speaker here\n"
    )
    assert formats.to_txt(meeting(), SEGMENTS) == (
        "[00:00:01] Zoë:\nGrüß Gott, & X-ray.\n\n[00:01:00] Zoë:\n=1+1 <b>\n\n[01:00:00] Dr. <K>:\nJa.\n\n"
        "No speaker here\n"
    )
    # Nothing left to head a turn: no line above its text either.
    assert formats.to_txt(meeting(), BARE) == "Grüß Gott, & X-ray.\n\n=1+1 <b>\n\nJa.\n\nNo speaker here\n"


def test_subtitles_without_speaker_names() -> None:
    assert formats.to_srt(meeting(), NO_NAMES) == (
        "1\n00:00:01,000 --> 00:00:02,000\nGrüß Gott, & X-ray.\n"
        "\n"
        "2\n00:01:00,000 --> 00:01:01,000\n=1+1 <b>\n"
        "\n"
        "3\n01:00:00,000 --> 01:00:01,250\nJa.\n"
        "\n"
        "4\n01:00:02,000 --> 01:00:03,000\nNo speaker here\n"
    )
    assert formats.to_vtt(meeting(), NO_NAMES) == (
        "WEBVTT\n"
        "\n"
        "00:00:01.000 --> 00:00:02.000\nGrüß Gott, &amp; X-ray.\n"
        "\n"
        "00:01:00.000 --> 00:01:01.000\n=1+1 &lt;b&gt;\n"
        "\n"
        "01:00:00.000 --> 01:00:01.250\nJa.\n"
        "\n"
        "01:00:02.000 --> 01:00:03.000\nNo speaker here\n"
    )
    # The names go from the subtitles only: the transcript given keeps them.
    kept = meeting()
    formats.to_srt(kept, NO_NAMES)
    assert [segment.speaker for segment in kept.segments] == ["Zoë", "Zoë", "Zoë", "Dr. <K>", None]


MD_HEAD = (
    "# Zoë & Kai.wav\n"
    "\n"
    "*1:02:05 of audio, small, language de, 2 speaker(s)*\n"
    "\n"
    "> **Warning:** partial: decoding stopped at 3724.0 s of 3725.4 s\n"
    "\n"
)


def test_markdown_with_each_switch_off() -> None:
    assert formats.to_md(meeting(), SEGMENTS) == MD_HEAD + (
        "`00:00:01` **Zoë:** Grüß Gott, & X-ray.\n"
        "\n"
        "`00:01:00` **Zoë:** =1+1 \\<b\\>\n"
        "\n"
        "`01:00:00` **Dr. \\<K\\>:** Ja.\n"
        "\n"
        "`01:00:02` No speaker here\n"
    )
    assert formats.to_md(meeting(), NO_NAMES) == MD_HEAD + (
        "`00:00:01` Grüß Gott, & X-ray. =1+1 \\<b\\>\n\n`01:00:00` Ja.\n\n`01:00:02` No speaker here\n"
    )
    assert formats.to_md(meeting(), BARE) == MD_HEAD + (
        "Grüß Gott, & X-ray.\n\n=1+1 \\<b\\>\n\nJa.\n\nNo speaker here\n"
    )


def test_qda_with_each_switch_off() -> None:
    assert formats.to_qda(meeting(), SEGMENTS) == (
        "[00:00:01] Zoë: Grüß Gott, & X-ray.\n\n[00:01:00] Zoë: =1+1 <b>\n\n[01:00:00] Dr. <K>: Ja.\n\n"
        "[01:00:02] No speaker here\n"
    )
    assert formats.to_qda(meeting(), NO_TIMES) == (
        "Zoë: Grüß Gott, & X-ray. =1+1 <b>\n\nDr. <K>: Ja.\n\nNo speaker here\n"
    )
    assert formats.to_qda(meeting(), BARE) == "Grüß Gott, & X-ray.\n\n=1+1 <b>\n\nJa.\n\nNo speaker here\n"


def html_page(*turns: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="de">\n<head><meta charset="utf-8"><title>Zoë &amp; Kai.wav</title>'
        f"<style>{HTML_STYLE}</style></head>\n<body>\n"
        "<h1>Zoë &amp; Kai.wav</h1>\n"
        '<p class="about">1:02:05 of audio, small, language de, 2 speaker(s)</p>\n'
        '<p class="warning">partial: decoding stopped at 3724.0 s of 3725.4 s</p>\n'
        + "".join(f"<p>{turn}</p>\n" for turn in turns)
        + "</body>\n</html>\n"
    )


def test_html_with_each_switch_off() -> None:
    zoe = '<span class="speaker" style="color:#1f77b4">Zoë</span> '
    doctor = '<span class="speaker" style="color:#d62728">Dr. &lt;K&gt;</span> '
    assert formats.to_html(meeting(), SEGMENTS) == html_page(
        f'<span class="time" data-start="1.00">00:00:01</span> {zoe}Grüß Gott, &amp; X-ray.',
        f'<span class="time" data-start="60.00">00:01:00</span> {zoe}=1+1 &lt;b&gt;',
        f'<span class="time" data-start="3600.00">01:00:00</span> {doctor}Ja.',
        '<span class="time" data-start="3602.00">01:00:02</span> No speaker here',
    )
    assert formats.to_html(meeting(), NO_NAMES) == html_page(
        '<span class="time" data-start="1.00">00:00:01</span> Grüß Gott, &amp; X-ray. =1+1 &lt;b&gt;',
        '<span class="time" data-start="3600.00">01:00:00</span> Ja.',
        '<span class="time" data-start="3602.00">01:00:02</span> No speaker here',
    )
    assert formats.to_html(meeting(), BARE) == html_page(
        "Grüß Gott, &amp; X-ray.", "=1+1 &lt;b&gt;", "Ja.", "No speaker here"
    )


def test_word_document_with_each_switch_off() -> None:
    from docx import Document

    def turns(style: formats.ExportStyle) -> list[str]:
        document = Document(io.BytesIO(formats.to_docx(meeting(), style)))
        return [paragraph.text for paragraph in document.paragraphs if paragraph.text][3:]

    assert turns(SEGMENTS) == [
        "00:00:01  Zoë: Grüß Gott, & X-ray.",
        "00:01:00  Zoë: =1+1 <b>",
        "01:00:00  Dr. <K>: Ja.",
        "01:00:02  No speaker here",
    ]
    assert turns(NO_NAMES) == ["00:00:01  Grüß Gott, & X-ray. =1+1 <b>", "01:00:00  Ja.", "01:00:02  No speaker here"]
    assert turns(NO_TIMES) == ["Zoë: Grüß Gott, & X-ray. =1+1 <b>", "Dr. <K>: Ja.", "No speaker here"]
    assert turns(BARE) == ["Grüß Gott, & X-ray.", "=1+1 <b>", "Ja.", "No speaker here"]
