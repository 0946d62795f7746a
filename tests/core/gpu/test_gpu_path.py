"""The fast GPU path on a machine without a GPU: the CUDA 12 libraries really load, and the compute-type
fallback and the out-of-memory backoff run the real model on CPU with injected GPU failures. Where a GPU is
there, device selection is checked to pick it and the sample call is transcribed on it.

The failures are the ones CTranslate2 itself raises: asking its CPU backend for float16 produces the same
ValueError a GPU without fast float16 (Pascal, Maxwell) produces, and an out-of-memory error is raised with
CTranslate2's CUDA wording from inside the segment generator, where a real one happens.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.engine import transcribe as transcribe_module
from app.core.engine.audio import decode_audio
from app.core.engine.gpu_plan import (
    GpuMemory,
    choose_batch_size,
    choose_model,
    fit_warning,
    is_cuda_error,
    is_out_of_memory,
)
from app.core.engine.models import CATALOG
from app.core.engine.transcribe import Transcriber, TranscriptionOptions, select_device
from app.core.errors import DeviceError
from app.core.gpu.cuda_libs import CudaLibrary, _load, install_hint, preload_cuda_libraries

CUDA_OOM = "CUDA failed with error out of memory"


def test_cuda12_cublas_loads_from_its_wheel_without_a_gpu() -> None:
    statuses = {status.soname: status for status in preload_cuda_libraries()}
    for soname in ("libcublasLt.so.12", "libcublas.so.12"):
        status = statuses[soname]
        assert status.loaded and status.origin == "wheel", status
        assert status.path is not None and status.path.endswith(f"nvidia/cublas/lib/{soname}")
    mapped = Path("/proc/self/maps").read_text()
    assert "nvidia/cublas/lib/libcublas.so.12" in mapped
    # The call is the check: with the library in the process, CTranslate2's CUDA runtime still answers (a
    # clash of two CUDA library versions aborts the process here).
    _cuda_gpus()


def test_a_missing_library_is_reported_with_what_to_install(tmp_path: Path) -> None:
    missing = CudaLibrary("cuBLAS 12", "libscriba-absent.so.12", "nvidia-cublas-cu12", True)
    status = _load(missing, [tmp_path])
    assert not status.loaded and status.origin == "missing"
    assert status.error and "libscriba-absent.so.12" in status.error
    assert install_hint([status]) == "pip install 'nvidia-cublas-cu12'"


def _cuda_gpus() -> int:
    import ctranslate2

    return int(ctranslate2.get_cuda_device_count())


def test_device_selection_here_says_why() -> None:
    device, reason = select_device("auto")
    if _cuda_gpus() == 0:
        assert device == "cpu" and "sees no CUDA GPU" in reason
        with pytest.raises(DeviceError, match="scriba doctor"):
            select_device("cuda")
    else:  # a machine with a GPU picks it
        assert device == "cuda", reason
        assert select_device("cuda")[0] == "cuda"


@pytest.mark.skipif(_cuda_gpus() == 0, reason="no CUDA GPU on this machine: the CPU path above stands in for it")
def test_the_sample_call_on_a_real_gpu(sample_dir: Path) -> None:
    """Only where CTranslate2 sees a GPU: the real CUDA path, with the first compute type the card accepts."""
    from app.core.engine.transcribe import COMPUTE_TYPE_CHAIN

    transcriber = Transcriber(TranscriptionOptions(model="tiny.en", device="cuda", language="en"))
    result = transcriber.transcribe(decode_audio(sample_dir / "sample.wav"))
    assert result.device == "cuda" and result.compute_type in COMPUTE_TYPE_CHAIN["cuda"]
    assert "yankee" in " ".join(segment.text for segment in result.segments).lower()


@pytest.fixture()
def pretend_gpu(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """CTranslate2 'sees' one GPU whose models are built on the CPU backend; returns the load attempts."""
    import ctranslate2

    monkeypatch.setattr(transcribe_module, "cuda_device_count", lambda: 1)
    # A recent card's compute types, so the chain is tried in full. Without a driver CTranslate2's own answer
    # changes from call to call (an error the first time, {"float32"} after), so a test's chain would depend on
    # which test asked first.
    real = ctranslate2.get_supported_compute_types
    supported = {"float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "float16", "bfloat16"}
    monkeypatch.setattr(
        ctranslate2,
        "get_supported_compute_types",
        lambda device, *args: set(supported) if device == "cuda" else real(device, *args),
    )
    return []


def _cpu_backed_factory(attempts: list[tuple[str, str]]) -> Any:
    from faster_whisper import WhisperModel

    def factory(path: str, *, device: str, compute_type: str, cpu_threads: int) -> Any:
        attempts.append((device, compute_type))
        return WhisperModel(path, device="cpu", compute_type=compute_type, cpu_threads=cpu_threads)

    return factory


def _gpu_memory(free_mb: float, total_mb: float = 8192) -> Any:
    return lambda: ([GpuMemory(0, "Stand-in GPU", total_mb, free_mb)], "stand-in")


def test_compute_type_chain_falls_back_and_logs(
    pretend_gpu: list[tuple[str, str]], sample_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    options = TranscriptionOptions(model="tiny.en", device="cuda", language="en", batch_size=0)
    transcriber = Transcriber(options, model_factory=_cpu_backed_factory(pretend_gpu), memory_probe=_gpu_memory(6000))
    with caplog.at_level(logging.WARNING, logger="app.core.engine.transcribe"):
        result = transcriber.transcribe(decode_audio(sample_dir / "sample.wav"))
    assert pretend_gpu == [("cuda", "int8_float16"), ("cuda", "float16"), ("cuda", "int8")]
    assert result.compute_type == "int8" and result.device == "cuda"
    assert len(transcriber.fallbacks) == 2
    assert "efficient int8_float16 computation" in transcriber.fallbacks[0]
    assert "efficient float16 computation" in transcriber.fallbacks[1]
    assert "using compute type int8 after" in caplog.text
    assert "yankee" in " ".join(segment.text for segment in result.segments).lower()


class _OomAbove:
    """faster-whisper's batched pipeline that runs out of GPU memory above ``limit`` (records each try)."""

    def __init__(self, limit: int, tries: list[int]) -> None:
        self.limit = limit
        self.tries = tries

    def __call__(self, model: Any) -> Any:
        from faster_whisper import BatchedInferencePipeline

        real = BatchedInferencePipeline(model=model)
        limit, tries = self.limit, self.tries

        class Pipeline:
            def transcribe(self, audio: Any, batch_size: int, **kwargs: Any) -> tuple[Iterator[Any], Any]:
                tries.append(batch_size)
                segments, info = real.transcribe(audio, batch_size=batch_size, **kwargs)
                if batch_size <= limit:
                    return segments, info

                def failing() -> Iterator[Any]:
                    raise RuntimeError(CUDA_OOM)
                    yield  # a generator, like faster-whisper's: the error comes at the first batch

                return failing(), info

        return Pipeline()


