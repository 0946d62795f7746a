"""Secrets live in the system keyring only, never in settings files or logs.

The Hugging Face token may also come from ``SCRIBA_HF_TOKEN`` or ``HF_TOKEN`` for headless use (servers,
CI, the remote worker); the CLI reads it here and hands it to the engine as a parameter.
"""

from __future__ import annotations

import contextlib
import logging
import os

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
