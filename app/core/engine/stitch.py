"""A long recording in pieces, on several machines, and back as one transcript.

Three steps, each usable on its own:

* :func:`plan_pieces` cuts a recording at its quietest moment near each target length (most often a pause
  between sentences) and gives each piece some audio beyond its cut on both sides, so that Whisper decodes the
  words near a cut with their context and the two pieces' speakers can be compared where they overlap;
* :func:`voice_stats` (on the machine that transcribed a piece) sums up each of its speakers' voice as the
  built-in diarizer's clusters are summed up: the sum of their CAM++ window embeddings, the window count and
  the noise around those windows;
* :func:`stitch` (at home) joins the pieces: the speakers of all pieces are clustered together by the very rule
  the diarizer uses to join the blocks of one long recording (:func:`app.core.engine.diarize.clustering.cluster`),
  so a voice in the first piece and in the last is one speaker; each piece's words are kept from its cut to the
  next; the overlaps, where two pieces heard the same audio, check the result (their agreement is said in the
  transcript's diarization note).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from app.core.engine.diarize.frames import FRAME_S
from app.core.engine.diarize.options import EmbeddedDiarizerOptions
from app.core.engine.diarize.windows import local_voice_spread
from app.core.transcript.document import DiarizationInfo, Segment, SpeakerTurn, Transcript, Word

if TYPE_CHECKING:
    from app.core.engine.diarize.base import SpeakerHints
    from app.core.engine.diarize.bundled_models import SpeakerEmbedding

# The length of a piece when a fleet cuts a long recording across its machines (seconds), and the audio each
# piece shares with its neighbours on either side of a cut: enough for Whisper's context at the cut and for
# both pieces to hear the same speakers there; 15 min keeps each machine's start-up and the overlap small.
DEFAULT_PIECE_S = 900.0
DEFAULT_OVERLAP_S = 15.0
# A recording is cut only when it is this much longer than one piece: a piece of a few minutes is not worth
# its start-up (and its overlap) on another machine.
CUT_WHEN_OVER = 1.5
# The quietest stretch is looked for this far on either side of each target cut, in frames this long.
SEARCH_S = 20.0
QUIET_FRAME_S = 0.1
QUIET_SPAN_FRAMES = 5  # 0.5 s: a pause, not the gap between two syllables
# Overlaps are compared on this grid. Two pieces' speakers are the same person when they hear them alone over
# the same LINK_S seconds at least, and that is LINK_SHARE of either one's single-speaker time there.
GRID_S = 0.1
LINK_S = 2.0
LINK_SHARE = 0.5


@dataclass(frozen=True)
class Piece:
    """One piece: the audio sent is [start, end); its words count from ``keep_from`` to ``keep_to`` (the cuts)."""

    index: int
    start: float
    end: float
    keep_from: float
    keep_to: float

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in ("index", "start", "end", "keep_from", "keep_to")}


def plan_pieces(samples: np.ndarray, sample_rate: int, piece_s: float, overlap_s: float) -> list[Piece]:
    """Pieces of about ``piece_s`` seconds, cut at the quietest half second near each target, each with
    ``overlap_s`` of the neighbouring pieces' audio on both sides. One piece when the recording is short."""
    duration = len(samples) / sample_rate
    if piece_s <= 0 or duration <= piece_s * CUT_WHEN_OVER:
        return [Piece(0, 0.0, duration, 0.0, duration)]
    count = max(2, round(duration / piece_s))
    cuts = [quietest(samples, sample_rate, duration * k / count, SEARCH_S) for k in range(1, count)]
    bounds = [0.0, *cuts, duration]
    return [
        Piece(k, max(0.0, bounds[k] - overlap_s), min(duration, bounds[k + 1] + overlap_s), bounds[k], bounds[k + 1])
        for k in range(count)
    ]


