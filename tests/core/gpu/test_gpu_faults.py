"""A stage that meets a known GPU fault runs on the CPU and says why; an unknown error still fails the job.

No GPU can be reached here, so each fault is replayed where the library raises it, with the text users of
peer programs reported (the issue cited beside each): faster-whisper's model constructed on "cuda" (CTranslate2
raises there for a missing CUDA, a card it cannot use, or a card whose memory another program holds), the
model's first encode (where a missing cuBLAS or cuDNN, or a card without kernels, shows), and torch's move of
the diarizer's networks onto "cuda". Everything else is real: tiny.en, the built-in diarizer and pyannote's
classes on a real recording.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.engine import transcribe as transcribe_module
from app.core.engine.audio import decode_audio
from app.core.engine.diarize import DiarizerOptions
from app.core.engine.pipeline import Engine, PipelineOptions
from app.core.engine.transcribe import Transcriber, TranscriptionOptions
from app.core.errors import DiarizationError
from app.core.gpu.faults import classify, last_fault

# The texts as the libraries raise them, each from a public report (owner/repository#number).
CUDNN8_WINDOWS = (  # SYSTRAN/faster-whisper#85
    "Could not load library cudnn_ops_infer64_8.dll. Error code 126\n"
    "Please make sure cudnn_ops_infer64_8.dll is in your library path!"
)
CUDNN8_LINUX = (  # SYSTRAN/faster-whisper#297
    "Could not load library libcudnn_ops_infer.so.8. Error: libcudnn_ops_infer.so.8: cannot open shared object "
    "file: No such file or directory"
)
CUDNN9_LINUX = (  # SYSTRAN/faster-whisper#1182
    "Unable to load any of {libcudnn_ops.so.9.1.0, libcudnn_ops.so.9.1, libcudnn_ops.so.9, libcudnn_ops.so}\n"
    "Invalid handle. Cannot load symbol cudnnCreateTensorDescriptor"
)
CUDNN9_WINDOWS = (  # SYSTRAN/faster-whisper#1230
    "Could not locate cudnn_ops64_9.dll. Please make sure it is in your library path!\n"
    "Invalid handle. Cannot load symbol cudnnCreateTensorDescriptor"
)
CUDNN_MISMATCH = "cuDNN error: CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH"  # m-bain/whisperX#1027
CT2_NO_KERNEL = (  # SYSTRAN/faster-whisper#806 (GeForce GTX 950, compute capability 5.2)
    "parallel_for failed: cudaErrorNoKernelImageForDevice: no kernel image is available for execution on the device"
)
TORCH_NO_KERNEL = (  # Purfview/whisper-standalone-win#509 (RTX 5070, sm_120; raised by pyannote's .to(cuda))
    "CUDA error: no kernel image is available for execution on the device\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
    "incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1.\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
)
TORCH_SM120_WARNING = (  # jhj0517/Whisper-WebUI#562
    "\nNVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
    "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_61 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
)
CT2_NOT_COMPILED = "This CTranslate2 package was not compiled with CUDA support"  # SYSTRAN/faster-whisper#307
CT2_ON_ROCM = (  # debpalash/VoiceStudio#1539 (AMD RX 7900 XTX, ROCm torch)
    "CUDA failed with error CUDA driver version is insufficient for CUDA runtime version"
)
CUBLAS_MISSING = "Library libcublas.so.12 is not found or cannot be loaded"  # SYSTRAN/faster-whisper#717
CT2_OOM = "CUDA failed with error out of memory"  # m-bain/whisperX#504
TORCH_OOM = (  # davabase/whisper_real_time#8 (raised by model.to(device))
    "CUDA out of memory. Tried to allocate 26.00 MiB (GPU 0; 8.00 GiB total capacity; 6.50 GiB already allocated; "
    "0 bytes free; 6.83 GiB reserved in total by PyTorch)"
)
# Not known: these fail the job with their own text.
ILLEGAL_ACCESS = "CUDA failed with error an illegal memory access was encountered"
NO_DRIVER = (
    "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver from "
    "http://www.nvidia.com/Download/index.aspx"
)


def _torch_oom(text: str) -> BaseException:
    import torch

    return torch.OutOfMemoryError(text)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: RuntimeError(CUDNN8_WINDOWS), "cudnn8-missing"),
        (lambda: RuntimeError(CUDNN8_LINUX), "cudnn8-missing"),
        (lambda: RuntimeError(CUDNN9_LINUX), "cudnn9-missing"),
        (lambda: RuntimeError(CUDNN9_WINDOWS), "cudnn9-missing"),
        (lambda: RuntimeError(CUDNN_MISMATCH), "cudnn-version-mismatch"),
        (lambda: RuntimeError(CT2_NO_KERNEL), "ctranslate2-no-kernel-for-card"),
        (lambda: RuntimeError(TORCH_NO_KERNEL), "torch-no-kernel-for-card"),
        (lambda: UserWarning(TORCH_SM120_WARNING), "torch-no-kernel-for-card"),
        (lambda: ValueError(CT2_NOT_COMPILED), "ctranslate2-without-cuda"),
        (lambda: RuntimeError(CT2_ON_ROCM), "ctranslate2-without-cuda"),
        (lambda: RuntimeError(CUBLAS_MISSING), "cublas-missing"),
        (lambda: RuntimeError("Library cublas64_12.dll is not found or cannot be loaded"), "cublas-missing"),
        (lambda: RuntimeError(CT2_OOM), "ctranslate2-out-of-memory-at-load"),
        (lambda: _torch_oom(TORCH_OOM), "torch-out-of-memory-at-load"),
    ],
)
def test_each_real_error_text_is_the_fault_it_names(make: Callable[[], BaseException], expected: str) -> None:
    match = classify(make(), loading=True)
    assert match is not None and match.fault.name == expected


def test_the_fault_keeps_the_first_line_of_the_librarys_words() -> None:
    match = classify(UserWarning(TORCH_SM120_WARNING), loading=True)
    assert match is not None
    assert match.text == (
        "UserWarning: NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
        "installation."
    )


def test_unknown_errors_and_compute_type_refusals_are_no_fault() -> None:
    for error in (
        RuntimeError(ILLEGAL_ACCESS),
        RuntimeError(NO_DRIVER),
        # What a card without fast float16 says: the compute-type chain's business, not a fault.
        ValueError(
            "Requested float16 compute type, but the target device or backend do not support efficient float16 "
            "computation."
        ),
    ):
        assert classify(error, loading=True) is None, error


def test_a_fault_is_found_in_the_errors_a_failure_came_from() -> None:
    try:
        try:
            raise RuntimeError(CUDNN_MISMATCH)
        except RuntimeError as cause:
            raise DiarizationError("could not load the segmentation model") from cause
    except DiarizationError as error:
        match = classify(error, loading=True)
    assert match is not None and match.fault.name == "cudnn-version-mismatch"
    assert match.text == "RuntimeError: cuDNN error: CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH"
    assert match.note("transcribed") == (
        "torch and CTranslate2 loaded different cuDNN builds (CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH); "
        "transcribed on the CPU instead"
    )


def test_out_of_memory_is_a_fault_only_while_a_model_goes_onto_the_card() -> None:
    # Inside a batch, out of memory halves the batch (tests/core/gpu/test_gpu_path.py), never moves to the CPU.
    assert classify(RuntimeError(CT2_OOM), loading=False) is None
    assert classify(_torch_oom(TORCH_OOM), loading=False) is None
    loading = classify(RuntimeError(CT2_OOM), loading=True)
    assert (
        loading is not None and loading.fault.reason == "the GPU's memory is taken (another program is using the card)"
    )


# The transcription: faster-whisper's model on a pretended GPU.


RTX_COMPUTE_TYPES = {"float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "float16", "bfloat16"}


@pytest.fixture()
def pretend_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """CTranslate2 'sees' one GPU, a recent card's compute types (device selection picks "cuda", the chain starts
    at int8_float16); no model can really run on it."""
    import ctranslate2

    real = ctranslate2.get_supported_compute_types
    monkeypatch.setattr(transcribe_module, "cuda_device_count", lambda: 1)
    # Without a driver CTranslate2's own answer changes from call to call (an error, then {"float32"}).
    monkeypatch.setattr(
        ctranslate2,
        "get_supported_compute_types",
        lambda device, *args: set(RTX_COMPUTE_TYPES) if device == "cuda" else real(device, *args),
    )


class Attempts:
    """faster-whisper's WhisperModel where a GPU would be: on "cuda", the constructor raises ``at_load`` or the
    model is built on the CPU and its first encode raises ``at_encode`` (where CTranslate2 raises a missing
    cuBLAS or cuDNN, or a card without kernels); on "cpu", the real model. Records (device, compute type)."""

    def __init__(self, at_load: BaseException | None = None, at_encode: BaseException | None = None) -> None:
        self.at_load = at_load
        self.at_encode = at_encode
        self.tries: list[tuple[str, str]] = []

    def factory(self) -> type[Any]:
        from faster_whisper import WhisperModel

        attempts = self

        class OnAPretendedGpu(WhisperModel):  # type: ignore[misc]
            def __init__(self, path: str, device: str = "auto", compute_type: str = "default", **kwargs: Any) -> None:
                attempts.tries.append((device, compute_type))
                if device == "cuda" and attempts.at_load is not None:
                    raise attempts.at_load
                super().__init__(path, device="cpu", compute_type=compute_type, **kwargs)
                self.on_gpu = device == "cuda"

            def encode(self, features: Any, *args: Any, **kwargs: Any) -> Any:
                if self.on_gpu and attempts.at_encode is not None:
                    raise attempts.at_encode
                return super().encode(features, *args, **kwargs)

        return OnAPretendedGpu


@pytest.fixture(scope="module")
def cpu_reference(sample_dir: Path) -> list[tuple[float, float, str]]:
    """What a CPU run of tiny.en gives for the sample call: the fallback must give exactly this."""
    result = Transcriber(TranscriptionOptions(model="tiny.en", device="cpu", language="en")).transcribe(
        decode_audio(sample_dir / "sample.wav")
    )
    assert result.device == "cpu" and result.compute_type == "int8"
    return [(segment.start, segment.end, segment.text) for segment in result.segments]


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ValueError(CT2_NOT_COMPILED), "CTranslate2 cannot use this GPU"),
        (RuntimeError(CT2_ON_ROCM), "CTranslate2 cannot use this GPU"),
        (RuntimeError(CT2_OOM), "the GPU's memory is taken (another program is using the card)"),
        (RuntimeError(CUDNN8_WINDOWS), "the GPU's cuDNN 8 library is missing"),
    ],
)
def test_a_model_the_gpu_cannot_load_is_loaded_on_the_cpu_and_the_job_says_why(
    pretend_gpu: None, error: BaseException, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    attempts = Attempts(at_load=error)
    transcriber = Transcriber(
        TranscriptionOptions(model="tiny.en", device="cuda", language="en"), model_factory=attempts.factory()
    )
    assert transcriber.device == "cuda"
    with caplog.at_level(logging.WARNING, logger="app.core.engine.transcribe"):
        transcriber.load()
    # One try on the GPU (no other compute type helps), then the CPU with its own compute type.
    assert attempts.tries == [("cuda", "int8_float16"), ("cpu", "int8")]
    assert (transcriber.device, transcriber.compute_type) == ("cpu", "int8")
    assert transcriber.gpu_fault is not None
    assert transcriber.gpu_fault.startswith(reason) and transcriber.gpu_fault.endswith(
        "; transcribed on the CPU instead"
    )
    assert str(error).splitlines()[0] in caplog.text  # the library's own words are in the log
    recorded = last_fault()
    assert recorded is not None and recorded.stage == "transcription" and recorded.note == transcriber.gpu_fault


@pytest.mark.parametrize("text", [CUBLAS_MISSING, CT2_NO_KERNEL, CUDNN9_LINUX])
def test_a_gpu_that_fails_at_its_first_encode_gives_the_cpu_runs_transcript(
    pretend_gpu: None, sample_dir: Path, cpu_reference: list[tuple[float, float, str]], text: str
) -> None:
    attempts = Attempts(at_encode=RuntimeError(text))
    transcriber = Transcriber(
        TranscriptionOptions(model="tiny.en", device="cuda", language="en", batch_size=0),
        model_factory=attempts.factory(),
    )
    seen: list[float] = []
    result = transcriber.transcribe(decode_audio(sample_dir / "sample.wav"), progress=seen.append)
    assert attempts.tries[-1] == ("cpu", "int8") and ("cuda", "int8") in attempts.tries
    assert (result.device, result.compute_type) == ("cpu", "int8")
    assert result.gpu_fault is not None and result.gpu_fault.endswith("; transcribed on the CPU instead")
    assert [(segment.start, segment.end, segment.text) for segment in result.segments] == cpu_reference
    assert seen == sorted(seen) and seen[-1] == 1.0


def test_an_unknown_gpu_error_still_fails_the_transcription_with_its_text(pretend_gpu: None, sample_dir: Path) -> None:
    attempts = Attempts(at_encode=RuntimeError(ILLEGAL_ACCESS))
    transcriber = Transcriber(
        TranscriptionOptions(model="tiny.en", device="cuda", language="en", batch_size=0),
        model_factory=attempts.factory(),
    )
    with pytest.raises(RuntimeError, match="an illegal memory access was encountered"):
        transcriber.transcribe(decode_audio(sample_dir / "sample.wav"))
    assert transcriber.device == "cuda" and transcriber.gpu_fault is None
    assert all(device == "cuda" for device, _ in attempts.tries)
    assert last_fault() is None


# The diarization: torch's move of the networks onto the GPU.


@pytest.fixture()
def move_fails(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[BaseException], None]]:
    """torch 'has' a GPU, and moving a network onto it raises the given error (where torch raises it)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    original = torch.nn.Module.to

    def arm(error: BaseException) -> None:
        def to(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            if any(str(value).startswith("cuda") for value in (*args, kwargs.get("device")) if value is not None):
                raise error
            return original(self, *args, **kwargs)

        monkeypatch.setattr(torch.nn.Module, "to", to)

    # pyannote on "cuda" turns these on (torch's own setters, which monkeypatch cannot undo): given back after.
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)
    yield arm
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = flags


