"""The formats a transcript is exported to: txt (speaker paragraphs), srt, vtt (with voice tags), json; and for
reading, editing and analysis: Markdown, CSV and TSV (one row per segment, for a spreadsheet), a standalone HTML
page, Word (docx) and a QDA text (MAXQDA, ATLAS.ti, NVivo: a timestamp and the speaker opening each paragraph).
Writing them to a folder is :mod:`app.core.transcript.save`'s."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from app.core.transcript.document import Segment, Transcript, Word
from app.core.transcript.times import clock, timestamp, timestamp_seconds

FORMATS = ("txt", "srt", "vtt", "json", "md", "csv", "tsv", "html", "docx", "qda")
# What a job writes unless told otherwise: the four formats every player and script reads.
DEFAULT_FORMATS = ("txt", "srt", "vtt", "json")
# File name endings where the format's name is not one: QDA programs import plain .txt files.
SUFFIXES = {"qda": ".qda.txt"}


@dataclass(frozen=True)
class ExportStyle:
    """What the formats people read show besides the words; all on is each format as it always was. Each switch
    only takes something away, in the formats :data:`STYLED` lists for it (json, csv and tsv are data: whole)."""

    timestamps: bool = True  # the time each paragraph starts
    speakers: bool = True  # the speaker's name before what they say
    paragraphs: bool = True  # a speaker's consecutive segments joined; off: one paragraph per segment


# The formats each switch of ExportStyle changes (subtitles keep their cue times: they are what a subtitle is).
STYLED: dict[str, tuple[str, ...]] = {
    "timestamps": ("txt", "md", "html", "docx", "qda"),
    "speakers": ("txt", "srt", "vtt", "md", "html", "docx", "qda"),
    "paragraphs": ("txt", "md", "html", "docx", "qda"),
}
WHOLE = ExportStyle()


def filename(stem: str, fmt: str) -> str:
    return f"{stem}{SUFFIXES.get(fmt, '.' + fmt)}"


def stem_and_format(name: str) -> tuple[str, str] | None:
    """An export's file name split into its stem and format (talk.qda.txt: talk, qda); None for another name."""
    for fmt in sorted(FORMATS, key=lambda fmt: -len(filename("", fmt))):  # .qda.txt before .txt
        suffix = filename("", fmt)
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], fmt
    return None


# Subtitle cues longer than this are split at word boundaries: players show a cue as one block of text.
MAX_CUE_SECONDS = 7.0
MAX_CUE_CHARS = 84


def to_txt(transcript: Transcript, style: ExportStyle = WHOLE) -> str:
    """One paragraph per speaker turn, headed by the speaker and the time the turn starts."""
    blocks = [_paragraph(speaker, start, text, style) for speaker, start, _end, text in paragraphs(transcript, style)]
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def paragraphs(transcript: Transcript, style: ExportStyle = WHOLE) -> list[tuple[str | None, float, float, str]]:
    """Consecutive segments of one speaker merged (each on its own when ``style.paragraphs`` is off): (speaker,
    start, end, text), the unit people read. The speaker is kept here whatever the style: turns stay apart."""
    merged: list[tuple[str | None, float, float, str]] = []
    for segment in transcript.segments:
        text = segment.text.strip()
        if not text:
            continue
        if style.paragraphs and merged and merged[-1][0] == segment.speaker:
            speaker, start, _end, before = merged[-1]
            merged[-1] = (speaker, start, segment.end, f"{before} {text}")
        else:
            merged.append((segment.speaker, segment.start, segment.end, text))
    return merged


def _paragraph(speaker: str | None, start: float, body: str, style: ExportStyle) -> str:
    # A transcript without speakers is plain text; with them, each turn has its head line.
    if speaker is None:
        return body
    head = [f"[{timestamp_seconds(start)}]"] * style.timestamps + [f"{speaker}:"] * style.speakers
    return f"{' '.join(head)}\n{body}" if head else body


def _nameless(transcript: Transcript, style: ExportStyle) -> Transcript:
    """The transcript as a format that shows a segment's speaker itself sees it with ``style``."""
    if style.speakers:
        return transcript
    return replace(transcript, segments=tuple(replace(segment, speaker=None) for segment in transcript.segments))


