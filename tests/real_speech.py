"""The real recordings with human ground truth in ../shared/real-speech (kept out of the repository)."""

from __future__ import annotations

from pathlib import Path

from tests import metrics


def real_speech_dir() -> Path:
    """SCRIBA_REAL_SPEECH, else ``real-speech`` in the shared folder beside the checkout."""
    path = metrics.real_speech_dir()
    # Not a skip: these recordings are the ground truth the speaker tests are judged on.
    assert path is not None, f"real speech recordings not found: {metrics.REAL_SPEECH_HINT}"
    return path


def rttm_turns(path: Path) -> list[tuple[float, float, str]]:
    """(start, end, speaker) of every SPEAKER line of an RTTM file."""
    turns = []
    for line in path.read_text().splitlines():
        fields = line.split()
        if fields and fields[0] == "SPEAKER":
            start, duration = float(fields[3]), float(fields[4])
            turns.append((start, start + duration, fields[7]))
    return turns
