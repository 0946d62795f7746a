"""Stage 4 of the built-in diarizer: short utterances ("Hello?", "mm-hmm") that the segmentation hears as
another person than their neighbours go to that person."""

from __future__ import annotations

import bisect

import numpy as np

from app.core.engine.diarize.bundled_models import LocalActivity
from app.core.engine.diarize.frames import _runs


def interjections(activity: LocalActivity, labels: np.ndarray, window: int) -> np.ndarray:
    """Give short utterances that the segmentation hears as another person than their neighbours to that person.

    A stretch shorter than a window has no window of its own: the windows over it are mostly its neighbours'
    voice, so the voices alone give a "Hello?" or a "mm-hmm" to whoever spoke around it. The segmentation
    judges each 10 s chunk as a whole, numbers the people it hears in it, and does tell the two apart.

    A chunk votes for a short solo stretch of one local speaker next to (across silence) a stretch of another
    local speaker, when the labels give both the same speaker. A chunk whose edge cuts the stretch does not
    judge it. The stretch is relabelled where more than half of the chunks hearing it vote so (as a frame is
    speech where more than half of them hear speech), and only to a speaker the votes name: the one the labels
    give to the rest of that local speaker's talk in the chunk. Without a name there is no change: in a long
    recording the segmentation heard a stutterer's blocks as someone else too (gentle_lucier, 4 stretches,
    2.8 s), and all 8 stretches that went to the best other voice instead were wrong there (10 min of the
    long-file material: DER 0.154 -> 0.161; named only: 0.156, one stretch of a speaker split in two)."""
    n_frames = len(labels)
    votes = np.zeros(n_frames, dtype=np.int32)
    hearing = np.zeros(n_frames, dtype=np.int32)
    named: list[tuple[int, int, int]] = []  # (first frame, end frame, the speaker a vote names)
    for chunk, first in enumerate(activity.first_frames):
        first = int(first)
        local = activity.active[chunk, activity.model_frames(chunk)][: n_frames - first]
        end = first + len(local)
        hearing[first:end] += 1
        talking = local.sum(axis=1)
        solo = np.where(talking == 1, local.argmax(axis=1), np.where(talking == 0, -1, -2))
        runs = [run for run in _runs(solo) if run[2] != -1]  # silence does not separate neighbours
        for index, (start, stop, speaker) in enumerate(runs):
            if speaker < 0 or stop - start >= window:
                continue
            if start == 0 or stop == len(solo):
                # The chunk's edge cuts this stretch: it may be longer than the chunk hears, so it abstains.
                hearing[first + start : first + stop] -= 1
                continue
            own = labels[first + start : first + stop]
            own = own[own >= 0]
            if len(own) == 0:
                continue
            label = int(np.bincount(own).argmax())
            for neighbour in (index - 1, index + 1):
                if not 0 <= neighbour < len(runs):
                    continue
                n_start, n_stop, n_speaker = runs[neighbour]
                if n_speaker < 0 or n_speaker == speaker:
                    continue
                theirs = labels[first + n_start : first + n_stop]
                theirs = theirs[theirs >= 0]
                if len(theirs) and int(np.bincount(theirs).argmax()) == label:
                    votes[first + start : first + stop] += 1
                    elsewhere = np.flatnonzero(solo == speaker)
                    elsewhere = elsewhere[(elsewhere < start) | (elsewhere >= stop)]
                    others = labels[first + elsewhere]
                    others = others[(others >= 0) & (others != label)]
                    if len(others):
                        named.append((first + start, first + stop, int(np.bincount(others).argmax())))
                    break
    relabel = (2 * votes > hearing) & (labels >= 0)
    if not relabel.any():
        return labels
    named.sort()
    result = labels.copy()
    speakers = int(labels.max()) + 1
    for start, stop, flag in _runs(relabel.astype(np.int64)):
        if not flag:
            continue
        # The votes over this stretch (each is shorter than a window): those starting in the window before it.
        held = np.zeros(speakers)
        for begin, end, speaker in named[bisect.bisect_left(named, (start - window,)) :]:
            if begin >= stop:
                break
            held[speaker] += max(0, min(stop, end) - max(start, begin))
        if held.any():
            result[start:stop] = int(held.argmax())
    return result
