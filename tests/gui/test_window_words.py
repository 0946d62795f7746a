"""Words and buttons, never commands (issue 40, point 5): what the window shows in the known cases names no
command to type, no module and no library file; the way out is a button. Speaker detection without pyannote's
download and a job whose model is missing here; no NVML in test_gpu_panel, an offload without a key in
test_offload_dialog (the same check)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QLabel, QMessageBox, QWidget

from app.core.config.settings import Settings
from app.core.queue.jobs import JobState
from app.gui.settings.dialog import SettingsDialog

LONG_WAIT = 240_000  # ms: the engine's process starts and fails on the missing model
# A command to type (backticks, `scriba models …`, pip), a library file (.so), or a Python package's name.
COMMAND_OR_FILE = re.compile(
    r"`|\bscriba (models|offload|doctor|queue|speakers|transcribe|dictate)\b|\.so\b|pip install|pyannote\.audio"
)


def shown_texts(widget: QWidget) -> list[str]:
    """Every text ``widget`` shows a person: labels, buttons, message boxes, tooltips."""
    texts: list[str] = []
    for child in [widget, *widget.findChildren(QWidget)]:
        if child is not widget and not child.isVisibleTo(widget):
            continue
        texts.append(child.toolTip())
        if isinstance(child, QLabel | QAbstractButton):
            texts.append(child.text())
        if isinstance(child, QMessageBox):
            texts += [child.text(), child.informativeText()]
    return [text for text in texts if text]


def commands_in(texts: list[str]) -> list[str]:
    return [text for text in texts if COMMAND_OR_FILE.search(text)]


def test_speaker_detection_says_in_words_how_to_get_pyannote(qtbot: Any, tmp_path: Path) -> None:
    dialog = SettingsDialog(Settings(), token_stored=False, models_cache=tmp_path / "models")
    qtbot.addWidget(dialog)
    dialog.show()
    section = dialog.speaker_detection
    # pyannote community-1 is not downloaded in this test's cache: the built-in diarizer runs until it is.
    assert "built-in diarizer" in section.backend.text() and "Check and download" in section.backend.text()
    assert commands_in(shown_texts(section)) == []
    assert commands_in(shown_texts(dialog)) == []


def test_a_job_whose_model_is_missing_is_said_in_words_with_buttons(
    open_window: Callable[..., Any], qtbot: Any, sample_dir: Path
) -> None:
    window = open_window()
    window.apply_settings(window.settings.with_job(model="base"))  # not on this computer
    status: list[str] = []
    window.statusBar().messageChanged.connect(status.append)
    (job,) = window.add_paths([sample_dir / "sample.wav"])
    qtbot.waitUntil(lambda: window.store.get(job.id).state is JobState.FAILED, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: window.model_offer is not None and window.model_offer.isVisible(), timeout=5000)
    offer = window.model_offer
    (failed,) = [message for message in status if message.startswith("Failed: ")]
    said = [
        failed,
        window.store.get(job.id).error or "",
        window.model.index(window.model.row_of(job.id), 0).data(Qt.ItemDataRole.ToolTipRole) or "",
        *shown_texts(offer),
    ]
    assert "base" in said[0] and "not downloaded" in said[0], said[0]
    assert commands_in(said) == [], said
    assert offer.download_button is not None and offer.download_button.text() == "Download base"
    offer.close()


def test_an_error_that_reaches_the_window_shows_its_words_without_the_command(
    open_window: Callable[..., Any], qtbot: Any, tmp_path: Path
) -> None:
    from PySide6.QtWidgets import QApplication

    from app.core.engine.models import resolve_model
    from app.core.errors import ModelNotFoundError
    from app.gui.main import CrashReporter

    window = open_window(start_worker=False)
    reporter = CrashReporter(tmp_path / "crash.log")
    try:
        resolve_model("small", tmp_path / "no models here")
    except ModelNotFoundError as error:
        missing = error
    assert "`scriba models download small`" in str(missing)  # the command line keeps its command
    reporter._excepthook(type(missing), missing, None)
    qtbot.waitUntil(
        lambda: any(isinstance(w, QMessageBox) and w.isVisible() for w in QApplication.topLevelWidgets()), timeout=3000
    )
    box = next(w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible())
    assert box.text().startswith("Model 'small' is not downloaded yet") and commands_in([box.text()]) == []
    assert window.isVisible()
    box.close()
