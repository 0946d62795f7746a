"""A queue job's transcript as files: the auto-export when it finishes (here or offloaded), the window's Export…
and `scriba queue export`, and the refresh after an edit in Scriba's editor. Each goes through
:func:`app.core.transcript.save.save_transcript`, which decides the names and what may be replaced."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from app.core.queue.jobs import STORAGE_ERRORS, Job, JobStore, storage_reason
from app.core.transcript.document import Transcript
from app.core.transcript.formats import WHOLE, ExportStyle, stem_and_format
from app.core.transcript.save import SavedTranscript, save_transcript

log = logging.getLogger(__name__)


class JobExports:
    """The queue's export record, narrowed to one job's own files: its auto-export replaces the files it wrote
    before (a retry, an export cut off half-way) while they are unchanged, never another job's file of the same
    name. Each file is added to the job's own the moment it is written."""

    def __init__(self, store: JobStore, job: Job) -> None:
        self.store = store
        self.job_id = job.id
        self.own = {Path(path) for path in job.exported}

    def exported_sha256(self, path: Path) -> str | None:
        return self.store.exported_sha256(path) if path in self.own else None

    def record_export(self, path: Path, sha256: str) -> None:
        self.store.record_export(path, sha256)
        self.store.add_exported(self.job_id, path)
        self.own.add(path)


def auto_export(store: JobStore, job: Job, transcript: Transcript) -> str | None:
    """A finished job's exports to its output folder (none set: nothing to do); returns the note for the user.
    The job's exports are marked finished at the end: a kill in between leaves them for the next worker."""
    if not job.options.output_dir:
        return None
    try:
        return _auto_export_to(store, job, transcript, Path(job.options.output_dir).expanduser())
    finally:
        try:
            store.exports_finished(job.id)
        except STORAGE_ERRORS as error:  # finished again at the next start: the same files, replaced
            log.warning("exports of job %s not marked finished: %s", job.id, storage_reason(error))


def _auto_export_to(store: JobStore, job: Job, transcript: Transcript, directory: Path) -> str:
    try:
        saved = save_transcript(
            transcript,
            directory,
            job.source.stem,
            job.options.formats,
            record=JobExports(store, job),
            protect=(job.source,),
        )
    except Exception as error:  # save_transcript reports per format; this is a bug, still not the job's end
        log.exception("export of job %s failed", job.id)
        note = f"transcribed, but the exports could not be written to {directory}: {error}"
        _store_note(store, job, note)
        return note
    note = saved.summary()
    if saved.failed and not saved.written:
        note = f"transcribed, but the exports could not be written: {note}"
    try:
        if saved.written:
            store.set_exported(job.id, list(saved.written))
    except STORAGE_ERRORS as error:
        log.warning("exports of job %s not recorded: %s", job.id, storage_reason(error))
    if saved.failed or saved.renamed:
        _store_note(store, job, note)
    return note


def export_job(
    store: JobStore, job_id: int, directory: Path, formats: Iterable[str], style: ExportStyle = WHOLE
) -> SavedTranscript:
    """A done job's transcript exported by hand (the window's Export…, `scriba queue export`): named after its
    recording; any file Scriba wrote and nobody changed since may be replaced. ``style``: what the formats people
    read show besides the words."""
    job = store.get(job_id)
    transcript = store.load_transcript(job_id)
    return save_transcript(
        transcript, directory, job.source.stem, formats, record=store, protect=(job.source,), style=style
    )


def refresh_exports(store: JobStore, job_id: int) -> SavedTranscript | None:
    """The job's exported files written again from its transcript as edited in Scriba's editor (an edit there is
    Scriba's own write); a file changed by hand outside Scriba since is kept, the edited transcript going beside
    it (NAME-2). None when the job has no exports."""
    job = store.get(job_id)
    named = [(Path(path), stem_and_format(Path(path).name)) for path in job.exported]
    exported = [(path.parent, parts) for path, parts in named if parts is not None]
    if not exported:
        return None
    directory, (stem, _fmt) = exported[0]
    formats = tuple(dict.fromkeys(fmt for _directory, (_stem, fmt) in exported))
    saved = save_transcript(
        store.load_transcript(job_id), directory, stem, formats, record=store, protect=(job.source,)
    )
    if saved.written:
        store.set_exported(job_id, list(saved.written))
    return saved


def _store_note(store: JobStore, job: Job, note: str) -> None:
    try:
        store.set_note(job.id, note)
    except STORAGE_ERRORS as error:
        log.warning("note of job %s not stored: %s", job.id, storage_reason(error))
