"""GPU faults Scriba knows: the errors the GPU paths of CTranslate2 and torch raise on a desktop whose GPU, or
whose GPU libraries, cannot run a stage. Each is recognised by its own text, so the stage (the transcription or
the diarization) runs on the CPU instead and the job says why in one line, where an unknown error still fails
the stage with its own text.

Each entry names a public report of the same text by users of a peer program (faster-whisper, WhisperX, Buzz,
noScribe, aTrain, Faster-Whisper-XXL), as ``owner/repository#number``: where the text was taken from, and where
its causes are discussed.

Out of memory is a fault only while a model is being put on the card (another program holds the card's
memory): inside a batch it is the batch halving's business (app/core/engine/gpu_plan.py ``is_out_of_memory``).

The last fault seen is kept in a small file in the cache folder, so that ``scriba doctor``, a process of its
own, can report it.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.core.files import write_atomic

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GpuFault:
    name: str
    patterns: tuple[str, ...]  # regular expressions, searched case-insensitively in "Type: message"
    reason: str  # why the GPU could not run the stage, in plain words; completed by what ran instead
    peer_issue: str  # a public report of this text: "owner/repository#number"
    only_while_loading: bool = False  # out of memory: a fault only while the model goes onto the card
    _compiled: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_compiled", tuple(re.compile(pattern, re.IGNORECASE) for pattern in self.patterns))

    def recognises(self, text: str) -> bool:
        return any(pattern.search(text) for pattern in self._compiled)


KNOWN_FAULTS: tuple[GpuFault, ...] = (
    GpuFault(
        "cudnn8-missing",
        # Windows: "Could not load library cudnn_ops_infer64_8.dll. Error code 126"; Linux: "Could not load
        # library libcudnn_ops_infer.so.8. Error: libcudnn_ops_infer.so.8: cannot open shared object file"
        (r"cudnn(_\w+)?64_8\.dll", r"libcudnn(_\w+)?\.so\.8\b"),
        "the GPU's cuDNN 8 library is missing or cannot be loaded",
        "SYSTRAN/faster-whisper#85",
    ),
    GpuFault(
        "cudnn9-missing",
        # "Unable to load any of {libcudnn_ops.so.9.1.0, libcudnn_ops.so.9.1, libcudnn_ops.so.9, libcudnn_ops.so}
        # Invalid handle. Cannot load symbol cudnnCreateTensorDescriptor"; Windows: "Could not locate
        # cudnn_ops64_9.dll"
        (r"libcudnn(_\w+)?\.so\.9\b", r"cudnn(_\w+)?64_9\.dll", r"Cannot load symbol cudnn\w+"),
        "the GPU's cuDNN 9 library is missing or cannot be loaded",
        "SYSTRAN/faster-whisper#1182",
    ),
    GpuFault(
        "cudnn-version-mismatch",
        # torch and CTranslate2 each bring a cuDNN; the second to load finds the first's sub-libraries:
        # "RuntimeError: cuDNN error: CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH" (pipeline.to(cuda))
        (r"CUDNN_STATUS_(SUBLIBRARY_)?VERSION_MISMATCH",),
        "torch and CTranslate2 loaded different cuDNN builds (CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)",
        "m-bain/whisperX#1027",
    ),
    GpuFault(
        "ctranslate2-no-kernel-for-card",
        # CTranslate2 4 is not built for compute capability 5.x (GTX 900, Tesla M40): "RuntimeError:
        # parallel_for failed: cudaErrorNoKernelImageForDevice: no kernel image is available for execution on
        # the device", raised by the first encode
        (r"cudaErrorNoKernelImageForDevice: no kernel image",),
        "CTranslate2 has no GPU code for this card (it is no longer built for compute capability 5.x cards)",
        "SYSTRAN/faster-whisper#806",
    ),
    GpuFault(
        "torch-no-kernel-for-card",
        # A card newer than the torch build (sm_120): "RuntimeError: CUDA error: no kernel image is available
        # for execution on the device"; torch warns first "... with CUDA capability sm_120 is not compatible with
        # the current PyTorch installation" (an error where warnings are made errors)
        (
            r"CUDA error: no kernel image is available",
            r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation",
        ),
        "this torch build has no GPU code for this card (a newer card, such as sm_120, needs a newer torch)",
        "Purfview/whisper-standalone-win#509",
    ),
    GpuFault(
        "ctranslate2-without-cuda",
        # A CTranslate2 without CUDA: "ValueError: This CTranslate2 package was not compiled with CUDA support";
        # an AMD card, whose ROCm torch says "cuda", under the CUDA wheel: "CUDA driver version is insufficient
        # for CUDA runtime version", or a ROCm build without the card: "no ROCm-capable device is detected"
        (
            r"not compiled with CUDA support",
            r"CUDA driver version is insufficient for CUDA runtime version",
            r"no ROCm-capable device is detected",
        ),
        "CTranslate2 cannot use this GPU (no CUDA build or driver for it: an AMD card, or an NVIDIA driver "
        "older than CUDA 12)",
        "SYSTRAN/faster-whisper#307",
    ),
    GpuFault(
        "cublas-missing",
        # "RuntimeError: Library libcublas.so.12 is not found or cannot be loaded" (Windows: cublas64_12.dll),
        # raised by the first encode
        (r"Library (lib)?cublas\S* is not found or cannot be loaded",),
        "the GPU's cuBLAS library (CUDA 12) is missing or cannot be loaded",
        "SYSTRAN/faster-whisper#717",
    ),
    GpuFault(
        "ctranslate2-out-of-memory-at-load",
        # "RuntimeError: CUDA failed with error out of memory" while the model is loaded onto a card another
        # program fills
        (r"CUDA failed with error out of memory",),
        "the GPU's memory is taken (another program is using the card)",
        "m-bain/whisperX#504",
        only_while_loading=True,
    ),
    GpuFault(
        "torch-out-of-memory-at-load",
        # "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 26.00 MiB (GPU 0; ...)"
        (
            r"CUDA out of memory\. Tried to allocate",
            r"OutOfMemoryError: CUDA out of memory",
            r"CUDA error: out of memory",
        ),
        "the GPU's memory is taken (another program is using the card)",
        "pyannote/pyannote-audio#1036",
        only_while_loading=True,
    ),
)


@dataclass(frozen=True)
class FaultMatch:
    """A known fault found in an error: which, and the text it was found in."""

    fault: GpuFault
    error: BaseException  # the exception of the chain whose text matched
    text: str  # "Type: message", first line

    def note(self, instead: str) -> str:
        """One line for the job: "the GPU's cuDNN 9 library is missing ...; transcribed on the CPU instead"."""
        return f"{self.fault.reason}; {instead} on the CPU instead"


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and the errors it was raised from or while handling, outermost first."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def classify(error: BaseException, *, loading: bool) -> FaultMatch | None:
    """The known GPU fault in ``error`` or the errors it came from; None when it is not one.

    ``loading``: whether the error came while the model was being put on the GPU (only then is out of memory a
    fault: later it is the batch's)."""
    for link in _chain(error):
        text = _text(link)
        for fault in KNOWN_FAULTS:
            if fault.only_while_loading and not loading:
                continue
            if fault.recognises(text):
                first_line = next((line.strip() for line in str(link).splitlines() if line.strip()), "")
                return FaultMatch(fault, link, f"{type(link).__name__}: {first_line}"[:300])
    return None


# The last fault seen, for `scriba doctor`.
FAULT_FILE = "last-gpu-fault.json"


def fault_file() -> Path:
    from app.core.paths import cache_dir

    return cache_dir() / FAULT_FILE


@dataclass(frozen=True)
class RecordedFault:
    name: str
    stage: str  # "transcription", "diarization" or "doctor"
    note: str  # the line the job got
    error: str  # the library's own text
    peer_issue: str
    when: float  # seconds since the epoch

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def record_fault(match: FaultMatch, stage: str, note: str, path: Path | None = None) -> None:
    """Keep ``match`` as the last fault seen. A file that cannot be written costs the record, never the job."""
    target = path or fault_file()
    record = RecordedFault(match.fault.name, stage, note, match.text, match.fault.peer_issue, time.time())
    try:
        write_atomic(target, json.dumps(record.to_dict(), indent=1))  # doctor never reads half a record
    except OSError as error:
        log.warning("could not keep the GPU fault for `scriba doctor` in %s: %s", target, error)


def last_fault(path: Path | None = None) -> RecordedFault | None:
    """The last fault recorded on this machine; None when there is none or its file cannot be read."""
    source = path or fault_file()
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
        return RecordedFault(
            str(data["name"]),
            str(data["stage"]),
            str(data["note"]),
            str(data["error"]),
            str(data["peer_issue"]),
            float(data["when"]),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as error:
        log.warning("ignored an unreadable GPU fault record %s: %s", source, error)
        return None


# A native crash has no text to classify: what a cuDNN that cannot be loaded does on Linux (the process aborts).
PROCESS_CRASH = GpuFault(
    "gpu-process-crash",
    (),
    "a GPU library crashed the transcription process",
    "SYSTRAN/faster-whisper#1182",
)


def record_gpu_crash(note: str, error: str, path: Path | None = None) -> None:
    """Keep a crash of the GPU path (the job then ran on the CPU) as the last fault, for `scriba doctor`."""
    record_fault(FaultMatch(PROCESS_CRASH, RuntimeError(error), error), "transcription", note, path)
