"""The model manager (Settings › Models…) and Settings offering a download, driven offscreen.

The stand-in hub (tests/hub_standin.py, public repository mode) serves the real files of the bundled tiny.en
under the repository of the model being downloaded: what is tested is the window's download, cancel, resume
and removal, not the weights. Downloads land in a test cache folder.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.config.settings import Settings
from app.core.engine import models
from app.gui.settings.dialog import SettingsDialog
from app.gui.settings.models_dialog import COLUMNS, ModelsDialog
from tests.gui.test_queue_safety import answer_next_question
from tests.hub_standin import HubState, serve_hub

SERVED = "base.en"


@pytest.fixture(scope="module")
def served_files() -> dict[str, bytes]:
    folder = models.bundled_model_path()
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


@pytest.fixture
def hub(served_files: dict[str, bytes]) -> Iterator[tuple[HubState, str]]:
    state = HubState(models.CATALOG[SERVED].repo_id, dict(served_files), {}, public=True)
    with serve_hub(state) as endpoint:
        yield state, endpoint


def row_of(dialog: ModelsDialog, name: str) -> dict[str, str]:
    row = list(models.CATALOG).index(name)
    return {column: dialog.table.item(row, index).text() for index, column in enumerate(COLUMNS)}


def test_the_table_says_what_is_on_disk_its_size_languages_and_speed(qtbot: Any, tmp_path: Path) -> None:
    dialog = ModelsDialog(cache=tmp_path)
    qtbot.addWidget(dialog)
    assert dialog.table.rowCount() == len(models.CATALOG)
    assert row_of(dialog, "tiny.en") == {
        "Model": "tiny.en",
        "Languages": "English only",
        "Size": "75 MB",
        "Speed": "10x large",
        "On disk": "bundled",
    }
    assert row_of(dialog, "large-v3")["Languages"] == "multilingual"
    assert row_of(dialog, "large-v3")["On disk"] == "not downloaded"
    dialog.select("tiny.en")
    assert not dialog.download_button.isEnabled() and not dialog.remove_button.isEnabled()  # bundled: stays
    dialog.select("large-v3")
    assert dialog.download_button.isEnabled() and not dialog.remove_button.isEnabled()


def test_download_with_progress_then_remove(
    qtbot: Any, tmp_path: Path, hub: tuple[HubState, str], served_files: dict[str, bytes]
) -> None:
    _, endpoint = hub
    dialog = ModelsDialog(select=SERVED, cache=tmp_path, endpoint=endpoint)
    qtbot.addWidget(dialog)
    dialog.show()
    with qtbot.waitSignal(dialog.downloaded, timeout=60_000) as finished:
        dialog.download_button.click()
        assert row_of(dialog, SERVED)["On disk"] == "downloading…"
        assert dialog.cancel_button.isEnabled() and not dialog.download_button.isEnabled()
    assert finished.args == [SERVED]
    assert row_of(dialog, SERVED)["On disk"] == "downloaded"
    assert "downloaded and ready" in dialog.status.text() and not dialog.progress.isVisible()
    assert models.resolve_model(SERVED, cache=tmp_path).origin == "cache"
    assert {path.name: path.read_bytes() for path in (tmp_path / SERVED).iterdir()} == served_files

    seen = answer_next_question("Cancel")
    dialog.remove_button.click()
    assert "Delete base.en" in seen["text"] and (tmp_path / SERVED).is_dir()  # asked first; kept on Cancel
    answer_next_question("Delete")
    dialog.remove_button.click()
    assert not (tmp_path / SERVED).exists()
    assert row_of(dialog, SERVED)["On disk"] == "not downloaded"


def test_cancel_keeps_what_arrived_and_the_next_download_continues(
    qtbot: Any, tmp_path: Path, hub: tuple[HubState, str], served_files: dict[str, bytes]
) -> None:
    state, endpoint = hub
    release = threading.Event()
    state.hold_after["model.bin"] = (8 << 20, release)  # 8 MB of model.bin, then the hub waits
    dialog = ModelsDialog(select=SERVED, cache=tmp_path, endpoint=endpoint)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.download_button.click()
    qtbot.waitUntil(lambda: dialog.progress.value() >= 8 << 10, timeout=30_000)  # kB
    assert "Downloading base.en" in dialog.status.text()
    dialog.cancel_button.click()
    release.set()
    qtbot.waitUntil(lambda: "cancelled" in dialog.status.text(), timeout=30_000)
    assert row_of(dialog, SERVED)["On disk"] == "not downloaded" and dialog.download_button.isEnabled()
    assert models.partial_dir(SERVED, tmp_path).is_dir()

    state.requests.clear()
    with qtbot.waitSignal(dialog.downloaded, timeout=60_000):
        dialog.download_button.click()
    assert {path.name: path.read_bytes() for path in (tmp_path / SERVED).iterdir()} == served_files
    assert any(wanted.startswith("bytes=") for method, _, wanted in state.requests if method == "GET")


def test_choosing_a_model_not_on_disk_offers_the_download(
    qtbot: Any, tmp_path: Path, hub: tuple[HubState, str]
) -> None:
    _, endpoint = hub
    dialog = SettingsDialog(Settings(), token_stored=False, endpoint=endpoint, models_cache=tmp_path)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.model.setCurrentText(SERVED)
    seen = answer_next_question("Download")
    dialog.accept()
    assert "base.en is not on this computer" in seen["text"]
    manager = dialog.models_dialog
    assert manager is not None and manager.isVisible() and dialog.result() == 0  # Settings waits for it
    with qtbot.waitSignal(manager.downloaded, timeout=60_000):
        pass
    with qtbot.waitSignal(dialog.accepted, timeout=5_000):
        manager.accept()
    assert dialog.result_settings().job.model == SERVED
    assert models.resolve_model(SERVED, cache=tmp_path).origin == "cache"


def test_settings_model_list_says_which_are_on_disk(qtbot: Any, tmp_path: Path) -> None:
    from PySide6.QtCore import Qt

    dialog = SettingsDialog(Settings(), token_stored=False, models_cache=tmp_path)
    qtbot.addWidget(dialog)
    tips = {
        dialog.model.itemText(index): dialog.model.itemData(index, Qt.ItemDataRole.ToolTipRole)
        for index in range(dialog.model.count())
    }
    assert tips["tiny.en"] == "English only; on disk"
    assert tips["large-v3"] == "multilingual; not downloaded (3,090 MB)"
