"""Asking before a job's transcript is set aside (remove, re-transcribe), in words that say what goes."""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget

from app.core.queue.jobs import Job, JobStateError, JobStore


def ask_first(parent: QWidget, title: str, text: str, accept: str) -> bool:
    """A question whose default button is the harmless one: Enter or Escape keep everything."""
    box = QMessageBox(QMessageBox.Icon.Question, title, text, parent=parent)
    accept_button = box.addButton(accept, QMessageBox.ButtonRole.DestructiveRole)
    keep = box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(keep)
    box.exec()
    return box.clickedButton() is accept_button


def what_is_lost(store: JobStore, job: Job) -> str:
    """The transcript a job holds, counted the way a person would count it."""
    try:
        transcript = store.load_transcript(job.id)
    except (OSError, ValueError, JobStateError):
        return "its transcript"
    speakers = f" and {len(transcript.speakers)} speaker name(s)" if transcript.speakers else ""
    return f"its transcript ({len(transcript.segments)} lines{speakers}, with every edit made to it)"


def ask_to_retry(parent: QWidget, store: JobStore, job: Job, settings: str) -> bool:
    text = (
        f"Transcribe {job.source.name} again with the current settings ({settings})?\n\n"
        f"Its current transcript goes to the trash: {what_is_lost(store, job)}. "
        "Edit › Restore removed… brings it back."
    )
    return ask_first(parent, "Retry job", text, "Transcribe again")


def ask_to_remove(parent: QWidget, store: JobStore, job: Job) -> bool:
    text = (
        f"Remove {job.source.name} from the queue?\n\n"
        f"It goes to the trash with {what_is_lost(store, job)}. Edit › Restore removed… brings it back."
    )
    return ask_first(parent, "Remove job", text, "Move to trash")
