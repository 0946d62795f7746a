"""The transcription engine: faster-whisper behind explicit, frozen options.

The loaded model is kept by :class:`Transcriber` between jobs with the same model, device and compute type,
because loading large-v3 costs seconds and gigabytes every time.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from app.core.cancel import CancelToken
from app.core.errors import DeviceError
from app.core.models import ResolvedModel, resolve_model
from app.core.transcript import Segment, Word

if TYPE_CHECKING:
    from app.core.audio import Audio

log = logging.getLogger(__name__)

Device = Literal["auto", "cpu", "cuda"]
ProgressCallback = Callable[[float], None]

# Tried in order until the device accepts one. int8_float16 keeps int8 weights (half the memory of float16)
# with float16 activations, which is the fastest on recent NVIDIA cards; older cards refuse float16.
COMPUTE_TYPE_CHAIN: dict[str, tuple[str, ...]] = {
    "cuda": ("int8_float16", "float16", "int8", "float32"),
    "cpu": ("int8", "float32"),
}


@dataclass(frozen=True)
class TranscriptionOptions:
    model: str | None = None  # catalog name or a CTranslate2 directory; None = best model on disk
    device: Device = "auto"
    compute_type: str = "auto"
    language: str | None = None  # None = detect
    beam_size: int = 5
    vad_filter: bool = True
    word_timestamps: bool = True
    batch_size: int = 0  # 0 = sequential decoding; >0 = faster-whisper's batched pipeline
    cpu_threads: int = 0  # 0 = every core of this machine
    initial_prompt: str | None = None

    def resolved_cpu_threads(self) -> int:
        return self.cpu_threads or os.cpu_count() or 1


@dataclass(frozen=True)
class TranscriptionResult:
    segments: tuple[Segment, ...]
    language: str
    language_probability: float
    duration: float
    model: str
    device: str
    compute_type: str


def cuda_device_count() -> int:
    """CUDA devices visible to CTranslate2 (0 when it was built without CUDA or finds no driver)."""
    import ctranslate2

    try:
        return int(ctranslate2.get_cuda_device_count())
    except Exception:  # a broken driver raises instead of returning 0
        return 0


def resolve_device(device: Device) -> str:
    if device == "auto":
        return "cuda" if cuda_device_count() > 0 else "cpu"
    if device == "cuda" and cuda_device_count() == 0:
        raise DeviceError(
            "device 'cuda' was requested but CTranslate2 sees no CUDA GPU. Check the NVIDIA driver "
            "(`nvidia-smi`) or use --device cpu."
        )
    if device not in ("cpu", "cuda"):
        raise DeviceError(f"unknown device '{device}': use auto, cpu or cuda")
    return device


def compute_type_candidates(device: str, requested: str) -> list[str]:
    """The compute types to try, best first: the user's choice alone, or the device's chain."""
    import ctranslate2

    if requested != "auto":
        return [requested]
    try:
        supported = set(ctranslate2.get_supported_compute_types(device))
    except Exception:
        supported = set(COMPUTE_TYPE_CHAIN[device])
    return [kind for kind in COMPUTE_TYPE_CHAIN[device] if kind in supported] or ["float32"]


class Transcriber:
    """Loads a Whisper model once and transcribes decoded audio with it."""

    def __init__(self, options: TranscriptionOptions) -> None:
        self.options = options
        self.model_ref: ResolvedModel = resolve_model(options.model)
        self.device = resolve_device(options.device)
        self.compute_type = ""
        self._model: Any = None
        self._batched: Any = None

    def matches(self, options: TranscriptionOptions) -> bool:
        """Whether ``options`` can reuse the model already loaded here."""
        return (
            resolve_model(options.model).path == self.model_ref.path
            and resolve_device(options.device) == self.device
            and options.compute_type in ("auto", self.compute_type)
            and options.resolved_cpu_threads() == self.options.resolved_cpu_threads()
        )

    def load(self) -> None:
        if self._model is not None:
            return
        from faster_whisper import WhisperModel

        failures: list[str] = []
        for compute_type in compute_type_candidates(self.device, self.options.compute_type):
            try:
                self._model = WhisperModel(
                    str(self.model_ref.path),
                    device=self.device,
                    compute_type=compute_type,
                    cpu_threads=self.options.resolved_cpu_threads(),
                )
            except (ValueError, RuntimeError) as error:
                # CTranslate2 raises ValueError for a compute type the device lacks and RuntimeError for
                # missing CUDA libraries or memory; the next type in the chain may still work.
                failures.append(f"{compute_type}: {error}")
                log.warning("compute type %s refused on %s: %s", compute_type, self.device, error)
                continue
            self.compute_type = compute_type
            if failures:
                log.info("using compute type %s after: %s", compute_type, "; ".join(failures))
            return
        raise DeviceError(
            f"could not load {self.model_ref.name} on {self.device} with any compute type: " + "; ".join(failures)
        )

    def unload(self) -> None:
        """Drop the model so its memory (host or GPU) is given back."""
        self._model = None
        self._batched = None

    def transcribe(
        self,
        audio: Audio,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
    ) -> TranscriptionResult:
        self.load()
        options = self.options
        kwargs: dict[str, Any] = {
            "language": options.language,
            "beam_size": options.beam_size,
            "vad_filter": options.vad_filter,
            "word_timestamps": options.word_timestamps,
            "initial_prompt": options.initial_prompt,
        }
        if options.batch_size > 0:
            if self._batched is None:
                from faster_whisper import BatchedInferencePipeline

                self._batched = BatchedInferencePipeline(model=self._model)
            segments_iter, info = self._batched.transcribe(audio.samples, batch_size=options.batch_size, **kwargs)
        else:
            segments_iter, info = self._model.transcribe(audio.samples, **kwargs)

        segments = tuple(self._collect(segments_iter, audio.duration, progress, cancel))
        if progress is not None:
            progress(1.0)
        return TranscriptionResult(
            segments=segments,
            language=str(info.language),
            language_probability=float(info.language_probability),
            duration=audio.duration,
            model=self.model_ref.name,
            device=self.device,
            compute_type=self.compute_type,
        )

    @staticmethod
    def _collect(
        segments_iter: Iterator[Any],
        duration: float,
        progress: ProgressCallback | None,
        cancel: CancelToken | None,
    ) -> Iterator[Segment]:
        try:
            for raw in segments_iter:
                if cancel is not None:
                    cancel.raise_if_cancelled()
                words = tuple(
                    Word(start=float(w.start), end=float(w.end), word=str(w.word), probability=float(w.probability))
                    for w in (raw.words or ())
                )
                yield Segment(start=float(raw.start), end=float(raw.end), text=str(raw.text).strip(), words=words)
                if progress is not None and duration > 0:
                    progress(min(1.0, float(raw.end) / duration))
        finally:
            close = getattr(segments_iter, "close", None)
            if close is not None:
                close()  # stops faster-whisper's generator so no further window is decoded after a cancel
