"""The GPU batch plan at its edges, which mutation testing found unpinned: the batch size where the free memory
just fits one, two or sixteen elements, what each choice says, and the error texts that mean out of memory.
The figures are written here: 1536 MB kept free for the model's own work, 225 MB per element for large-v3,
110 MB for small, batches in powers of two up to 16."""

from __future__ import annotations

import pytest

from app.core.engine.gpu_plan import choose_batch_size, is_out_of_memory

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers


@pytest.mark.parametrize(
    ("model", "free_mb", "expected"),
    [
        ("large-v3", 1536 + 224, (1, "batch size 1: only 1760 MB of GPU memory free")),
        ("large-v3", 1536 + 225, (1, "batch size 1: 1.7 GB free, about 225 MB per element")),
        ("large-v3", 1536 + 2 * 225, (2, "batch size 2: 1.9 GB free, about 225 MB per element")),
        ("large-v3", 1536 + 16 * 225, (16, "batch size 16: 5.0 GB free, about 225 MB per element")),
        ("large-v3", 1536 + 16 * 225 - 1, (8, "batch size 8: 5.0 GB free, about 225 MB per element")),
        ("small", 1536 + 3 * 110, (2, "batch size 2: 1.8 GB free, about 110 MB per element")),
        ("small", 2100, (4, "batch size 4: 2.1 GB free, about 110 MB per element")),  # 2100 / 1024 = 2.05
    ],
)
def test_the_batch_is_the_largest_power_of_two_the_free_memory_holds(
    model: str, free_mb: float, expected: tuple[int, str]
) -> None:
    assert choose_batch_size(model, "cuda", free_mb) == expected


def test_what_the_batch_choice_says_without_a_gpu_or_without_its_memory() -> None:
    assert choose_batch_size("large-v3", "cpu", 70_000) == (
        0,
        "sequential decoding on CPU (batching costs accuracy there)",
    )
    assert choose_batch_size("large-v3", "cuda", None) == (
        8,
        "batch size 8: GPU memory unknown (NVML unavailable); halves on out-of-memory",
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CUDA failed with error out of memory", True),
        ("CUDA OUT OF MEMORY", True),
        ("cuBLAS failed with status CUBLAS_STATUS_ALLOC_FAILED", True),
        ("an illegal memory access: cudaErrorMemoryAllocation", True),
        ("CUDA failed with error invalid device function", False),
        ("memory", False),
    ],
)
def test_which_errors_mean_out_of_memory(text: str, expected: bool) -> None:
    assert is_out_of_memory(RuntimeError(text)) is expected
