"""``scriba doctor``: what this machine has for Scriba, what Scriba would use, and what to install.

The report's top-level keys are stable (scripts and bug reports rely on them): ``gpus``, ``nvml``
{available, reason}, ``ctranslate2_cuda_devices``, ``torch_cuda``, ``selected`` {device, compute_type,
reason}, ``verdict``. The other keys may grow.

The verdict is earned, not inferred: the selected device runs a real model (the bundled tiny.en on a second
of audio), and on a GPU torch runs a matrix product, so "PASSED" means the path a job takes works.
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from typing import Any

from app import __version__
from app.core.engine.diarize.speaker_stack import speaker_stack_problem
from app.core.engine.gpu_plan import GpuMemory, choose_batch_size, choose_model
from app.core.gpu.cuda_libs import LibraryStatus, install_hint, missing_required, preload_cuda_libraries
from app.core.gpu.faults import FaultMatch, classify, last_fault, record_fault
from app.core.gpu.gpustats import GpuStatsSampler

# Exit codes of `scriba doctor`.
OK = 0  # the GPU path passed, or there is no GPU and the CPU path works
GPU_UNUSABLE = 1  # an NVIDIA GPU is there but Scriba cannot use it: the verdict says what to install
BROKEN = 2  # the install is broken: not even the CPU path transcribes, or speakers cannot be found

_PACKAGES = (
    "faster-whisper",
    "ctranslate2",
    "torch",
    "torchaudio",
    "pyannote.audio",
    "PySide6",
    "nvidia-ml-py",
    "nvidia-cublas-cu12",
    "nvidia-cudnn-cu12",
    "nvidia-cudnn-cu13",
    "numpy",
)


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _ctranslate2_cuda() -> tuple[int, list[str], str | None]:
    """CUDA devices CTranslate2 sees, its CUDA compute types, and its error when it cannot use CUDA."""
    import ctranslate2

    try:
        count = int(ctranslate2.get_cuda_device_count())
    except Exception as error:
        return 0, [], f"{type(error).__name__}: {error}"
    try:
        kinds = sorted(ctranslate2.get_supported_compute_types("cuda"))
    except Exception as error:
        # Without a GPU this says why in CTranslate2's words ("CUDA driver version is insufficient…").
        return count, [], str(error)
    return count, kinds, None


def _torch_cuda(nvml_available: bool) -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return {"available": False, "version": None, "device_count": 0, "devices": [], "reason": "torch missing"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = bool(torch.cuda.is_available())
    devices = [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())] if available else []
    if available:
        reason = f"torch {torch.__version__} uses CUDA {torch.version.cuda}"
    elif torch.version.cuda is None:
        reason = f"torch {torch.__version__} is a CPU-only build"
    elif not nvml_available:
        reason = f"torch {torch.__version__} (CUDA {torch.version.cuda}) finds no NVIDIA driver"
    else:
        # With a driver present, torch's own warning says why (usually a driver older than its CUDA).
        said = "; ".join(str(warning.message).splitlines()[0] for warning in caught)
        reason = said or f"torch {torch.__version__} (CUDA {torch.version.cuda}) cannot use the GPU"
    return {
        "available": available,
        "version": torch.version.cuda,
        "device_count": len(devices),
        "devices": devices,
        "reason": reason,
    }


@dataclass(frozen=True)
class SmokeTest:
    passed: bool
    detail: str
    error: BaseException | None = None  # what failed it
    torch_fault: FaultMatch | None = None  # a known GPU fault of torch's (the diarization then runs on the CPU)


def _smoke_test(device: str, compute_type: str) -> SmokeTest:
    """Transcribe one second of audio with the bundled tiny.en on ``device``: proof that the path loads and runs."""
    import numpy as np

    from app.core.engine.audio import SAMPLE_RATE
    from app.core.engine.models import BUNDLED_MODEL, resolve_model

    try:
        from faster_whisper import WhisperModel

        started = time.perf_counter()
        model = WhisperModel(str(resolve_model(BUNDLED_MODEL).path), device=device, compute_type=compute_type)
        # A quiet 440 Hz tone: real samples through the encoder and one decoder step, whatever text comes out.
        tone = (0.05 * np.sin(2 * np.pi * 440 * np.arange(SAMPLE_RATE) / SAMPLE_RATE)).astype(np.float32)
        segments, _ = model.transcribe(tone, beam_size=1, vad_filter=False, language="en")
        list(segments)
        ran = f"tiny.en ran on {device} ({compute_type}) in {time.perf_counter() - started:.1f} s"
    except Exception as error:
        return SmokeTest(False, f"tiny.en failed on {device} ({compute_type}): {type(error).__name__}: {error}", error)
    if device == "cuda":
        import torch

        if torch.cuda.is_available():
            try:
                product = torch.ones(256, 256, device="cuda") @ torch.ones(256, 256, device="cuda")
                torch.cuda.synchronize()
            except Exception as error:
                fault = classify(error, loading=True)
                if fault is None:
                    return SmokeTest(False, f"torch failed on cuda: {type(error).__name__}: {error}", error)
                return SmokeTest(True, ran, error, fault)  # the transcription's GPU works; the speakers' does not
            if float(product[0, 0]) != 256.0:
                return SmokeTest(False, "torch's CUDA matrix product gave a wrong result")
    return SmokeTest(True, ran)


def run_doctor(nvml: Any | None = None, smoke_test: bool = True) -> tuple[dict[str, Any], int]:
    """The report and the exit code. ``nvml`` is a pynvml stand-in for tests (the real module by default)."""
    from app.core.engine.transcribe import compute_type_candidates

    sampler = GpuStatsSampler(nvml)
    try:
        nvml_available = sampler.open()
        snapshot = sampler.sample()
    finally:
        sampler.close()
    gpus = [asdict(gpu) | {"memory_free_mb": gpu.memory_free_mb} for gpu in snapshot.gpus]
    first_gpu = next(
        (
            GpuMemory(gpu.index, gpu.name, float(gpu.memory_total_mb), float(gpu.memory_free_mb or 0.0))
            for gpu in snapshot.gpus
            if gpu.memory_total_mb is not None
        ),
        None,
    )

    ct2_devices, ct2_cuda_types, ct2_error = _ctranslate2_cuda()
    libraries: list[LibraryStatus] = preload_cuda_libraries()
    missing = missing_required(libraries)
    torch_cuda = _torch_cuda(nvml_available)

    problems: list[str] = []
    if nvml_available and ct2_devices == 0:
        problems.append(f"CTranslate2 sees no CUDA GPU although the driver lists {len(gpus)} ({ct2_error})")
    if nvml_available and missing:
        problems.append(f"{', '.join(status.soname for status in missing)} not loadable: {install_hint(libraries)}")
    gpu_ready = ct2_devices > 0 and not missing

    device = "cuda" if gpu_ready else "cpu"
    compute_type = compute_type_candidates(device, "auto")[0]
    smoke = _smoke_test(device, compute_type) if smoke_test else SmokeTest(True, "smoke test skipped")
    gpu_fault = classify(smoke.error, loading=True) if device == "cuda" and smoke.error and not smoke.passed else None
    if gpu_fault is not None:
        # A GPU fault Scriba knows: every job would run on the CPU and say why, so that is what is checked.
        note = gpu_fault.note("jobs are transcribed")
        record_fault(gpu_fault, "doctor", note)
        problems.append(f"{note} (CTranslate2: {gpu_fault.text}; a known problem, see {gpu_fault.fault.peer_issue})")
        gpu_ready = False
        device = "cpu"
        compute_type = compute_type_candidates(device, "auto")[0]
        smoke = _smoke_test(device, compute_type)
    if gpu_ready:
        reason = (
            f"cuda: CTranslate2 sees {ct2_devices} GPU(s) and cuBLAS 12 is loaded; {compute_type} is the first of "
            f"the chain int8_float16, float16, int8, float32 that the card supports"
        )
    elif nvml_available or gpu_fault is not None:
        reason = f"cpu: the GPU cannot be used ({'; '.join(problems)}); {compute_type} is the fastest CPU type"
    else:
        reason = f"cpu: no usable NVIDIA GPU ({sampler.reason}); {compute_type} is the fastest CPU type"
    model = choose_model(device, first_gpu.total_mb if first_gpu else None)
    batch_size, batch_reason = choose_batch_size(model.model.name, device, first_gpu.free_mb if first_gpu else None)
    diarization_device = "cuda" if gpu_ready and torch_cuda["available"] else "cpu"
    if gpu_ready and not torch_cuda["available"]:
        problems.append(f"pyannote will diarize on CPU: {torch_cuda['reason']}")
    diarization_note = ""
    if smoke.torch_fault is not None:
        diarization_device = "cpu"
        torch_note = smoke.torch_fault.note("speakers are found")
        record_fault(smoke.torch_fault, "doctor", torch_note)
        problems.append(f"{torch_note} (torch: {smoke.torch_fault.text}; see {smoke.torch_fault.fault.peer_issue})")
        diarization_note = f" ({torch_note})"

    # Importing pyannote.audio takes seconds: checked with the smoke test, which runs things, not without it.
    speakers_problem = speaker_stack_problem() if smoke_test else None
    passed, detail = smoke.passed, smoke.detail
    if not passed:
        verdict, code = f"FAILED: {detail}. Reinstall Scriba (`make venv`) and run `scriba doctor` again.", BROKEN
    elif speakers_problem is not None:
        # Transcription runs, but every job that finds speakers (the default) would fail.
        verdict = f"FAILED: speakers cannot be found: {speakers_problem} Transcription alone works ({detail})."
        code = BROKEN
    elif gpu_ready:
        gpu_name = first_gpu.name if first_gpu else "CUDA GPU"
        memory = f", {first_gpu.total_mb / 1024:.0f} GB" if first_gpu else ""
        verdict = (
            f"GPU test PASSED: {gpu_name}{memory}, driver {sampler.driver_version or '?'}; {detail}; "
            f"default model {model.model.name}, {batch_reason}; diarization on {diarization_device}{diarization_note}"
        )
        code = OK
    elif nvml_available or gpu_fault is not None:
        verdict = f"GPU NOT USED: {'; '.join(problems)}. Scriba works on CPU meanwhile ({detail})."
        code = GPU_UNUSABLE
    else:
        verdict = (
            f"CPU set-up OK: {detail}; default model {model.model.name}. No GPU: {sampler.reason}. For a GPU, "
            "install an NVIDIA card's driver (nvidia-smi must work) and run `scriba doctor` again."
        )
        code = OK
    last = last_fault()

    report: dict[str, Any] = {
        "scriba": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "gpus": gpus,
        "nvml": {"available": nvml_available, "reason": sampler.reason, "driver_version": sampler.driver_version},
        "ctranslate2_cuda_devices": ct2_devices,
        "ctranslate2_cuda_compute_types": ct2_cuda_types,
        "ctranslate2_cuda_error": ct2_error,
        "cuda_libraries": [status.to_dict() for status in libraries],
        "torch_cuda": torch_cuda,
        "host": asdict(snapshot.host) if snapshot.host else None,
        "selected": {
            "device": device,
            "compute_type": compute_type,
            "reason": reason,
            "model": model.model.name,
            "model_reason": model.reason,
            "batch_size": batch_size,
            "batch_reason": batch_reason,
            "diarization_device": diarization_device,
        },
        "problems": problems,
        "speaker_libraries": speakers_problem or ("ok" if smoke_test else "not checked"),
        "smoke_test": {"passed": passed, "detail": detail},
        # The last GPU fault a job (or this check) met on this machine, and what ran instead.
        "last_gpu_fault": last.to_dict() if last else None,
        "verdict": verdict,
    }
    return report, code


def format_report(report: dict[str, Any]) -> str:
    """The report for people: one fact per line, the verdict last."""
    lines = [f"Scriba {report['scriba']}, Python {report['python']}, {report['platform']}", ""]
    lines.append("Packages:")
    for name, version in report["packages"].items():
        lines.append(f"  {name:<20} {version or '-'}")
    nvml = report["nvml"]
    lines += ["", f"NVML: {'available' if nvml['available'] else 'unavailable'}: {nvml['reason']}"]
    for gpu in report["gpus"]:
        free = gpu.get("memory_free_mb")
        total = gpu.get("memory_total_mb")
        memory = f"{free / 1024:.1f} GB free of {total / 1024:.1f} GB" if free is not None and total else "memory ?"
        lines.append(f"  GPU {gpu['index']}: {gpu['name']}, {memory}")
    lines.append(f"CTranslate2 CUDA devices: {report['ctranslate2_cuda_devices']}")
    if report["ctranslate2_cuda_error"]:
        lines.append(f"  ({report['ctranslate2_cuda_error']})")
    for library in report["cuda_libraries"]:
        where = library["path"] or library["origin"]
        state = f"loaded from {where}" if library["loaded"] else f"MISSING ({library['error']})"
        lines.append(f"{library['group']:<10} {library['soname']:<20} {state}")
    torch_cuda = report["torch_cuda"]
    lines.append(f"torch CUDA: {'yes' if torch_cuda['available'] else 'no'}: {torch_cuda['reason']}")
    selected = report["selected"]
    lines += [
        "",
        f"Selected: {selected['device']} / {selected['compute_type']}: {selected['reason']}",
        f"Model: {selected['model_reason']}",
        f"Batching: {selected['batch_reason']}",
        f"Diarization: {selected['diarization_device']}",
        f"Speaker libraries (torch, torchaudio, pyannote.audio): {report['speaker_libraries']}",
    ]
    fault = report.get("last_gpu_fault")
    if fault:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(fault["when"]))
        lines += [
            f"Last GPU fault ({when}, {fault['stage']}): {fault['note']}",
            f"  {fault['error']} (a known problem: {fault['peer_issue']})",
        ]
    lines += [
        "",
        report["verdict"],
    ]
    return "\n".join(lines)
