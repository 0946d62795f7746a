"""pyannote.audio's pretrained pipeline (community-1): the most accurate diarizer.

It is gated on the Hugging Face hub (a free token after accepting its licence), so it is downloaded once
(`scriba models download pyannote`, see pyannote_models) and loaded from then on from that local copy,
offline. pyannote is only ever handed an absolute directory: given anything else it would look the name up in
the current directory first, and then on the hub.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.cancel import CancelToken
from app.core.engine.diarize.base import SpeakerHints, Turn
from app.core.engine.diarize.speaker_stack import require_speaker_stack
from app.core.errors import DiarizationError
from app.core.progress import FractionProgress

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from app.core.engine.audio import Audio

PYANNOTE_PIPELINE = "pyannote/speaker-diarization-community-1"  # the hub id, for messages


def pyannote_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyannote.audio") is not None


class PyannoteDiarizer:
    name = "pyannote"

    def __init__(self, source: str | None = None, token: str | None = None, device: str = "cpu") -> None:
        self.source = source
        self._token = token
        self.device = device
        self.device_note = "on CPU"
        self._pipeline: Any = None

    def __repr__(self) -> str:  # never show the token
        return f"PyannoteDiarizer(source={self.source!r}, device={self.device!r})"

    def load(self) -> None:
        if self._pipeline is not None:
            return
        require_speaker_stack()  # also keeps pyannote.audio from reporting usage and quiets its torchcodec warning
        import torch
        from pyannote.audio import Pipeline

        local = self._local_pipeline()
        try:
            pipeline = Pipeline.from_pretrained(local)
        except Exception as error:
            raise DiarizationError(
                f"could not load the pyannote pipeline at {local}: {type(error).__name__}: {error}"
            ) from error
        if pipeline is None:  # pragma: no cover - pyannote returns None only for hub ids, never handed in here
            raise DiarizationError(f"pyannote could not load the pipeline at {local}")
        if self.device == "cuda" and not torch.cuda.is_available():
            # CTranslate2 (CUDA 12) can see a GPU that torch (CUDA 13) cannot use, with a driver older than
            # torch's CUDA needs: diarize on the CPU rather than fail the job, and say so.
            log.warning(
                "torch cannot use the GPU (torch %s, CUDA %s): pyannote runs on CPU",
                torch.__version__,
                torch.version.cuda,
            )
            self.device = "cpu"
            self.device_note = f"on CPU: torch {torch.__version__} cannot use this GPU (see `scriba doctor`)"
        if self.device == "cuda":
            self.device_note = "on GPU (TF32 and cuDNN benchmark on)"
            # TF32 matmuls and cuDNN autotuning make the segmentation and embedding models markedly faster on
            # Ampere and newer cards, at no cost in diarization accuracy.
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            torch.backends.cudnn.benchmark = True
        pipeline.to(torch.device(self.device))
        self._pipeline = pipeline

    def _local_pipeline(self) -> Path:
        """The absolute pipeline directory to load; downloads only when a token was handed in explicitly."""
        from app.core.engine.diarize.pyannote_models import download_pipeline, explicit_pipeline, find_pipeline
        from app.core.errors import ModelError

        try:
            if self.source:
                return explicit_pipeline(self.source).path
            found = find_pipeline()
            if found is not None:
                return found.path
            if self._token:
                # pyannote was requested (not chosen automatically) with a token, e.g. on a rented machine:
                # fetch it into the cache once, the same checked way as `scriba models download pyannote`.
                return download_pipeline(self._token)
        except ModelError as error:
            raise DiarizationError(f"pyannote: {error}") from None
        missing = DiarizationError(
            "pyannote community-1 is not downloaded: get it once in Settings > Speakers > Speaker detection"
        )
        missing.cli_hint = "(or with `scriba models download pyannote`)"
        raise missing

    def diarize(
        self,
        audio: Audio,
        hints: SpeakerHints,
        progress: FractionProgress | None = None,
        cancel: CancelToken | None = None,
    ) -> tuple[Turn, ...]:
        import torch

        self.load()
        samples = audio.samples
        sample_rate = audio.sample_rate
        kwargs: dict[str, int] = {}
        if hints.num_speakers is not None:
            kwargs["num_speakers"] = hints.num_speakers
        if hints.min_speakers is not None:
            kwargs["min_speakers"] = hints.min_speakers
        if hints.max_speakers is not None:
            kwargs["max_speakers"] = hints.max_speakers

        steps = ("segmentation", "speaker_counting", "embeddings", "discrete_diarization")

        def hook(
            step_name: str, step_artifact: Any, file: Any = None, total: int | None = None, completed: int | None = None
        ) -> None:
            if cancel is not None:
                cancel.raise_if_cancelled()  # raised inside pyannote's loop: the pipeline stops at once
            if progress is not None and step_name in steps:
                done = (completed / total) if total and completed is not None else 1.0
                progress((steps.index(step_name) + done) / len(steps))

        # The samples decoded once for transcription are handed over as a tensor: no second decode, and no
        # dependency on torchcodec/FFmpeg versions inside pyannote.
        waveform = torch.from_numpy(samples).unsqueeze(0)
        output = self._pipeline({"waveform": waveform, "sample_rate": sample_rate}, hook=hook, **kwargs)
        annotation = getattr(output, "exclusive_speaker_diarization", None) or getattr(
            output, "speaker_diarization", output
        )
        return tuple(
            Turn(start=float(segment.start), end=float(segment.end), speaker=str(label))
            for segment, _, label in annotation.itertracks(yield_label=True)
        )
