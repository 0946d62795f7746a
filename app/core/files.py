"""Writing a file whole or not at all, in one place: exports, the queue's transcripts, settings, voiceprints,
price and speed tables, GPU fault records, dictation recordings and the diarizer's exported networks."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_target(path: Path, *, private: bool = False) -> Iterator[Path]:
    """A temporary file beside ``path`` (``.NAME.xxxxxxxx.tmp``) for the caller to fill; renamed over ``path``
    when the block ends, removed when it raises. A reader (or a crash) never sees a half-written file, and a good
    older file is only replaced by a complete new one. ``private``: readable by the user alone (0600); otherwise
    the mode any program would give it (the umask), or the mode of the file it replaces."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        # mkstemp makes the file private; a file replaced keeps the mode it had (one made private stays private).
        if not private:
            try:
                mode = stat.S_IMODE(path.stat().st_mode)
            except OSError:
                mode = 0o666 & ~_umask()
            os.chmod(temporary, mode)
        yield temporary
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def write_atomic(path: Path, text: str | bytes, *, private: bool = False) -> None:
    """``path`` holds ``text`` (UTF-8, "\\n" line ends) or bytes as they are, synced to disk, or keeps what it
    held: see :func:`atomic_target`."""
    data = to_bytes(text)
    with atomic_target(path, private=private) as temporary, temporary.open("wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())


def write_atomic_with(path: Path, write: Callable[[Path], object], *, private: bool = False) -> None:
    """``write(temporary)`` makes the file (a library that wants a path: soundfile, ONNX), then it replaces
    ``path`` whole: see :func:`atomic_target`."""
    with atomic_target(path, private=private) as temporary:
        write(temporary)


def _umask() -> int:
    """The process's umask, read without changing it (os.umask sets it, which would race other threads)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def to_bytes(text: str | bytes) -> bytes:
    """What :func:`write_atomic` writes for ``text``: UTF-8 ("\\n" line ends) for text, bytes as they are."""
    return text.encode("utf-8") if isinstance(text, str) else text


def sha256_text(text: str | bytes) -> str:
    """The hash of what :func:`write_atomic` writes for ``text``."""
    return hashlib.sha256(to_bytes(text)).hexdigest()


def file_sha256(path: Path) -> str | None:
    """The hash of a file's bytes; None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()
