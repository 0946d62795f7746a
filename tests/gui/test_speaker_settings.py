"""Settings > Speaker detection against the local stand-in hub: a refused token, then a good one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.core.config.settings import Settings
from app.core.engine.diarize.pyannote_models import PYANNOTE_REPO, TERMS_URL, find_pipeline
from app.gui.settings.dialog import SettingsDialog
from tests.hub_standin import HubState, serve_hub

# Only the layout matters here: the check and download never load the models.
FILES = {
    "config.yaml": b"pipeline:\n  name: pyannote.audio.pipelines.SpeakerDiarization\n",
    "segmentation/pytorch_model.bin": b"s" * 50_000,
    "embedding/pytorch_model.bin": b"e" * 300_000,
    "plda/plda.npz": b"p" * 1000,
    "plda/xvec_transform.npz": b"x" * 1000,
}


@pytest.fixture
def endpoint() -> Iterator[str]:
    with serve_hub(HubState(PYANNOTE_REPO, dict(FILES), {"hf_good": True, "hf_no_terms": False})) as url:
        yield url


def _check(qtbot: Any, endpoint: str, token: str) -> SettingsDialog:
    dialog = SettingsDialog(Settings(), token_stored=False, endpoint=endpoint)
    qtbot.addWidget(dialog)
    section = dialog.speaker_detection
    assert "built-in" in section.backend.text()
    assert TERMS_URL in section.findChildren(type(section.status))[0].text()  # the one-time step, with the link
    section.token.setText(token)
    qtbot.mouseClick(section.check_button, qtbot_left())
    qtbot.waitUntil(lambda: section.check_button.isEnabled(), timeout=20_000)
    section.wait()
    return dialog


def qtbot_left() -> Any:
    from PySide6.QtCore import Qt

    return Qt.MouseButton.LeftButton


def test_a_refused_token_is_said_in_words(qtbot: Any, endpoint: str) -> None:
    dialog = _check(qtbot, endpoint, "hf_revoked")  # kept: the section lives as long as its dialog
    section = dialog.speaker_detection
    assert section.status.property("kind") == "token"
    assert "token was refused" in section.status.text()
    assert "hf_revoked" not in section.status.text()
    assert not section.progress.isVisible() and find_pipeline() is None


def test_terms_not_accepted_links_to_the_page(qtbot: Any, endpoint: str) -> None:
    dialog = _check(qtbot, endpoint, "hf_no_terms")  # kept: the section lives as long as its dialog
    section = dialog.speaker_detection
    assert section.status.property("kind") == "terms"
    assert f'href="{TERMS_URL}"' in section.status.text()


def test_a_good_token_downloads_and_pyannote_will_run(qtbot: Any, endpoint: str) -> None:
    dialog = _check(qtbot, endpoint, "hf_good")
    section = dialog.speaker_detection
    assert section.status.property("kind") == "done", section.status.text()
    found = find_pipeline()
    assert found is not None and found.origin == "cache"
    assert "pyannote community-1" in section.backend.text()
    assert section.progress.maximum() == sum(map(len, FILES.values())) // 1024
    assert dialog.new_token() == "hf_good"  # stored in the keyring when the dialog is accepted


def test_about_names_the_models_and_their_licences() -> None:
    from app.gui.about import about_text

    text = about_text()
    assert "speaker-diarization-community-1" in text and "CC-BY-4.0" in text
    assert "tiny.en" in text and "MIT" in text


def test_the_transcript_says_which_diarizer_ran_and_why(qtbot: Any) -> None:
    from app.core.transcript.document import DiarizationInfo, Transcript
    from app.gui.transcript.view import TranscriptView

    view = TranscriptView()
    qtbot.addWidget(view)
    reason = "pyannote community-1 is not downloaded: used the built-in diarizer"
    transcript = Transcript(
        source="call.wav",
        duration=3.0,
        language="en",
        model="tiny.en",
        device="cpu",
        compute_type="int8",
        segments=(),
        diarization=DiarizationInfo("embedded", reason, ()),
    )
    view.show_transcript(1, transcript)
    assert "built-in diarizer" in view.title.text() and reason in view.title.text()
