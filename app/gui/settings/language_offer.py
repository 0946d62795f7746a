"""What the window asks when a job stopped because its model cannot transcribe the recording's language."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QMessageBox, QWidget

from app.core.engine.language_check import ModelSuggestion, suggest_multilingual
from app.core.queue.jobs import JobNotFoundError, JobOptions, JobStore

if TYPE_CHECKING:
    from app.gui.settings.models_dialog import ModelsDialog

# Queue a job again with other options: (job id, what changed in words, the options).
RetryWith = Callable[[int, str, JobOptions], None]


class LanguageOffer(QMessageBox):
    """Three ways on: a multilingual model (on disk, or downloaded first), "it is English" (the way out of a
    false alarm), or leave the job failed. Opened window-modal with ``open()``; the caller reads the button."""

    def __init__(self, parent: QWidget | None, source_name: str, reason: str, suggestion: ModelSuggestion) -> None:
        super().__init__(QMessageBox.Icon.Warning, "Not English?", "", parent=parent)
        self.suggestion = suggestion
        self.setText(
            f"<b>{source_name}</b> was not transcribed: the model transcribes English only, and the recording "
            "is not in English. It would have come out as invented English."
        )
        self.setInformativeText(
            f"Transcribe it with {suggestion.name}, which knows about 100 languages"
            + ("." if suggestion.on_disk else f" (a {suggestion.size_mb:,} MB download, once).")
        )
        self.setDetailedText(reason)
        use = (
            f"Transcribe with {suggestion.name}" if suggestion.on_disk else f"Download {suggestion.name} and transcribe"
        )
        self.use_button = self.addButton(use, QMessageBox.ButtonRole.AcceptRole)
        self.english_button = self.addButton("It is English: transcribe anyway", QMessageBox.ButtonRole.ActionRole)
        self.close_button = self.addButton(QMessageBox.StandardButton.Close)
        self.setDefaultButton(self.use_button)


def offer_multilingual(
    parent: QWidget,
    store: JobStore,
    job_id: int,
    reason: str,
    job_options: Callable[[], JobOptions],
    retry_with: RetryWith,
    open_models: Callable[[str], ModelsDialog],
) -> LanguageOffer | None:
    """Offer a multilingual model (downloading it first when none is on disk) or "it is English" for a job that
    stopped on the language check, then queue the job again that way (this job only): ``retry_with(job_id, what,
    options)``, with ``job_options()`` (the current settings) changed in one field. None when the job is gone."""
    try:
        job = store.get(job_id)
    except JobNotFoundError:
        return None
    offer = LanguageOffer(parent, job.source.name, reason, suggest_multilingual())
    offer.buttonClicked.connect(lambda button: _answer(offer, button, job_id, job_options, retry_with, open_models))
    offer.open()
    return offer


def _answer(
    offer: LanguageOffer,
    button: object,
    job_id: int,
    job_options: Callable[[], JobOptions],
    retry_with: RetryWith,
    open_models: Callable[[str], ModelsDialog],
) -> None:
    suggestion = offer.suggestion
    options = job_options()
    if button is offer.english_button:
        retry_with(job_id, "language en", replace(options, language="en"))
    elif button is offer.use_button and suggestion.on_disk:
        retry_with(job_id, f"model {suggestion.name}", replace(options, model=suggestion.name))
    elif button is offer.use_button:
        open_models(suggestion.name).downloaded.connect(
            lambda name: retry_with(job_id, f"model {name}", replace(job_options(), model=name))
        )