def quietest(samples: np.ndarray, sample_rate: int, around: float, search_s: float) -> float:
    """The middle of the quietest half second within ``search_s`` of ``around`` (seconds)."""
    frame = max(1, round(QUIET_FRAME_S * sample_rate))
    first = max(0, round((around - search_s) * sample_rate) // frame)
    last = min(len(samples) // frame, round((around + search_s) * sample_rate) // frame)
    if last - first < QUIET_SPAN_FRAMES:
        return around
    stretch = samples[first * frame : last * frame].astype(np.float64).reshape(-1, frame)
    energy = np.mean(stretch**2, axis=1)
    spans = np.convolve(energy, np.ones(QUIET_SPAN_FRAMES), mode="valid")
    # Ties (digital silence) go to the one nearest the target, so pieces stay near the length asked for.
    target = (around * sample_rate / frame) - first - QUIET_SPAN_FRAMES / 2
    order = np.lexsort((np.abs(np.arange(len(spans)) - target), spans))
    best = int(order[0])
    return (first + best + QUIET_SPAN_FRAMES / 2) * frame / sample_rate


# --------------------------------------------------------------------------------------------- voices


@dataclass(frozen=True)
class VoiceStats:
    """One speaker of one piece as the diarizer's clustering sees a cluster: the sum of its windows' unit
    embeddings, how many windows, and the sum of their noise (the same-voice spread around each)."""

    total: np.ndarray
    count: int
    noise_sum: float

    def to_dict(self) -> dict[str, Any]:
        return {"sum": [round(float(value), 6) for value in self.total], "count": self.count, "noise": self.noise_sum}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], dimension: int = 192) -> VoiceStats:
        """From another machine's JSON: checked, since it is not trusted."""
        total = np.asarray(data["sum"], dtype=np.float64)
        count = int(data["count"])
        noise = float(data["noise"])
        if total.shape != (dimension,) or not np.all(np.isfinite(total)) or count < 1 or not math.isfinite(noise):
            raise ValueError("a voice summary that is not one")
        if float(np.linalg.norm(total)) > count * 1.001 or noise < 0:
            raise ValueError("a voice summary that no real windows give")  # a sum of count unit vectors
        return cls(total, count, noise)


def voice_stats(
    embedding: SpeakerEmbedding,
    samples: np.ndarray,
    turns: Sequence[tuple[float, float, str]],
    options: EmbeddedDiarizerOptions | None = None,
) -> dict[str, VoiceStats]:
    """Each speaker's :class:`VoiceStats` from the windows of their solo speech (as the diarizer places its
    windows); a speaker with less solo speech than one window has none."""
    from app.core.engine.speakers import solo_spans

    options = options or EmbeddedDiarizerOptions()
    window = round(options.window_s / FRAME_S)
    step = max(1, round(options.step_s / FRAME_S))
    owners: list[str] = []
    starts: list[int] = []
    for speaker in dict.fromkeys(who for _, _, who in turns):
        for start_s, end_s in solo_spans(turns, speaker):
            first, last = round(start_s / FRAME_S), round(end_s / FRAME_S)
            if last - first < window:
                continue
            positions = list(range(first, last - window + 1, step))
            if positions[-1] != last - window:
                positions.append(last - window)
            starts.extend(positions)
            owners.extend([speaker] * len(positions))
    if not starts:
        return {}
    at = np.asarray(starts, dtype=np.int64)
    embeddings = embedding.embed_windows(samples, at, window)
    noise = local_voice_spread(embeddings, at, window, options.noise_neighbours, 0.3)
    who = np.asarray(owners)
    return {
        speaker: VoiceStats(
            embeddings[who == speaker].astype(np.float64).sum(axis=0),
            int(np.sum(who == speaker)),
            float(noise[who == speaker].sum()),
        )
        for speaker in dict.fromkeys(owners)
    }


# --------------------------------------------------------------------------------------------- stitch


@dataclass(frozen=True)
class PieceResult:
    piece: Piece
    transcript: Transcript  # in the piece's own time (0 = the piece's start)
    voices: Mapping[str, VoiceStats]


