"""The first-run page, Settings after a failed download, a job whose model is missing, and the way from a fresh
data folder to a first transcript, driven offscreen with the real engine (tiny.en) in the window's worker.

This machine has no network: a real download fails to connect, which is the offline case as a user meets it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.core.config.settings import Settings
from app.core.engine import models
from app.core.engine.recommend import Machine
from app.core.queue.jobs import JobState
from app.gui.settings.dialog import SettingsDialog
from app.gui.settings.first_run import FirstRunDialog
from tests.gui.test_queue_safety import answer_next_question
from tests.gui.test_window import LONG_WAIT, drop

EIGHT_CORES = Machine("cpu", cpu_cores=8, ram_gb=16.0)


@pytest.fixture
def download_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call of the one function that downloads a model (it goes on to the real one)."""
    calls: list[str] = []
    real = models.download_model

    def spy(name: str, *args: Any, **kwargs: Any) -> models.ResolvedModel:
        calls.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(models, "download_model", spy)
    return calls


def test_the_page_shows_the_machine_the_advice_and_three_choices(qtbot: Any, download_calls: list[str]) -> None:
    dialog = FirstRunDialog(machine=EIGHT_CORES)
    qtbot.addWidget(dialog)
    dialog.show()
    assert "8 CPU cores and 16 GB of memory" in dialog.machine_label.text()
    assert "Recommended: turbo (balanced), about 8 minutes for an hour of audio here" in dialog.reasons.text()
    texts = {tier: button.text() for tier, button in dialog.tier_buttons.items()}
    assert (
        texts["balanced"]
        == "Balanced (recommended): turbo, about 8 minutes for an hour of audio here (1,620 MB download)"
    )
    assert texts["fast"].startswith("Fast: small, about 5 minutes") and "large-v3" in texts["accurate"]
    assert dialog.tier_buttons["balanced"].isChecked()
    assert dialog.download_button.text() == "Download turbo (1,620 MB) and use it"
    dialog.tier_buttons["fast"].click()
    assert dialog.download_button.text() == "Download small (485 MB) and use it"
    assert download_calls == []  # nothing is downloaded without the click


def test_start_now_closes_at_once_and_downloads_nothing(
    open_window: Callable[..., Any], qtbot: Any, download_calls: list[str]
) -> None:
    window = open_window()
    assert window.first_start
    page = window.offer_first_run()
    assert page is not None and page.isVisible()
    page.start_button.click()
    assert not page.isVisible()
    assert download_calls == []
    assert window.settings.job.model is None and models.resolve_model(window.settings.job.model).name == "tiny.en"
    assert window.settings_store.load().window.first_run_done
    assert window.offer_first_run() is None  # answered: not again


def test_offline_the_page_says_so_and_the_built_in_model_stays(
    open_window: Callable[..., Any], qtbot: Any, download_calls: list[str]
) -> None:
    window = open_window()
    page = window.open_first_run(machine=EIGHT_CORES)
    page.tier_buttons["fast"].click()
    page.download_button.click()
    assert page.cancel_button.isVisible() and not page.download_button.isEnabled()
    qtbot.waitUntil(lambda: page.outcome != "", timeout=60_000)
    assert download_calls == ["small"]
    assert "This computer seems to be offline: small could not be downloaded" in page.status.text()
    assert "The built-in tiny.en keeps working" in page.status.text()
    assert page.isVisible() and page.download_button.isEnabled()
    assert page.download_button.text() == "Try downloading small again"
    assert window.settings.job.model is None  # never the model that did not arrive
    page.start_button.click()
    assert window.settings.job.model is None and not page.isVisible()


def test_settings_keeps_the_working_model_when_the_download_fails_and_offers_retry(
    open_window: Callable[..., Any], qtbot: Any, tmp_path: Path
) -> None:
    window = open_window()
    window.apply_settings(window.settings.with_job(model="tiny.en"))
    dialog = SettingsDialog(window.settings, token_stored=False, parent=window, models_cache=tmp_path / "models")
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.model.setCurrentText("base")
    seen = answer_next_question("Download")
    dialog.accept()
    assert "base is not on this computer" in seen["text"]
    manager = dialog.models_dialog
    assert manager is not None
    qtbot.waitUntil(lambda: manager.outcome != "", timeout=60_000)
    with qtbot.waitSignal(dialog.accepted, timeout=5_000):
        manager.accept()
    assert dialog.result_settings().job.model == "tiny.en"  # the model that works stays
    assert dialog.download_failure is not None and dialog.download_failure[0] == "base"
    assert "offline" in dialog.download_failure[1]
    window.settings_accepted(dialog)
    assert window.settings.job.model == "tiny.en"
    notice = window.download_notice
    assert notice is not None and notice.isVisible()
    assert notice.text() == "base was not downloaded, so new jobs keep using tiny.en."
    assert notice.retry_button.text() == "Retry download"
    notice.retry_button.click()
    retried = window.models_dialog
    assert retried is not None and retried.isVisible()
    qtbot.waitUntil(lambda: retried.outcome != "", timeout=60_000)
    assert "base" in retried.outcome and window.settings.job.model == "tiny.en"