@pytest.fixture(scope="module")
def cpu_speakers(sample_dir: Path) -> list[tuple[float, float, str]]:
    result = Engine().diarize(decode_audio(sample_dir / "sample.wav"), DiarizerOptions(backend="embedded"))
    assert result.device == "cpu"
    return [(turn.start, turn.end, turn.speaker) for turn in result.turns]


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda: RuntimeError(CUDNN_MISMATCH), "torch and CTranslate2 loaded different cuDNN builds"),
        (lambda: RuntimeError(TORCH_NO_KERNEL), "this torch build has no GPU code for this card"),
        (lambda: _torch_oom(TORCH_OOM), "the GPU's memory is taken"),
    ],
)
def test_the_built_in_diarizer_finds_the_speakers_on_the_cpu_after_a_fault_moving_to_the_gpu(
    move_fails: Callable[[BaseException], None],
    sample_dir: Path,
    cpu_speakers: list[tuple[float, float, str]],
    make: Callable[[], BaseException],
    reason: str,
) -> None:
    move_fails(make())
    engine = Engine()
    result = engine.diarize(decode_audio(sample_dir / "sample.wav"), DiarizerOptions(backend="embedded", device="cuda"))
    assert result.device == "cpu"
    assert result.gpu_fault is not None and result.gpu_fault.startswith(reason)
    assert result.gpu_fault.endswith("; speakers found on the CPU instead")
    assert f"(on CPU: {result.gpu_fault})" in result.reason
    assert [(turn.start, turn.end, turn.speaker) for turn in result.turns] == cpu_speakers
    recorded = last_fault()
    assert recorded is not None and recorded.stage == "diarization"


