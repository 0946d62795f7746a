"""A real process that writes a recording into a folder in two parts, stalling in between until it is told to
go on: a copy that stalls (a slow share, a USB stick), a transfer that resumes, a recorder that saves as it goes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# "open": one open file, as a stalled `cp` holds it; "reopened": closed between the two parts, as a transfer that
# resumes appends them; "rewritten": the first part is a whole recording of its own, later replaced by the
# second (a recorder that saves as it goes).
SCRIPT = r"""
import sys
from pathlib import Path

mode, destination, first, rest = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
if mode == "open":
    stream = destination.open("wb")
    stream.write(first.read_bytes())
    stream.flush()
else:
    destination.write_bytes(first.read_bytes())
print("first part written", flush=True)
sys.stdin.readline()
if mode == "open":
    stream.write(rest.read_bytes())
    stream.close()
elif mode == "reopened":
    with destination.open("ab") as stream:
        stream.write(rest.read_bytes())
else:
    destination.write_bytes(rest.read_bytes())
print("done", flush=True)
"""


def split_wav(source: Path, folder: Path) -> tuple[Path, Path, int]:
    """``source`` (a PCM WAV) cut at half its audio, on a sample boundary: the header and the first half, the
    rest, and where its audio starts. Written to ``folder``."""
    whole = source.read_bytes()
    start = whole.index(b"data", 12) + 8
    half = start + (len(whole) - start) // 4 * 2
    first, rest = folder / f"{source.stem}.first", folder / f"{source.stem}.rest"
    first.write_bytes(whole[:half])
    rest.write_bytes(whole[half:])
    return first, rest, start


class SlowWriter:
    def __init__(self, mode: str, target: Path, first: Path, rest: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, mode, str(target), str(first), str(rest)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line == "first part written\n", line

    @property
    def pid(self) -> int:
        return self.process.pid

    def finish(self) -> None:
        """Write the second part and end (the copy completes)."""
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        assert self.process.wait(timeout=30) == 0

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
