"""Real recordings damaged the ways copies get damaged, and small real file systems that fill up.

Made at test time from pyannote's sample call, so the speech (and what tiny.en hears in it) is real.
"""

from __future__ import annotations

import contextlib
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soundfile

# 91 s of speech, cut at 34 %: the decoder stops after about 31 s, as in issue 18's report (30.9 of 91 s).
CLAIMED_SECONDS = 91.0
KEPT_FRACTION = 0.34


def _speech(sample_wav: Path, seconds: float) -> tuple[np.ndarray, int]:
    samples, rate = soundfile.read(sample_wav, dtype="float32")
    repeats = int(np.ceil(seconds * rate / len(samples)))
    return np.tile(samples, repeats)[: int(seconds * rate)], rate


def truncated_flac(sample_wav: Path, path: Path) -> Path:
    """A FLAC whose header says 91 s but whose bytes stop at a third: an interrupted copy or download.
    FFmpeg decodes what is there, then fails ("Invalid data found when processing input")."""
    samples, rate = _speech(sample_wav, CLAIMED_SECONDS)
    whole = path.with_name(f".whole-{uuid.uuid4().hex}.flac")
    soundfile.write(whole, samples, rate, format="FLAC")
    data = whole.read_bytes()
    whole.unlink()
    path.write_bytes(data[: int(len(data) * KEPT_FRACTION)])
    return path


def flac_with_a_damaged_tail(sample_wav: Path, path: Path) -> Path:
    """A FLAC whose last two thirds were overwritten with noise (a bad sector): FFmpeg skips the garbage without
    an error, so only the length the container claims shows that most of the recording is missing."""
    samples, rate = _speech(sample_wav, CLAIMED_SECONDS)
    soundfile.write(path, samples, rate, format="FLAC")
    data = bytearray(path.read_bytes())
    cut = int(len(data) * KEPT_FRACTION)
    data[cut:] = np.random.default_rng(18).bytes(len(data) - cut)
    path.write_bytes(bytes(data))
    return path


def can_mount() -> bool:
    probe = Path("/tmp") / f"scriba-mount-probe-{uuid.uuid4().hex}"
    probe.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True)
        if mounted.returncode != 0:
            return False
        subprocess.run(["umount", str(probe)], check=True)
        return True
    except OSError:
        return False
    finally:
        probe.rmdir()


@contextlib.contextmanager
def small_disk(path: Path, size: str = "4m", read_only: bool = False) -> Iterator[Path]:
    """A real tmpfs of ``size`` mounted at ``path`` (root only), unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True, capture_output=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def fill(disk: Path) -> Path:
    """Write zeros until the file system says it is full (ENOSPC). Returns the filler, to delete later."""
    filler = disk / "filler.bin"
    block = b"\0" * 65536
    with filler.open("wb") as stream:
        try:
            while True:
                stream.write(block)
                stream.flush()
        except OSError:
            pass
    with contextlib.suppress(OSError), filler.open("ab") as stream:  # the last partial block
        for _ in range(4096):
            stream.write(b"\0" * 512)
            stream.flush()
    return filler


def mp3_with_a_damaged_middle(wav: Path, path: Path, seconds: float = 60.0) -> tuple[float, float]:
    """The first ``seconds`` of a real recording as a constant-bit-rate MP3 (64 kb/s) whose middle fifth of bytes
    was overwritten with noise, as a bad sector does. Returns where the damage lies in the recording, in seconds
    (at a constant bit rate, bytes are time)."""
    import av

    samples, rate = soundfile.read(wav, dtype="float32")
    samples = samples[: int(seconds * rate)]
    with av.open(str(path), "w", format="mp3") as container:
        stream = container.add_stream("libmp3lame", rate=rate)
        stream.layout = "mono"
        stream.bit_rate = 64000
        frame_size = stream.codec_context.frame_size or 1152
        for start in range(0, len(samples), frame_size):
            chunk = (samples[start : start + frame_size] * 32767).astype(np.int16)
            frame = av.AudioFrame.from_ndarray(chunk.reshape(1, -1), format="s16", layout="mono")
            frame.sample_rate, frame.pts = rate, start
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    data = bytearray(path.read_bytes())
    first, last = int(len(data) * 0.4), int(len(data) * 0.6)
    data[first:last] = np.random.default_rng(38).bytes(last - first)
    path.write_bytes(bytes(data))
    return 0.4 * seconds, 0.6 * seconds
