"""Scoring helpers for tests and benchmarks: WER against a reference text, DER against an RTTM."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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


def wer(reference: str, hypothesis: str) -> float:
    ref, hyp = normalise(reference), normalise(hypothesis)
    previous = list(range(len(hyp) + 1))
    for i, ref_word in enumerate(ref, start=1):
        current = [i] + [0] * len(hyp)
        for j, hyp_word in enumerate(hyp, start=1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref_word != hyp_word))
        previous = current
    return previous[-1] / max(1, len(ref))


def stm_text(path: Path) -> str:
    """The words of an STM file (fields: file channel speaker start end text…), in time order."""
    rows = []
    for line in path.read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and not line.startswith(";;"):
            rows.append((float(fields[3]), fields[5]))
    return " ".join(text for _, text in sorted(rows))


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


def der(reference: Any, hypothesis: Any, strict: bool = True) -> float:
    """Strict: no collar, overlapped speech scored. Forgiving: 0.25 s collar, overlap skipped."""
    from pyannote.metrics.diarization import DiarizationErrorRate

    metric = (
        DiarizationErrorRate(collar=0.0, skip_overlap=False)
        if strict
        else DiarizationErrorRate(collar=0.25, skip_overlap=True)
    )
    return float(metric(reference, hypothesis))
