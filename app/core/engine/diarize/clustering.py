"""Stage 2 of the built-in diarizer: how many speakers, by merging the voice windows' clusters while their
distance, less the part that noise alone explains, stays under one threshold."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from app.core.engine.diarize.base import SpeakerHints
from app.core.engine.diarize.bundled_models import LocalActivity
from app.core.engine.diarize.frames import FRAME_S, _unit
from app.core.engine.diarize.options import EmbeddedDiarizerOptions


def _two_voices_at_once(count: np.ndarray, hints: SpeakerHints, options: EmbeddedDiarizerOptions) -> SpeakerHints:
    """The hints with at least two speakers where the segmentation hears enough overlapped speech (see
    ``two_voices_overlap_s``); a count the user gave (exactly N, at least two or more, at most one) is kept as it
    is. "At least one" says nothing, so the rule still applies."""
    if options.two_voices_overlap_s is None or hints.num_speakers or (hints.min_speakers or 1) >= 2:
        return hints  # off, or the user's count already says as much or more
    if hints.max_speakers is not None and hints.max_speakers < 2:
        return hints
    overlap_s = float(np.count_nonzero(count >= options.overlap_count)) * FRAME_S
    return replace(hints, min_speakers=2) if overlap_s >= options.two_voices_overlap_s else hints


def cluster(
    embeddings: np.ndarray,
    noise: float | np.ndarray,
    independent: float,
    hints: SpeakerHints,
    options: EmbeddedDiarizerOptions,
    groups: np.ndarray | None = None,
    heard_apart: HeardApart | None = None,
) -> np.ndarray:
    """Labels 0..k-1: agglomerative merging of the two clusters whose means are closest once the distance that
    noise alone explains is taken off; stops at ``merge_distance`` (or at the count the hints ask for). When
    more clusters than allowed are left past ``merge_distance``, the least-heard one joins its nearest instead.

    Up to ``cluster_block`` windows are clustered at once. Beyond, the windows are first clustered block by
    block (in time order) with a stricter threshold, and those clusters, each a sum and a count, are then
    merged together by the same rule: the pairwise table is never larger than a block, so a three-hour
    recording costs three times an hour rather than nine, and a voice heard in the first block and again in
    the last is still one cluster, because the second stage compares every block's clusters with every other's.
    ``groups`` gives each window its stretch of audio (:func:`repeat_groups`; default: every window its own).
    Where the hints ask for more speakers than the voices give and ``heard_apart`` is there, the extra ones are
    split off by :func:`split_heard_apart`."""
    n = len(embeddings)
    target = hints.num_speakers
    fewest = hints.min_speakers or 1
    most = min(hints.max_speakers or options.max_speakers, options.max_speakers)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    sums = embeddings.astype(np.float64)
    counts = np.ones(n)
    # The stretches of audio each item holds: a cluster is as many independent samples as it holds distinct
    # stretches, however often each was heard. Only the noise correction uses it; the means stay plain means.
    audio: list[set[int]] = [{int(group)} for group in (np.arange(n) if groups is None else groups)]
    # Each window's noise (the same for all, or the spread measured around it); a cluster's is their mean.
    noises = np.broadcast_to(np.asarray(noise, dtype=np.float64), (n,)).copy()
    owner = np.arange(n)  # window -> item (cluster) of the current stage
    block = max(2, options.cluster_block)
    while len(counts) > block:
        strict = options.merge_distance * options.block_merge_fraction
        block_sums: list[np.ndarray] = []
        block_counts: list[np.ndarray] = []
        block_noises: list[np.ndarray] = []
        block_audio: list[set[int]] = []
        renumber = np.empty(len(counts), dtype=np.int64)
        for first in range(0, len(counts), block):
            last = min(len(counts), first + block)
            local = agglomerate(
                sums[first:last],
                counts[first:last],
                noises[first:last],
                audio[first:last],
                independent,
                strict,
                None,
                1,
                last - first,
            )
            merged = local.max() + 1
            renumber[first:last] = local + sum(len(c) for c in block_counts)
            block_sums.append(np.stack([sums[first:last][local == k].sum(axis=0) for k in range(merged)]))
            block_counts.append(np.asarray([counts[first:last][local == k].sum() for k in range(merged)]))
            block_noises.append(np.asarray([noises[first:last][local == k].sum() for k in range(merged)]))
            block_audio.extend(
                set().union(*(audio[first + i] for i in np.flatnonzero(local == k))) for k in range(merged)
            )
        reduced = sum(len(c) for c in block_counts)
        owner = renumber[owner]
        sums, counts, noises = np.concatenate(block_sums), np.concatenate(block_counts), np.concatenate(block_noises)
        audio = block_audio
        if reduced > 0.9 * len(renumber):
            break  # the blocks hardly merge (noise everywhere): stop reducing, the last stage takes what is left
    labels = None
    # "At least N" cannot go past the cap on speakers (the merging never did); "exactly N" is taken as it is.
    wanted = target or min(fewest, most)
    if heard_apart is not None and wanted > 1:
        merges: list[Merge] = []
        natural = agglomerate(sums, counts, noises, audio, independent, options.merge_distance, None, 1, most, merges)
        missing = wanted - (natural.max() + 1)
        if missing > 0:
            labels = split_heard_apart(natural, merges, missing, heard_apart.item_tallies(owner, len(counts)))
        elif target is None or natural.max() + 1 == target:
            labels = natural  # what merging with the count would give: the count does not bind
    if labels is None:
        labels = agglomerate(sums, counts, noises, audio, independent, options.merge_distance, target, fewest, most)
    _, renumbered = np.unique(labels[owner], return_inverse=True)
    return renumbered.astype(np.int64)


def agglomerate(
    sums: np.ndarray,
    counts: np.ndarray,
    noise_sums: np.ndarray,
    audio: list[set[int]],
    independent: float,
    merge_distance: float,
    target: int | None,
    fewest: int,
    most: int,
    merges: list[Merge] | None = None,
) -> np.ndarray:
    """Agglomerative merging of items given as (sum of unit vectors, number of windows, sum of the windows'
    noise, the stretches of audio among them); labels 0..k-1. The noise a cluster's mean carries is its windows'
    mean noise over its number of independent samples: its distinct stretches of audio. Each merge made is
    appended to ``merges`` when given."""
    n = len(counts)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    sums = np.array(sums, dtype=np.float64)
    counts = np.array(counts, dtype=np.float64)
    noise_sums = np.array(noise_sums, dtype=np.float64)
    audio = [set(stretches) for stretches in audio]
    samples = np.asarray([len(stretches) for stretches in audio], dtype=np.float64)
    alive = np.ones(n, dtype=bool)
    owner = np.arange(n)

    def gaps(index: int) -> np.ndarray:
        means = sums / counts[:, None]
        mean = means[index]
        squared = np.sum((means - mean) ** 2, axis=1)
        carried = noise_sums / (counts * independent * samples)  # each mean's noise: mean window noise / n
        corrected = squared - (carried + carried[index])
        corrected[~alive] = np.inf
        corrected[index] = np.inf
        return corrected

    means = sums / counts[:, None]
    norms = np.sum(means**2, axis=1)
    distance = np.maximum(norms[:, None] + norms[None, :] - 2 * (means @ means.T), 0.0)
    carried = noise_sums / (counts * independent * samples)
    distance -= carried[:, None] + carried[None, :]
    np.fill_diagonal(distance, np.inf)
    # Each row's nearest cluster is kept up to date, so a merge costs O(n) rather than a scan of the matrix.
    nearest = distance.argmin(axis=1)
    nearest_gap = distance[np.arange(n), nearest]
    clusters = n
    while clusters > 1:
        first = int(np.argmin(nearest_gap))
        second = int(nearest[first])
        best = float(nearest_gap[first])
        if target is not None:
            if clusters <= target:
                break
        elif clusters <= most and (best >= merge_distance or clusters <= fewest):
            break
        if best >= merge_distance:
            # More clusters than allowed (or than the count asked for), and no two of them sound alike: the one
            # heard least joins the voice nearest to it. Merging the closest pair instead joined two real
            # speakers while stray clusters (a laugh, overlapped speech, a piece of another room) kept their
            # places under the cap: on the three-hour benchmark a phone call's two speakers and two espeak-ng
            # voices were merged that way (DER 0.296 -> 0.205); with the true count given, AMI 0.402 -> 0.377.
            living = np.flatnonzero(alive)
            first = int(living[np.argmin(counts[living])])
            second = int(nearest[first])
        if merges is not None:
            apart = float(np.sum((sums[first] / counts[first] - sums[second] / counts[second]) ** 2))
            merges.append(Merge(first, second, apart))
        sums[first] += sums[second]
        counts[first] += counts[second]
        noise_sums[first] += noise_sums[second]
        audio[first] |= audio[second]
        samples[first] = len(audio[first])
        alive[second] = False
        owner[owner == second] = first
        distance[second, :] = np.inf
        distance[:, second] = np.inf
        nearest_gap[second] = np.inf
        row = gaps(first)
        distance[first, :] = row
        distance[:, first] = row
        nearest[first] = int(row.argmin())
        nearest_gap[first] = row[nearest[first]]
        stale = np.flatnonzero(alive & ((nearest == first) | (nearest == second)))
        for index in stale:
            nearest[index] = int(distance[index].argmin())
            nearest_gap[index] = distance[index, nearest[index]]
        closer = alive & (row < nearest_gap)
        nearest[closer] = first
        nearest_gap[closer] = row[closer]
        clusters -= 1
    _, labels = np.unique(owner, return_inverse=True)
    return labels.astype(np.int64)


@dataclass(frozen=True)
class Merge:
    """One merge of :func:`agglomerate`: the item that kept its number, the one merged into it (each standing for
    its cluster at that moment), and how far apart their means were."""

    kept: int
    joined: int
    squared_distance: float  # between the two means, noise not taken off


class HeardApart:
    """How often the segmentation hears two sets of voice windows as two people, and how often as one.

    segmentation-3.0 numbers the people it hears in each 10 s chunk: two of one chunk's local speakers are two
    people, as the network heard them; one local speaker is one. A window fully inside a chunk belongs to the
    local speaker who has at least :data:`DOMINANT` of its solo frames (frames where that chunk hears one person),
    if it has at least half its frames solo; otherwise it says nothing there. For two sets of windows, every pair
    of windows (one of each) that belong to local speakers of the same chunk is a vote: *apart* when the two local
    speakers differ, *together* when they are one. The table behind the votes is made on the first vote, from the
    chunks' answers only; the votes for two sets cost one pass over it."""

    DOMINANT = 0.8  # with "half the window solo", a first choice, not tuned: no other value was tried

    def __init__(self, activity: LocalActivity, starts: np.ndarray, window: int) -> None:
        self._activity, self._starts, self._window_frames = activity, np.asarray(starts), window
        self._table: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def _belonging(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(window, chunk, local speaker) for every window that belongs to a local speaker of a chunk; made on
        the first vote only, as most recordings never need it."""
        if self._table is not None:
            return self._table
        activity, starts, window = self._activity, self._starts, self._window_frames
        windows: list[np.ndarray] = []
        chunks: list[np.ndarray] = []
        locals_: list[np.ndarray] = []
        order = np.argsort(starts, kind="stable")
        sorted_starts = np.asarray(starts)[order]
        for chunk, first in enumerate(activity.first_frames):
            first = int(first)
            local = activity.active[chunk, activity.model_frames(chunk)]
            alone = local & (local.sum(axis=1, keepdims=True) == 1)
            # Solo frames of each local speaker before each frame: a window's count is one subtraction.
            before = np.concatenate([np.zeros((1, local.shape[1]), np.int64), np.cumsum(alone, axis=0)])
            low = int(np.searchsorted(sorted_starts, first))
            high = int(np.searchsorted(sorted_starts, first + len(local) - window, side="right"))
            if high <= low:
                continue
            offsets = sorted_starts[low:high] - first
            solo = before[offsets + window] - before[offsets]  # (windows, 3)
            total = solo.sum(axis=1)
            best = solo.argmax(axis=1)
            belongs = (2 * total >= window) & (solo.max(axis=1) >= self.DOMINANT * np.maximum(total, 1))
            windows.append(order[low:high][belongs])
            chunks.append(np.full(int(belongs.sum()), chunk))
            locals_.append(best[belongs])
        empty = np.zeros(0, np.int64)
        self._table = (
            np.concatenate(windows) if windows else empty,
            np.concatenate(chunks) if chunks else empty,
            np.concatenate(locals_) if locals_ else empty,
        )
        return self._table

    def item_tallies(self, owner: np.ndarray, n_items: int) -> list[dict[tuple[int, int], int]]:
        """For each item (a cluster of windows; ``owner`` gives each window's), how many of its windows belong to
        each (chunk, local speaker)."""
        window, chunk, local = self._belonging()
        tallies: list[dict[tuple[int, int], int]] = [{} for _ in range(n_items)]
        for item, key in zip(owner[window].tolist(), zip(chunk.tolist(), local.tolist(), strict=True), strict=True):
            tallies[item][key] = tallies[item].get(key, 0) + 1
        return tallies


def votes(side_a: dict[tuple[int, int], int], side_b: dict[tuple[int, int], int]) -> tuple[int, int]:
    """(apart, together): pairs of windows, one of each side, that belong to two people of one chunk, and to one."""
    together = sum(count * side_b.get(key, 0) for key, count in side_a.items())
    per_chunk_a: dict[int, int] = {}
    for (chunk, _), count in side_a.items():
        per_chunk_a[chunk] = per_chunk_a.get(chunk, 0) + count
    pairs = sum(per_chunk_a.get(chunk, 0) * count for (chunk, _), count in side_b.items())
    return pairs - together, together


def split_heard_apart(
    labels: np.ndarray, merges: list[Merge], missing: int, tallies: list[dict[tuple[int, int], int]]
) -> np.ndarray:
    """``labels`` with ``missing`` more speakers: the merges undone are those whose two sides the segmentation
    most often heard as two people (:class:`HeardApart`; a side with no votes counts as even).

    Stopping the merging at the count instead undid the last merges, which are the largest: halves of the main
    speaker whose voice prints drift over a recording (by the noise rule they were as far apart as two people).
    The people a count adds are most often those who hardly spoke (a "yeah", or only over someone else) or who
    spoke at once with another, and that is what the segmentation hears. Measured on every development
    recording (``benchmarks/bench_diarizer_variants.py``): AMI given the true counts 0.355 -> 0.286 (EN2004a
    0.572 -> 0.264, EN2005a 0.550 -> 0.293, EN2006b 0.558 -> 0.462; EN2002a 0.497 -> 0.537); where two voices at
    once ask for two speakers, EN2005a 0.331 -> 0.228 and EN2006b as it was (its two women were already the last
    merge); nothing else changes, as elsewhere no count binds. Splitting off the pair whose means lay farthest
    apart instead (a small odd group) fixed EN2005a as well but split EN2006b's women wrongly (0.529 -> 0.586).
    ``tallies`` gives each item's windows by (chunk, local speaker) (:meth:`HeardApart.item_tallies`).

    Each merge is scored as the merging went, replaying it: every cluster keeps its tally, the smaller one
    folded into the larger, so a long recording's thousands of merges cost one pass over its windows.
    Only merges inside the final stage can be undone (a block's own merges were made before it)."""
    tallies = [dict(tally) for tally in tallies]
    scores: list[tuple[float, float, int]] = []
    for index, merge in enumerate(merges):
        kept, joined = tallies[merge.kept], tallies[merge.joined]
        apart, together = votes(kept, joined)
        scores.append(((apart + 1) / (apart + together + 2), merge.squared_distance, index))
        small, large = (kept, joined) if len(kept) <= len(joined) else (joined, kept)
        for key, count in small.items():
            large[key] = large.get(key, 0) + count
        tallies[merge.kept], tallies[merge.joined] = large, {}
    chosen = {index for *_, index in sorted(scores, reverse=True)[:missing]}

    # Replay again for the items on the joined side of each chosen merge, as they were at that moment.
    members: list[list[int]] = [[item] for item in range(len(labels))]
    split_off: list[list[int]] = []
    for index, merge in enumerate(merges):
        if index in chosen:
            split_off.append(list(members[merge.joined]))
        small_side, large_side = sorted((members[merge.kept], members[merge.joined]), key=len)
        large_side.extend(small_side)
        members[merge.kept], members[merge.joined] = large_side, []
    labels = labels.copy()
    # Latest first: a side split off by an earlier merge is taken out of the one split off by a later merge.
    for items in reversed(split_off):
        labels[items] = labels.max() + 1
    _, renumbered = np.unique(labels, return_inverse=True)
    return renumbered.astype(np.int64)


def drop_small_speakers(
    embeddings: np.ndarray, labels: np.ndarray, spans: list[tuple[int, int]], hints: SpeakerHints, min_speech_s: float
) -> np.ndarray:
    """Give the windows of speakers with under ``min_speech_s`` of speech to the closest remaining voice.

    A count the user asked for is kept (the largest speakers stay)."""
    speech = _speech_seconds(labels, np.asarray(spans, dtype=np.int64))
    order = np.argsort(speech)[::-1]
    keep = [int(label) for label in order if speech[label] >= min_speech_s]
    wanted = hints.num_speakers or hints.min_speakers or 1
    keep = [int(label) for label in order[: max(len(keep), wanted)]]
    if len(keep) == labels.max() + 1:
        return labels
    centroids = np.stack([_unit(embeddings[labels == label].mean(axis=0)) for label in keep])
    nearest = (embeddings @ centroids.T).argmax(axis=1)
    mapped = np.asarray([keep.index(int(label)) if label in keep else -1 for label in labels])
    mapped = np.where(mapped >= 0, mapped, nearest)
    _, renumbered = np.unique(mapped, return_inverse=True)
    return renumbered.astype(np.int64)


def _speech_seconds(labels: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """Seconds of speech each label's windows cover (overlapping windows counted once), in O(n log n)."""
    seconds = np.zeros(labels.max() + 1)
    for label in range(len(seconds)):
        own = spans[labels == label]
        if len(own) == 0:
            continue
        own = own[np.argsort(own[:, 0], kind="stable")]
        reach = np.maximum.accumulate(own[:, 1])
        covered_until = np.concatenate([[own[0, 0]], reach[:-1]])
        seconds[label] = np.maximum(own[:, 1] - np.maximum(own[:, 0], covered_until), 0).sum() * FRAME_S
    return seconds
