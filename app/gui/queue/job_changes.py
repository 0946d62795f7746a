"""Retry and Remove of the jobs selected in the queue: every selected row, one question for the transcripts that
would go to the trash, and a retried job keeps its row (it does not jump to the bottom under the cursor)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtWidgets import QWidget

from app.core.queue.jobs import Job, JobNotFoundError, JobOptions, JobState, JobStateError, JobStore
from app.core.queue.trash import Trash
from app.gui.queue.safety import ask_first, ask_to_remove, ask_to_retry, what_is_lost


class JobChanges:
    """``options()``: the settings a retried job runs with; ``shown()``/``clear_shown()``: the job whose transcript
    the editor shows, and closing it; ``say(text)``: the status line; ``changed()``: after the queue changed;
    ``wake()``: the worker looks for a queued job now."""

    def __init__(
        self,
        parent: QWidget,
        store: JobStore,
        options: Callable[[], JobOptions],
        shown: Callable[[], int | None],
        clear_shown: Callable[[], None],
        say: Callable[[str], None],
        changed: Callable[[], None],
        wake: Callable[[], None],
    ) -> None:
        self._parent = parent
        self._store = store
        self._options = options
        self._shown = shown
        self._clear_shown = clear_shown
        self._say = say
        self._changed = changed
        self._wake = wake

    def _jobs(self, job_ids: Sequence[int]) -> list[Job]:
        jobs = []
        for job_id in job_ids:
            try:
                jobs.append(self._store.get(job_id))
            except JobNotFoundError:
                continue  # gone meanwhile (another process removed it)
        return jobs

    def retry(self, job_ids: Sequence[int]) -> list[int]:
        """Queue the jobs again, where they are, with the current settings. Finished transcripts go to the trash
        first (after asking once), so that re-transcribing never throws away edits and speaker names. Returns the
        jobs queued again; the status line names those that could not be (a job still queued or running)."""
        jobs = self._jobs(job_ids)
        options = self._options()
        model = f"model {options.model}" if options.model else "the best model on disk"
        setting = f"{model}, language {options.language or 'detected'}"
        done = [job for job in jobs if job.state is JobState.DONE]
        if len(done) == 1 and not ask_to_retry(self._parent, self._store, done[0], setting):
            return []
        if len(done) > 1 and not self._ask_many(done, "Retry jobs", f"Transcribe {len(done)} jobs again", setting):
            return []
        retried: list[Job] = []
        refused: list[str] = []
        trashed = 0
        for job in jobs:
            trash = Trash(self._store.directory)
            kept = trash.put(self._store, job, "re-transcribed") if job.state is JobState.DONE else None
            if kept is not None and self._shown() == job.id:
                self._clear_shown()
            try:
                self._store.retry(job.id, options, keep_place=True)
            except (JobNotFoundError, JobStateError) as error:
                refused.append(f"{job.source.name}: {error}")
                if kept is not None:
                    trash.put_back(self._store, kept)  # nothing was re-queued: nothing is lost
                continue
            retried.append(job)
            trashed += kept is not None
        self._changed()
        if retried:
            self._wake()
        said = f"{_names(retried)} queued again with the current settings ({setting})." if retried else ""
        if trashed:
            said += " The old transcript is in the trash." if trashed == 1 else " The old transcripts are in the trash."
        if refused:
            said += f" Not retried: {'; '.join(refused[:2])}" + ("…" if len(refused) > 2 else "")
        self._say(said.strip())
        return [job.id for job in retried]

    def remove(self, job_ids: Sequence[int]) -> list[int]:
        """Remove the jobs; their transcripts go to the trash (after asking once), never straight to nothing.
        Returns the jobs removed; the status line names those that could not go (a running job)."""
        jobs = self._jobs(job_ids)
        with_transcript = [job for job in jobs if self._store.transcript_file(job.id).is_file()]
        if len(with_transcript) == 1 and not ask_to_remove(self._parent, self._store, with_transcript[0]):
            return []
        if len(with_transcript) > 1 and not self._ask_many(
            with_transcript, "Remove jobs", f"Remove {len(with_transcript)} jobs from the queue", None
        ):
            return []
        removed: list[Job] = []
        refused: list[str] = []
        trashed = 0
        for job in jobs:
            trash = Trash(self._store.directory)
            kept = trash.put(self._store, job, "removed") if job in with_transcript else None
            if self._shown() == job.id:
                self._clear_shown()
            try:
                # The store decides whether a "running" job is really running (its worker alive) or may go.
                self._store.remove(job.id)
            except (JobNotFoundError, JobStateError) as error:
                refused.append(f"{job.source.name}: {error}")
                if kept is not None:
                    trash.put_back(self._store, kept)
                continue
            removed.append(job)
            trashed += kept is not None
        self._changed()
        said = f"{_names(removed)} removed." if removed else ""
        if trashed:
            said += " Its transcript is in the trash." if trashed == 1 else " Their transcripts are in the trash."
        if refused:
            said += f" Not removed: {'; '.join(refused[:2])}" + ("…" if len(refused) > 2 else "")
        self._say(said.strip())
        return [job.id for job in removed]

    def _ask_many(self, jobs: list[Job], title: str, question: str, setting: str | None) -> bool:
        names = "\n".join(f"• {job.source.name}: {what_is_lost(self._store, job)}" for job in jobs[:8])
        more = f"\n… and {len(jobs) - 8} more" if len(jobs) > 8 else ""
        how = f" with the current settings ({setting})" if setting else ""
        text = (
            f"{question}{how}?\n\nTheir transcripts go to the trash:\n{names}{more}\n\n"
            "Edit › Restore removed… brings them back."
        )
        return ask_first(self._parent, title, text, "Transcribe again" if setting else "Move to trash")


def _names(jobs: list[Job]) -> str:
    if len(jobs) == 1:
        return jobs[0].source.name
    return f"{len(jobs)} jobs ({', '.join(job.source.name for job in jobs[:3])}{'…' if len(jobs) > 3 else ''})"
