"""A watch folder: recordings that appear in it are queued, and their transcripts exported beside them.

Polled, not notified: a listing every few seconds works the same on every platform and on network shares
(where inotify and FSEvents see nothing of changes made by another machine), and costs a directory read.

A file is queued once it is complete, as far as can be told:
- *settled*: the same size and modification time at two looks in a row, and for at least ``settle`` seconds;
- no process on this machine has it open for writing (Linux: ``/proc/*/fd``; a copy that stalls keeps it open);
- its audio runs to the length its header states (a half-copied WAV, FLAC or MP3 states the whole length).
A file that stays unchanged but still looks incomplete (a copy from another machine that died, a recorder that
crashed) is queued after ``grace`` seconds all the same, so that its job says what is wrong with it.

A file that a job already holds (queued, running, finished or failed, from this run or an earlier one) is not
queued a second time. When it changes after its job took it (a copy that stalled past every check, then
finished; a recorder that saves as it goes), the finished job is queued again for the file as it is now, and the
watch says so: a failed or partial job on any change, a complete one when the size changed.
"""

from __future__ import annotations

import logging
import os
import struct
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path

from app.core.engine.audio import MEDIA_EXTENSIONS
from app.core.queue.jobs import Job, JobOptions, JobState, JobStateError, JobStore

log = logging.getLogger(__name__)

# How long a file must stay unchanged before it is looked at as a whole (on top of two looks in a row).
SETTLE_SECONDS = 5.0
# How long an unchanged file that still looks incomplete waits before it is queued as it is.
INCOMPLETE_GRACE_SECONDS = 120.0
# The audio may end this much before the length its header states and still count as complete: some headers
# only estimate (the same allowance as the job's own "partial" check in the pipeline).
_SHORTFALL_SECONDS = 1.0
_SHORTFALL_FRACTION = 0.02

Signature = tuple[int, int]  # (size, mtime_ns)


