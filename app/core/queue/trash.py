"""Transcripts set aside instead of deleted: removing a job or re-transcribing it keeps what it had here.

A folder per entry (``trash/ENTRY/``) with the transcript as the queue stored it and what is needed to bring it
back as a job (the source file, the options, why it was set aside). Restoring adds a finished job again through
:meth:`JobStore.add_transcribed`; nothing is ever deleted here except by :meth:`Trash.empty`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from app.core.queue.jobs import Job, JobOptions, JobStore
from app.core.transcript.document import Transcript

TRASH_DIR = "trash"


@dataclass(frozen=True)
class TrashEntry:
    directory: Path
    source: Path
    options: JobOptions
    reason: str  # "removed" or "re-transcribed"
    trashed_at: float
    job_id: int  # the id the job had; a restored job gets a new one

    @property
    def transcript_file(self) -> Path:
        return self.directory / "transcript.json"

    def load(self) -> Transcript:
        return Transcript.from_dict(json.loads(self.transcript_file.read_text(encoding="utf-8")))

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.trashed_at))
        return f"{self.source.name} ({self.reason} {when})"


class Trash:
    def __init__(self, data_dir: Path) -> None:
        self.directory = data_dir / TRASH_DIR

    def put(self, store: JobStore, job: Job, reason: str) -> TrashEntry | None:
        """Move the job's stored transcript here (None when it has none). The move is one rename on the same
        disk, so the transcript is in the queue's folder or in the trash, never in neither."""
        transcript = store.transcript_file(job.id)
        if not transcript.is_file():
            return None
        entry_dir = self.directory / f"{time.strftime('%Y%m%d-%H%M%S')}-job{job.id}-{time.time_ns() % 10**6:06}"
        entry_dir.mkdir(parents=True)
        entry = TrashEntry(entry_dir, job.source, job.options, reason, time.time(), job.id)
        about = {
            "source": str(job.source),
            "options": job.options.to_dict(),
            "reason": reason,
            "trashed_at": entry.trashed_at,
            "job_id": job.id,
        }
        (entry_dir / "entry.json").write_text(json.dumps(about, indent=1), encoding="utf-8")
        os.replace(transcript, entry.transcript_file)
        return entry

    def put_back(self, store: JobStore, entry: TrashEntry) -> None:
        """Undo :meth:`put` for a job that is still in the queue (the action it was set aside for failed)."""
        os.replace(entry.transcript_file, store.transcript_file(entry.job_id))
        shutil.rmtree(entry.directory, ignore_errors=True)

    def entries(self) -> list[TrashEntry]:
        """Newest first; an entry whose files cannot be read is left alone and not listed."""
        found: list[TrashEntry] = []
        if not self.directory.is_dir():
            return found
        for entry_dir in self.directory.iterdir():
            try:
                about = json.loads((entry_dir / "entry.json").read_text(encoding="utf-8"))
                if not (entry_dir / "transcript.json").is_file():
                    continue
                found.append(
                    TrashEntry(
                        entry_dir,
                        Path(about["source"]),
                        JobOptions.from_dict(about["options"]),
                        str(about["reason"]),
                        float(about["trashed_at"]),
                        int(about["job_id"]),
                    )
                )
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return sorted(found, key=lambda entry: entry.trashed_at, reverse=True)

    def restore(self, store: JobStore, entry: TrashEntry) -> Job:
        """The transcript comes back as a finished job (edits and speaker names as they were)."""
        job = store.add_transcribed(entry.source, entry.options, entry.load(), note="restored from the trash")
        shutil.rmtree(entry.directory, ignore_errors=True)
        return job

    def empty(self) -> int:
        entries = self.entries()
        for entry in entries:
            shutil.rmtree(entry.directory, ignore_errors=True)
        return len(entries)