def _cues(transcript: Transcript) -> list[Segment]:
    """Subtitle cues: segments, with long ones split at word boundaries."""
    cues: list[Segment] = []
    for segment in transcript.segments:
        if not segment.text.strip():
            continue
        too_long = segment.end - segment.start > MAX_CUE_SECONDS or len(segment.text) > MAX_CUE_CHARS
        if not too_long or len(segment.words) < 2:
            cues.append(segment)
            continue
        chunk: list[Word] = []
        for word in segment.words:
            if chunk and (
                word.end - chunk[0].start > MAX_CUE_SECONDS
                or len("".join(w.word for w in chunk) + word.word) > MAX_CUE_CHARS
            ):
                cues.append(
                    Segment(
                        chunk[0].start,
                        chunk[-1].end,
                        "".join(w.word for w in chunk).strip(),
                        tuple(chunk),
                        segment.speaker,
                    )
                )
                chunk = []
            chunk.append(word)
        cues.append(
            Segment(
                chunk[0].start, chunk[-1].end, "".join(w.word for w in chunk).strip(), tuple(chunk), segment.speaker
            )
        )
    return cues


def to_srt(transcript: Transcript, style: ExportStyle = WHOLE) -> str:
    blocks = []
    for index, cue in enumerate(_cues(_nameless(transcript, style)), start=1):
        label = f"[{cue.speaker}] " if cue.speaker else ""
        blocks.append(
            f"{index}\n{timestamp(cue.start, ',')} --> {timestamp(cue.end, ',')}\n{label}{cue.text.strip()}\n"
        )
    return "\n".join(blocks)


