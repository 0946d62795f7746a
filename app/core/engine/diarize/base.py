"""The diarization interface shared by the pyannote and the built-in backends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from app.core.progress import FractionProgress

if TYPE_CHECKING:
    from app.core.cancel import CancelToken
    from app.core.engine.audio import Audio


@dataclass(frozen=True)
class SpeakerHints:
    """What the user knows about the number of speakers; all None = decide automatically."""

    num_speakers: int | None = None
    min_speakers: int | None = None
    max_speakers: int | None = None

    def __post_init__(self) -> None:
        for name in ("num_speakers", "min_speakers", "max_speakers"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name.replace('_', ' ')} must be at least 1, not {value}")
        if self.min_speakers and self.max_speakers and self.min_speakers > self.max_speakers:
            raise ValueError(f"min speakers ({self.min_speakers}) is more than max speakers ({self.max_speakers})")


@dataclass(frozen=True)
class Turn:
    start: float
    end: float
    speaker: str  # backend-local label; the merge step renames speakers in order of appearance


@dataclass(frozen=True)
class DiarizationResult:
    turns: tuple[Turn, ...]
    backend: str
    reason: str  # why this backend ran, for the user ("no Hugging Face token: used the built-in diarizer")
    device: str = "cpu"
    gpu_fault: str | None = None  # why it ran on the CPU although the GPU was chosen (app/core/gpu/faults.py)


class Diarizer(Protocol):
    name: str

    def diarize(
        self,
        audio: Audio,
        hints: SpeakerHints,
        progress: FractionProgress | None = None,
        cancel: CancelToken | None = None,
    ) -> tuple[Turn, ...]: ...
