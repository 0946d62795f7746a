"""Stage 3 of the built-in diarizer: who speaks in each 10 ms frame, from the windows' likeness to each
speaker, a Viterbi path with a cost per change, and the turns that come of it."""

from __future__ import annotations

import numpy as np

from app.core.engine.diarize.base import Turn
from app.core.engine.diarize.frames import FRAME_S, _runs, _unit
from app.core.engine.diarize.options import EmbeddedDiarizerOptions


def _frame_scores(similarity: np.ndarray, spans: list[tuple[int, int]], n_frames: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean similarity to each speaker of the windows over each frame, and which frames any window covers."""
    scores = np.zeros((n_frames + 1, similarity.shape[1]), dtype=np.float32)
    counts = np.zeros(n_frames + 1, dtype=np.int32)
    for (first, last), row in zip(spans, similarity, strict=True):
        scores[first] += row
        scores[last] -= row
        counts[first] += 1
        counts[last] -= 1
    coverage = np.cumsum(counts)[:n_frames]
    # In place and in float32: for a three-hour recording these are a million frames per speaker.
    np.cumsum(scores, axis=0, out=scores)
    scores = scores[:n_frames]
    scores /= np.maximum(coverage, 1)[:, None]
    return scores, coverage > 0


def _turn_centroids(
    embeddings: np.ndarray,
    spans: list[tuple[int, int]],
    frame_labels: np.ndarray,
    previous: np.ndarray,
    share: float,
) -> np.ndarray:
    """Each speaker's unit mean over the windows with at least ``share`` of their frames in its turns; a speaker
    without such a window keeps its previous voice."""
    first = np.asarray([span[0] for span in spans], dtype=np.int64)
    last = np.asarray([span[1] for span in spans], dtype=np.int64)
    length = np.maximum(last - first, 1)
    centroids = previous.copy()
    for speaker in range(len(previous)):
        inside = np.concatenate([[0], np.cumsum(frame_labels == speaker, dtype=np.int64)])
        last_in, first_in = np.minimum(last, len(frame_labels)), np.minimum(first, len(frame_labels))
        pure = inside[last_in] - inside[first_in] >= share * length
        if pure.any():
            centroids[speaker] = _unit(embeddings[pure].mean(axis=0))
    return centroids


def _viterbi(scores: np.ndarray, speech: np.ndarray, change_penalty: float) -> np.ndarray:
    """The speaker of each speech frame (-1 elsewhere) maximising total similarity minus a cost per change."""
    labels = np.full(len(scores), -1, dtype=np.int64)
    frames = np.flatnonzero(speech)
    if len(frames) == 0:
        return labels
    speakers = scores.shape[1]
    if speakers == 1:
        labels[frames] = 0
        return labels
    back = np.zeros((len(frames), speakers), dtype=np.int8 if speakers < 128 else np.int64)
    total = scores[frames[0]].astype(np.float64)  # sums over a million frames: float32 would lose the penalty
    stay_index = np.arange(speakers)
    for t in range(1, len(frames)):
        best = int(total.argmax())
        switch = total[best] - change_penalty
        stay = total >= switch
        back[t] = np.where(stay, stay_index, best)
        total = np.where(stay, total, switch) + scores[frames[t]]  # row by row: no copy of the speech frames
    path = np.zeros(len(frames), dtype=np.int64)
    path[-1] = int(total.argmax())
    for t in range(len(frames) - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    labels[frames] = path
    return labels


def _bridge_pauses(labels: np.ndarray, max_frames: int) -> np.ndarray:
    """Close pauses shorter than ``max_frames`` between two stretches of the same speaker."""
    labels = labels.copy()
    runs = _runs(labels)
    for index in range(1, len(runs) - 1):
        start, end, label = runs[index]
        before, after = runs[index - 1][2], runs[index + 1][2]
        if label < 0 and end - start <= max_frames and before == after and before >= 0:
            labels[start:end] = before
    return labels


def _overlap_turns(
    scores: np.ndarray, labels: np.ndarray, overlap: np.ndarray, options: EmbeddedDiarizerOptions
) -> list[Turn]:
    """Where two people talk at once, the second-best speaker of each frame speaks too."""
    # Only the overlapped frames are copied: a copy of every frame's scores would be 86 MB for three hours.
    rows = np.flatnonzero(overlap & (labels >= 0))
    others = scores[rows]
    others[np.arange(len(rows)), labels[rows]] = -np.inf
    second = np.full(len(labels), -1, dtype=np.int64)
    second[rows] = others.argmax(axis=1)
    shortest = round(options.min_overlap_s / FRAME_S)
    return _frames_to_turns(second, shortest)


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


def _frames_to_turns(labels: np.ndarray, min_frames: int = 1) -> list[Turn]:
    return [
        Turn(start=round(start * FRAME_S, 3), end=round(end * FRAME_S, 3), speaker=f"S{label}")
        for start, end, label in _runs(labels)
        if label >= 0 and end - start >= min_frames
    ]