class WatchFolder:
    def __init__(
        self,
        folder: Path,
        options: JobOptions,
        store: JobStore,
        recursive: bool = False,
        *,
        settle: float = SETTLE_SECONDS,
        grace: float = INCOMPLETE_GRACE_SECONDS,
        on_notice: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.folder = Path(folder).expanduser().absolute()
        # Exported beside the recording, in the watch's formats, whatever the options said about a folder.
        self.options = options
        self.store = store
        self.recursive = recursive
        self.settle = settle
        self.grace = grace
        self._notice = on_notice or (lambda text: log.info("%s", text))
        self._clock = clock
        self._last_seen: dict[Path, Signature] = {}  # at the previous look
        self._unchanged_since: dict[Path, float] = {}  # clock time the file first had its present signature
        # Files a job holds, with their signature when it took them (None: changed since, by an earlier run).
        self._taken: dict[Path, Signature | None] = {}
        self._checked: dict[Path, tuple[Signature, str | None]] = {}  # completeness verdict per signature
        self.waiting: dict[Path, str] = {}  # files held back, and why
        self.looks = 0

    def scan(self) -> list[Job]:
        """Queue every complete media file that no job holds yet, and again every one whose finished job it
        has outgrown; the jobs queued."""
        try:
            return self._scan()
        finally:
            self.looks += 1

    def _scan(self) -> list[Job]:
        if not self.folder.is_dir():
            return []  # an unplugged drive or a share that dropped: nothing to do until it is back
        now = self._clock()
        seen: dict[Path, Signature] = {}
        candidates: list[Path] = []
        for path in self._media():
            try:
                status = path.stat()
            except OSError:
                continue  # removed between the listing and now
            signature = (status.st_size, status.st_mtime_ns)
            seen[path] = signature
            if self._last_seen.get(path) != signature:
                self._unchanged_since[path] = now
            elif status.st_size > 0 and now - self._unchanged_since[path] >= self.settle:
                if path not in self._taken and self._held_by_earlier_job(path, signature, status.st_mtime):
                    continue
                if self._taken.get(path, ()) != signature:
                    candidates.append(path)
        self._last_seen = seen
        self._forget_except(seen)
        return self._take(candidates, seen, now) if candidates else []

    def _held_by_earlier_job(self, path: Path, signature: Signature, mtime: float) -> bool:
        """Whether a job of an earlier run (or another process) holds ``path``; recorded as taken if so."""
        jobs = self.store.find_by_source(path)
        if not jobs:
            return False
        job = jobs[-1]
        # A partial or failed job that began before the file last changed read an unfinished file: it is
        # redone like one this run took. (Done and complete: left alone, even on a share whose clock is off.)
        outgrown = (
            (job.state is JobState.FAILED or (job.state is JobState.DONE and job.partial))
            and job.started_at is not None
            and mtime > job.started_at
        )
        self._taken[path] = None if outgrown else signature
        return not outgrown

    def _take(self, candidates: list[Path], seen: dict[Path, Signature], now: float) -> list[Job]:
        writers = open_for_writing(candidates)
        queued: list[Job] = []
        for path in candidates:
            signature = seen[path]
            reason = writers.get(path) or self._incomplete(path, signature)
            if reason is not None:
                unchanged_for = now - self._unchanged_since[path]
                if path in writers or unchanged_for < self.grace:
                    self._wait(path, reason)
                    continue
                self._notice(
                    f"{path.name} has not changed for {unchanged_for:.0f} s, though {reason}: queued as it is "
                    "(it is transcribed again if it changes)"
                )
            self.waiting.pop(path, None)
            if path in self._taken:
                job = self._redo(path, signature)
            else:
                job = self.store.add(path, replace(self.options, output_dir=str(path.parent)))
                self._taken[path] = signature
                log.info("watch folder %s: queued %s", self.folder, path.name)
            if job is not None:
                queued.append(job)
        return queued

    def _redo(self, path: Path, signature: Signature) -> Job | None:
        """The file changed after its job took it: a finished job is queued again for the file as it is now."""
        jobs = self.store.find_by_source(path)
        if not jobs:
            self._taken[path] = signature  # the job was removed from the queue: the user's choice stands
            return None
        job = jobs[-1]
        if job.state is JobState.RUNNING:
            return None  # it may be reading the old file; judged again once it has ended
        before = self._taken[path]
        self._taken[path] = signature
        if job.state is JobState.QUEUED:
            return None  # not started yet: it reads the file as it is now
        if job.state is JobState.CANCELLED:
            return None  # cancelled by the user: not started again behind their back
        if job.state is JobState.DONE and not job.partial and before is not None and before[0] == signature[0]:
            return None  # whole, and only touched (a sync that rewrote it, tags edited): not worth a second run
        try:
            self.store.retry(job.id)
        except JobStateError:
            self._taken[path] = before  # taken by a worker meanwhile: judged again at the next look
            return None
        grown = f" ({before[0]} → {signature[0]} bytes)" if before is not None else ""
        ended = " (its transcript was partial)" if job.partial else ""
        if job.state is JobState.FAILED:
            ended = " (it had failed)"
        self.store.set_note(job.id, f"the recording changed after it was transcribed{grown}; transcribed again")
        self._notice(
            f"{path.name} changed after job {job.id} took it{grown}{ended}: job {job.id} is queued again for "
            "the whole file"
        )
        return self.store.get(job.id)

    def _incomplete(self, path: Path, signature: Signature) -> str | None:
        checked = self._checked.get(path)
        if checked is not None and checked[0] == signature:
            return checked[1]  # the file has not changed since: neither has the verdict
        reason = incomplete_reason(path)
        self._checked[path] = (signature, reason)
        return reason

    def _wait(self, path: Path, reason: str) -> None:
        if self.waiting.get(path) != reason:
            self._notice(f"waiting for {path.name}: {reason}; it is queued once it is complete")
        self.waiting[path] = reason

    def _forget_except(self, seen: dict[Path, Signature]) -> None:
        """A file gone from the folder is forgotten (one put back later is judged afresh)."""
        for table in (self._unchanged_since, self._checked, self.waiting):
            for path in [path for path in table if path not in seen]:
                del table[path]
        for path in [path for path in self._taken if path not in seen]:
            del self._taken[path]

    def _media(self) -> list[Path]:
        try:
            children = self.folder.rglob("*") if self.recursive else self.folder.iterdir()
            return sorted(
                child
                for child in children
                if child.suffix.lower() in MEDIA_EXTENSIONS and not child.name.startswith(".") and child.is_file()
            )
        except OSError as error:
            log.warning("watch folder %s cannot be read: %s", self.folder, error)
            return []


def open_for_writing(paths: Collection[Path]) -> dict[Path, str]:
    """Which of ``paths`` a process on this machine has open for writing, and which process ("process 1234
    (cp)"). Linux only (elsewhere: none found); processes of other users cannot be seen and are not counted."""
    if not paths or not sys.platform.startswith("linux"):
        return {}
    wanted = {os.path.realpath(path): path for path in paths}
    found: dict[Path, str] = {}
    try:
        processes = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return {}
    for pid in processes:
        folder = f"/proc/{pid}/fd"
        try:
            descriptors = os.listdir(folder)
        except OSError:
            continue  # ended meanwhile, or another user's
        for descriptor in descriptors:
            try:
                target = os.readlink(f"{folder}/{descriptor}")
            except OSError:
                continue
            path = wanted.get(target)
            if path is None or path in found or not _writable(pid, descriptor):
                continue
            found[path] = f"it is open for writing by process {pid}{_command(pid)}"
    return found


def _writable(pid: str, descriptor: str) -> bool:
    try:
        with open(f"/proc/{pid}/fdinfo/{descriptor}", encoding="ascii") as info:
            for line in info:
                if line.startswith("flags:"):
                    return int(line.split()[1], 8) & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR)
    except (OSError, ValueError):
        pass
    return False


