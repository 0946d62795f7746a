"""Warnings from libraries that mean nothing to a Scriba user, silenced one by one (by message and module)
before the library is imported, so that anything else they warn about still shows."""

from __future__ import annotations

import warnings


def silence_pyannote_torchcodec_warning() -> None:
    """pyannote.audio warns at import that torchcodec cannot decode files; Scriba decodes audio itself (PyAV) and
    hands pyannote only in-memory waveforms, so the warning, printed on every transcription, is noise."""
    warnings.filterwarnings(
        "ignore",
        message=r"\s*torchcodec is not installed correctly",
        category=UserWarning,
        module=r"pyannote\.audio\.core\.io",
    )
