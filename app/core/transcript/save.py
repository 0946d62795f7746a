"""How a finished transcript becomes files, decided once for every caller (`scriba transcribe`, the queue's
auto-export and `queue export`, the window's Export… and its refresh after an edit, `offload run` and a fleet):
the names, which existing files may be replaced, atomic writes and the "kept them" note."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from app.core.files import file_sha256, sha256_text, write_atomic
from app.core.transcript.document import Transcript
from app.core.transcript.formats import WHOLE, ExportStyle, filename, render


class ExportRecord(Protocol):
    """Where Scriba remembers what it wrote (the queue database): a file is only replaced when it still holds
    exactly what Scriba put there; a file edited by hand (or not Scriba's at all) is never overwritten."""

    def exported_sha256(self, path: Path) -> str | None: ...

    def record_export(self, path: Path, sha256: str) -> None: ...


def first_free_stem(stem: str, taken: Callable[[str], bool]) -> str:
    """``stem``, or ``stem-2``, ``stem-3`` …: the first that is not ``taken``. The one way Scriba numbers a name
    that is in use (exports, two inputs of one name, a saved dictation)."""
    candidate, number = stem, 2
    while taken(candidate):
        candidate, number = f"{stem}-{number}", number + 1
    return candidate


@dataclass(frozen=True)
class ExportResult:
    """What was written to one folder."""

    directory: Path
    stem: str  # the name used
    requested_stem: str  # the name asked for; differs when a file there was kept (edited by hand, not ours)
    written: tuple[Path, ...]
    failures: dict[str, BaseException]  # format -> why it was not written

    @property
    def renamed(self) -> bool:
        return self.stem != self.requested_stem


def describe_write_error(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        where = f": {error.filename}" if error.filename else ""
        return f"{error.strerror}{where}"
    return f"{type(error).__name__}: {error}" if not isinstance(error, ValueError) else str(error)


@dataclass(frozen=True)
class SavedTranscript:
    """What :func:`save_transcript` did: the export to the folder asked for, what went to the fallback folder
    instead, why the name changed (a file there was kept) and why a format was not written there."""

    result: ExportResult
    kept: ExportResult | None
    kept_note: str | None  # "… kept them, wrote talk-2.* instead"
    error_note: str | None  # "could not write to … (txt: …); the transcript was kept in …"

    @property
    def written(self) -> tuple[Path, ...]:
        return self.result.written + (self.kept.written if self.kept is not None else ())

    @property
    def renamed(self) -> bool:
        return self.result.renamed

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

    @property
    def lines(self) -> tuple[str, ...]:
        """For a terminal: "note: …" for a file kept, "error: …" for a folder that refused a format."""
        return tuple(
            [f"note: {self.kept_note}"] * (self.kept_note is not None)
            + [f"error: {self.error_note}"] * (self.error_note is not None)
        )

    def summary(self) -> str:
        """One line for the window or a job's note: what was written where, what was kept, what failed and why."""
        result = self.result
        parts = []
        if result.written:
            parts.append(f"exported {', '.join(path.name for path in result.written)} to {result.directory}")
        if self.kept_note is not None:
            parts.append(self.kept_note)
        if self.error_note is not None and self.kept is not None:
            parts.append(self.error_note)
        else:
            parts += [f"{fmt} not written ({describe_write_error(error)})" for fmt, error in result.failures.items()]
        return "; ".join(parts)


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
    protect: Iterable[Path] = (),
    fallback: Path | None = None,
    style: ExportStyle = WHOLE,
) -> SavedTranscript:
    """The one way a transcript becomes files (`scriba transcribe`, `offload run` and its fleets, the queue's
    auto-export and `queue export`, the window's Export… and its refresh after an edit).

    Naming: ``stem.fmt`` for every format, or the first free ``stem-N`` for all of them when one of those files may
    not be replaced. Replaced only: a file ``record`` says Scriba wrote, holding exactly what Scriba wrote (an edit
    in Scriba's own editor is Scriba's write; a file changed by hand outside is kept), never a file that is not
    Scriba's (no record: nothing is replaced), and never ``protect`` (the recordings themselves, whatever their
    names). Every file is written atomically and each format on its own: one that fails costs only itself. Formats
    the folder refuses go to ``fallback`` (the data folder's ``unsaved-exports``), so that a finished transcript is
    never thrown away. ``style``: what the formats people read show besides the words (all, unless asked)."""
    formats = tuple(dict.fromkeys(formats))
    protected = tuple(Path(path) for path in protect)

    def replaceable(path: Path) -> bool:
        if record is None or any(_same_file(path, kept) for kept in protected):
            return False
        try:
            recorded = record.exported_sha256(path)
        except Exception:  # an unreadable record must cost a new file name, never a user's file
            return False
        return recorded is not None and recorded == file_sha256(path)

    result = _write_each(transcript, directory, stem, formats, replaceable, record, style)
    kept_note: str | None = None
    if result.renamed:
        inputs = [
            path
            for fmt in formats
            if (path := directory / filename(result.requested_stem, fmt)).exists()
            and any(_same_file(path, kept) for kept in protected)
        ]
        if inputs:
            kept_note = f"{inputs[0]} is a recording being transcribed: kept it, wrote {result.stem}.* instead"
        else:
            kept_note = (
                f"{result.requested_stem}.* in {directory} were not written by Scriba as they are now "
                f"(edited by hand?): kept them, wrote {result.stem}.* instead"
            )
    kept: ExportResult | None = None
    error_note: str | None = None
    if result.failures:
        reasons = "; ".join(f"{fmt}: {describe_write_error(error)}" for fmt, error in result.failures.items())
        where = ""
        if fallback is not None:
            kept = _write_each(transcript, fallback, result.stem, tuple(result.failures), replaceable, record, style)
            if kept.written:
                where = f"; the transcript was kept in {', '.join(str(path) for path in kept.written)}"
            if kept.failures:
                lost = "; ".join(f"{fmt}: {describe_write_error(error)}" for fmt, error in kept.failures.items())
                where += f"; it could not be kept in {fallback} either ({lost})"
        error_note = f"could not write to {directory} ({reasons}){where}"
    return SavedTranscript(result, kept, kept_note, error_note)


def _write_each(
    transcript: Transcript,
    directory: Path,
    stem: str,
    formats: tuple[str, ...],
    replaceable: Callable[[Path], bool],
    record: ExportRecord | None,
    style: ExportStyle,
) -> ExportResult:
    """``directory/stem.fmt`` for every format (all under the first free ``stem-N`` when one of them may not be
    replaced), each on its own: one that fails (a renderer's bug, a full disk, a file too large) costs that
    format only, and says why. ``record`` is told the hash of every file written."""
    failures: dict[str, BaseException] = {}
    written: list[Path] = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        chosen = first_free_stem(
            stem,
            lambda candidate: any(
                (path := directory / filename(candidate, fmt)).exists() and not replaceable(path) for fmt in formats
            ),
        )
    except OSError as error:
        return ExportResult(directory, stem, stem, (), dict.fromkeys(formats, error))
    for fmt in formats:
        target = directory / filename(chosen, fmt)
        try:
            text = render(transcript, fmt, style)
            write_atomic(target, text)
        except Exception as error:  # independent formats: the others are still written
            failures[fmt] = error
            continue
        written.append(target)
        if record is not None:
            with contextlib.suppress(Exception):  # the file is written; forgetting it only costs a new name later
                record.record_export(target, sha256_text(text))
    return ExportResult(directory, chosen, stem, tuple(written), failures)


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
