"""The real recordings with human ground truth in ../shared/real-speech (kept out of the repository)."""

from __future__ import annotations

import os
from pathlib import Path


def real_speech_dir() -> Path:
    """SCRIBA_REAL_SPEECH, else ``real-speech`` in the shared folder beside the checkout."""
    configured = os.environ.get("SCRIBA_REAL_SPEECH")
    path = Path(configured) if configured else Path(__file__).resolve().parents[2] / "shared" / "real-speech"
    # Not a skip: these recordings are the ground truth the speaker tests are judged on.
    assert path.is_dir(), f"real speech recordings not found at {path} (set SCRIBA_REAL_SPEECH)"
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
