"""File › Export…: a folder chosen in a dialog, and the selected job's transcript written there."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

from app.core.queue.exports import export_job
from app.core.queue.jobs import JobStateError, JobStore
from app.gui.error_dialog import show_error


def export_to_chosen_folder(
    parent: QWidget, store: JobStore, job_id: int, formats: tuple[str, ...], start_folder: str
) -> str | None:
    """Ask for a folder and write job ``job_id``'s transcript there in ``formats`` (a file there that Scriba did
    not write as it is now is kept, the new one takes another name). Returns the status line's sentence; None when
    no folder was chosen or the export failed (an error dialog said why)."""
    folder = QFileDialog.getExistingDirectory(parent, f"Export {', '.join(formats)} to", start_folder)
    if not folder:
        return None
    try:
        result = export_job(store, job_id, Path(folder), formats)
    except (OSError, ValueError, JobStateError) as error:
        show_error(parent, "Export failed", f"Could not export to {folder}: {error}")
        return None
    if result.failed:
        show_error(parent, "Export failed", result.summary())
        return None
    return result.summary()[:1].upper() + result.summary()[1:]