def _escape_vtt(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_vtt(transcript: Transcript, style: ExportStyle = WHOLE) -> str:
    blocks = ["WEBVTT\n"]
    for cue in _cues(_nameless(transcript, style)):
        text = _escape_vtt(cue.text.strip())
        if cue.speaker:
            text = f"<v {_escape_vtt(cue.speaker)}>{text}"
        blocks.append(f"{timestamp(cue.start, '.')} --> {timestamp(cue.end, '.')}\n{text}\n")
    return "\n".join(blocks)


def to_json(transcript: Transcript, style: ExportStyle = WHOLE) -> str:
    return json.dumps(transcript.to_dict(), ensure_ascii=False, indent=2) + "\n"


def _title(transcript: Transcript) -> str:
    return Path(transcript.source).name or "Transcript"


def _about(transcript: Transcript) -> str:
    """One line on where the transcript came from, for the formats people read."""
    speakers = f", {len(transcript.speakers)} speaker(s)" if transcript.speakers else ""
    return f"{clock(transcript.duration)} of audio, {transcript.model}, language {transcript.language}{speakers}"


def to_md(transcript: Transcript, style: ExportStyle = WHOLE) -> str:
    lines = [f"# {_md_escape(_title(transcript))}", "", f"*{_md_escape(_about(transcript))}*", ""]
    lines += [f"> **Warning:** {_md_escape(warning)}\n" for warning in transcript.warnings]
    for speaker, start, _end, text in paragraphs(transcript, style):
        head = [f"`{timestamp_seconds(start)}`"] * style.timestamps
        if speaker and style.speakers:
            head.append(f"**{_md_escape(speaker)}:**")
        lines += [" ".join([*head, _md_escape(text)]), ""]
    return "\n".join(lines)


def _md_escape(text: str) -> str:
    # Characters that would start emphasis, code, links or HTML in the middle of spoken text.
    for character in "\\`*_[]<>#|":
        text = text.replace(character, "\\" + character)
    return text


def _table(transcript: Transcript, delimiter: str) -> str:
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n")
    writer.writerow(["start", "end", "start_seconds", "end_seconds", "speaker", "text"])
    for segment in transcript.segments:
        text = segment.text.strip()
        if not text:
            continue
        writer.writerow(
            [
                timestamp(segment.start, "."),
                timestamp(segment.end, "."),
                f"{segment.start:.3f}",
                f"{segment.end:.3f}",
                segment.speaker or "",
                # A cell starting with = + - @ would be run as a formula by a spreadsheet (CSV injection).
                f"'{text}" if text[:1] in ("=", "+", "-", "@") else text,
            ]
        )
    return buffer.getvalue()


def to_csv(transcript: Transcript, style: ExportStyle = WHOLE) -> str:
    # The byte-order mark tells Excel the file is UTF-8 (without it, accents come out garbled there).
    return "\ufeff" + _table(transcript, ",")


def to_tsv(transcript: Transcript, style: ExportStyle = WHOLE) -> str:
    return _table(transcript, "\t")


def to_html(transcript: Transcript, style: ExportStyle = WHOLE) -> str:
    from html import escape

    colours = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
    order = {speaker: index for index, speaker in enumerate(dict.fromkeys(s.speaker for s in transcript.segments))}
    body = [f"<h1>{escape(_title(transcript))}</h1>", f'<p class="about">{escape(_about(transcript))}</p>']
    body += [f'<p class="warning">{escape(warning)}</p>' for warning in transcript.warnings]
    for speaker, start, _end, text in paragraphs(transcript, style):
        colour = colours[order.get(speaker, 0) % len(colours)]
        shown = speaker if style.speakers else None
        who = f'<span class="speaker" style="color:{colour}">{escape(shown)}</span> ' if shown else ""
        time = f'<span class="time" data-start="{start:.2f}">{timestamp_seconds(start)}</span> ' * style.timestamps
        body.append(f"<p>{time}{who}{escape(text)}</p>")
    css = (
        "body{font:16px/1.6 system-ui,sans-serif;max-width:46em;margin:2em auto;padding:0 1em}"
        ".time{color:#777;font:13px monospace;margin-right:.5em}.speaker{font-weight:600}"
        ".about{color:#777}.warning{color:#b35900}"
        "@media(prefers-color-scheme:dark){body{background:#1e1e1e;color:#ddd}}"
    )
    head = f'<meta charset="utf-8"><title>{escape(_title(transcript))}</title><style>{css}</style>'
    return f'<!DOCTYPE html>\n<html lang="{escape(transcript.language)}">\n<head>{head}</head>\n<body>\n' + (
        "\n".join(body) + "\n</body>\n</html>\n"
    )


def to_docx(transcript: Transcript, style: ExportStyle = WHOLE) -> bytes:
    """A Word document: the title, where it came from, then one paragraph per speaker turn (its time in grey,
    the speaker in bold). Opens in Word, LibreOffice and Google Docs."""
    import io

    from docx import Document
    from docx.shared import Pt, RGBColor

    document = Document()
    document.core_properties.title = _title(transcript)
    document.add_heading(_title(transcript), level=1)
    about = document.add_paragraph(_about(transcript))
    about.runs[0].italic = True
    for warning in transcript.warnings:
        document.add_paragraph(f"Warning: {warning}").runs[0].bold = True
    for speaker, start, _end, text in paragraphs(transcript, style):
        paragraph = document.add_paragraph()
        if style.timestamps:
            time_run = paragraph.add_run(f"{timestamp_seconds(start)}  ")
            time_run.font.size = Pt(9)
            time_run.font.color.rgb = RGBColor(0x77, 0x77, 0x77)
        if speaker and style.speakers:
            paragraph.add_run(f"{speaker}: ").bold = True
        paragraph.add_run(text)
    stream = io.BytesIO()
    document.save(stream)
    return stream.getvalue()


def to_qda(transcript: Transcript, style: ExportStyle = WHOLE) -> str:
    """Paragraphs that open with ``[hh:mm:ss]`` and ``Speaker:``, a blank line between them: the layout MAXQDA's
    "transcript with timestamps" import, ATLAS.ti's and NVivo's transcript imports read, linking each paragraph
    to its place in the recording (and, in MAXQDA, coding it by speaker)."""
    blocks = []
    for speaker, start, _end, text in paragraphs(transcript, style):
        head = [f"[{timestamp_seconds(start)}]"] * style.timestamps + [f"{speaker}:"] * bool(speaker and style.speakers)
        blocks.append(" ".join([*head, " ".join(text.split())]))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


RENDERERS: dict[str, Callable[[Transcript, ExportStyle], str | bytes]] = {
    "txt": to_txt,
    "srt": to_srt,
    "vtt": to_vtt,
    "json": to_json,
    "md": to_md,
    "csv": to_csv,
    "tsv": to_tsv,
    "html": to_html,
    "docx": to_docx,
    "qda": to_qda,
}


def render(transcript: Transcript, fmt: str, style: ExportStyle = WHOLE) -> str | bytes:
    try:
        renderer = RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown format '{fmt}': choose from {', '.join(FORMATS)}") from None
    return renderer(transcript, style)
