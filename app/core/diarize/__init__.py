"""Speaker diarization: who spoke when. Two backends behind one interface, chosen automatically."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from app.core.diarize.base import DiarizationResult, Diarizer, SpeakerHints, Turn
from app.core.diarize.pyannote_backend import PYANNOTE_PIPELINE

__all__ = [
    "PYANNOTE_PIPELINE",
    "DiarizationResult",
    "Diarizer",
    "DiarizerChoice",
    "DiarizerOptions",
    "SpeakerHints",
    "Turn",
    "choose_backend",
]

Backend = Literal["auto", "pyannote", "embedded"]


@dataclass(frozen=True)
class DiarizerOptions:
    backend: Backend = "auto"
    hints: SpeakerHints = field(default_factory=SpeakerHints)
    pyannote_source: str = PYANNOTE_PIPELINE  # hub id or a local pipeline directory
    hf_token: str | None = field(default=None, repr=False)  # never printed with the options
    device: str = "cpu"


@dataclass(frozen=True)
class DiarizerChoice:
    backend: Literal["pyannote", "embedded"]
    reason: str


def choose_backend(options: DiarizerOptions) -> DiarizerChoice:
    """Which backend to try first, and why, in words for the user."""
    from pathlib import Path

    from app.core.diarize.pyannote_backend import pyannote_installed

    if options.backend == "embedded":
        return DiarizerChoice("embedded", "the built-in diarizer was requested")
    local = Path(options.pyannote_source).expanduser()
    if options.backend == "pyannote":
        return DiarizerChoice("pyannote", "pyannote was requested")
    if not pyannote_installed():
        return DiarizerChoice("embedded", "pyannote.audio is not installed: used the built-in diarizer")
    if local.exists():
        return DiarizerChoice("pyannote", f"local pyannote pipeline at {local}")
    if options.hf_token:
        return DiarizerChoice("pyannote", f"Hugging Face token found: used {options.pyannote_source}")
    return DiarizerChoice("embedded", "no Hugging Face token: used the built-in diarizer")
