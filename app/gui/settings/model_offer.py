"""What the window offers when a model is missing: a job that stopped because its model is not on this computer
("Download <model>" or "Use the built-in model instead"), and a download chosen in Settings that failed (the model
that works stays; "Retry download")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QMessageBox, QWidget

from app.core.engine.models import BUNDLED_MODEL, CATALOG
from app.core.queue.jobs import JobNotFoundError, JobStore
from app.gui.settings.language_offer import RetryWith

if TYPE_CHECKING:
    from app.gui.settings.models_dialog import ModelsDialog


class MissingModelOffer(QMessageBox):
    """A job's model is not on disk: download it (a catalog model) or use the built-in model, for this job."""

    def __init__(self, parent: QWidget | None, source_name: str, model: str) -> None:
        super().__init__(QMessageBox.Icon.Warning, "Model not on this computer", "", parent=parent)
        self.model = model
        self.setText(f"<b>{source_name}</b> was not transcribed: its model, {model}, is not on this computer.")
        entry = CATALOG.get(model)
        self.download_button = None
        if entry is not None:
            self.setInformativeText(
                f"Download {model} ({entry.size_mb:,} MB, once) and transcribe it, or transcribe it now with the "
                f"built-in {BUNDLED_MODEL} (English only, least accurate)."
            )
            self.download_button = self.addButton(f"Download {model}", QMessageBox.ButtonRole.AcceptRole)
        else:
            self.setInformativeText(f"Transcribe it with the built-in {BUNDLED_MODEL} (English only, least accurate).")
        self.builtin_button = self.addButton("Use the built-in model instead", QMessageBox.ButtonRole.ActionRole)
        self.close_button = self.addButton(QMessageBox.StandardButton.Close)
        self.setDefaultButton(self.download_button or self.builtin_button)


def offer_missing_model(
    parent: QWidget, store: JobStore, job_id: int, retry_with: RetryWith, open_models: Callable[[str], ModelsDialog]
) -> MissingModelOffer | None:
    """Ask how a job whose model is missing goes on; the answer queues it again (this job only) through
    ``retry_with``; a download opens the model manager with ``open_models``. None when the job is gone."""
    try:
        job = store.get(job_id)
    except JobNotFoundError:
        return None
    model = job.options.model or BUNDLED_MODEL
    offer = MissingModelOffer(parent, job.source.name, model)
    offer.buttonClicked.connect(lambda button: _answer(offer, button, store, job_id, retry_with, open_models))
    offer.open()
    return offer


def _answer(
    offer: MissingModelOffer,
    button: object,
    store: JobStore,
    job_id: int,
    retry_with: RetryWith,
    open_models: Callable[[str], ModelsDialog],
) -> None:
    try:
        options = store.get(job_id).options
    except JobNotFoundError:
        return
    if button is offer.builtin_button:
        retry_with(job_id, f"the built-in {BUNDLED_MODEL}", replace(options, model=BUNDLED_MODEL))
    elif offer.download_button is not None and button is offer.download_button:
        dialog = open_models(offer.model)
        dialog.downloaded.connect(lambda name: retry_with(job_id, f"model {name}", replace(options, model=name)))


class DownloadFailedNotice(QMessageBox):
    """A model chosen in Settings could not be downloaded: the model that works stayed selected; Retry tries the
    download again (and selects the model when it lands)."""

    def __init__(self, parent: QWidget | None, model: str, kept: str, what: str) -> None:
        super().__init__(QMessageBox.Icon.Warning, "Model not downloaded", "", parent=parent)
        self.model = model
        self.setText(f"{model} was not downloaded, so new jobs keep using {kept}.")
        self.setInformativeText(what)
        self.retry_button = self.addButton("Retry download", QMessageBox.ButtonRole.AcceptRole)
        self.close_button = self.addButton(QMessageBox.StandardButton.Close)
        self.setDefaultButton(self.retry_button)
