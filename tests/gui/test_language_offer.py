"""A German recording with the English-only default model, in the window, the language set to German: the job
stops before any invented English is written, and the window offers a multilingual model (downloaded first, as
none is on disk) or "it is English". (Undeclared, the English model's own confidence only warns: see
tests/core/engine/test_language_check.py.)

The real engine runs in the window's child process (tiny.en, the only model on disk). German is espeak-ng's
(no real German recording is available). The download goes to the stand-in hub (tests/hub_standin.py) through
the hub client's endpoint setting (HF_ENDPOINT); it serves the bundled tiny.en's real files under the
repository of the model offered: the weights are not what is tested, the way from the question to a
re-queued job is.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import soundfile

from app.core.engine import models
from app.core.engine.language_check import SUGGESTED_DOWNLOAD
from app.core.queue.jobs import JobState
from tests.gui.test_window import LONG_WAIT
from tests.hub_standin import HubState, serve_hub
from tests.synth import SAMPLE_RATE, other_language_speech


@pytest.fixture
def german(tmp_path: Path) -> Path:
    path = tmp_path / "besprechung.wav"
    soundfile.write(path, other_language_speech("de", "de+m3"), SAMPLE_RATE)
    return path


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubState]:
    from huggingface_hub import constants

    folder = models.bundled_model_path()
    files = {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}
    state = HubState(models.CATALOG[SUGGESTED_DOWNLOAD].repo_id, files, {}, public=True)
    with serve_hub(state) as endpoint:
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)  # what HF_ENDPOINT sets
        yield state


def failed_with_an_offer(open_window: Any, qtbot: Any, german: Path) -> tuple[Any, int]:
    window = open_window()
    window.apply_settings(window.settings.with_job(language="de"))
    (job,) = window.add_paths([german])
    qtbot.waitUntil(lambda: window.store.get(job.id).state is JobState.FAILED, timeout=LONG_WAIT)
    assert "English only" in (window.store.get(job.id).error or "")
    qtbot.waitUntil(lambda: window.language_offer is not None and window.language_offer.isVisible(), timeout=5000)
    return window, job.id


def test_it_is_english_queues_the_job_again_declared_english(open_window: Any, qtbot: Any, german: Path) -> None:
    window, job_id = failed_with_an_offer(open_window, qtbot, german)
    offer = window.language_offer
    assert "besprechung.wav" in offer.text() and "invented English" in offer.text()
    assert offer.use_button.text() == f"Download {SUGGESTED_DOWNLOAD} and transcribe"  # nothing multilingual here
    offer.english_button.click()
    qtbot.waitUntil(lambda: window.store.get(job_id).state is JobState.DONE, timeout=LONG_WAIT)
    job = window.store.get(job_id)
    assert job.options.language == "en" and window.settings.job.language == "de"  # this job only


def test_download_the_offered_model_then_the_job_runs_with_it(
    open_window: Any, qtbot: Any, german: Path, hub: HubState
) -> None:
    window, job_id = failed_with_an_offer(open_window, qtbot, german)
    window.language_offer.use_button.click()
    manager = window.models_dialog
    assert manager is not None and manager.isVisible()
    qtbot.waitUntil(lambda: window.store.get(job_id).state is not JobState.FAILED, timeout=60_000)
    assert window.store.get(job_id).options.model == SUGGESTED_DOWNLOAD
    assert models.resolve_model(SUGGESTED_DOWNLOAD).origin == "cache"
    assert any("/resolve/" in path for _, path, _ in hub.requests)
    manager.accept()
    qtbot.waitUntil(lambda: window.store.get(job_id).state is JobState.DONE, timeout=LONG_WAIT)
