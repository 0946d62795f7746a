"""Stage 1 of the built-in diarizer: where speech is, where the voice windows go, and how much one voice's
windows scatter in this recording (the noise the clustering takes off)."""

from __future__ import annotations

import numpy as np

from app.core.cancel import CancelToken
from app.core.engine.diarize.frames import FRAME_S, _runs
from app.core.engine.diarize.options import EmbeddedDiarizerOptions


def speech_regions(count: np.ndarray, options: EmbeddedDiarizerOptions) -> list[tuple[int, int]]:
    """Frame ranges where somebody speaks; gaps shorter than ``region_gap_s`` are closed."""
    active = np.asarray(count) >= options.speech_count
    runs = [(start, end) for start, end, label in _runs(active.astype(np.int64)) if label == 1]
    merged: list[list[int]] = []
    gap = round(options.region_gap_s / FRAME_S)
    for start, end in runs:
        if merged and start - merged[-1][1] < gap:
            merged[-1][1] = end
        else:
            merged.append([start, end])
    shortest = round(options.min_region_s / FRAME_S)
    return [(start, end) for start, end in merged if end - start >= shortest]


def reported_speech(count: np.ndarray, regions: list[tuple[int, int]]) -> np.ndarray:
    """The frames turns may cover: inside a speech region, and heard as speech by more than half of the chunks
    that cover the frame (the count rounded as pyannote rounds it; see ``speech_count``)."""
    speech = np.zeros(len(count), dtype=bool)
    for first, last in regions:
        speech[first:last] = True
    return speech & (np.rint(count) >= 1)


def _window_starts(
    regions: list[tuple[int, int]], n_frames: int, window: int, step: int
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Window start frames covering every region, and the speech span each window votes for.

    A region shorter than a window gets one window centred on it (its context is mostly the same voice,
    or silence, which the encoder tolerates); its vote is limited to the region itself.
    """
    window = min(window, n_frames)
    starts: list[int] = []
    spans: list[tuple[int, int]] = []
    for first, region_end in regions:
        last = min(n_frames, region_end)
        if last - first <= window:
            centre = (first + last) // 2
            begin = int(np.clip(centre - window // 2, 0, n_frames - window))
            starts.append(begin)
            spans.append((first, last))
            continue
        positions = list(range(first, last - window + 1, step))
        if positions[-1] != last - window:
            positions.append(last - window)
        for begin in positions:
            starts.append(begin)
            spans.append((begin, begin + window))
    return np.asarray(starts, dtype=np.int64), spans


def same_voice_spread(embeddings: np.ndarray, starts: np.ndarray, window: int) -> float:
    """Half the median squared distance between windows exactly one window apart (inside one stretch of speech).

    Such neighbours are nearly always the same person, so this measures how much one voice's embeddings
    scatter in this recording; the median ignores the few pairs that straddle a change of speaker."""
    position = {int(start): index for index, start in enumerate(starts)}
    pairs = [
        float(np.sum((embeddings[index] - embeddings[position[int(start) + window]]) ** 2)) / 2
        for index, start in enumerate(starts)
        if int(start) + window in position
    ]
    # Without such pairs (only short, scattered speech) assume the spread typical of real recordings (0.2-0.35).
    return float(np.median(pairs)) if pairs else 0.3


def local_voice_spread(
    embeddings: np.ndarray, starts: np.ndarray, window: int, neighbours: int, fallback: float
) -> np.ndarray:
    """For each window, :func:`same_voice_spread` measured on the ``neighbours`` pairs nearest to it in time.

    A long recording is rarely one room and one microphone throughout (a phone call joins, the room changes);
    one median for all of it over-corrects the clean parts and under-corrects the noisy ones."""
    position = {int(start): index for index, start in enumerate(starts)}
    pair_at = []
    spread = []
    for index, start in enumerate(starts):
        other = position.get(int(start) + window)
        if other is not None:
            pair_at.append(int(start))
            spread.append(float(np.sum((embeddings[index] - embeddings[other]) ** 2)) / 2)
    if not spread:
        return np.full(len(starts), fallback)
    order = np.argsort(pair_at, kind="stable")
    times = np.asarray(pair_at)[order]
    values = np.asarray(spread)[order]
    half = max(1, neighbours // 2)
    result = np.empty(len(starts))
    for index, start in enumerate(starts):
        centre = int(np.searchsorted(times, start))
        first = max(0, min(centre - half, len(values) - 2 * half))
        result[index] = float(np.median(values[first : first + 2 * half]))
    return result


def repeat_groups(
    embeddings: np.ndarray,
    starts: np.ndarray,
    window: int,
    noise: float | np.ndarray,
    repeat_distance: float,
    cancel: CancelToken | None = None,
    cells: int = 2_000_000,
) -> np.ndarray:
    """For each window, the id of its stretch of audio: windows that are the same audio heard again share one.

    The merge rule takes off the noise a cluster's mean carries, noise / n, assuming its n windows are
    independent samples of the voice. Audio heard twice (a podcast's intro, an ad, a clip played back, a
    benchmark's rounds) gives near-identical windows that are not: counted as n, they make the noise look
    averaged away, and the stretches of one voice that were repeated stop merging with each other (on the
    repeated hour of the long-file material: 139 clusters for 15 speakers without the cap). A cluster counts
    its distinct ids instead. The distance table is computed a few rows at a time, about ``cells`` entries, so
    memory stays the same whatever the length; time is quadratic but small beside the embeddings (4,800 windows, an
    hour of speech: 1.5 s; 14,400, three hours: 6.8 s, on the loaded 2-core machine)."""
    n = len(embeddings)
    groups = np.arange(n)
    if n < 2 or repeat_distance <= 0:
        return groups
    vectors = embeddings.astype(np.float32)
    squared_norms = np.sum(vectors**2, axis=1)
    limits = repeat_distance * np.broadcast_to(np.asarray(noise, dtype=np.float64), (n,))
    heard_before = np.full(n, -1)
    rows = max(1, cells // n)
    for first in range(0, n, rows):
        if cancel:
            cancel.raise_if_cancelled()
        last = min(n, first + rows)
        squared = squared_norms[first:last, None] + squared_norms[None, :] - 2 * (vectors[first:last] @ vectors.T)
        # Candidates: earlier windows (in time order) that do not share audio in time with this one; their
        # likeness to it would only be what overlapping means.
        earlier = np.arange(n)[None, :] < np.arange(first, last)[:, None]
        apart = np.abs(starts[first:last, None] - starts[None, :]) >= window
        squared[~(earlier & apart & (squared < limits[first:last, None]))] = np.inf
        nearest = squared.argmin(axis=1)
        found = np.isfinite(squared[np.arange(last - first), nearest])
        heard_before[first:last][found] = nearest[found]
    # Each window joins the stretch of the earlier window it is nearest to, and only that one: joining every
    # window it resembles would chain neighbours (which share half their audio) into one stretch when a
    # passage is heard twice, and a whole passage would count as a single sample.
    for index in np.flatnonzero(heard_before >= 0):
        groups[index] = groups[heard_before[index]]
    return groups
