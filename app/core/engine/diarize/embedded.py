"""The built-in diarizer: offline, no token, from the pip install alone.

Why it is built this way (measured on the nine real AMI meeting openings, pyannote's phone call, espeak-ng
voices and four single-speaker recordings; README "Speakers"):

1. **Who is talking, and how many at once**: pyannote's segmentation-3.0 network over sliding 10 s chunks.
   It finds speech that voice activity detection misses inside turns, and it hears overlapped speech, which
   alone is about 12 % of a meeting's speaking time.
2. **Voices**: CAM++ embeddings of 1.5 s windows every 0.75 s inside speech. 1.5 s is about the shortest
   stretch that still says who is speaking; shorter windows made the clustering worse on every meeting.
3. **How many speakers** (the hard part): agglomerative clustering of the windows that merges the two
   closest clusters while the squared distance of their mean vectors, *less the part of it that noise alone
   explains*, stays under ``merge_distance``. The noise is measured in each recording: windows one window
   apart inside one stretch of speech are nearly always the same person, and their spread says how far apart
   two halves of one voice drift in this room, on this microphone. A fixed cosine threshold (the previous
   design) had to be retuned per recording: espeak-ng voices wanted 0.25, meetings 0.35 and a phone call
   0.32, and a single reader was split at 0.3. Corrected for noise, one setting holds for all of them.
   Speakers with under ``min_speaker_s`` of speech are given to the nearest real voice: with less than two
   seconds nobody can be told apart reliably, and a back-channel ("mm-hmm") is not a new person. And where
   the segmentation hears a second or more of two voices at once, there are at least two people, even when
   no clean stretch of either voice tells them apart.
4. **When**: each 10 ms speech frame scores every speaker by the similarity of the windows covering it; a
   Viterbi path with a cost per speaker change picks the labels (no flicker); each voice is measured again
   from the windows inside its own turns and the frames are labelled once more; pauses of one speaker under
   ``bridge_s`` are closed, and where the segmentation hears two people at once the second-best speaker is
   added, so overlapped speech is attributed to both.
5. **Interjections**: an utterance shorter than a window ("Hello?", "mm-hmm") has no window of its own, so the
   voices give it to whoever spoke around it. The segmentation hears each 10 s chunk whole and numbers its
   speakers within it: where most chunks hear such an utterance as another person than its neighbours, it goes
   to the speaker given to the rest of that person's talk in the chunk.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from app.core.cancel import CancelToken
from app.core.engine.diarize.base import SpeakerHints, Turn
from app.core.engine.diarize.bundled_models import (
    HOP_SAMPLES,
    SAMPLE_RATE,
    LocalActivity,
    Segmentation,
    SpeakerEmbedding,
)
from app.core.progress import FractionProgress

if TYPE_CHECKING:
    from app.core.engine.audio import Audio

FRAME_S = HOP_SAMPLES / SAMPLE_RATE


@dataclass(frozen=True)
class EmbeddedDiarizerOptions:
    window_s: float = 1.5
    step_s: float = 0.75
    segmentation_step_s: float = 2.5  # 10 s chunks every 2.5 s: each frame is judged four times
    # Windows are placed where the averaged speaker count reaches ``speech_count``: half of the chunks that hear
    # a frame is enough to embed it (its voice is still evidence). A frame is *reported* as speech only where
    # more than half of them hear a speaker, as pyannote's own pipeline rounds the count (np.rint: 0.5 -> 0,
    # 1.5 -> 2): a tie between chunks is most often a breath, a chair or a laugh that no reference marks.
    # Measured: AMI mean DER 0.255 -> 0.251 (EN2003a 0.279 -> 0.245, ES2003a 0.117 -> 0.107; EN2002a 0.372 ->
    # 0.385), the call 0.087 -> 0.084, espeak-ng 0.036 -> 0.025; measured again after the last-chunk fix
    # (``chunk_starts``): 0.257 -> 0.242. Placing the windows by the same rule splits a single reader (fewer
    # windows at the edges of speech), so the two stay apart.
    speech_count: float = 0.5
    overlap_count: float = 1.5  # ... and where it reaches this, two people talk at once
    min_region_s: float = 0.1
    region_gap_s: float = 0.1
    # Merge clusters while |mean_a - mean_b|^2 - noise * (1/n_a + 1/n_b) stays below this (n in independent
    # windows). Judged on all development recordings together (nine AMI meetings, the phone call, four single
    # speakers, two espeak-ng meetings): 0.14-0.18 keep the meetings' mean DER at 0.263-0.276 and the call
    # right; below 0.17 a stuttering reader (gentle_lucier) is split in two, at 0.18 two of four espeak voices
    # merge, at 0.22 the phone call's two speakers merge. 0.17 is the one value where none of these happens.
    merge_distance: float = 0.17
    max_speakers: int = 20
    # Long recordings: the windows are clustered in blocks of this many (about 20 minutes of speech) first,
    # and the blocks' clusters then together, so time and memory grow linearly with the length (issue 17).
    # A recording with fewer windows is clustered in one piece, exactly as before.
    cluster_block: int = 1600
    # The noise around each window: the median of this many window pairs nearest to it (about 30 s of speech
    # on either side; 0: one median for the whole recording). A recording shorter than that is unchanged (all
    # development recordings: identical figures); on a round of the long-file material (a phone call, readings
    # in other rooms, meetings, espeak-ng) DER fell from 0.271 to 0.258, as the clean espeak-ng voices were no
    # longer over-corrected by the meetings' noise and merged.
    noise_neighbours: int = 40
    # Inside a block only merges well under the final threshold are made: a block's clusters are merged
    # again, with every other block's, in the second stage; what it merges wrongly could not be undone.
    block_merge_fraction: float = 0.5
    # A window whose voice print lies closer than this fraction of the same-voice spread to a window elsewhere
    # (not overlapping it in time) is the same audio heard again: a repeated intro, jingle or ad, a replayed
    # clip. Such windows count together as one sample of the voice, not as many (see repeat_groups). Distinct
    # stretches of one voice lie at about 2x the spread, windows sharing half their audio at 1.1-1.2x (three
    # real recordings); repeats on the same window grid at under 0.1x (the long-file material, whose rounds
    # repeat their audio). Repeats off the grid by a fraction of a step are caught only in part (11-97 % of a
    # reading's windows heard again, by offset): the count is then too high, as it was before, never too low.
    repeat_distance: float = 0.3
    min_speaker_s: float = 2.0
    # Two voices heard at once are two people: where the segmentation hears at least this much overlapped
    # speech in all (frames whose averaged count reaches ``overlap_count``), at least two speakers are found.
    # (pyannote's own pipeline never puts two people of one chunk in one cluster, but where it finds one
    # cluster only, it drops the second.) The segmentation's overlap matches the references' closely: AMI
    # 11.8 / 2.3 / 5.1 / 7.3 s where the RTTMs have 11.8 / 3.2 / 5.7 / 8.1 s, at most 0.3 s on the other clips,
    # and 0.0 s on every single-speaker recording. Before, EN2005a and EN2006b were one speaker: now two
    # (EN2006b DER 0.690 -> 0.529, its two main voices mostly apart; EN2005a 0.183 -> 0.331, its main speaker
    # split, and 0.228 since the second speaker is split off where the segmentation hears two people
    # (``split_heard_apart``); AMI mean 0.242 -> 0.241, now 0.229; the call, espeak-ng and the single speakers
    # unchanged). None: off.
    two_voices_overlap_s: float | None = 1.0
    change_penalty: float = 2.0  # Viterbi cost of a speaker change, in units of per-frame similarity
    min_turn_s: float = 0.3
    # A pause of one speaker shorter than this is closed. Every pause the segmentation hears is a pause in the
    # references too (AMI's word alignments, the phone call's RTTM, espeak-ng's own timings): closing pauses up to
    # 1 s (the previous value) marked them as speech. 0-0.25 s is one plateau on all development material (AMI
    # mean 0.262 -> 0.255, the call 0.100 -> 0.087, espeak-ng 0.053 -> 0.036, the long-file benchmark's hour
    # 0.190 -> 0.173); 0.25 still closes a stop's silence inside a word. Words in a pause take the nearest turn.
    bridge_s: float = 0.25
    min_overlap_s: float = 0.1
    # After the first labelling, each speaker's voice is measured again from the windows that lie within one of
    # its turns (mixed windows at changes and in overlap blurred the first one) and the frames are labelled
    # again. One round: AMI 0.251 -> 0.250, the long-file benchmark's 10 min / 1 h / 3 h (readers per
    # recording) 0.160 / 0.176 / 0.190 -> 0.154 / 0.175 / 0.191, espeak-ng's three voices 0.174 -> 0.168, the
    # call unchanged. More rounds until the labels settle: AMI 0.249, 1 h 0.171 (settled after five), but 3 h
    # 0.194: there the labels never settle (0.6 % of frames change in the first round, then 0.1-0.2 % in every
    # later one, back and forth between two clusters of one voice), each round a Viterbi pass (~3 s at 3 h).
    # After the last-chunk fix: AMI 0.244 without the round, 0.242 with it.
    resegment_rounds: int = 1
    # Short utterances the segmentation hears as another person than their neighbours ("Hello?", "mm-hmm") go
    # to that person (see ``interjections``): the call 0.084 -> 0.038 (Sheila's "Hello?" and "Neither did I"),
    # AMI (0.242), espeak-ng and single speakers unchanged.
    interjections: bool = True
    # When a count asks for more speakers than the voices alone give (the user's "exactly 4", or two voices
    # heard at once above), the extra speakers are split off where the segmentation hears two people, not
    # where the voice prints drift (see ``split_heard_apart``). Off: the merging simply stops at the count,
    # which halved the main speaker: AMI given the true counts 0.355 -> 0.286, EN2005a 0.331 -> 0.228.
    split_heard_apart: bool = True


class EmbeddedDiarizer:
    name = "embedded"

    def __init__(
        self, options: EmbeddedDiarizerOptions | None = None, threads: int | None = None, device: str = "cpu"
    ) -> None:
        self.options = options or EmbeddedDiarizerOptions()
        self._threads = threads
        self.device = device
        self._segmentation: Segmentation | None = None
        self._embedding: SpeakerEmbedding | None = None

    def load(self) -> None:
        """Load the networks onto the device now (the move onto a GPU is where its faults show)."""
        self._load()

    def _load(self) -> tuple[Segmentation, SpeakerEmbedding]:
        import torch

        if self._threads:
            torch.set_num_threads(self._threads)
        if self.device == "cuda" and not torch.cuda.is_available():
            # CTranslate2 (CUDA 12) can see a GPU that torch (CUDA 13) cannot use: diarize on the CPU rather
            # than fail the job; the transcript's reason then says "on CPU".
            self.device = "cpu"
        if self._segmentation is None:
            self._segmentation = Segmentation(self.device, self.options.segmentation_step_s)
        if self._embedding is None:
            self._embedding = SpeakerEmbedding(self.device)
        return self._segmentation, self._embedding

    def diarize(
        self,
        audio: Audio,
        hints: SpeakerHints,
        progress: FractionProgress | None = None,
        cancel: CancelToken | None = None,
    ) -> tuple[Turn, ...]:
        options = self.options
        samples: np.ndarray = audio.samples
        segmentation, embedding = self._load()
        # Progress: in ONNX Runtime the segmentation is about a quarter of the time, the speaker embeddings 70 %,
        # the rest 5 % (three AMI clips, cProfile: 22 / 75 / 3 %; the clustering's share grows with the length).
        activity = segmentation.local_activity(samples, cancel, _scaled(progress, 0.0, 0.25))
        count = activity.count()
        regions = speech_regions(count, options)
        if not regions:
            return ()
        # The filterbank stops 25 ms short of the end (Kaldi's edge snipping); the count covers every 10 ms, so
        # frames are counted by it and a window reaching past the filterbank embeds its last whole window.
        n_frames = len(count)
        window = round(options.window_s / FRAME_S)
        step = max(1, round(options.step_s / FRAME_S))
        starts, spans = _window_starts(regions, n_frames, window, step)
        embeddings = embedding.embed_windows(
            samples, starts, window, progress=_scaled(progress, 0.25, 0.7), cancel=cancel
        )
        if cancel:
            cancel.raise_if_cancelled()

        independent = min(1.0, step / window)  # overlapping windows are not independent samples of a voice
        overall_noise = same_voice_spread(embeddings, starts, window)
        noise: float | np.ndarray = overall_noise
        if options.noise_neighbours:
            noise = local_voice_spread(embeddings, starts, window, options.noise_neighbours, overall_noise)
        groups = repeat_groups(embeddings, starts, window, noise, options.repeat_distance, cancel)
        hints = _two_voices_at_once(count[:n_frames], hints, options)
        heard_apart = HeardApart(activity, starts, window) if options.split_heard_apart else None
        labels = cluster(embeddings, noise, independent, hints, options, groups, heard_apart)
        labels = drop_small_speakers(embeddings, labels, spans, hints, options.min_speaker_s)
        centroids = np.stack([_unit(embeddings[labels == k].mean(axis=0)) for k in range(labels.max() + 1)])

        if progress:
            progress(0.95)
        speech = reported_speech(count[:n_frames], regions)
        scores, covered = _frame_scores((embeddings @ centroids.T).astype(np.float32), spans, n_frames)
        frame_labels = _viterbi(scores, speech & covered, options.change_penalty)
        pure_window = 1.0 - options.min_turn_s / options.window_s  # no whole other turn fits in the rest
        for _ in range(options.resegment_rounds):
            centroids = _turn_centroids(embeddings, spans, frame_labels, centroids, pure_window)
            scores, covered = _frame_scores((embeddings @ centroids.T).astype(np.float32), spans, n_frames)
            relabelled = _viterbi(scores, speech & covered, options.change_penalty)
            settled = np.array_equal(relabelled, frame_labels)
            frame_labels = relabelled
            if settled:
                break
        if options.interjections and len(centroids) > 1:
            frame_labels = interjections(activity, frame_labels, window)
        frame_labels = _absorb_short_turns(frame_labels, round(options.min_turn_s / FRAME_S))
        frame_labels = _bridge_pauses(frame_labels, round(options.bridge_s / FRAME_S))
        turns = _frames_to_turns(frame_labels)
        if len(centroids) > 1:
            turns += _overlap_turns(scores, frame_labels, count[:n_frames] >= options.overlap_count, options)
        if progress:
            progress(1.0)
        return tuple(sorted(turns, key=lambda turn: (turn.start, turn.speaker)))


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


def _scaled(progress: FractionProgress | None, offset: float, share: float) -> FractionProgress | None:
    if progress is None:
        return None
    return lambda fraction: progress(offset + share * min(1.0, max(0.0, fraction)))


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


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


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


def _frames_to_turns(labels: np.ndarray, min_frames: int = 1) -> list[Turn]:
    return [
        Turn(start=round(start * FRAME_S, 3), end=round(end * FRAME_S, 3), speaker=f"S{label}")
        for start, end, label in _runs(labels)
        if label >= 0 and end - start >= min_frames
    ]
