"""The fleet's units of work: a whole file, or a piece of a long one (cut here, sent as FLAC, stitched back).

A long recording on one node would keep the others idle while it runs, and keep the whole fleet waiting for
it. When the fleet has more than one node, a file longer than a piece and a half is cut at quiet moments
(app/core/engine/stitch.py), each piece is written losslessly as 16 kHz mono FLAC (what the engine decodes
to anyway: nothing the transcription uses is lost, and it is about a quarter of the size of the WAV a node
would otherwise fetch) and queued like a file of its own. A node returns each piece's transcript with its
speakers' voice summaries; when the last piece of a file is in, the file's transcript is stitched here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.engine.stitch import PieceResult, VoiceStats, plan_pieces, stitch
from app.core.errors import ScribaError
from app.core.queue.jobs import JobOptions
from app.core.transcript.document import Transcript

PIECE_RATE = 16000
# 16 kHz mono FLAC of speech takes up to about this many bytes a second (benchmarks/bench_transcode.py: 8.5-20
# kB/s on real recordings). A whole file at least TRANSCODE_GAIN times larger than that goes up as FLAC (what
# every node decodes it to anyway): a 16 kHz mono WAV shrinks by 37-70 % with the same words, a 44.1 kHz stereo
# WAV by 90 % with the same or fewer errors; a 128 kbit/s MP3 (16 kB/s) goes up as it is. Files up to
# TRANSCODE_MAX_S only: the decoded samples are held in memory while the FLAC is written (230 MB an hour).
FLAC_BYTES_PER_S = 20_000
TRANSCODE_GAIN = 1.5
TRANSCODE_MAX_S = 3600.0


@dataclass(frozen=True)
class Unit:
    """One job on the queue: file ``file`` whole (``piece`` None) or one of its pieces; ``path`` is served."""

    job: int
    file: int
    path: Path
    label: str  # for status lines: "talk.wav", or "talk.wav (part 2 of 3)"
    piece: Any = None  # app.core.engine.stitch.Piece


@dataclass
class Assembly:
    """The pieces of one file as they come back."""

    source: Path
    duration: float
    count: int
    options: JobOptions
    parts: dict[int, PieceResult] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, unit: Unit, transcript: Transcript, voices: Mapping[str, VoiceStats], seconds: float) -> bool:
        """Whether this was the last piece."""
        self.parts[unit.piece.index] = PieceResult(unit.piece, transcript, voices)
        self.seconds += seconds
        return len(self.parts) == self.count

    def transcript(self) -> Transcript:
        hints = self.options.to_pipeline(None).diarizer.hints
        return stitch(list(self.parts.values()), str(self.source.absolute()), self.duration, hints)


def piece_length(durations: Sequence[float | None], nodes: int, longest_s: float, shortest_s: float) -> float:
    """How long the pieces of this fleet's long files should be (0: none is cut). A fleet lasts at least as long
    as its longest job: with all the audio shared out evenly each node has ``total / nodes``; pieces of half
    that keep every node busy to the end. Never longer than ``longest_s`` (a node's result should come back
    within minutes), never shorter than ``shortest_s`` (each piece costs its overlap and a model's warm-up)."""
    if nodes < 2:
        return 0.0
    total = sum(duration for duration in durations if duration)
    return min(longest_s, max(shortest_s, total / (2 * nodes)))


def plan_units(
    files: Sequence[Path],
    options: Sequence[JobOptions],
    nodes: int,
    lengths: tuple[float, float, float],
    folder: Path,
    status: Callable[[str], None],
) -> tuple[list[Unit], dict[int, Assembly], dict[int, str]]:
    """The queue's units for ``files`` on ``nodes`` nodes (``lengths``: the longest and shortest piece and the
    overlap, seconds), the assemblies of the cut files, and the files that could not be read here (each failed
    with its reason; the others go on)."""
    from app.core.engine.audio import decode_audio, probe_duration

    units: list[Unit] = []
    assemblies: dict[int, Assembly] = {}
    failures: dict[int, str] = {}
    durations: list[float | None] = []
    for path in files:
        duration = None
        with contextlib.suppress(Exception):  # unreadable here: the node says what is wrong with it
            duration = probe_duration(path)
        durations.append(duration)
    longest_s, shortest_s, overlap_s = lengths
    piece_s = piece_length(durations, nodes, longest_s, shortest_s)
    for index, (path, duration) in enumerate(zip(files, durations, strict=True)):
        if piece_s <= 0 or duration is None or duration <= piece_s * 1.5:
            units.append(Unit(len(units), index, _smaller(path, duration, folder / f"{index:04d}.flac"), path.name))
            continue
        try:
            audio = decode_audio(path, PIECE_RATE)
        except ScribaError as error:
            failures[index] = str(error)
            continue
        pieces = plan_pieces(audio.samples, PIECE_RATE, piece_s, overlap_s)
        if len(pieces) == 1:  # the decoded length is under the header's: whole after all
            units.append(Unit(len(units), index, _smaller(path, duration, folder / f"{index:04d}.flac"), path.name))
            continue
        status(f"{path.name}: cut into {len(pieces)} pieces, one node each")
        assemblies[index] = Assembly(path, audio.duration, len(pieces), options[index])
        for piece in pieces:
            target = folder / f"{index:04d}-{piece.index:02d}.flac"
            _write_flac(target, audio.samples[round(piece.start * PIECE_RATE) : round(piece.end * PIECE_RATE)])
            label = f"{path.name} (part {piece.index + 1} of {len(pieces)})"
            units.append(Unit(len(units), index, target, label, piece))
        del audio
    return units, assemblies, failures


def _smaller(path: Path, duration: float | None, target: Path) -> Path:
    """``path`` as 16 kHz mono FLAC when that is much smaller (a WAV, a video), else ``path`` itself."""
    from app.core.engine.audio import decode_audio

    try:
        size = path.stat().st_size
    except OSError:
        return path
    if duration is None or duration > TRANSCODE_MAX_S or size < FLAC_BYTES_PER_S * duration * TRANSCODE_GAIN:
        return path
    try:
        audio = decode_audio(path, PIECE_RATE)
    except ScribaError:
        return path  # sent as it is: the node says what is wrong with it, as for any file
    _write_flac(target, audio.samples)
    return target if target.stat().st_size < size else path


def read_voices(value: Any) -> dict[str, VoiceStats]:
    """A node's voice summaries (untrusted JSON); ValueError when they are not what a node computes."""
    if not isinstance(value, dict):
        raise ValueError("no voice summaries")
    return {str(speaker): VoiceStats.from_dict(stats) for speaker, stats in value.items()}


def _write_flac(path: Path, samples: Any) -> None:
    import soundfile

    soundfile.write(path, samples, PIECE_RATE, format="FLAC", subtype="PCM_16")