def stitch(
    parts: Sequence[PieceResult],
    source: str,
    duration: float,
    hints: SpeakerHints | None = None,
    options: EmbeddedDiarizerOptions | None = None,
) -> Transcript:
    """The pieces' transcripts as one transcript of the whole recording (see the module's note)."""
    from app.core.engine.diarize.base import SpeakerHints

    hints = hints or SpeakerHints()
    options = options or EmbeddedDiarizerOptions()
    parts = sorted(parts, key=lambda part: part.piece.start)
    shifted = [part.transcript.shifted(part.piece.start) for part in parts]
    diarized = all(transcript.diarization is not None for transcript in shifted)
    names = _global_speakers(parts, hints, options) if diarized else {}

    def label(index: int, speaker: str | None) -> str | None:
        return names.get((index, speaker), speaker) if speaker is not None else None

    segments: list[Segment] = []
    turns: list[SpeakerTurn] = []
    for index, (part, transcript) in enumerate(zip(parts, shifted, strict=True)):
        low = -math.inf if index == 0 else part.piece.keep_from
        high = math.inf if index == len(parts) - 1 else part.piece.keep_to
        for segment in transcript.segments:
            kept = _kept_segment(segment, low, high)
            if kept is not None:
                words = tuple(replace(word, speaker=label(index, word.speaker)) for word in kept.words)
                segments.append(replace(kept, words=words, speaker=label(index, kept.speaker)))
        if transcript.diarization is not None:
            for turn in transcript.diarization.turns:
                start, end = max(turn.start, low), min(turn.end, high)
                if end > start:
                    turns.append(SpeakerTurn(start, end, label(index, turn.speaker) or turn.speaker))
    segments.sort(key=lambda segment: segment.start)
    turns.sort(key=lambda turn: (turn.start, turn.speaker))
    segments, turns, speakers = _named_in_order(segments, turns)

    first = shifted[0]
    diarization = None
    if diarized and first.diarization is not None:
        agreement = overlap_agreement(parts, names)
        said = f"; speakers agree on {agreement:.0%} of the overlaps" if agreement is not None else ""
        diarization = DiarizationInfo(
            first.diarization.backend,
            f"{first.diarization.reason} (in {len(parts)} pieces on several machines{said})",
            tuple(turns),
        )
    timings: dict[str, float] = {}
    for transcript in shifted:
        for key, value in transcript.timings.items():
            timings[key] = timings.get(key, 0.0) + value
    warnings = tuple(dict.fromkeys(warning for transcript in shifted for warning in transcript.warnings))
    return replace(
        first,
        source=source,
        duration=duration,
        segments=tuple(segments),
        diarization=diarization,
        speakers=speakers,
        timings=timings,
        warnings=warnings,
        identification=None,
    )


def _global_speakers(
    parts: Sequence[PieceResult], hints: SpeakerHints, options: EmbeddedDiarizerOptions
) -> dict[tuple[int, str], str]:
    """(piece, its speaker) -> one label for the whole recording. First the overlaps: two neighbouring pieces
    that hear one speaker each, over the same seconds of shared audio, heard the same person (the strongest
    evidence there is: the same samples). Then the voices: what the overlaps did not join is clustered by the
    diarizer's own rule, never joining two speakers that one piece told apart."""
    keys: list[tuple[int, str]] = []
    for index, part in enumerate(parts):
        transcript = part.transcript
        heard = [turn.speaker for turn in transcript.diarization.turns] if transcript.diarization else []
        heard += [segment.speaker for segment in transcript.segments if segment.speaker]
        keys.extend((index, speaker) for speaker in dict.fromkeys([*heard, *part.voices]))
    root = {key: key for key in keys}

    def find(key: tuple[int, str]) -> tuple[int, str]:
        while root[key] != key:
            key = root[key]
        return key

    for first, second in overlap_links(parts):
        if first in root and second in root:
            root[find(second)] = find(first)
    groups: dict[tuple[int, str], list[tuple[int, str]]] = {}
    for key in keys:
        groups.setdefault(find(key), []).append(key)
    voiced: list[list[tuple[int, str]]] = []
    stats: list[VoiceStats] = []
    for members in groups.values():
        voices = [parts[index].voices[speaker] for index, speaker in members if speaker in parts[index].voices]
        if voices:
            voiced.append(members)
            stats.append(
                VoiceStats(
                    np.sum([voice.total for voice in voices], axis=0),
                    sum(voice.count for voice in voices),
                    sum(voice.noise_sum for voice in voices),
                )
            )
    names: dict[tuple[int, str], str] = {}
    if stats:
        most = min(hints.max_speakers or options.max_speakers, options.max_speakers)
        labels = _merge_across_pieces(
            stats,
            [{index for index, _ in members} for members in voiced],
            min(1.0, options.step_s / options.window_s),
            options.merge_distance,
            hints.num_speakers,
            hints.min_speakers or 1,
            most,
        )
        for members, label in zip(voiced, labels, strict=True):
            names.update((key, f"G{label}") for key in members)
    # A speaker with no solo window to compare, and no overlap to vouch for them, keeps a label of their own
    # (never another's on a guess).
    for members in groups.values():
        for key in members:
            names.setdefault(key, f"P{members[0][0]}:{members[0][1]}")
    return names