def test_out_of_memory_halves_the_batch_and_finishes(pretend_gpu: list[tuple[str, str]], sample_dir: Path) -> None:
    audio = decode_audio(sample_dir / "sample.wav")
    tries: list[int] = []
    # 6 GB free: the automatic choice is 16 for tiny.en; the card "fits" only 4.
    transcriber = Transcriber(
        TranscriptionOptions(model="tiny.en", device="cuda", language="en", compute_type="int8"),
        model_factory=_cpu_backed_factory(pretend_gpu),
        batched_factory=_OomAbove(4, tries),
        memory_probe=_gpu_memory(6000),
    )
    result = transcriber.transcribe(audio)
    assert tries == [16, 8, 4]
    assert result.batch_size == 4 and transcriber.batch_size == 4
    assert transcriber.fallbacks == [
        "batch size 16: out of GPU memory, retried with 8",
        "batch size 8: out of GPU memory, retried with 4",
    ]
    # The retried job gives what a job at batch 4 gives from the start.
    direct = Transcriber(
        TranscriptionOptions(model="tiny.en", device="cuda", language="en", compute_type="int8", batch_size=4),
        model_factory=_cpu_backed_factory([]),
        memory_probe=_gpu_memory(6000),
    ).transcribe(audio)
    assert [segment.text for segment in result.segments] == [segment.text for segment in direct.segments]


class _MemoryShrinks:
    """faster-whisper's batched pipeline on a card where another program takes memory after the first piece:
    batch 8 fits the first call, from the second call on only ``limit`` does (records each try)."""

    def __init__(self, limit: int, tries: list[int]) -> None:
        self.limit = limit
        self.tries = tries

    def __call__(self, model: Any) -> Any:
        from faster_whisper import BatchedInferencePipeline

        real = BatchedInferencePipeline(model=model)
        limit, tries = self.limit, self.tries

        class Pipeline:
            def transcribe(self, audio: Any, batch_size: int, **kwargs: Any) -> tuple[Iterator[Any], Any]:
                tries.append(batch_size)
                segments, info = real.transcribe(audio, batch_size=batch_size, **kwargs)
                if len(tries) == 1 or batch_size <= limit:
                    return segments, info

                def failing() -> Iterator[Any]:
                    raise RuntimeError(CUDA_OOM)
                    yield

                return failing(), info

        return Pipeline()


