"""Giving freed memory back to the operating system during long jobs.

glibc's allocator keeps memory a process has freed for its own reuse. The networks' activations (about 8 MB per
speaker-embedding window, batches of 16) are freed after every batch, but glibc raises its mmap threshold after
freeing such blocks, so later ones come from the heap, and the heap's free holes are not returned: the resident
size then grows with the number of batches, that is with the recording's length. Measured on a three-hour
recording (``benchmarks/bench_long.py`` material, the built-in diarizer alone): the embedding step raised the
resident size by 620 MB where 150 MB were live; trimming after each block of windows kept it to 300 MB and the
diarizer's peak fell from 2.71 to 2.25 GB. ``malloc_trim`` releases the free pages inside the heap as well as at
its top (glibc 2.8 and later); it costs a few milliseconds, so it is called once per block of work, not per
batch.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _libc() -> Any | None:
    if not sys.platform.startswith("linux"):
        return None  # macOS and Windows allocators return large freed blocks themselves
    name = ctypes.util.find_library("c")
    try:
        library = ctypes.CDLL(name or "libc.so.6")
        trim = library.malloc_trim
    except (OSError, AttributeError):
        return None  # musl (Alpine) has no malloc_trim; its allocator unmaps freed blocks itself
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_freed_memory() -> bool:
    """Return the allocator's free pages to the system; True when something was given back.

    A no-op (False) where the C library has no ``malloc_trim``."""
    trim = _libc()
    if trim is None:
        return False
    return bool(trim(0))
