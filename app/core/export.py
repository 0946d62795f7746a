"""Exporters: txt (speaker paragraphs), srt, vtt (with voice tags) and json, written atomically."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from app.core.transcript import Segment, Transcript

FORMATS = ("txt", "srt", "vtt", "json")

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


def to_txt(transcript: Transcript) -> str:
    """One paragraph per speaker turn, headed by the speaker and the time the turn starts."""
    paragraphs: list[str] = []
    speaker: str | None = None
    texts: list[str] = []
    start = 0.0
    for segment in transcript.segments:
        text = segment.text.strip()
        if not text:
            continue
        if texts and segment.speaker != speaker:
            paragraphs.append(_paragraph(speaker, start, texts))
            texts = []
        if not texts:
            speaker, start = segment.speaker, segment.start
        texts.append(text)
    if texts:
        paragraphs.append(_paragraph(speaker, start, texts))
    return "\n\n".join(paragraphs) + ("\n" if paragraphs else "")


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
        chunk: list = []
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


RENDERERS: dict[str, Callable[[Transcript], str]] = {"txt": to_txt, "srt": to_srt, "vtt": to_vtt, "json": to_json}


def render(transcript: Transcript, fmt: str) -> str:
    try:
        return RENDERERS[fmt](transcript)
    except KeyError:
        raise ValueError(f"unknown format '{fmt}': choose from {', '.join(FORMATS)}") from None


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file in the same folder, then rename over ``path``: a reader (or a crash)
    never sees a half-written file, and a good older file is only replaced by a complete new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def export(transcript: Transcript, directory: Path, stem: str, formats: tuple[str, ...] | list[str]) -> list[Path]:
    """Write ``directory/stem.fmt`` for every format; every file is rendered before any is written."""
    rendered = {fmt: render(transcript, fmt) for fmt in formats}
    paths = []
    for fmt, text in rendered.items():
        target = directory / f"{stem}.{fmt}"
        write_atomic(target, text)
        paths.append(target)
    return paths
