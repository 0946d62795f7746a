"""Right-sizing for the device: which model, compute type and batch size Scriba picks, and why.

Every choice comes with a sentence that says why, because "it picked the wrong model" is only fixable by a
user who can see what Scriba saw (how much GPU memory, which card, which libraries).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core.engine.models import BUNDLED_MODEL, CATALOG, ResolvedModel, installed_models, resolve_model
from app.core.gpu.gpustats import GpuStatsSampler

log = logging.getLogger(__name__)

# On CPU, models above small run slower than real time on a laptop (medium is about 3x slower than small
# with int8 on 4 cores), so "auto" stops at small there; the user can still ask for any model by name.
CPU_MAX_MODEL_VRAM_GB = 2.0

# Batched decoding memory, per element of the batch, in MB. Anchored on faster-whisper's published large-v2
# figures (RTX 3070 Ti: 4525 MB sequential vs 6090 MB at batch 8 in fp16, 2926 vs 4500 MB in int8, so about
# 225 MB per element either way); the smaller models are our estimate, scaled by encoder width. The OOM
# backoff in the transcriber covers the error in these estimates.
_PER_ITEM_MB = {"tiny": 40.0, "base": 60.0, "small": 110.0, "medium": 170.0, "large": 225.0}
# Left free for the CUDA context, cuBLAS workspaces and the diarizer that runs after transcription.
RESERVE_MB = 1536.0
MAX_BATCH_SIZE = 16  # faster-whisper's own guidance: beyond 16 the gain is small and latency grows


@dataclass(frozen=True)
class GpuMemory:
    index: int
    name: str
    total_mb: float
    free_mb: float


def gpu_memory(nvml: Any | None = None) -> tuple[list[GpuMemory], str]:
    """Memory of every NVIDIA GPU now, and NVML's status line (or why NVML is unavailable)."""
    sampler = GpuStatsSampler(nvml)
    try:
        if not sampler.open():
            return [], sampler.reason
        snapshot = sampler.sample()
        gpus = [
            GpuMemory(gpu.index, gpu.name, float(gpu.memory_total_mb), float(gpu.memory_free_mb or 0.0))
            for gpu in snapshot.gpus
            if gpu.memory_total_mb is not None
        ]
        return gpus, sampler.reason
    finally:
        sampler.close()


def model_family(name: str) -> str:
    for family in ("tiny", "base", "small", "medium"):
        if name.startswith(family):
            return family
    return "large"  # large-v2, large-v3, turbo and distil-large-v3 share large-v3's encoder


@dataclass(frozen=True)
class ModelChoice:
    model: ResolvedModel
    reason: str


def choose_model(device: str, vram_total_mb: float | None, cache: Path | None = None) -> ModelChoice:
    """The most accurate model on disk that suits ``device``: fits the GPU's memory, or is small enough for a CPU."""
    installed = installed_models(cache)
    if device == "cuda" and vram_total_mb is not None:
        limit_gb = vram_total_mb / 1024
        where = f"on disk that fits the GPU's {limit_gb:.0f} GB"
    elif device == "cuda":
        limit_gb = float("inf")  # NVML unreadable: trust the user's download choice
        where = "on disk (GPU memory unknown)"
    else:
        limit_gb = CPU_MAX_MODEL_VRAM_GB
        where = (
            "on disk that suits a CPU (larger models run slower than real time without a GPU; name one to use it "
            "anyway)"
        )
    fitting = [model for model in installed if CATALOG[model.name].vram_gb <= limit_gb]
    model = fitting[0] if fitting else resolve_model(BUNDLED_MODEL, cache)
    reason = f"{model.name}: the most accurate model {where}"
    better = [
        entry.name
        for entry in sorted(CATALOG.values(), key=lambda entry: entry.rank, reverse=True)
        if entry.rank > CATALOG[model.name].rank and entry.vram_gb <= limit_gb and entry.multilingual
    ]
    if better and device == "cuda":
        reason += f"; {better[0]} would fit too: `scriba models download {better[0]}`"
    return ModelChoice(model, reason)


def fit_warning(model_name: str, gpu: GpuMemory | None) -> str | None:
    """A warning when ``model_name`` will probably not fit in ``gpu``'s memory, with what to pick instead."""
    entry = CATALOG.get(model_name)
    if entry is None or gpu is None:
        return None  # a converted model of unknown size, or no GPU to fit
    need_mb = entry.vram_gb * 1024
    if gpu.total_mb >= need_mb and gpu.free_mb >= need_mb:
        return None
    smaller = [
        other.name
        for other in sorted(CATALOG.values(), key=lambda other: other.rank, reverse=True)
        if other.vram_gb * 1024 <= gpu.free_mb and other.multilingual == entry.multilingual
    ]
    instead = f"pick {smaller[0]} ({CATALOG[smaller[0]].vram_gb:.0f} GB)" if smaller else "pick a smaller model"
    if gpu.total_mb < need_mb:
        what = f"this GPU ({gpu.name}) has {gpu.total_mb / 1024:.1f} GB"
    else:
        what = f"only {gpu.free_mb / 1024:.1f} GB of {gpu.name}'s {gpu.total_mb / 1024:.1f} GB is free now"
    return (
        f"{model_name} needs about {entry.vram_gb:.0f} GB of GPU memory and {what}: it may run out of memory. "
        f"To be safe, {instead}, or use --device cpu."
    )


def choose_batch_size(model_name: str, device: str, free_mb: float | None) -> tuple[int, str]:
    """Batch size for faster-whisper's batched pipeline, from the GPU memory left after the model loaded.

    0 means sequential decoding. On CPU that is the choice: batching there was 2.4x faster on our 10-minute
    benchmark but its WER went from 0.087 to 0.133, and a CPU user has picked accuracy by waiting anyway.
    """
    if device != "cuda":
        return 0, "sequential decoding on CPU (batching costs accuracy there)"
    if free_mb is None:
        return 8, "batch size 8: GPU memory unknown (NVML unavailable); halves on out-of-memory"
    per_item = _PER_ITEM_MB[model_family(model_name)]
    fits = int((free_mb - RESERVE_MB) // per_item)
    if fits < 1:
        return 1, f"batch size 1: only {free_mb:.0f} MB of GPU memory free"
    batch = 1
    while batch * 2 <= min(fits, MAX_BATCH_SIZE):
        batch *= 2  # powers of two, so the out-of-memory halving steps through the same sizes
    return batch, f"batch size {batch}: {free_mb / 1024:.1f} GB free, about {per_item:.0f} MB per element"


def is_out_of_memory(error: BaseException) -> bool:
    """Whether a CTranslate2/CUDA error means the GPU ran out of memory (worth a retry with less)."""
    text = str(error).lower()
    return "out of memory" in text or "alloc_failed" in text or "cudaerrormemoryallocation" in text


def is_cuda_error(error: BaseException) -> bool:
    """Whether a CTranslate2 error came from the CUDA runtime (``cudaError…``, "CUDA failed with error …")."""
    text = str(error)
    return "cudaError" in text or "CUDA failed with error" in text or "CUBLAS_STATUS_" in text
