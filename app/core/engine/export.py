"""Exporters, written atomically: txt (speaker paragraphs), srt, vtt (with voice tags), json; and for reading,
editing and analysis: Markdown, CSV and TSV (one row per segment, for a spreadsheet), a standalone HTML page,
Word (docx) and a QDA text (MAXQDA, ATLAS.ti, NVivo: a timestamp and the speaker opening each paragraph)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from app.core.engine.transcript import Segment, Transcript, Word

FORMATS = ("txt", "srt", "vtt", "json", "md", "csv", "tsv", "html", "docx", "qda")
# What a job writes unless told otherwise: the four formats every player and script reads.
DEFAULT_FORMATS = ("txt", "srt", "vtt", "json")
# File name endings where the format's name is not one: QDA programs import plain .txt files.
SUFFIXES = {"qda": ".qda.txt"}


def filename(stem: str, fmt: str) -> str:
    return f"{stem}{SUFFIXES.get(fmt, '.' + fmt)}"


# Subtitle cues longer than this are split at word boundaries: players show a cue as one block of text.
MAX_CUE_SECONDS = 7.0
MAX_CUE_CHARS = 84


def timestamp(seconds: float, separator: str) -> str:
    """HH:MM:SS<sep>mmm, hours unbounded (a 100-hour recording stays readable)."""
    millis = max(0, round(seconds * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{millis:03d}"


def clock(seconds: float) -> str:
    """A duration for people: 4:05, 1:02:03."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


def parse_time(text: str) -> float:
    """A time as people write it: ``90``, ``1:30``, ``1:02:03.5`` (seconds); ValueError when it is not one."""
    parts = text.strip().split(":")
    if len(parts) > 3 or any(part.strip() == "" for part in parts):
        raise ValueError(f"'{text}' is not a time: give seconds (90), M:SS (1:30) or H:MM:SS")
    seconds = 0.0
    for index, part in enumerate(parts):
        try:
            value = float(part)
        except ValueError:
            raise ValueError(f"'{text}' is not a time: give seconds (90), M:SS (1:30) or H:MM:SS") from None
        if value < 0 or (index > 0 and value >= 60):  # minutes and seconds after a colon stay under 60
            raise ValueError(f"'{text}' is not a time: give seconds (90), M:SS (1:30) or H:MM:SS")
        seconds = seconds * 60 + value
    return seconds


def to_txt(transcript: Transcript) -> str:
    """One paragraph per speaker turn, headed by the speaker and the time the turn starts."""
    blocks = [_paragraph(speaker, start, [text]) for speaker, start, _end, text in paragraphs(transcript)]
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def paragraphs(transcript: Transcript) -> list[tuple[str | None, float, float, str]]:
    """Consecutive segments of one speaker merged: (speaker, start, end, text), the unit people read."""
    merged: list[tuple[str | None, float, float, str]] = []
    for segment in transcript.segments:
        text = segment.text.strip()
        if not text:
            continue
        if merged and merged[-1][0] == segment.speaker:
            speaker, start, _end, before = merged[-1]
            merged[-1] = (speaker, start, segment.end, f"{before} {text}")
        else:
            merged.append((segment.speaker, segment.start, segment.end, text))
    return merged


def _paragraph(speaker: str | None, start: float, texts: list[str]) -> str:
    body = " ".join(texts)
    if speaker is None:
        return body
    return f"[{timestamp(start, '.')[:-4]}] {speaker}:\n{body}"


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


def to_srt(transcript: Transcript) -> str:
    blocks = []
    for index, cue in enumerate(_cues(transcript), start=1):
        label = f"[{cue.speaker}] " if cue.speaker else ""
        blocks.append(
            f"{index}\n{timestamp(cue.start, ',')} --> {timestamp(cue.end, ',')}\n{label}{cue.text.strip()}\n"
        )
    return "\n".join(blocks)


