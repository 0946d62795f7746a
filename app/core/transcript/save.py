"""How a finished transcript becomes files, decided once for every caller (`scriba transcribe`, the queue's
auto-export and `queue export`, the window's Export… and its refresh after an edit, `offload run` and a batch):
the names, which existing files may be replaced, atomic writes and the "kept them" note."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from app.core.files import file_sha256, sha256_text, write_atomic
from app.core.transcript.document import Transcript
from app.core.transcript.formats import filename, render


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
