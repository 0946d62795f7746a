"""The built-in diarizer: Silero VAD, GE2E speaker embeddings on sliding windows, and clustering that
chooses the number of speakers itself. Works offline from the pip install alone.

How it decides:
1. Speech regions come from Silero VAD (shipped with faster-whisper) with short pauses kept, because
   turns in conversation are separated by a few hundred milliseconds, not seconds.
2. Every speech region is covered by overlapping windows (``window_s`` long, every ``step_s``); each window
   becomes a unit vector from the speaker encoder.
3. Windows are clustered by spectral clustering on their cosine affinity; the number of speakers is the
   largest eigengap of the normalised Laplacian (within the user's hints), which needs no hand-tuned
   distance threshold. A single speaker is detected separately (for one voice no gap is meaningful): the
   recording split in two halves by voice, and the halves' centroids compared.
4. Each 10 ms speech frame takes the speaker whose centroid is closest to the windows covering it, and
   turns shorter than ``min_turn_s`` are absorbed by their neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from app.core.cancel import CancelToken
from app.core.diarize.base import ProgressCallback, SpeakerHints, Turn
from app.core.diarize.encoder import HOP_SAMPLES, SAMPLE_RATE, SpeakerEncoder, mel_frames

if TYPE_CHECKING:
    from app.core.audio import Audio

FRAME_S = HOP_SAMPLES / SAMPLE_RATE


@dataclass(frozen=True)
class EmbeddedDiarizerOptions:
    window_s: float = 1.2  # shorter than the 1.6 s of training: turns in conversation are often shorter
    step_s: float = 0.2
    vad_threshold: float = 0.5
    min_silence_ms: int = 150
    speech_pad_ms: int = 30
    max_speakers: int = 10
    single_speaker_similarity: float = 0.90  # halves of the recording this alike are one voice
    min_turn_s: float = 0.3
    reseg_window_s: float = 0.8  # shorter windows locate turn boundaries once the speakers are known
    reseg_step_s: float = 0.1
    reseg_weight: float = 1.0  # weight of short-window votes against long-window votes
    pruning_keep: float = 0.2  # fraction of strongest affinities kept per row before spectral clustering


class EmbeddedDiarizer:
    name = "embedded"

    def __init__(self, options: EmbeddedDiarizerOptions | None = None, threads: int | None = None) -> None:
        self.options = options or EmbeddedDiarizerOptions()
        self._threads = threads
        self._encoder: SpeakerEncoder | None = None

    def diarize(
        self,
        audio: Audio,
        hints: SpeakerHints,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
    ) -> tuple[Turn, ...]:
        samples: np.ndarray = audio.samples
        options = self.options
        regions = speech_regions(samples, options)
        if progress:
            progress(0.2)
        if not regions:
            return ()
        if cancel:
            cancel.raise_if_cancelled()

        mels = mel_frames(samples)
        n_frames = len(mels)
        window = round(options.window_s / FRAME_S)
        step = max(1, round(options.step_s / FRAME_S))
        starts, spans = _window_starts(regions, n_frames, window, step)
        if self._encoder is None:
            self._encoder = SpeakerEncoder(threads=self._threads)
        embeddings = self._encoder.embed(mels, starts, min(window, n_frames))
        if progress:
            progress(0.7)
        if cancel:
            cancel.raise_if_cancelled()

        labels = cluster(embeddings, hints, options)
        centroids = np.stack([_unit(embeddings[labels == k].mean(axis=0)) for k in range(labels.max() + 1)])

        # Frame-level scores: each speech frame sums the similarity to each centroid of the windows over it,
        # from the long windows that found the speakers and from shorter ones that place the boundaries.
        speech = np.zeros(n_frames, dtype=bool)
        for start, end in regions:
            speech[int(start / FRAME_S) : int(np.ceil(end / FRAME_S))] = True
        scores, covered = _frame_scores(embeddings @ centroids.T, spans, n_frames)
        if options.reseg_weight > 0:
            short = round(options.reseg_window_s / FRAME_S)
            short_starts, short_spans = _window_starts(
                regions, n_frames, short, max(1, round(options.reseg_step_s / FRAME_S))
            )
            short_embeddings = self._encoder.embed(mels, short_starts, min(short, n_frames))
            short_scores, _ = _frame_scores(short_embeddings @ centroids.T, short_spans, n_frames)
            counts_long = np.maximum(_coverage(spans, n_frames), 1)[:, None]
            counts_short = np.maximum(_coverage(short_spans, n_frames), 1)[:, None]
            scores = scores / counts_long + options.reseg_weight * short_scores / counts_short
        frame_labels = np.where(speech & covered, scores.argmax(axis=1), -1)
        frame_labels = _absorb_short_turns(frame_labels, round(options.min_turn_s / FRAME_S))
        if progress:
            progress(1.0)
        return _frames_to_turns(frame_labels)


def _frame_scores(similarity: np.ndarray, spans: list[tuple[int, int]], n_frames: int) -> tuple[np.ndarray, np.ndarray]:
    """Sum of window similarities over the frames each window covers, and which frames any window covers."""
    scores = np.zeros((n_frames + 1, similarity.shape[1]), dtype=np.float64)
    for (first, last), row in zip(spans, similarity, strict=True):
        scores[first] += row
        scores[last] -= row
    return np.cumsum(scores, axis=0)[:n_frames], _coverage(spans, n_frames) > 0


def _coverage(spans: list[tuple[int, int]], n_frames: int) -> np.ndarray:
    counts = np.zeros(n_frames + 1)
    for first, last in spans:
        counts[first] += 1
        counts[last] -= 1
    return np.cumsum(counts)[:n_frames]


def speech_regions(samples: np.ndarray, options: EmbeddedDiarizerOptions) -> list[tuple[float, float]]:
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    vad = VadOptions(
        threshold=options.vad_threshold,
        min_silence_duration_ms=options.min_silence_ms,
        speech_pad_ms=options.speech_pad_ms,
        min_speech_duration_ms=100,
    )
    return [(c["start"] / SAMPLE_RATE, c["end"] / SAMPLE_RATE) for c in get_speech_timestamps(samples, vad)]


def _window_starts(
    regions: list[tuple[float, float]], n_frames: int, window: int, step: int
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Window start frames covering every region, and the speech span each window votes for.

    A region shorter than a window gets one window centred on it (its context is mostly the same voice,
    or silence, which the encoder tolerates); its vote is limited to the region itself.
    """
    window = min(window, n_frames)
    starts: list[int] = []
    spans: list[tuple[int, int]] = []
    for start_s, end_s in regions:
        first = int(start_s / FRAME_S)
        last = min(n_frames, int(np.ceil(end_s / FRAME_S)))
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


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def cluster(embeddings: np.ndarray, hints: SpeakerHints, options: EmbeddedDiarizerOptions) -> np.ndarray:
    """Labels 0..k-1 for each embedding; k from the hints, else from the eigengap (k >= 2) and a
    one-speaker test."""
    n = len(embeddings)
    if hints.num_speakers is not None:
        k_min = k_max = hints.num_speakers
    else:
        k_min = hints.min_speakers or 1
        k_max = hints.max_speakers or options.max_speakers
    # A speaker is counted only with about a second of speech (5 windows at the default step), and the
    # eigengap of k needs eigenvalue k+1: short clips cannot support many speakers.
    k_max = min(k_max, n - 1, max(1, n // 5))
    k_min = min(k_min, k_max)
    if n < 3 or k_max <= 1:
        return np.zeros(n, dtype=np.int64)

    eigenvalues, eigenvectors = _spectral_embedding(embeddings, options.pruning_keep)
    if k_min == k_max:
        return _spectral_labels(eigenvectors, k_min)
    # The eigengap of the normalised Laplacian counts well-separated groups; it is computed for k >= 2 only,
    # because for one voice there is no gap to find (the spectrum rises smoothly).
    gaps = np.diff(eigenvalues[: k_max + 1])
    k = max(range(max(2, k_min), k_max + 1), key=lambda c: gaps[c - 1])
    if k_min <= 1:
        # One speaker or several? Split in two and compare the halves: two people's centroids are further
        # apart than the two halves of one voice (measured: 0.63-0.88 between people, even on a narrow-band
        # phone call; 0.91-0.95 between halves of one voice).
        halves = _spectral_labels(eigenvectors, 2)
        first = _unit(embeddings[halves == 0].mean(axis=0))
        second = _unit(embeddings[halves == 1].mean(axis=0))
        if float(first @ second) >= options.single_speaker_similarity:
            return np.zeros(n, dtype=np.int64)
    return _spectral_labels(eigenvectors, k)


def _spectral_embedding(embeddings: np.ndarray, pruning_keep: float) -> tuple[np.ndarray, np.ndarray]:
    n = len(embeddings)
    affinity = np.clip(embeddings @ embeddings.T, 0.0, 1.0)
    # Keep each row's strongest links only (p-pruning, as in Park et al. 2019): it removes the weak
    # cross-speaker similarities that blur the eigengap.
    keep = max(2, int(np.ceil(pruning_keep * n)))
    threshold = np.sort(affinity, axis=1)[:, -keep][:, None]
    pruned = np.where(affinity >= threshold, affinity, 0.0)
    pruned = 0.5 * (pruned + pruned.T)
    inv_sqrt = 1.0 / np.sqrt(np.maximum(pruned.sum(axis=1), 1e-10))
    laplacian = np.eye(n) - inv_sqrt[:, None] * pruned * inv_sqrt[None, :]
    eigenvalues, eigenvectors = np.linalg.eigh(laplacian)
    return eigenvalues, eigenvectors


def _spectral_labels(eigenvectors: np.ndarray, k: int) -> np.ndarray:
    spectral = eigenvectors[:, :k]
    spectral = spectral / np.maximum(np.linalg.norm(spectral, axis=1, keepdims=True), 1e-10)
    return _kmeans(spectral, k)


def _kmeans(points: np.ndarray, k: int, iterations: int = 100, restarts: int = 8) -> np.ndarray:
    """Deterministic k-means (k-means++ seeding from a fixed generator) over a few restarts."""
    generator = np.random.default_rng(0)
    best_labels = np.zeros(len(points), dtype=np.int64)
    best_inertia = np.inf
    for _ in range(restarts):
        centres = [points[generator.integers(len(points))]]
        for _ in range(1, k):
            distance = np.min([np.sum((points - c) ** 2, axis=1) for c in centres], axis=0)
            total = distance.sum()
            probabilities = distance / total if total > 0 else np.full(len(points), 1 / len(points))
            centres.append(points[generator.choice(len(points), p=probabilities)])
        centre_array = np.array(centres)
        labels = np.zeros(len(points), dtype=np.int64)
        for _ in range(iterations):
            distances = ((points[:, None, :] - centre_array[None, :, :]) ** 2).sum(axis=2)
            new_labels = distances.argmin(axis=1)
            if np.array_equal(new_labels, labels) and _ > 0:
                break
            labels = new_labels
            for index in range(k):
                members = points[labels == index]
                if len(members):
                    centre_array[index] = members.mean(axis=0)
        inertia = float(((points - centre_array[labels]) ** 2).sum())
        if inertia < best_inertia:
            best_inertia, best_labels = inertia, labels
    # Renumber so labels are 0..k'-1 with no empty cluster.
    _, renumbered = np.unique(best_labels, return_inverse=True)
    return renumbered.astype(np.int64)


def _absorb_short_turns(labels: np.ndarray, min_frames: int) -> np.ndarray:
    """Give each speech run shorter than ``min_frames`` to the neighbouring speaker (not to silence)."""
    labels = labels.copy()
    changed = True
    while changed:
        changed = False
        runs = _runs(labels)
        for index, (start, end, label) in enumerate(runs):
            if label < 0 or end - start >= min_frames:
                continue
            before = runs[index - 1] if index > 0 else None
            after = runs[index + 1] if index + 1 < len(runs) else None
            neighbours = [run for run in (before, after) if run is not None and run[2] >= 0 and run[2] != label]
            if not neighbours:
                continue
            longest = max(neighbours, key=lambda run: run[1] - run[0])
            labels[start:end] = longest[2]
            changed = True
            break
    return labels


def _runs(labels: np.ndarray) -> list[tuple[int, int, int]]:
    if len(labels) == 0:
        return []
    boundaries = np.flatnonzero(np.diff(labels)) + 1
    starts = np.concatenate([[0], boundaries])
    ends = np.concatenate([boundaries, [len(labels)]])
    return [(int(s), int(e), int(labels[s])) for s, e in zip(starts, ends, strict=True)]


def _frames_to_turns(labels: np.ndarray) -> tuple[Turn, ...]:
    return tuple(
        Turn(start=round(start * FRAME_S, 3), end=round(end * FRAME_S, 3), speaker=f"S{label}")
        for start, end, label in _runs(labels)
        if label >= 0
    )
