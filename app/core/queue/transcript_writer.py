"""Edited transcripts written on a thread of their own: saving a three-hour meeting (4.5 MB of JSON and an
fsync, a quarter of a second or more) must not freeze the window that is being typed in.

One writer thread, one file at a time. A save asked for while the last one of the same transcript is still
waiting replaces it (the newest state wins; the states between were never on disk for long anyway), and a
transcript's file only ever moves forward: each write takes the newest state there is when it starts. Every
write is atomic (temporary file, fsync, rename), so a crash leaves the last complete transcript, never half
of one. Readers in this process see the newest state at once (:meth:`TranscriptWriter.latest`); whoever
needs the file itself on disk (another process, a move to the trash, quitting) calls :meth:`flush`.

The thread runs only while there is something to write, and is not a daemon: an interpreter that exits with
saves still waiting finishes them first. It starts writing once saves have paused for a moment (the window
first shows the edit, then the file is written, not both at once on a two-core machine), and it turns into
JSON only the segments it has not written before: an edit changes one segment of thousands.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from app.core.files import write_atomic
from app.core.transcript.document import DiarizationInfo, Segment, Transcript

log = logging.getLogger(__name__)

# Told how the write that holds a given save went: None when it is on disk, else why not.
SaveDone = Callable[[BaseException | None], None]
# A write starts once no save has come for this long (edits come in bursts: undo held down, a replace-all)…
SETTLE_SECONDS = 0.3
# … or this long after the oldest save still waiting, whichever is first. A flush never waits.
LONGEST_WAIT_SECONDS = 2.0
# Where the segments go in the stored form: the list is written in place of this (JSON strings hold no line
# breaks, so this can only be the top-level key).
_SEGMENTS_KEY = '\n "segments": []'
_DIARIZATION_KEY = '\n "diarization": null'


def transcript_json(transcript: Transcript) -> str:
    """The stored form of a transcript (what the queue writes when a job finishes, too)."""
    return json.dumps(transcript.to_dict(), ensure_ascii=False, indent=1)


class SegmentCache:
    """:func:`transcript_json`, text for text, from the JSON of each segment (and of who spoke when) kept between
    calls: they are immutable, so one already turned into JSON (the same object) is not turned again."""

    def __init__(self) -> None:
        self._json: dict[int, tuple[Segment, str]] = {}  # id(segment) -> (the segment, its JSON as a list item)
        # Who spoke when (a turn a paragraph: thousands in a long meeting), kept like a segment.
        self._diarization: tuple[DiarizationInfo, str] | None = None

    def transcript_json(self, transcript: Transcript) -> str:
        missing = [segment for segment in transcript.segments if self._cached(segment) is None]
        if missing:
            # The stored form of these segments, from the transcript's own to_dict (one contract, no copy of it).
            stored = replace(transcript, segments=tuple(missing)).to_dict()["segments"]
            for segment, data in zip(missing, stored, strict=True):
                # A list item of the top-level "segments" key: two levels in, at indent=1.
                text = json.dumps(data, ensure_ascii=False, indent=1).replace("\n", "\n  ")
                self._json[id(segment)] = (segment, text)
        items = [self._json[id(segment)][1] for segment in transcript.segments]
        # Only this transcript's segments are kept: the next save of it is mostly these.
        self._json = {id(segment): self._json[id(segment)] for segment in transcript.segments}
        head = json.dumps(replace(transcript, segments=(), diarization=None).to_dict(), ensure_ascii=False, indent=1)
        listed = "[\n  " + ",\n  ".join(items) + "\n ]" if items else "[]"
        head = head.replace(_SEGMENTS_KEY, '\n "segments": ' + listed, 1)
        diarization = transcript.diarization
        if diarization is None:
            return head
        if self._diarization is None or self._diarization[0] is not diarization:
            stored = replace(transcript, segments=()).to_dict()["diarization"]
            # The value of a top-level key: one level in.
            self._diarization = (diarization, json.dumps(stored, ensure_ascii=False, indent=1).replace("\n", "\n "))
        return head.replace(_DIARIZATION_KEY, '\n "diarization": ' + self._diarization[1], 1)

    def _cached(self, segment: Segment) -> str | None:
        entry = self._json.get(id(segment))
        return entry[1] if entry is not None and entry[0] is segment else None


class TranscriptWriter:
    def __init__(self, path_of: Callable[[int], Path], settle: float = SETTLE_SECONDS) -> None:
        self._path_of = path_of
        self._settle = settle
        self._condition = threading.Condition()
        self._pending: dict[int, Transcript] = {}  # job id -> newest state not yet being written, oldest first
        self._done: dict[int, list[SaveDone]] = {}  # job id -> who waits on the pending state
        self._writing: tuple[int, Transcript] | None = None
        self._thread: threading.Thread | None = None
        self._first_waiting = 0.0  # monotonic time of the oldest save still waiting
        self._last_saved = 0.0  # monotonic time of the newest save
        self._flushing = 0  # callers waiting in flush(): write now
        self._cache = SegmentCache()

    def save(self, job_id: int, transcript: Transcript, done: SaveDone | None = None) -> None:
        """Write ``transcript`` as job ``job_id``'s soon; returns at once. ``done`` is called on the writer's
        thread once a write that holds this state (or a newer one) has ended."""
        with self._condition:
            self._last_saved = time.monotonic()
            if not self._pending:
                self._first_waiting = self._last_saved
            self._pending[job_id] = transcript
            self._condition.notify_all()
            if done is not None:
                self._done.setdefault(job_id, []).append(done)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="transcript-writer")
                self._thread.start()

    def latest(self, job_id: int) -> Transcript | None:
        """The newest state of job ``job_id``'s transcript not yet on disk (None: the file is up to date)."""
        with self._condition:
            if job_id in self._pending:
                return self._pending[job_id]
            if self._writing is not None and self._writing[0] == job_id:
                return self._writing[1]
            return None

    def flush(self, job_id: int | None = None, timeout: float | None = None) -> bool:
        """Wait until job ``job_id``'s saves (default: every save) are written or have failed, and their
        ``done`` called. False when ``timeout`` seconds passed first."""

        def finished() -> bool:
            if job_id is None:
                return not self._pending and self._writing is None
            return job_id not in self._pending and (self._writing is None or self._writing[0] != job_id)

        with self._condition:
            if self._thread is threading.current_thread():
                return finished()  # a ``done`` callback waiting on its own thread would wait forever
            self._flushing += 1
            self._condition.notify_all()
            try:
                return self._condition.wait_for(finished, timeout)
            finally:
                self._flushing -= 1

    def _run(self) -> None:
        while True:
            with self._condition:
                while self._pending and not self._flushing:
                    now = time.monotonic()
                    wait = min(self._last_saved + self._settle, self._first_waiting + LONGEST_WAIT_SECONDS) - now
                    if wait <= 0:
                        break
                    self._condition.wait(wait)
                if not self._pending:
                    self._thread = None
                    return
                job_id = next(iter(self._pending))
                transcript = self._pending.pop(job_id)
                waiting = self._done.pop(job_id, [])
                self._writing = (job_id, transcript)
                self._first_waiting = time.monotonic()  # the saves still waiting wait from now
            error: BaseException | None = None
            try:
                write_atomic(self._path_of(job_id), self._cache.transcript_json(transcript))
            except OSError as problem:
                log.warning("transcript of job %s not saved: %s", job_id, problem)
                error = problem
            except Exception as problem:  # a bug: reported like a disk error rather than ending the thread
                log.exception("transcript of job %s not saved", job_id)
                error = problem
            for done in waiting:  # before the flush waiting on this write returns
                try:
                    done(error)
                except Exception:
                    log.exception("a transcript save's callback failed")
            with self._condition:
                self._writing = None
                self._condition.notify_all()
