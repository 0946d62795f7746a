"""Speaker diarization: who spoke when. Two backends behind one interface, chosen automatically."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from app.core.engine.diarize.base import DiarizationResult, Diarizer, SpeakerHints, Turn
from app.core.engine.diarize.pyannote_backend import PYANNOTE_PIPELINE

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
    # None: Scriba's downloaded (or bundled) copy of community-1; else an absolute pipeline directory the user
    # gave. Never a hub id or a relative path: see pyannote_models for why.
    pyannote_source: str | None = None
    hf_token: str | None = field(default=None, repr=False)  # never printed with the options
    device: str = "cpu"


@dataclass(frozen=True)
class DiarizerChoice:
    backend: Literal["pyannote", "embedded"]
    reason: str  # in words, for the transcript, the window and the command line alike
    cli_hint: str = ""  # the command that gets the better backend, for the command line only


def choose_backend(options: DiarizerOptions) -> DiarizerChoice:
    """Which backend to try first, and why, in words for the user."""
    from app.core.engine.diarize.pyannote_backend import pyannote_installed
    from app.core.engine.diarize.pyannote_models import find_pipeline

    if options.backend == "embedded":
        return DiarizerChoice("embedded", "the built-in diarizer was requested")
    if options.backend == "pyannote":
        return DiarizerChoice("pyannote", "pyannote was requested")
    if not pyannote_installed():
        return DiarizerChoice(
            "embedded",
            "the better speaker detection (pyannote community-1) cannot run in this installation: used the built-in "
            "diarizer",
            "(pyannote.audio is not installed)",
        )
    if options.pyannote_source:
        return DiarizerChoice("pyannote", f"pyannote pipeline at {options.pyannote_source}")
    local = find_pipeline()
    if local is not None:
        where = "downloaded" if local.origin == "cache" else "bundled"
        return DiarizerChoice("pyannote", f"pyannote community-1 is {where}: used it, offline")
    return DiarizerChoice(
        "embedded",
        "pyannote community-1 is not downloaded: used the built-in diarizer",
        "(get pyannote once with `scriba models download pyannote` or in the window's Settings)",
    )
