"""The built-in diarizer's frame grid (10 ms, the segmentation's hop) and the helpers every stage uses."""

from __future__ import annotations

import numpy as np

from app.core.engine.diarize.bundled_models import HOP_SAMPLES, SAMPLE_RATE

FRAME_S = HOP_SAMPLES / SAMPLE_RATE


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def _runs(labels: np.ndarray) -> list[tuple[int, int, int]]:
    if len(labels) == 0:
        return []
    boundaries = np.flatnonzero(np.diff(labels)) + 1
    starts = np.concatenate([[0], boundaries])
    ends = np.concatenate([boundaries, [len(labels)]])
    return [(int(s), int(e), int(labels[s])) for s, e in zip(starts, ends, strict=True)]