def _command(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as comm:
            return f" ({comm.read().strip()})"
    except OSError:
        return ""


def incomplete_reason(path: Path) -> str | None:
    """Why ``path`` looks unfinished (its audio stops short of the length its header states, or it cannot be
    read as media yet), or None. A file that says nothing of its length passes: nothing shows it unfinished."""
    if path.suffix.lower() in (".wav", ".wave"):
        return _wav_incomplete(path)
    import av  # here: PyAV loads FFmpeg's libraries, which the window does not need until a file is looked at

    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            if not container.streams.audio:
                return None  # not an unfinished recording: the job says what it is
            stream = container.streams.audio[0]
            if stream.duration is not None and stream.time_base is not None:
                stated = float(stream.duration * stream.time_base)
            elif container.duration is not None:
                stated = container.duration / 1_000_000  # AV_TIME_BASE
            else:
                return None
            end = 0.0
            for packet in container.demux(stream):
                if packet.pts is not None and packet.time_base is not None:
                    end = max(end, float((packet.pts + (packet.duration or 0)) * packet.time_base))
    except av.FFmpegError as error:
        return f"it cannot be read as media yet ({getattr(error, 'strerror', None) or error})"
    except OSError as error:
        return f"it cannot be read yet ({error.strerror or error})"
    if stated - end > max(_SHORTFALL_SECONDS, _SHORTFALL_FRACTION * stated):
        return f"its audio stops at {end:.1f} s of the {stated:.1f} s its header states"
    return None


def _wav_incomplete(path: Path) -> str | None:
    """A WAV file's header states the size of its audio before the audio is written (a copy writes it first,
    a recorder when it stops): fewer bytes than that means unfinished. FFmpeg shortens the stated length to
    the file's, so the header is read here."""
    try:
        with path.open("rb") as stream:
            head = stream.read(12)
            if len(head) < 12 or head[:4] not in (b"RIFF", b"RF64") or head[8:12] != b"WAVE":
                return None  # not a RIFF WAV: the job says what it is
            big_size: int | None = None
            byte_rate = 0
            while True:
                chunk = stream.read(8)
                if len(chunk) < 8:
                    return "its header ends before its audio starts"
                name, size = chunk[:4], struct.unpack("<I", chunk[4:])[0]
                if name == b"ds64":  # RF64: the real sizes, for files past 4 GB
                    body = stream.read(size + size % 2)
                    big_size = struct.unpack("<Q", body[8:16])[0] if len(body) >= 16 else None
                    continue
                if name == b"fmt ":
                    body = stream.read(size + size % 2)
                    byte_rate = struct.unpack("<I", body[8:12])[0] if len(body) >= 12 else 0
                    continue
                if name == b"data":
                    start = stream.tell()
                    break
                stream.seek(size + size % 2, os.SEEK_CUR)
            total = os.fstat(stream.fileno()).st_size
    except OSError as error:
        return f"it cannot be read yet ({error.strerror or error})"
    if head[:4] == b"RF64" and size == 0xFFFFFFFF and big_size is not None:
        size = big_size
    if size in (0, 0xFFFFFFFF):
        return "its header does not state its length yet (a recorder writes it when it stops)"
    have = total - start
    if have >= size:
        return None
    if byte_rate:
        return f"it holds {have / byte_rate:.1f} s of the {size / byte_rate:.1f} s its header states"
    return f"it holds {have} of the {size} bytes of audio its header states"