def overlap_links(parts: Sequence[PieceResult]) -> list[tuple[tuple[int, str], tuple[int, str]]]:
    """Pairs of (piece, speaker) of neighbouring pieces that hear the same person where they overlap: each pair
    the other's main partner there (one to one), over at least ``LINK_S`` and most of both one's and the other's
    single-speaker time in the overlap."""
    from scipy.optimize import linear_sum_assignment

    links: list[tuple[tuple[int, str], tuple[int, str]]] = []
    for index, grid in _shared_audio(parts):
        one, two = _who_alone(parts[index], grid), _who_alone(parts[index + 1], grid)
        both = (one != "") & (two != "")
        rows, columns = sorted(set(one[both])), sorted(set(two[both]))
        if not rows or not columns:
            continue
        shared = np.zeros((len(rows), len(columns)))
        for a, b in zip(one[both], two[both], strict=True):
            shared[rows.index(a), columns.index(b)] += GRID_S
        for row, column in zip(*linear_sum_assignment(shared, maximize=True), strict=True):
            seconds = shared[row, column]
            if seconds >= LINK_S and seconds >= LINK_SHARE * max(shared[row].sum(), shared[:, column].sum()):
                links.append(((index, rows[row]), (index + 1, columns[column])))
    return links


def _merge_across_pieces(
    stats: Sequence[VoiceStats],
    pieces: Sequence[set[int]],
    independent: float,
    merge_distance: float,
    target: int | None,
    fewest: int,
    most: int,
) -> list[int]:
    """Agglomerative merging of the pieces' speakers by the diarizer's rule (squared distance of the means, less
    the noise each mean carries, below ``merge_distance``), except that two speakers a piece's own diarizer told
    apart are never merged: without that, two similar voices of one piece (two espeak-ng voices at 0.86) both
    joined the cluster of a third piece's speaker one after the other, each pulling its mean towards the next."""
    sums = [voice.total.copy() for voice in stats]
    counts = [float(voice.count) for voice in stats]
    noises = [voice.noise_sum for voice in stats]
    members: list[set[int]] = [{index} for index in range(len(stats))]
    heard_in: list[set[int]] = [set(group) for group in pieces]
    while len(members) > 1:
        means = np.stack([total / count for total, count in zip(sums, counts, strict=True)])
        carried = np.asarray(noises) / (np.asarray(counts) ** 2 * independent)  # mean noise / independent windows
        squared = np.sum((means[:, None, :] - means[None, :, :]) ** 2, axis=2)
        distance = squared - (carried[:, None] + carried[None, :])
        for first in range(len(members)):
            distance[first, first] = np.inf
            for second in range(first + 1, len(members)):
                if heard_in[first] & heard_in[second]:
                    distance[first, second] = distance[second, first] = np.inf
        row, column = divmod(int(np.argmin(distance)), len(members))
        best = float(distance[row, column])
        if not math.isfinite(best):
            break
        if target is not None:
            if len(members) <= target:
                break
        elif len(members) <= most and (best >= merge_distance or len(members) <= fewest):
            break
        keep, drop = min(row, column), max(row, column)
        sums[keep] = sums[keep] + sums[drop]
        counts[keep] += counts[drop]
        noises[keep] += noises[drop]
        members[keep] |= members[drop]
        heard_in[keep] |= heard_in[drop]
        del sums[drop], counts[drop], noises[drop], members[drop], heard_in[drop]
    labels = [0] * len(stats)
    for label, group in enumerate(sorted(members, key=min)):
        for index in group:
            labels[index] = label
    return labels