def test_pyannote_moved_to_a_gpu_with_another_cudnn_runs_pyannote_on_the_cpu(
    move_fails: Callable[[BaseException], None], sample_dir: Path, tmp_path: Path
) -> None:
    from tests.pyannote_standin import build_pipeline

    folder = build_pipeline(tmp_path / "community-1")
    move_fails(RuntimeError(CUDNN_MISMATCH))
    options = DiarizerOptions(backend="pyannote", pyannote_source=str(folder), device="cuda")
    result = Engine().diarize(decode_audio(sample_dir / "sample.wav"), options)
    assert (result.backend, result.device) == ("pyannote", "cpu")  # pyannote still: only the device changed
    assert result.gpu_fault is not None and "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH" in result.gpu_fault


def test_an_unknown_error_moving_the_diarizer_fails_with_its_text(
    move_fails: Callable[[BaseException], None], sample_dir: Path
) -> None:
    move_fails(RuntimeError(NO_DRIVER))
    with pytest.raises(RuntimeError, match="Found no NVIDIA driver on your system"):
        Engine().diarize(decode_audio(sample_dir / "sample.wav"), DiarizerOptions(backend="embedded", device="cuda"))
    assert last_fault() is None


def test_out_of_memory_while_finding_the_speakers_is_not_a_load_fault(
    move_fails: Callable[[BaseException], None], sample_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loaded onto the card, the networks then run out of memory: no fall back (that is the batch's concern)."""
    from app.core.engine.diarize.embedded import EmbeddedDiarizer

    move_fails(RuntimeError(NO_DRIVER))  # armed, but the load below never moves anything

    def loaded(self: EmbeddedDiarizer) -> None:
        pass

    def runs_out(self: EmbeddedDiarizer, *args: Any, **kwargs: Any) -> Any:
        raise _torch_oom(TORCH_OOM)

    monkeypatch.setattr(EmbeddedDiarizer, "load", loaded)
    monkeypatch.setattr(EmbeddedDiarizer, "diarize", runs_out)
    with pytest.raises(Exception, match=r"CUDA out of memory\. Tried to allocate 26\.00 MiB"):
        Engine().diarize(decode_audio(sample_dir / "sample.wav"), DiarizerOptions(backend="embedded", device="cuda"))


# The whole job.


def test_a_job_whose_gpu_fails_in_both_stages_finishes_on_the_cpu_and_says_why(
    pretend_gpu: None,
    move_fails: Callable[[BaseException], None],
    monkeypatch: pytest.MonkeyPatch,
    sample_dir: Path,
    cpu_reference: list[tuple[float, float, str]],
    cpu_speakers: list[tuple[float, float, str]],
) -> None:
    import faster_whisper

    attempts = Attempts(at_encode=RuntimeError(CUBLAS_MISSING))
    monkeypatch.setattr(faster_whisper, "WhisperModel", attempts.factory())
    move_fails(RuntimeError(TORCH_NO_KERNEL))
    options = PipelineOptions(
        transcription=TranscriptionOptions(model="tiny.en", device="cuda", language="en"),
        diarizer=DiarizerOptions(backend="embedded", device="cuda"),
        check_language=False,
    )
    transcript = Engine().run(sample_dir / "sample.wav", options)
    assert transcript.device == "cpu" and transcript.compute_type == "int8"
    assert transcript.warnings == (
        "the GPU's cuBLAS library (CUDA 12) is missing or cannot be loaded; transcribed on the CPU instead",
        "this torch build has no GPU code for this card (a newer card, such as sm_120, needs a newer torch); "
        "speakers found on the CPU instead",
    )
    assert [(segment.start, segment.end, segment.text) for segment in transcript.segments] == cpu_reference
    assert transcript.diarization is not None and "on CPU: this torch build" in transcript.diarization.reason
    assert len(transcript.speakers) == len({speaker for _, _, speaker in cpu_speakers})


def test_a_gpu_fault_in_the_language_check_moves_the_job_to_the_cpu(
    pretend_gpu: None,
    monkeypatch: pytest.MonkeyPatch,
    sample_dir: Path,
    cpu_reference: list[tuple[float, float, str]],
) -> None:
    """An English-only model on a recording of undeclared language is run on it first, by the language check:
    the first encode, and so a missing cuBLAS, comes there."""
    import faster_whisper

    attempts = Attempts(at_encode=RuntimeError(CUBLAS_MISSING))
    monkeypatch.setattr(faster_whisper, "WhisperModel", attempts.factory())
    options = PipelineOptions(
        transcription=TranscriptionOptions(model="tiny.en", device="cuda", language=None), diarize=False
    )
    transcript = Engine().run(sample_dir / "sample.wav", options)
    assert (transcript.device, transcript.language) == ("cpu", "en")
    assert transcript.warnings == (
        "the GPU's cuBLAS library (CUDA 12) is missing or cannot be loaded; transcribed on the CPU instead",
    )
    assert [(segment.start, segment.end, segment.text) for segment in transcript.segments] == cpu_reference


def test_a_job_with_an_unknown_gpu_error_fails_with_its_text(
    pretend_gpu: None, monkeypatch: pytest.MonkeyPatch, sample_dir: Path
) -> None:
    import faster_whisper

    attempts = Attempts(at_encode=RuntimeError(ILLEGAL_ACCESS))
    monkeypatch.setattr(faster_whisper, "WhisperModel", attempts.factory())
    options = PipelineOptions(
        transcription=TranscriptionOptions(model="tiny.en", device="cuda", language="en"),
        diarize=False,
        check_language=False,
    )
    with pytest.raises(RuntimeError, match="CUDA failed with error an illegal memory access was encountered"):
        Engine().run(sample_dir / "sample.wav", options)


# `scriba doctor`.


def test_doctor_reports_the_last_fault_a_job_met(pretend_gpu: None) -> None:
    from app.core.doctor import format_report, run_doctor

    attempts = Attempts(at_load=RuntimeError(CT2_OOM))
    Transcriber(TranscriptionOptions(model="tiny.en", device="cuda"), model_factory=attempts.factory()).load()
    report, _ = run_doctor(smoke_test=False)
    fault = report["last_gpu_fault"]
    assert fault["name"] == "ctranslate2-out-of-memory-at-load" and fault["stage"] == "transcription"
    assert fault["error"] == "RuntimeError: CUDA failed with error out of memory"
    assert fault["peer_issue"] == "m-bain/whisperX#504"
    json.dumps(report)  # `scriba doctor --json` can print it
    text = format_report(report)
    assert (
        "transcription): the GPU's memory is taken (another program is using the card); transcribed on the CPU "
        "instead" in text
    )
    assert "RuntimeError: CUDA failed with error out of memory (a known problem: m-bain/whisperX#504)" in text


def test_doctor_explains_a_known_fault_of_its_gpu_test_and_checks_the_cpu_jobs_will_use(
    pretend_gpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import faster_whisper

    from app.core import doctor
    from tests.core.nvml_standin import Frame, NvmlStandIn

    attempts = Attempts(at_load=RuntimeError(CT2_ON_ROCM))
    monkeypatch.setattr(faster_whisper, "WhisperModel", attempts.factory())
    monkeypatch.setattr(doctor, "_ctranslate2_cuda", lambda: (1, ["float16", "int8"], None))
    nvml = NvmlStandIn([[Frame(name="NVIDIA GeForce GTX 1080", memory_total=8192 * 2**20, memory_used=300 * 2**20)]])
    report, code = doctor.run_doctor(nvml=nvml)
    assert code == doctor.GPU_UNUSABLE
    assert attempts.tries == [("cuda", "int8_float16"), ("cpu", "int8")]
    assert report["smoke_test"]["passed"] and "tiny.en ran on cpu (int8)" in report["smoke_test"]["detail"]
    assert (report["selected"]["device"], report["selected"]["compute_type"]) == ("cpu", "int8")
    assert report["verdict"].startswith("GPU NOT USED: CTranslate2 cannot use this GPU")
    assert "jobs are transcribed on the CPU instead" in report["verdict"]
    assert "SYSTRAN/faster-whisper#307" in report["verdict"]
    assert report["last_gpu_fault"]["stage"] == "doctor"


def test_doctor_without_a_known_fault_fails_as_before(pretend_gpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import faster_whisper

    from app.core import doctor
    from tests.core.nvml_standin import Frame, NvmlStandIn

    attempts = Attempts(at_load=RuntimeError(ILLEGAL_ACCESS))
    monkeypatch.setattr(faster_whisper, "WhisperModel", attempts.factory())
    monkeypatch.setattr(doctor, "_ctranslate2_cuda", lambda: (1, ["float16", "int8"], None))
    nvml = NvmlStandIn([[Frame(name="NVIDIA GeForce GTX 1080", memory_total=8192 * 2**20, memory_used=300 * 2**20)]])
    report, code = doctor.run_doctor(nvml=nvml)
    assert code == doctor.BROKEN
    assert "an illegal memory access was encountered" in report["verdict"]
    assert report["last_gpu_fault"] is None
