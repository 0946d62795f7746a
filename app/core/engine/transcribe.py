"""The transcription engine: faster-whisper behind explicit, frozen options.

The loaded model is kept by :class:`Transcriber` between jobs with the same model, device and compute type,
because loading large-v3 costs seconds and gigabytes every time.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from app.core.cancel import CancelToken
from app.core.engine.audio import Audio
from app.core.engine.gpu_plan import (
    GpuMemory,
    choose_batch_size,
    choose_model,
    fit_warning,
    gpu_memory,
    is_cuda_error,
    is_out_of_memory,
)
from app.core.engine.level import speech_gain
from app.core.engine.memory import release_freed_memory
from app.core.engine.models import ResolvedModel, resolve_model
from app.core.errors import DeviceError, UsageError
from app.core.gpu.faults import FaultMatch, classify, record_fault
from app.core.progress import FractionProgress
from app.core.transcript.document import Segment, Word

log = logging.getLogger(__name__)

Device = Literal["auto", "cpu", "cuda"]
RunDevice = Literal["cpu", "cuda"]  # what "auto" becomes once the machine has been looked at
Task = Literal["transcribe", "translate"]
AUTO_BATCH = -1

# Tried in order until the device accepts one. int8_float16 keeps int8 weights (half the memory of float16)
# with float16 activations, which is the fastest on recent NVIDIA cards; older cards refuse float16.
COMPUTE_TYPE_CHAIN: dict[str, tuple[str, ...]] = {
    "cuda": ("int8_float16", "float16", "int8", "float32"),
    "cpu": ("int8", "float32"),
}


# Long recordings are decoded in pieces of about this length, each cut at the quietest half second near its
# end. faster-whisper computes the spectrogram of all it is given at once (and the batched pipeline keeps every
# window's features): a two-hour file peaked at 8.1 GB. In pieces, memory stays that of ten minutes whatever
# the length. Ten minutes is long enough that a cut is rare (a file under 10.5 minutes is never cut) and that
# Whisper's 30 s windows are unaffected inside a piece. A piece starts without the previous piece's words as
# its prompt: given them, tiny.en dropped two of three sentences of a piece (tests/core/engine/test_long_audio.py);
# the user's own prompt (names, vocabulary) is given to every piece.
PIECE_S = 600.0
CUT_SEARCH_S = 30.0


def piece_bounds(
    samples: np.ndarray, sample_rate: int, piece_s: float = PIECE_S, search_s: float = CUT_SEARCH_S
) -> list[tuple[int, int]]:
    """(first, end) sample ranges covering ``samples``: pieces of about ``piece_s``, each ended in the quietest
    half second within ``search_s`` of its nominal end, so a cut falls between words rather than inside one."""
    total = len(samples)
    piece = int(piece_s * sample_rate)
    search = int(search_s * sample_rate)
    bounds: list[tuple[int, int]] = []
    first = 0
    while total - first > piece + search:
        low = first + piece - search
        cut = low + _quietest(samples[low : first + piece + search], sample_rate)
        bounds.append((first, cut))
        first = cut
    bounds.append((first, total))
    return bounds


def _quietest(samples: np.ndarray, sample_rate: int) -> int:
    """The centre of the quietest half second of ``samples`` (in 0.1 s frames)."""
    frame = max(1, sample_rate // 10)
    usable = len(samples) // frame * frame
    energy = np.mean(np.square(samples[:usable].reshape(-1, frame), dtype=np.float64), axis=1)
    if len(energy) < 5:
        return len(samples) // 2
    smoothed = np.convolve(energy, np.ones(5) / 5, mode="valid")
    return (int(np.argmin(smoothed)) + 2) * frame + frame // 2


@dataclass(frozen=True)
class TranscriptionOptions:
    model: str | None = None  # catalog name or a CTranslate2 directory; None = best model on disk
    device: Device = "auto"
    compute_type: str = "auto"
    language: str | None = None  # None = detect
    beam_size: int = 5
    vad_filter: bool = True
    word_timestamps: bool = True
    # AUTO_BATCH: batched on a GPU, sized from its free memory; sequential on CPU. 0 = sequential decoding;
    # >0 = faster-whisper's batched pipeline with that batch size (halved on out-of-memory).
    batch_size: int = -1
    cpu_threads: int = 0  # 0 = every core of this machine
    initial_prompt: str | None = None  # words and spellings to expect (names, jargon), as text before the audio
    hotwords: str | None = None  # words to favour, given to the decoder in every window
    task: Task = "transcribe"  # or "translate": into English (multilingual models only)
    piece_s: float = PIECE_S  # longer files are decoded in pieces of about this length (bounded memory)

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
    batch_size: int = 0  # the batch size that finished the job (after any out-of-memory halving)
    # Why the job ran on the CPU although the GPU was chosen (a known GPU fault, app/core/gpu/faults.py); None: no
    # fault.
    gpu_fault: str | None = None
    notes: tuple[str, ...] = ()  # for the job's notes (a prompt cut to what the model can take)


def cuda_device_count() -> int:
    """CUDA devices visible to CTranslate2 (0 when it was built without CUDA or finds no driver)."""
    import ctranslate2

    try:
        return int(ctranslate2.get_cuda_device_count())
    except Exception:  # a broken driver raises instead of returning 0
        return 0


def select_device(device: Device) -> tuple[RunDevice, str]:
    """The device to run on and why; a requested GPU that cannot start raises :class:`DeviceError`."""
    if device not in ("auto", "cpu", "cuda"):
        raise DeviceError(f"unknown device '{device}': use auto, cpu or cuda")
    if device == "cpu":
        return "cpu", "cpu: requested"
    count = cuda_device_count()
    if count == 0:
        if device == "cuda":
            raise DeviceError(
                "device 'cuda' was requested but CTranslate2 sees no CUDA GPU. Check the NVIDIA driver "
                "(`nvidia-smi`, `scriba doctor`) or use --device cpu."
            )
        return "cpu", "cpu: CTranslate2 sees no CUDA GPU (`scriba doctor` says why)"
    from app.core.gpu.cuda_libs import install_hint, missing_required, preload_cuda_libraries

    libraries = preload_cuda_libraries()
    missing = missing_required(libraries)
    if missing:
        problem = (
            f"the GPU is there but {', '.join(status.soname for status in missing)} (CUDA 12, needed by "
            f"CTranslate2) could not be loaded: {install_hint(libraries)}"
        )
        if device == "cuda":
            raise DeviceError(problem)
        log.warning("%s; running on CPU", problem)
        return "cpu", f"cpu: {problem}"
    return "cuda", f"cuda: CTranslate2 sees {count} CUDA GPU(s) and cuBLAS 12 is loaded"


def resolve_device(device: Device) -> RunDevice:
    return select_device(device)[0]


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


# Whisper reads at most this many tokens of text before the audio (half its 448-token context, less one); the
# prompt and the hotwords share them. faster-whisper cuts each to this alone, so both long left the decoder no room
# for a single word (an empty transcript marked done).
PROMPT_TOKENS = 223


def bound_prompt(
    tokenizer: Any, prompt: str | None, hotwords: str | None
) -> tuple[str | None, str | None, tuple[str, ...]]:
    """``prompt`` and ``hotwords`` cut to PROMPT_TOKENS together, and a note for each that was cut. The prompt keeps
    its last part (Whisper reads it as the text just before the audio), the hotwords their first (a list, most
    important first); when both are long each keeps half."""

    def tokens(text: str | None) -> list[int]:
        return list(tokenizer.encode(" " + text.strip(), add_special_tokens=False).ids) if text and text.strip() else []

    prompt_ids, hotword_ids = tokens(prompt), tokens(hotwords)
    if len(prompt_ids) + len(hotword_ids) <= PROMPT_TOKENS:
        return prompt, hotwords, ()
    hotword_share = min(len(hotword_ids), max(PROMPT_TOKENS // 2, PROMPT_TOKENS - len(prompt_ids)))
    prompt_share = PROMPT_TOKENS - hotword_share
    notes: list[str] = []
    if len(hotword_ids) > hotword_share:
        hotwords = tokenizer.decode(hotword_ids[:hotword_share]).strip()
        notes.append(
            f"the hotwords were cut to their first {hotword_share} of {len(hotword_ids)} tokens ({len(hotwords)} "
            f"characters): Whisper reads at most {PROMPT_TOKENS} tokens of prompt and hotwords together"
        )
    if len(prompt_ids) > prompt_share:
        prompt = tokenizer.decode(prompt_ids[-prompt_share:]).strip() if prompt_share else None
        notes.append(
            f"the prompt was cut to its last {prompt_share} of {len(prompt_ids)} tokens ({len(prompt or '')} "
            f"characters): Whisper reads at most {PROMPT_TOKENS} tokens of prompt and hotwords together"
        )
    return prompt, hotwords, tuple(notes)


class Transcriber:
    """Loads a Whisper model once and transcribes decoded audio with it."""

    def __init__(
        self,
        options: TranscriptionOptions,
        *,
        model_factory: Callable[..., Any] | None = None,
        batched_factory: Callable[..., Any] | None = None,
        memory_probe: Callable[[], tuple[list[GpuMemory], str]] = gpu_memory,
    ) -> None:
        """``model_factory``/``batched_factory`` default to faster-whisper's classes; ``memory_probe`` reads GPU
        memory. They are parameters so that the fallback chain and the out-of-memory backoff can be driven by
        injected failures on a machine without a GPU."""
        self.options = options
        self.device, self.device_reason = select_device(options.device)
        self._memory_probe = memory_probe
        self.model_ref, self.model_reason = self._resolve_model(options.model)
        self.compute_type = ""
        self.batch_size = 0  # the last job's batch size after any halving
        self.fallbacks: list[str] = []  # what was refused on the way (compute types, batch sizes), for the log
        self.align_seconds = 0.0  # the last job's word-alignment pass (part of its transcription time)
        self.gpu_fault: str | None = None  # set when a known GPU fault moved this transcriber to the CPU
        self._compute_request = options.compute_type  # "auto" after a fall back to the CPU
        self.gain = 1.0  # what the last job's samples were multiplied by before decoding (app/core/engine/level.py)
        self._model_factory = model_factory
        self._batched_factory = batched_factory
        self._model: Any = None
        self._batched: Any = None

    def _gpu(self) -> GpuMemory | None:
        """The GPU CTranslate2 uses (its device 0), as NVML sees it; None without NVML."""
        if self.device != "cuda":
            return None
        gpus, _ = self._memory_probe()
        return gpus[0] if gpus else None

    def _resolve_model(self, name: str | None) -> tuple[ResolvedModel, str]:
        gpu = self._gpu()
        if name in (None, "auto"):
            choice = choose_model(self.device, gpu.total_mb if gpu else None)
            return choice.model, choice.reason
        model = resolve_model(name)
        warning = fit_warning(model.name, gpu)
        if warning:
            # Said before the load, which is where a model too big for the card fails (or crawls).
            log.warning("%s", warning)
        return model, f"{model.name}: requested"

    def matches(self, options: TranscriptionOptions) -> bool:
        """Whether ``options`` can reuse the model already loaded here."""
        return (
            resolve_device(options.device) == self.device
            and self._resolve_model(options.model)[0].path == self.model_ref.path
            and options.compute_type in ("auto", self.compute_type)
            and options.resolved_cpu_threads() == self.options.resolved_cpu_threads()
        )

    @property
    def multilingual(self) -> bool:
        """Whether the loaded model knows other languages than English (read from the model, so a model folder
        outside the catalog is judged right too)."""
        self.load()
        return bool(getattr(getattr(self._model, "model", None), "is_multilingual", True))

    def load(self) -> None:
        if self._model is not None:
            return
        factory = self._model_factory
        if factory is None:
            from faster_whisper import WhisperModel

            factory = WhisperModel

        failures: list[str] = []
        for compute_type in compute_type_candidates(self.device, self._compute_request):
            try:
                self._model = factory(
                    str(self.model_ref.path),
                    device=self.device,
                    compute_type=compute_type,
                    cpu_threads=self.options.resolved_cpu_threads(),
                )
            except (ValueError, RuntimeError) as error:
                fault = classify(error, loading=True) if self.device == "cuda" else None
                if fault is not None:
                    # No other compute type helps a GPU that cannot run at all: the CPU does the job.
                    self._fall_back_to_cpu(fault)
                    self.load()
                    return
                # CTranslate2 raises ValueError for a compute type the device lacks (float16 on a Pascal card)
                # and RuntimeError for missing CUDA libraries or memory; the next type in the chain may work.
                failures.append(f"{compute_type}: {error}")
                log.warning("compute type %s refused on %s: %s", compute_type, self.device, error)
                continue
            self.compute_type = compute_type
            if failures:
                self.fallbacks.extend(f"compute type {failure}" for failure in failures)
                log.warning("using compute type %s after: %s", compute_type, "; ".join(failures))
            return
        raise DeviceError(
            f"could not load {self.model_ref.name} on {self.device} with any compute type: " + "; ".join(failures)
        )

    @property
    def whisper_model(self) -> Any:
        """The loaded faster-whisper model (after :meth:`load`), for callers with their own decoding settings."""
        self.load()
        return self._model

    def unload(self) -> None:
        """Drop the model so its memory (host or GPU) is given back."""
        self._model = None
        self._batched = None

    def _fall_back_to_cpu(self, fault: FaultMatch) -> None:
        """After a known GPU fault: the CPU, with its own compute type and (when the model was chosen
        automatically) the model a CPU run would choose, so the job gives what a CPU run gives."""
        note = fault.note("transcribed")
        log.warning("%s (%s; see %s)", note, fault.text, fault.fault.peer_issue)
        record_fault(fault, "transcription", note)
        self.unload()
        self.device = "cpu"
        self.device_reason = f"cpu: {note}"
        self.gpu_fault = note
        self.fallbacks.append(note)
        self._compute_request = "auto"
        if self.options.model in (None, "auto"):
            self.model_ref, self.model_reason = self._resolve_model(self.options.model)

    def transcribe(
        self,
        audio: Audio,
        progress: FractionProgress | None = None,
        cancel: CancelToken | None = None,
    ) -> TranscriptionResult:
        self.load()
        progress = _never_back(progress)
        try:
            return self._transcribe(audio, progress, cancel)
        except Exception as error:
            # The whole file again, on the CPU; anything else is the job's error, as it was.
            if not self.fall_back_after(error):
                raise
            return self._transcribe(audio, progress, cancel)

    def fall_back_after(self, error: BaseException) -> bool:
        """Whether ``error``, raised while the loaded model computed, is a known GPU fault; if so the model is
        loaded on the CPU, and the caller does its work again. Some faults come only when the GPU first computes
        (a missing cuBLAS or cuDNN, a card without kernels), in the transcription or in the language check."""
        fault = classify(error, loading=False) if self.device == "cuda" else None
        if fault is None:
            return False
        self._fall_back_to_cpu(fault)
        self.load()
        return True

    def _transcribe(
        self,
        audio: Audio,
        progress: FractionProgress | None,
        cancel: CancelToken | None,
    ) -> TranscriptionResult:
        options = self.options
        if options.task == "translate" and not self.multilingual:
            raise UsageError(
                f"{self.model_ref.name} is an English-only model and cannot translate: choose a multilingual model "
                "(small, medium, large-v3 …) to translate into English"
            )
        prompt, hotwords, prompt_notes = bound_prompt(
            self._model.hf_tokenizer, options.initial_prompt, options.hotwords
        )
        kwargs: dict[str, Any] = {
            "language": options.language,
            "beam_size": options.beam_size,
            "vad_filter": options.vad_filter,
            "word_timestamps": options.word_timestamps,
            "initial_prompt": prompt,
            "hotwords": hotwords,
            "task": options.task,
        }
        batch_size = self._initial_batch_size()
        # A quiet recording is raised before Whisper and its VAD hear it (app/core/engine/level.py): Silero VAD
        # loses quiet speech whole. Measured once for the whole file, so every piece gets the same gain.
        gain = speech_gain(audio.samples, audio.sample_rate)
        if gain != 1.0:
            log.info("%s: quiet recording, raised by %.1f dB before transcribing", audio.source, 20 * np.log10(gain))
        self.gain = gain
        bounds = piece_bounds(audio.samples, audio.sample_rate, options.piece_s, min(CUT_SEARCH_S, options.piece_s / 4))
        segments: list[Segment] = []
        info: Any = None
        align_seconds = 0.0
        for first, end in bounds:
            offset = first / audio.sample_rate
            # A view, not a copy: the file's samples are held once, whatever its length (a raised piece is one
            # piece's copy).
            samples = audio.samples[first:end]
            if gain != 1.0:
                samples = samples.astype(np.float32, copy=False) * np.float32(gain)
            piece = Audio(samples=samples, sample_rate=audio.sample_rate, source=audio.source)
            piece_progress = _shifted_progress(progress, offset, piece.duration, audio.duration)
            piece_segments, piece_info, batch_size = self._decode_piece(
                piece, batch_size, kwargs, piece_progress, cancel
            )
            align_seconds += self.align_seconds
            segments.extend(_shifted(segment, offset) for segment in piece_segments)
            release_freed_memory()  # the piece's features and encoder outputs (app/core/engine/memory.py)
            if info is None:
                info = piece_info
                # Every later piece in the language found in the first: detection on a piece that happens to
                # hold only music or a name could otherwise switch languages half-way.
                kwargs["language"] = options.language or piece_info.language
        self.align_seconds = align_seconds
        self.batch_size = batch_size
        if progress is not None:
            progress(1.0)
        return TranscriptionResult(
            segments=tuple(segments),
            language=str(info.language),
            language_probability=float(info.language_probability),
            duration=audio.duration,
            model=self.model_ref.name,
            device=self.device,
            compute_type=self.compute_type,
            batch_size=batch_size,
            gpu_fault=self.gpu_fault,
            notes=prompt_notes,
        )

    def _decode_piece(
        self,
        audio: Audio,
        batch_size: int,
        kwargs: dict[str, Any],
        progress: FractionProgress | None,
        cancel: CancelToken | None,
    ) -> tuple[tuple[Segment, ...], Any, int]:
        """Decode one piece, halving the batch on out-of-memory; returns the batch size that finished it."""
        out_of_memory_seen = False
        while True:
            try:
                segments, info = self._decode(audio, batch_size, kwargs, progress, cancel)
                return segments, info, batch_size
            except RuntimeError as error:
                # Once a batch has run out of memory, CTranslate2 can report the next one's shortage as another
                # CUDA error (an H200 under held memory: "parallel_for failed: cudaErrorInvalidDevice").
                if not (is_out_of_memory(error) or (out_of_memory_seen and is_cuda_error(error))):
                    raise
                out_of_memory_seen = True
                if batch_size <= 1:
                    raise DeviceError(
                        f"{self.model_ref.name} ran out of GPU memory even "
                        f"{'at batch size 1' if batch_size == 1 else 'decoding sequentially'} ({error}). "
                        "Close other programs that use the GPU, pick a smaller model, or use --device cpu."
                    ) from error
                # Halve and start the piece again: a batch that does not fit now will not fit later in the
                # same file, and decoding is deterministic, so the redone part gives the same text.
                smaller = batch_size // 2
                shortage = "out of GPU memory" if is_out_of_memory(error) else f"out of GPU memory ({error})"
                self.fallbacks.append(f"batch size {batch_size}: {shortage}, retried with {smaller}")
                log.warning("out of GPU memory at batch size %d (%s); retrying with %d", batch_size, error, smaller)
                batch_size = smaller

    def _initial_batch_size(self) -> int:
        if self.options.batch_size != AUTO_BATCH:
            return max(0, self.options.batch_size)
        # Measured after the model loaded, so its weights are already out of the free memory.
        gpu = self._gpu()
        batch_size, reason = choose_batch_size(self.model_ref.name, self.device, gpu.free_mb if gpu else None)
        log.info("%s", reason)
        return batch_size

    def _decode(
        self,
        audio: Audio,
        batch_size: int,
        kwargs: dict[str, Any],
        progress: FractionProgress | None,
        cancel: CancelToken | None,
    ) -> tuple[tuple[Segment, ...], Any]:
        if batch_size > 0:
            if self._batched is None:
                factory = self._batched_factory
                if factory is None:
                    from faster_whisper import BatchedInferencePipeline

                    factory = BatchedInferencePipeline
                self._batched = factory(model=self._model)
            segments_iter, info = self._batched.transcribe(audio.samples, batch_size=batch_size, **kwargs)
        elif kwargs.get("word_timestamps"):
            # Not faster-whisper's own word timestamps: they move its seeking and drop phrases. The text is
            # decoded as without them, the timings come from a separate alignment pass (app.core.engine.word_timing).
            from app.core.engine.word_timing import AlignmentClock, transcribe_then_align

            clock = AlignmentClock()
            segments_iter, info = transcribe_then_align(self._model, audio.samples, clock, **kwargs)
            segments = tuple(self._collect(segments_iter, audio.duration, progress, cancel))
            self.align_seconds = clock.seconds
            return segments, info
        else:
            segments_iter, info = self._model.transcribe(audio.samples, **kwargs)
        self.align_seconds = 0.0
        return tuple(self._collect(segments_iter, audio.duration, progress, cancel)), info

    @staticmethod
    def _collect(
        segments_iter: Iterator[Any],
        duration: float,
        progress: FractionProgress | None,
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


def _shifted(segment: Segment, offset: float) -> Segment:
    """``segment`` of a piece starting ``offset`` seconds into the file, in the file's time."""
    if offset == 0:
        return segment
    return replace(
        segment,
        start=segment.start + offset,
        end=segment.end + offset,
        words=tuple(replace(word, start=word.start + offset, end=word.end + offset) for word in segment.words),
    )


def _never_back(progress: FractionProgress | None) -> FractionProgress | None:
    """``progress`` that never reports less than it already has (a file started again on the CPU)."""
    if progress is None:
        return None
    furthest = [0.0]

    def report(fraction: float) -> None:
        furthest[0] = max(furthest[0], fraction)
        progress(furthest[0])

    return report


def _shifted_progress(
    progress: FractionProgress | None, offset: float, piece_duration: float, total: float
) -> FractionProgress | None:
    if progress is None or total <= 0:
        return None
    return lambda fraction: progress(min(1.0, (offset + fraction * piece_duration) / total))