def overlap_agreement(parts: Sequence[PieceResult], names: Mapping[tuple[int, str], str]) -> float | None:
    """Of the time where two neighbouring pieces each hear one speaker in their shared audio, the share where
    they name the same one; None when no overlap holds such time."""
    agree = total = 0
    for index, grid in _shared_audio(parts):
        one = np.asarray([names.get((index, who), "") if who else "" for who in _who_alone(parts[index], grid)])
        two = np.asarray([names.get((index + 1, who), "") if who else "" for who in _who_alone(parts[index + 1], grid)])
        both = (one != "") & (two != "")
        total += int(both.sum())
        agree += int((both & (one == two)).sum())
    return agree / total if total else None


def _shared_audio(parts: Sequence[PieceResult]) -> Iterator[tuple[int, np.ndarray]]:
    """For each piece i that shares audio with piece i + 1: i and the times of that audio, on the grid."""
    for index in range(len(parts) - 1):
        start, end = parts[index + 1].piece.start, parts[index].piece.end
        if end - start >= GRID_S:
            yield index, np.arange(start, end, GRID_S) + GRID_S / 2


def _who_alone(part: PieceResult, grid: np.ndarray) -> np.ndarray:
    """At each grid time (recording time): the one speaker this piece hears (its own label), or '' (nobody, or
    several at once)."""
    heard = np.full(len(grid), "", dtype=object)
    count = np.zeros(len(grid), dtype=np.int64)
    if part.transcript.diarization is None:
        return heard
    for turn in part.transcript.diarization.turns:
        inside = (grid >= turn.start + part.piece.start) & (grid < turn.end + part.piece.start)
        heard[inside] = turn.speaker
        count[inside] += 1
    heard[count != 1] = ""
    return heard


def _kept_segment(segment: Segment, low: float, high: float) -> Segment | None:
    """The part of ``segment`` that belongs to this piece: the words that start in [low, high)."""
    if not segment.words:
        return segment if low <= segment.start < high else None
    words = [word for word in segment.words if low <= word.start < high]
    if not words:
        return None
    if len(words) == len(segment.words):
        return segment
    return Segment(words[0].start, words[-1].end, "".join(w.word for w in words).strip(), tuple(words), segment.speaker)


def _named_in_order(
    segments: list[Segment], turns: list[SpeakerTurn]
) -> tuple[list[Segment], list[SpeakerTurn], tuple[str, ...]]:
    """SPEAKER_00, SPEAKER_01 … in order of first appearance in the words, then in the turns (as the engine
    names them)."""
    order: dict[str, str] = {}
    appearances = [who for s in segments for who in (s.speaker, *(w.speaker for w in s.words))]
    for speaker in appearances + [turn.speaker for turn in turns]:
        if speaker is not None and speaker not in order:
            order[speaker] = f"SPEAKER_{len(order):02d}"

    def rename(word: Word) -> Word:
        return replace(word, speaker=order.get(word.speaker) if word.speaker else None)

    segments = [
        replace(s, speaker=order.get(s.speaker) if s.speaker else None, words=tuple(map(rename, s.words)))
        for s in segments
    ]
    turns = [replace(turn, speaker=order[turn.speaker]) for turn in turns]
    return segments, turns, tuple(order.values())