def test_out_of_memory_in_the_second_piece_keeps_the_halved_batch_for_the_rest(
    pretend_gpu: list[tuple[str, str]], sample_dir: Path
) -> None:
    """The call (30 s) in pieces of about 10 s: three pieces. The second runs out of memory at batch 8 and is
    redone at 4; the third must start at 4, not try 8 again."""
    audio = decode_audio(sample_dir / "sample.wav")
    tries: list[int] = []
    transcriber = Transcriber(
        TranscriptionOptions(
            model="tiny.en", device="cuda", language="en", compute_type="int8", batch_size=8, piece_s=10.0
        ),
        model_factory=_cpu_backed_factory(pretend_gpu),
        batched_factory=_MemoryShrinks(4, tries),
        memory_probe=_gpu_memory(6000),
    )
    result = transcriber.transcribe(audio)
    # piece 1 at 8; piece 2 at 8 (out of memory), again at 4; piece 3 at 4.
    assert tries == [8, 8, 4, 4]
    assert transcriber.fallbacks == ["batch size 8: out of GPU memory, retried with 4"]
    assert result.batch_size == 4
    assert result.segments[-1].end > 20.0  # the third piece's words are there


def test_out_of_memory_at_batch_one_fails_with_advice(pretend_gpu: list[tuple[str, str]], sample_dir: Path) -> None:
    tries: list[int] = []
    transcriber = Transcriber(
        TranscriptionOptions(model="tiny.en", device="cuda", language="en", compute_type="int8", batch_size=2),
        model_factory=_cpu_backed_factory(pretend_gpu),
        batched_factory=_OomAbove(0, tries),
        memory_probe=_gpu_memory(6000),
    )
    with pytest.raises(DeviceError, match=r"ran out of GPU memory even at batch size 1.*smaller model"):
        transcriber.transcribe(decode_audio(sample_dir / "sample.wav"))
    assert tries == [2, 1]


def test_other_runtime_errors_are_not_retried(pretend_gpu: list[tuple[str, str]], sample_dir: Path) -> None:
    class Broken:
        def __init__(self, model: Any) -> None:
            self.calls = 0

        def transcribe(self, audio: Any, batch_size: int, **kwargs: Any) -> Any:
            raise RuntimeError("CUDA failed with error an illegal memory access was encountered")

    transcriber = Transcriber(
        TranscriptionOptions(model="tiny.en", device="cuda", compute_type="int8", batch_size=8),
        model_factory=_cpu_backed_factory(pretend_gpu),
        batched_factory=Broken,
        memory_probe=_gpu_memory(6000),
    )
    with pytest.raises(RuntimeError, match="illegal memory access"):
        transcriber.transcribe(decode_audio(sample_dir / "sample.wav"))
    assert transcriber.fallbacks == []


def test_out_of_memory_wordings() -> None:
    assert is_out_of_memory(RuntimeError(CUDA_OOM))
    assert is_out_of_memory(RuntimeError("cuBLAS failed with status CUBLAS_STATUS_ALLOC_FAILED"))
    assert not is_out_of_memory(RuntimeError("CUDA failed with error invalid device function"))