def test_a_job_whose_model_is_missing_offers_download_or_the_built_in_model(
    open_window: Callable[..., Any], qtbot: Any, sample_dir: Path
) -> None:
    window = open_window()
    window.apply_settings(window.settings.with_job(model="base"))  # as a file from an older Scriba could have it
    (job,) = window.add_paths([sample_dir / "sample.wav"])
    qtbot.waitUntil(lambda: window.store.get(job.id).state is JobState.FAILED, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: window.model_offer is not None and window.model_offer.isVisible(), timeout=5000)
    offer = window.model_offer
    assert "sample.wav" in offer.text() and "base, is not on this computer" in offer.text()
    assert offer.download_button is not None and offer.download_button.text() == "Download base"
    assert offer.builtin_button.text() == "Use the built-in model instead"
    offer.builtin_button.click()
    qtbot.waitUntil(lambda: window.store.get(job.id).state is JobState.DONE, timeout=LONG_WAIT)
    assert window.store.get(job.id).options.model == "tiny.en"
    assert window.settings.job.model == "base"  # this job only


def test_a_newcomer_reaches_a_first_transcript_in_three_actions(
    open_window: Callable[..., Any], qtbot: Any, sample_dir: Path, download_calls: list[str]
) -> None:
    actions = 0
    window = open_window()  # a fresh data and config folder
    page = window.offer_first_run()  # what the program does on its first start
    assert page is not None and page.isVisible()
    qtbot.mouseClick(page.start_button, Qt.MouseButton.LeftButton)
    actions += 1
    drop(window.drop_zone, [sample_dir / "sample.wav"])  # the recording dropped on the window
    actions += 1
    qtbot.waitUntil(lambda: getattr(window, "options_sheet", None) is not None, timeout=10_000)
    sheet = window.options_sheet
    qtbot.waitUntil(sheet.isVisible, timeout=10_000)
    qtbot.mouseClick(sheet.add_button, Qt.MouseButton.LeftButton)  # the sheet's defaults kept
    actions += 1
    qtbot.waitUntil(lambda: len(window.store.jobs()) == 1, timeout=10_000)
    (job,) = window.store.jobs()
    qtbot.waitUntil(lambda: window.store.get(job.id).state is JobState.DONE, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: window.transcript_view.job_id == job.id, timeout=10_000)
    assert actions == 3 and download_calls == []
    assert window.store.load_transcript(job.id).segments


def test_settings_lists_on_disk_size_and_recommended(qtbot: Any, tmp_path: Path) -> None:
    from app.gui.settings.models_dialog import DETAIL_ROLE

    dialog = SettingsDialog(Settings(), token_stored=False, models_cache=tmp_path)
    qtbot.addWidget(dialog)
    dialog.set_recommended("turbo")
    details = {
        dialog.model.itemText(index): dialog.model.itemData(index, DETAIL_ROLE) for index in range(dialog.model.count())
    }
    assert details["tiny.en"] == "on disk"
    assert details["turbo"] == "1,620 MB download · recommended"
    assert details["large-v3"] == "3,090 MB download"


def test_reading_this_computer_imports_no_torch_into_the_window() -> None:
    """The window never imports torch or CTranslate2 (their import would freeze it for seconds): the first-run
    page reads the machine through doctor's checks in a process of its own. A fresh interpreter, so nothing
    imported by other tests counts."""
    script = (
        "import sys, time\n"
        "from PySide6.QtWidgets import QApplication\n"
        "app = QApplication([])\n"
        "from app.gui.settings.first_run import FirstRunDialog\n"
        "dialog = FirstRunDialog()\n"
        "waiting = dialog.machine_label.text()\n"
        "deadline = time.monotonic() + 240\n"
        "while dialog.machine_label.text() == waiting and time.monotonic() < deadline:\n"
        "    app.processEvents(); time.sleep(0.05)\n"
        "print('read:', dialog.machine_label.text() != waiting)\n"
        "print('heavy:', sorted(m for m in ('torch', 'ctranslate2') if m in sys.modules))\n"
    )
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert "read: True" in done.stdout, done.stdout + done.stderr
    assert "heavy: []" in done.stdout, done.stdout


def test_the_page_shows_words_not_html_escapes(qtbot: Any) -> None:
    dialog = FirstRunDialog(machine=Machine(device="cpu", cpu_cores=2, ram_gb=24.0))
    qtbot.addWidget(dialog)
    for label in (dialog.machine_label, dialog.reasons, dialog.basis):
        assert "&#" not in _shown(label), _shown(label)
    assert "computer's CPU cores" in _shown(dialog.basis)


def _shown(label: Any) -> str:
    """What a person reads in ``label``: its text as Qt lays it out (rich text rendered, plain text as it is)."""
    from PySide6.QtGui import QTextDocument

    document = QTextDocument()
    rich = label.textFormat() == Qt.TextFormat.RichText or (
        label.textFormat() == Qt.TextFormat.AutoText and Qt.mightBeRichText(label.text())
    )
    if rich:
        document.setHtml(label.text())
    else:
        document.setPlainText(label.text())
    return document.toPlainText()
