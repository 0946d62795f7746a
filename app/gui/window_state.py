"""The window's geometry and layout as text for the settings file (Qt gives them as bytes)."""

from __future__ import annotations

import base64

from PySide6.QtCore import QByteArray


def encode_state(data: QByteArray) -> str:
    return base64.b64encode(bytes(data.data())).decode("ascii")


def decode_state(text: str | None) -> QByteArray | None:
    if not text:
        return None
    try:
        return QByteArray(base64.b64decode(text))
    except ValueError:
        return None
