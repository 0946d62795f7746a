"""Cloud API keys from the window (issue 14 part 3): the offload dialog's "API keys…" stores a key in the
keyring under the same name `scriba offload key set` uses, removes one, never shows one back, and says what to
do when there is no keyring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.cloud.providers import PROVIDER_CLASSES, api_key
from app.gui.offload.dialog import OffloadDialog
from app.gui.offload.provider_keys import ProviderKeysDialog


def test_a_key_typed_in_the_offload_dialog_is_what_a_rental_uses(
    open_window: Any, qtbot: Any, _test_keyring: dict[tuple[str, str], str], sample_dir: Path
) -> None:
    window = open_window(start_worker=False)
    (job,) = window.add_paths([sample_dir / "sample.wav"])
    offload = OffloadDialog(window.store, [job.id], parent=window)
    qtbot.addWidget(offload)
    keys = offload.open_keys()
    assert keys.isVisible() and {keys.status[name].text() for name in PROVIDER_CLASSES} == {"no key"}
    keys.fields["vast"].setText("  vast-secret-123 ")
    keys.accept()
    assert api_key(PROVIDER_CLASSES["vast"]) == "vast-secret-123"  # what provider_from_keyring reads
    assert ("scriba", PROVIDER_CLASSES["vast"].key_name) in _test_keyring

    again = ProviderKeysDialog(window)
    qtbot.addWidget(again)
    assert again.status["vast"].text() == "a key is set" and again.fields["vast"].text() == ""  # never shown
    again._remove("vast")
    assert again.status["vast"].text() == "will be removed"
    again.accept()
    assert api_key(PROVIDER_CLASSES["vast"]) is None


def test_without_a_keyring_the_dialog_stays_open_and_says_why(qtbot: Any, _test_keyring: Any) -> None:
    import keyring
    from keyring.backends import fail

    keyring.set_keyring(fail.Keyring())  # the autouse fixture puts the test keyring back
    dialog = ProviderKeysDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.fields["lambda"].setText("lambda-secret")
    dialog.accept()
    assert dialog.isVisible() and dialog.error.isVisible()
    assert "Not stored" in dialog.error.text() and "SCRIBA_LAMBDA_API_KEY" in dialog.error.text()
