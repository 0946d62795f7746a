"""Secrets live in the system keyring only, never in settings files or logs.

The Hugging Face token may also come from ``SCRIBA_HF_TOKEN`` or ``HF_TOKEN`` for headless use (servers,
CI, the remote worker); the CLI reads it here and hands it to the engine as a parameter.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Mapping

log = logging.getLogger(__name__)

KEYRING_SERVICE = "scriba"
HF_TOKEN_KEY = "huggingface-token"
HF_TOKEN_ENV = ("SCRIBA_HF_TOKEN", "HF_TOKEN")


def get_secret(key: str) -> str | None:
    try:
        import keyring
        from keyring.errors import KeyringError

        try:
            return keyring.get_password(KEYRING_SERVICE, key) or None
        except KeyringError as error:
            log.info("keyring unavailable (%s): secret %s not read", type(error).__name__, key)
            return None
    except Exception as error:  # a broken keyring backend must not stop transcription
        log.info("keyring failed (%s): secret %s not read", type(error).__name__, key)
        return None


def set_secret(key: str, value: str | None) -> None:
    """Store ``value`` (or delete the secret when None or empty). Raises keyring's error when no keyring."""
    import keyring
    from keyring.errors import PasswordDeleteError

    if value:
        keyring.set_password(KEYRING_SERVICE, key, value)
        return
    with contextlib.suppress(PasswordDeleteError):
        keyring.delete_password(KEYRING_SERVICE, key)


def huggingface_token() -> tuple[str | None, str]:
    """The token and where it came from ("SCRIBA_HF_TOKEN", "keyring" …), or (None, "")."""
    for name in HF_TOKEN_ENV:
        value = os.environ.get(name, "").strip()
        if value:
            return value, name
    stored = get_secret(HF_TOKEN_KEY)
    if stored:
        return stored, "keyring"
    return None, ""


# What stores secrets on Linux: any Secret Service provider on the desktop session's D-Bus.
LINUX_KEYRING_ADVICE = (
    "Install and start a keyring that offers the Secret Service: GNOME Keyring (Debian/Ubuntu: "
    "`sudo apt install gnome-keyring`; Fedora: `sudo dnf install gnome-keyring`), KDE's KWallet (5.97 or later "
    "also answers as a Secret Service; turn it on in System Settings), or KeePassXC with Secret Service "
    "integration turned on in its settings. Then log out and in again. Without a desktop (a server, SSH): set "
    "SCRIBA_HF_TOKEN in the environment instead."
)


def keyring_problem(platform: str = sys.platform, environ: Mapping[str, str] = os.environ) -> str | None:
    """None when the system keyring can store secrets; otherwise why not and what to install, in words.

    keyring falls back to its "fail" backend when no real one is usable (on Linux: no Secret Service on the
    session bus, or no session bus at all), and every write then raises; this says so before a token is typed.
    """
    try:
        import keyring
        from keyring.backends import fail, null

        backend = keyring.get_keyring()
    except Exception as error:  # a broken keyring installation
        return f"the keyring library could not start ({type(error).__name__}: {error}). " + _advice(platform)
    if not isinstance(backend, fail.Keyring | null.Keyring):
        return None
    if platform.startswith("linux"):
        if not environ.get("DBUS_SESSION_BUS_ADDRESS"):
            why = (
                "no system keyring is reachable: there is no desktop session bus (D-Bus), which the keyring "
                "lives on (started outside a desktop session, e.g. over SSH or in a container?). "
            )
        else:
            why = "no system keyring is running: nothing on the desktop session bus offers the Secret Service. "
        return why + LINUX_KEYRING_ADVICE
    return "no system keyring is available. " + _advice(platform)


def _advice(platform: str) -> str:
    if platform.startswith("linux"):
        return LINUX_KEYRING_ADVICE
    return "Set SCRIBA_HF_TOKEN in the environment instead, or reinstall Scriba."
