"""Scoring helpers for tests and benchmarks: WER against a reference text, DER against an RTTM."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# Real recordings with human ground truth live beside the checkout, not in it (their licences differ).
REAL_SPEECH_DEFAULT = ROOT.parent / "shared" / "real-speech"
REAL_SPEECH_HINT = f"expected in {REAL_SPEECH_DEFAULT} or $SCRIBA_REAL_SPEECH"


def real_speech_dir(path: Path | str | None = None) -> Path | None:
    """The real-speech folder (an explicit path, $SCRIBA_REAL_SPEECH, or ../shared/real-speech); None if absent."""
    import os

    folder = Path(path or os.environ.get("SCRIBA_REAL_SPEECH") or REAL_SPEECH_DEFAULT)
    return folder if (folder / "gentle_lucier.wav").exists() else None


def normalise(text: str) -> list[str]:
    """Lower-case words without punctuation (hyphens split words, apostrophes stay)."""
    return re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("-", " ")).split()


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """Edit distance in normalised words, and the reference's length: pooled over files, these give a WER
    weighted by words rather than a mean of ratios."""
    ref, hyp = normalise(reference), normalise(hypothesis)
    previous = list(range(len(hyp) + 1))
    for i, ref_word in enumerate(ref, start=1):
        current = [i] + [0] * len(hyp)
        for j, hyp_word in enumerate(hyp, start=1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref_word != hyp_word))
        previous = current
    return previous[-1], len(ref)


def wer(reference: str, hypothesis: str) -> float:
    errors, length = word_errors(reference, hypothesis)
    return errors / max(1, length)


def _stm_rows(path: Path) -> list[tuple[float, str, str]]:
    """(start, speaker, text) of an STM file (fields: file channel speaker start end text…), in time order."""
    rows = []
    for line in path.read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and not line.startswith(";;"):
            rows.append((float(fields[3]), fields[2], fields[5]))
    return sorted(rows)


def stm_text(path: Path) -> str:
    """The words of an STM file, in time order."""
    return " ".join(text for _, _, text in _stm_rows(path))


def stm_speaker_text(path: Path) -> dict[str, str]:
    """Who said what: each speaker's words of an STM file, in time order (a cpWER reference)."""
    texts: dict[str, list[str]] = {}
    for _, speaker, text in _stm_rows(path):
        texts.setdefault(speaker, []).append(text)
    return {speaker: " ".join(words) for speaker, words in texts.items()}


def rttm_annotation(path: Path) -> Any:
    from pyannote.core import Annotation, Segment

    annotation = Annotation()
    for line in path.read_text().splitlines():
        fields = line.split()
        if fields and fields[0] == "SPEAKER":
            start, duration = float(fields[3]), float(fields[4])
            annotation[Segment(start, start + duration)] = fields[7]
    return annotation


def turns_annotation(turns: Iterable[tuple[float, float, str]]) -> Any:
    from pyannote.core import Annotation, Segment

    annotation = Annotation()
    for start, end, speaker in turns:
        if end > start:
            annotation[Segment(start, end)] = speaker
    return annotation


def transcript_annotation(transcript: dict[str, Any]) -> Any:
    """Who spoke when, as the transcript JSON says it: its speaker-labelled segments."""
    return turns_annotation((s["start"], s["end"], s["speaker"]) for s in transcript["segments"] if s["speaker"])


def der_metric(strict: bool = True) -> Any:
    """Strict: no collar, overlapped speech scored. Forgiving: 0.25 s collar, overlap skipped. Calling it on
    (reference, hypothesis) gives one file's DER; ``abs(metric)`` afterwards is the DER pooled over all."""
    from pyannote.metrics.diarization import DiarizationErrorRate

    return (
        DiarizationErrorRate(collar=0.0, skip_overlap=False)
        if strict
        else DiarizationErrorRate(collar=0.25, skip_overlap=True)
    )


def der(reference: Any, hypothesis: Any, strict: bool = True) -> float:
    return float(der_metric(strict)(reference, hypothesis))


def cpwer(reference: dict[str, str], hypothesis: dict[str, str]) -> tuple[int, int]:
    """CHiME's concatenated minimum-permutation WER (meeteval): each speaker's words concatenated, speakers
    paired to minimise the errors. Returns (errors, reference words); words normalised as for :func:`wer`."""
    from meeteval.wer.wer.cp import cp_word_error_rate

    # Plain texts, already in spoken order: nothing for meeteval to sort by time.
    result = cp_word_error_rate(
        {speaker: " ".join(normalise(text)) for speaker, text in reference.items()},
        {speaker: " ".join(normalise(text)) for speaker, text in hypothesis.items()},
        reference_sort=False,
        hypothesis_sort=False,
    )
    return int(result.errors), int(result.length)


def alone_in_best_chunk(
    turns: Iterable[tuple[float, float, str]], chunk_s: float = 10.0, frame_s: float = 0.01
) -> dict[str, float]:
    """Per speaker of a reference: the most speech they have *alone* (nobody else talking) inside any one
    stretch of ``chunk_s`` seconds (every start on the ``frame_s`` grid; a recording shorter than that is one
    stretch). pyannote's own clustering (``BaseClustering.filter_embeddings``, ``min_active_ratio=0.2``, used by
    community-1's VBx) builds its speakers only from 10 s chunks where a person has at least 2 s of such solo
    speech; a person below that never becomes a cluster of their own, however good the voice prints."""
    rows = [(start, end, speaker) for start, end, speaker in turns if end > start]
    if not rows:
        return {}
    names = sorted({speaker for *_, speaker in rows})
    n_frames = round(max(end for _, end, _ in rows) / frame_s)
    active = np.zeros((len(names), n_frames), dtype=bool)
    for start, end, speaker in rows:
        active[names.index(speaker), round(start / frame_s) : round(end / frame_s)] = True
    alone = active & (active.sum(axis=0) == 1)
    chunk = min(n_frames, round(chunk_s / frame_s))
    # Solo frames in every chunk-long stretch, from a running sum: [k, start] -> frames in start..start+chunk.
    running = np.concatenate([np.zeros((len(names), 1), dtype=np.int64), np.cumsum(alone, axis=1)], axis=1)
    best = (running[:, chunk:] - running[:, :-chunk]).max(axis=1)
    return {name: float(best[index]) * frame_s for index, name in enumerate(names)}


def countable_speakers(
    turns: Iterable[tuple[float, float, str]], min_alone_s: float = 2.0, chunk_s: float = 10.0
) -> int:
    """How many people of a reference have at least ``min_alone_s`` of solo speech inside some ``chunk_s``
    stretch (:func:`alone_in_best_chunk`): the people a diarizer built like pyannote's can count at all."""
    return sum(seconds >= min_alone_s - 1e-9 for seconds in alone_in_best_chunk(turns, chunk_s).values())