def _escape_vtt(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_vtt(transcript: Transcript) -> str:
    blocks = ["WEBVTT\n"]
    for cue in _cues(transcript):
        text = _escape_vtt(cue.text.strip())
        if cue.speaker:
            text = f"<v {_escape_vtt(cue.speaker)}>{text}"
        blocks.append(f"{timestamp(cue.start, '.')} --> {timestamp(cue.end, '.')}\n{text}\n")
    return "\n".join(blocks)


def to_json(transcript: Transcript) -> str:
    return json.dumps(transcript.to_dict(), ensure_ascii=False, indent=2) + "\n"


def _title(transcript: Transcript) -> str:
    return Path(transcript.source).name or "Transcript"


def _about(transcript: Transcript) -> str:
    """One line on where the transcript came from, for the formats people read."""
    speakers = f", {len(transcript.speakers)} speaker(s)" if transcript.speakers else ""
    return f"{clock(transcript.duration)} of audio, {transcript.model}, language {transcript.language}{speakers}"


def to_md(transcript: Transcript) -> str:
    lines = [f"# {_md_escape(_title(transcript))}", "", f"*{_md_escape(_about(transcript))}*", ""]
    lines += [f"> **Warning:** {_md_escape(warning)}\n" for warning in transcript.warnings]
    for speaker, start, _end, text in paragraphs(transcript):
        who = f" **{_md_escape(speaker)}:**" if speaker else ""
        lines += [f"`{timestamp(start, '.')[:-4]}`{who} {_md_escape(text)}", ""]
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


def to_csv(transcript: Transcript) -> str:
    # The byte-order mark tells Excel the file is UTF-8 (without it, accents come out garbled there).
    return "\ufeff" + _table(transcript, ",")


def to_tsv(transcript: Transcript) -> str:
    return _table(transcript, "\t")


def to_html(transcript: Transcript) -> str:
    from html import escape

    colours = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
    order = {speaker: index for index, speaker in enumerate(dict.fromkeys(s.speaker for s in transcript.segments))}
    body = [f"<h1>{escape(_title(transcript))}</h1>", f'<p class="about">{escape(_about(transcript))}</p>']
    body += [f'<p class="warning">{escape(warning)}</p>' for warning in transcript.warnings]
    for speaker, start, _end, text in paragraphs(transcript):
        colour = colours[order.get(speaker, 0) % len(colours)]
        who = f'<span class="speaker" style="color:{colour}">{escape(speaker)}</span> ' if speaker else ""
        time = f'<span class="time" data-start="{start:.2f}">{timestamp(start, ".")[:-4]}</span>'
        body.append(f"<p>{time} {who}{escape(text)}</p>")
    style = (
        "body{font:16px/1.6 system-ui,sans-serif;max-width:46em;margin:2em auto;padding:0 1em}"
        ".time{color:#777;font:13px monospace;margin-right:.5em}.speaker{font-weight:600}"
        ".about{color:#777}.warning{color:#b35900}"
        "@media(prefers-color-scheme:dark){body{background:#1e1e1e;color:#ddd}}"
    )
    head = f'<meta charset="utf-8"><title>{escape(_title(transcript))}</title><style>{style}</style>'
    return f'<!DOCTYPE html>\n<html lang="{escape(transcript.language)}">\n<head>{head}</head>\n<body>\n' + (
        "\n".join(body) + "\n</body>\n</html>\n"
    )


def to_docx(transcript: Transcript) -> bytes:
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
    for speaker, start, _end, text in paragraphs(transcript):
        paragraph = document.add_paragraph()
        time_run = paragraph.add_run(f"{timestamp(start, '.')[:-4]}  ")
        time_run.font.size = Pt(9)
        time_run.font.color.rgb = RGBColor(0x77, 0x77, 0x77)
        if speaker:
            paragraph.add_run(f"{speaker}: ").bold = True
        paragraph.add_run(text)
    stream = io.BytesIO()
    document.save(stream)
    return stream.getvalue()


def to_qda(transcript: Transcript) -> str:
    """Paragraphs that open with ``[hh:mm:ss]`` and ``Speaker:``, a blank line between them: the layout MAXQDA's
    "transcript with timestamps" import, ATLAS.ti's and NVivo's transcript imports read, linking each paragraph
    to its place in the recording (and, in MAXQDA, coding it by speaker)."""
    blocks = []
    for speaker, start, _end, text in paragraphs(transcript):
        who = f"{speaker}: " if speaker else ""
        blocks.append(f"[{timestamp(start, '.')[:-4]}] {who}{' '.join(text.split())}")
    return "\n\n".join(blocks) + ("\n" if blocks else "")


RENDERERS: dict[str, Callable[[Transcript], str | bytes]] = {
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


def render(transcript: Transcript, fmt: str) -> str | bytes:
    try:
        return RENDERERS[fmt](transcript)
    except KeyError:
        raise ValueError(f"unknown format '{fmt}': choose from {', '.join(FORMATS)}") from None


def write_atomic(path: Path, text: str | bytes, *, private: bool = False) -> None:
    """Write to a temporary file in the same folder, then rename over ``path``: a reader (or a crash)
    never sees a half-written file, and a good older file is only replaced by a complete new one. Text is
    written as UTF-8 with "\\n" line ends, bytes as they are. ``private``: readable by the user alone (0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    data = to_bytes(text)
    try:
        # mkstemp makes the file private (0600); the user's exports should be what any program makes (their
        # umask), and a file replaced keeps the mode it had (one made private stays private).
        if not private:
            try:
                mode = stat.S_IMODE(path.stat().st_mode)
            except OSError:
                mode = 0o666 & ~_umask()
            os.chmod(temporary, mode)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask, read without changing it (os.umask sets it, which would race other threads)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def to_bytes(text: str | bytes) -> bytes:
    """What :func:`write_atomic` writes for ``text``: UTF-8 ("\\n" line ends) for text, bytes as they are."""
    return text.encode("utf-8") if isinstance(text, str) else text


def sha256_text(text: str | bytes) -> str:
    """The hash of what :func:`write_atomic` writes for ``text``."""
    return hashlib.sha256(to_bytes(text)).hexdigest()


def file_sha256(path: Path) -> str | None:
    """The hash of a file's bytes; None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


class ExportRecord(Protocol):
    """Where Scriba remembers what it wrote (the queue database): a file is only replaced when it still holds
    exactly what Scriba put there; a file edited by hand (or not Scriba's at all) is never overwritten."""

    def exported_sha256(self, path: Path) -> str | None: ...

    def record_export(self, path: Path, sha256: str) -> None: ...


def unchanged_since_written(record: ExportRecord | None) -> Callable[[Path], bool]:
    """A ``may_replace`` test: the file is one Scriba wrote and nobody changed since (no record: nothing is)."""

    def may_replace(path: Path) -> bool:
        if record is None:
            return False
        try:
            recorded = record.exported_sha256(path)
        except Exception:  # an unreadable record must cost a new file name, never a user's file
            return False
        return recorded is not None and recorded == file_sha256(path)

    return may_replace


def first_free_stem(stem: str, taken: Callable[[str], bool]) -> str:
    """``stem``, or ``stem-2``, ``stem-3`` …: the first that is not ``taken``. The one way Scriba numbers a name
    that is in use (exports, two inputs of one name, a saved dictation)."""
    candidate, number = stem, 2
    while taken(candidate):
        candidate, number = f"{stem}-{number}", number + 1
    return candidate


def unique_stem(directory: Path, stem: str, formats: Iterable[str], may_replace: Callable[[Path], bool]) -> str:
    """The first free stem whose files (one per format) either do not exist or may be replaced. One name for all
    formats, so a transcript's txt, srt … stay together."""
    formats = tuple(formats)
    return first_free_stem(
        stem,
        lambda candidate: any(
            (directory / filename(candidate, fmt)).exists() and not may_replace(directory / filename(candidate, fmt))
            for fmt in formats
        ),
    )


@dataclass(frozen=True)
class ExportResult:
    directory: Path
    stem: str  # the name used
    requested_stem: str  # the name asked for; differs when a file there was kept (edited by hand, not ours)
    written: tuple[Path, ...]
    failures: dict[str, BaseException]  # format -> why it was not written

    @property
    def renamed(self) -> bool:
        return self.stem != self.requested_stem

    def summary(self) -> str:
        """One line for the user: what was written where, what was kept, what failed and why."""
        parts = []
        if self.written:
            parts.append(f"exported {', '.join(path.name for path in self.written)} to {self.directory}")
        if self.renamed:
            parts.append(
                f"{self.requested_stem}.* there already exist and were not written by Scriba as they are now "
                f"(edited by hand?): kept them, wrote {self.stem}.* instead"
            )
        for fmt, error in self.failures.items():
            parts.append(f"{fmt} not written ({describe_write_error(error)})")
        return "; ".join(parts)


def describe_write_error(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        where = f": {error.filename}" if error.filename else ""
        return f"{error.strerror}{where}"
    return f"{type(error).__name__}: {error}" if not isinstance(error, ValueError) else str(error)


def export_each(
    transcript: Transcript,
    directory: Path,
    stem: str,
    formats: Iterable[str],
    *,
    may_replace: Callable[[Path], bool] | None = None,
    record: ExportRecord | None = None,
) -> ExportResult:
    """Write ``directory/stem.fmt`` for every format, each on its own: one that fails (a renderer's bug, a full
    disk, a file too large) costs that format only, and says why.

    ``may_replace``: which existing files may be overwritten (None: any, the old behaviour); when one may not,
    every format goes to the next free ``stem-N``. ``record``: told the hash of every file written."""
    formats = tuple(dict.fromkeys(formats))
    failures: dict[str, BaseException] = {}
    written: list[Path] = []
    chosen = stem
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if may_replace is not None:
            chosen = unique_stem(directory, stem, formats, may_replace)
    except OSError as error:
        return ExportResult(directory, stem, stem, (), dict.fromkeys(formats, error))
    for fmt in formats:
        target = directory / filename(chosen, fmt)
        try:
            text = render(transcript, fmt)
            write_atomic(target, text)
        except Exception as error:  # independent formats: the others are still written
            failures[fmt] = error
            continue
        written.append(target)
        if record is not None:
            with contextlib.suppress(Exception):  # the file is written; forgetting it only costs a new name later
                record.record_export(target, sha256_text(text))
    return ExportResult(directory, chosen, stem, tuple(written), failures)


def export(
    transcript: Transcript,
    directory: Path,
    stem: str,
    formats: tuple[str, ...] | list[str],
    *,
    may_replace: Callable[[Path], bool] | None = None,
    record: ExportRecord | None = None,
) -> list[Path]:
    """:func:`export_each` for callers that want an error: raises the first format's failure (after every
    other format was still written)."""
    result = export_each(transcript, directory, stem, formats, may_replace=may_replace, record=record)
    for error in result.failures.values():
        raise error
    return list(result.written)


@dataclass(frozen=True)
class SavedTranscript:
    """What :func:`save_transcript` did: the export to the folder asked for, what went to the fallback folder
    instead, and the lines to tell the user ("note: …" for a file kept, "error: …" for a folder refused)."""

    result: ExportResult
    kept: ExportResult | None
    lines: tuple[str, ...]

    @property
    def written(self) -> tuple[Path, ...]:
        return self.result.written + (self.kept.written if self.kept is not None else ())

    @property
    def failed(self) -> bool:
        """Some format was not written where it was asked for (it may be in the fallback folder)."""
        return bool(self.result.failures)

    @property
    def lost(self) -> tuple[str, ...]:
        """Formats written nowhere, not even in the fallback folder."""
        if self.kept is None:
            return tuple(self.result.failures)
        return tuple(fmt for fmt in self.result.failures if fmt in self.kept.failures)


def _same_file(path: Path, other: Path) -> bool:
    try:
        return path.samefile(other)
    except OSError:
        return path.absolute() == other.absolute()


def save_transcript(
    transcript: Transcript,
    directory: Path,
    stem: str,
    formats: Iterable[str],
    *,
    record: ExportRecord | None,
    may_replace: Callable[[Path], bool] | None = None,
    protect: Iterable[Path] = (),
    fallback: Path | None = None,
) -> SavedTranscript:
    """The one way a finished transcript becomes files (`scriba transcribe`, the queue's auto-export, `offload run`).

    Naming: ``stem.fmt`` for every format, or the first free ``stem-N`` for all of them when one of those files may
    not be replaced. Replaced only: a file Scriba wrote and nobody changed since (``record``; ``may_replace``
    narrows that further, e.g. to one job's own files), never one edited by hand, never a file that is not
    Scriba's, and never ``protect`` (the recordings themselves, whatever their names). Every file is written
    atomically. Formats the folder refuses go to ``fallback`` (the data folder's ``unsaved-exports``), so that a
    finished transcript is never thrown away."""
    formats = tuple(dict.fromkeys(formats))
    protected = tuple(Path(path) for path in protect)
    unchanged = unchanged_since_written(record)

    def replaceable(path: Path) -> bool:
        if any(_same_file(path, kept) for kept in protected):
            return False
        return unchanged(path) and (may_replace is None or may_replace(path))

    result = export_each(transcript, directory, stem, formats, may_replace=replaceable, record=record)
    lines: list[str] = []
    if result.renamed:
        inputs = [
            path
            for fmt in formats
            if (path := directory / filename(result.requested_stem, fmt)).exists()
            and any(_same_file(path, kept) for kept in protected)
        ]
        if inputs:
            lines.append(f"note: {inputs[0]} is a recording being transcribed: kept it, wrote {result.stem}.* instead")
        else:
            lines.append(
                f"note: {result.requested_stem}.* in {directory} were not written by Scriba as they are now "
                f"(edited by hand?): kept them, wrote {result.stem}.* instead"
            )
    kept: ExportResult | None = None
    if result.failures:
        reasons = "; ".join(f"{fmt}: {describe_write_error(error)}" for fmt, error in result.failures.items())
        where = ""
        if fallback is not None:
            kept = export_each(
                transcript, fallback, result.stem, tuple(result.failures), may_replace=replaceable, record=record
            )
            if kept.written:
                where = f"; the transcript was kept in {', '.join(str(path) for path in kept.written)}"
            if kept.failures:
                where += f"; it could not be kept in {fallback} either ({kept.summary()})"
        lines.append(f"error: could not write to {directory} ({reasons}){where}")
    return SavedTranscript(result, kept, tuple(lines))


def stray_temporaries(directory: Path, stem: str, formats: Iterable[str]) -> list[Path]:
    """The temporary files :func:`write_atomic` left for ``stem``'s exports (or ``stem-N``'s) when its process was
    killed mid-write: ``.talk.srt.x1y2z3_a.tmp``. Only names of that exact shape: nothing else in the folder."""
    import re

    suffixes = "|".join(re.escape(filename("", fmt)) for fmt in dict.fromkeys(formats))
    if not suffixes:
        return []
    shape = re.compile(rf"\.{re.escape(stem)}(?:-\d+)?(?:{suffixes})\.[a-z0-9_]{{8}}\.tmp")
    try:
        return sorted(path for path in directory.iterdir() if shape.fullmatch(path.name) and path.is_file())
    except OSError:
        return []
