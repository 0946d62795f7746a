"""No keyring backend (Linux outside a desktop session, or without GNOME Keyring/KWallet): said in Settings where
the token is typed, with what to install, and again if storing a token fails.

The backend is keyring's own "fail" backend, the one keyring itself chooses on such a machine (as on this
project's test machines, which have no Secret Service).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.core.config.settings import Settings
from app.core.secrets import HF_TOKEN_KEY, get_secret, keyring_problem
from app.gui.settings.dialog import SettingsDialog
from tests.gui.test_queue_safety import answer_next_question


@pytest.fixture
def no_keyring(_test_keyring: dict[tuple[str, str], str]) -> Iterator[None]:
    import keyring
    from keyring.backends import fail

    keyring.set_keyring(fail.Keyring())
    yield  # the autouse fixture puts the previous backend back


@pytest.mark.unit
def test_the_problem_and_the_advice_in_words(no_keyring: None) -> None:
    outside_a_desktop = keyring_problem("linux", {})
    assert outside_a_desktop is not None and "no desktop session bus" in outside_a_desktop
    in_a_desktop = keyring_problem("linux", {"DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus"})
    assert in_a_desktop is not None and "Secret Service" in in_a_desktop
    for text in (outside_a_desktop, in_a_desktop):
        assert "sudo apt install gnome-keyring" in text and "KWallet" in text and "SCRIBA_HF_TOKEN" in text


@pytest.mark.unit
def test_a_working_keyring_is_no_problem() -> None:
    assert keyring_problem("linux", {}) is None  # the test keyring of tests/gui/conftest.py stores secrets


def test_settings_says_it_next_to_the_token_field(qtbot: Any, no_keyring: None) -> None:
    dialog = SettingsDialog(Settings(), token_stored=False)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.show_page("Speakers")
    note = dialog.speaker_detection.keyring_note
    assert note.isVisible()
    assert "cannot be remembered" in note.text() and "gnome-keyring" in note.text()


def test_settings_says_nothing_when_the_keyring_works(qtbot: Any) -> None:
    dialog = SettingsDialog(Settings(), token_stored=False)
    qtbot.addWidget(dialog)
    dialog.show()
    assert not dialog.speaker_detection.keyring_note.isVisible()


def test_storing_a_token_without_a_keyring_says_what_to_install(open_window: Any, qtbot: Any, no_keyring: None) -> None:
    window = open_window(start_worker=False)
    seen = answer_next_question("OK")
    window.apply_settings(window.settings, token="hf_example")
    # The error box does not block (the queue runs behind it): it is answered once the event loop turns.
    qtbot.waitUntil(lambda: "text" in seen, timeout=5000)
    assert "could not be stored" in seen["text"] and "gnome-keyring" in seen["text"]
    assert get_secret(HF_TOKEN_KEY) is None
