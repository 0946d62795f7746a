"""Freed memory goes back to the system (the fragmentation that made long recordings' memory grow)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from app.core.engine.memory import release_freed_memory


def resident_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm; trims glibc's heap")
def test_holes_left_in_the_heap_are_returned() -> None:
    # 20,000 blocks of 8 KB come from the heap (under glibc's mmap threshold); keeping every 50th leaves the
    # freed ones as holes that the allocator keeps for itself, as the networks' freed activations were kept.
    blocks = [np.ones(1024) for _ in range(20_000)]
    kept = blocks[::50]
    del blocks
    before = resident_mb()
    assert release_freed_memory()
    after = resident_mb()
    assert before - after > 80, f"resident {before:.0f} MB before the trim, {after:.0f} MB after"
    assert all(float(block.sum()) == 1024 for block in kept)  # what was still in use is untouched