@pytest.fixture()
def model_cache(tmp_path: Path) -> Path:
    """A model cache holding four catalog models (directory layout only: selection never loads them)."""
    for name in ("large-v3", "turbo", "medium", "small"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.bin").write_bytes(b"")
        (tmp_path / name / "config.json").write_text("{}")
    return tmp_path


@pytest.mark.parametrize(
    ("device", "vram_gb", "expected"),
    [("cuda", 80, "large-v3"), ("cuda", 8, "turbo"), ("cuda", 4, "small"), ("cpu", None, "small")],
)
def test_default_model_by_vram(model_cache: Path, device: str, vram_gb: float | None, expected: str) -> None:
    choice = choose_model(device, vram_gb * 1024 if vram_gb else None, model_cache)
    assert choice.model.name == expected
    assert choice.model.path == model_cache / expected
    assert CATALOG[expected].vram_gb <= (vram_gb or 2)


def test_default_model_suggests_a_download_that_would_fit(tmp_path: Path) -> None:
    choice = choose_model("cuda", 24 * 1024, tmp_path)  # nothing downloaded: the bundled tiny.en
    assert choice.model.name == "tiny.en"
    # "on disk": tiny.en is the best model there is here, not the best that would fit the card.
    assert choice.reason.startswith("tiny.en: the most accurate model on disk that fits the GPU's 24 GB;")
    assert "large-v3 would fit too: `scriba models download large-v3`" in choice.reason


def test_warning_before_a_model_that_will_not_fit() -> None:
    small_card = GpuMemory(0, "NVIDIA GeForce RTX 3070", 8192, 7600)
    warning = fit_warning("large-v3", small_card)
    assert warning is not None
    assert "large-v3 needs about 10 GB" in warning and "RTX 3070) has 8.0 GB" in warning
    assert "pick turbo (6 GB)" in warning
    busy_card = GpuMemory(0, "NVIDIA A10G", 24576, 4096)
    busy = fit_warning("medium", busy_card)
    assert busy is not None and "only 4.0 GB of NVIDIA A10G's 24.0 GB is free now" in busy
    assert fit_warning("large-v3", GpuMemory(0, "NVIDIA H100", 81559, 80000)) is None
    assert fit_warning("large-v3", None) is None


@pytest.mark.parametrize(
    ("model", "device", "free_mb", "expected"),
    [
        ("large-v3", "cuda", 70_000, 16),
        ("large-v3", "cuda", 4096, 8),  # (4096 - 1536) / 225 = 11 -> 8
        ("large-v3", "cuda", 1600, 1),
        ("small", "cuda", 2048, 4),  # (2048 - 1536) / 110 = 4
        ("large-v3", "cuda", None, 8),
        ("large-v3", "cpu", 70_000, 0),
    ],
)
def test_batch_size_from_free_memory(model: str, device: str, free_mb: float | None, expected: int) -> None:
    batch_size, reason = choose_batch_size(model, device, free_mb)
    assert batch_size == expected
    assert reason


class _OtherErrorAfterOom:
    """faster-whisper's batched pipeline as an H200 showed it under held memory: batch 16 runs out of memory,
    then batch 8 fails with another CUDA error; ``fits`` and below decode (records each try)."""

    def __init__(self, tries: list[int], fits: int, second: str) -> None:
        self.tries = tries
        self.fits = fits
        self.second = second

    def __call__(self, model: Any) -> Any:
        from faster_whisper import BatchedInferencePipeline

        real = BatchedInferencePipeline(model=model)
        tries, fits, second = self.tries, self.fits, self.second

        class Pipeline:
            def transcribe(self, audio: Any, batch_size: int, **kwargs: Any) -> tuple[Iterator[Any], Any]:
                tries.append(batch_size)
                segments, info = real.transcribe(audio, batch_size=batch_size, **kwargs)
                if batch_size <= fits:
                    return segments, info
                message = CUDA_OOM if len(tries) == 1 else second

                def failing() -> Iterator[Any]:
                    raise RuntimeError(message)
                    yield

                return failing(), info

        return Pipeline()


INVALID_DEVICE = "parallel_for failed: cudaErrorInvalidDevice: invalid device ordinal"


def test_a_cuda_error_after_out_of_memory_halves_the_batch_again(
    pretend_gpu: list[tuple[str, str]], sample_dir: Path
) -> None:
    tries: list[int] = []
    transcriber = Transcriber(
        TranscriptionOptions(model="tiny.en", device="cuda", language="en", compute_type="int8", batch_size=16),
        model_factory=_cpu_backed_factory(pretend_gpu),
        batched_factory=_OtherErrorAfterOom(tries, 4, INVALID_DEVICE),
        memory_probe=_gpu_memory(6000),
    )
    result = transcriber.transcribe(decode_audio(sample_dir / "sample.wav"))
    assert tries == [16, 8, 4]
    assert transcriber.fallbacks == [
        "batch size 16: out of GPU memory, retried with 8",
        f"batch size 8: out of GPU memory ({INVALID_DEVICE}), retried with 4",
    ]
    assert result.batch_size == 4 and "yankee" in " ".join(s.text for s in result.segments).lower()


def test_a_cuda_error_without_out_of_memory_before_it_fails_the_job(
    pretend_gpu: list[tuple[str, str]], sample_dir: Path
) -> None:
    tries: list[int] = []
    pipelines = _OtherErrorAfterOom(tries, 4, INVALID_DEVICE)
    pipelines.tries.append(0)  # the first try is counted as done: batch 16 fails with the other error at once
    transcriber = Transcriber(
        TranscriptionOptions(model="tiny.en", device="cuda", language="en", compute_type="int8", batch_size=16),
        model_factory=_cpu_backed_factory(pretend_gpu),
        batched_factory=pipelines,
        memory_probe=_gpu_memory(6000),
    )
    with pytest.raises(RuntimeError, match="cudaErrorInvalidDevice"):
        transcriber.transcribe(decode_audio(sample_dir / "sample.wav"))
    assert tries == [0, 16] and transcriber.fallbacks == []


def test_which_errors_come_from_cuda() -> None:
    assert is_cuda_error(RuntimeError("parallel_for failed: cudaErrorInvalidDevice: invalid device ordinal"))
    assert is_cuda_error(RuntimeError("CUDA failed with error an illegal memory access was encountered"))
    assert is_cuda_error(RuntimeError("cuBLAS failed with status CUBLAS_STATUS_EXECUTION_FAILED"))
    assert not is_cuda_error(RuntimeError("No such file or directory: model.bin"))
