"""Make the CUDA 12 libraries that CTranslate2 needs findable next to torch's CUDA 13 ones.

CTranslate2 4.8 (faster-whisper's engine) is built against CUDA 12 and opens ``libcublas.so.12`` with
``dlopen`` the first time a model runs on the GPU. torch 2.11 brings CUDA 13 libraries (``libcublas.so.13``),
which CTranslate2 cannot use, and the CUDA 12 ones that pip installs (``nvidia-cublas-cu12``) live in
``site-packages/nvidia/cublas/lib``, a directory the dynamic loader never searches. Loading them here by full
path with ``RTLD_GLOBAL`` first means CTranslate2's later ``dlopen("libcublas.so.12")`` finds the library
already in the process (the loader matches loaded objects by soname), so no ``LD_LIBRARY_PATH`` is needed.

cuDNN 9 is checked too: faster-whisper's documentation asks for it, and pyannote (through torch) uses it on
the GPU. The CTranslate2 4.8 Linux wheel itself references only cuBLAS, which is why only cuBLAS is required.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CudaLibrary:
    """One shared library that the GPU path wants, in load order within its group."""

    group: str  # what the user knows it as: "cuBLAS 12", "cuDNN 9"
    soname: str
    wheel: str  # the pip package that ships it
    required: bool  # False: reported, but the GPU path can start without it


CUDA_LIBRARIES: tuple[CudaLibrary, ...] = (
    # cuBLASLt first: libcublas.so.12 needs it and is found only if it is already loaded.
    CudaLibrary("cuBLAS 12", "libcublasLt.so.12", "nvidia-cublas-cu12", True),
    CudaLibrary("cuBLAS 12", "libcublas.so.12", "nvidia-cublas-cu12", True),
    CudaLibrary("cuDNN 9", "libcudnn.so.9", "nvidia-cudnn-cu12", False),
)


@dataclass(frozen=True)
class LibraryStatus:
    group: str
    soname: str
    required: bool
    loaded: bool
    path: str | None  # where it was loaded from; None when the system loader found it by name or it failed
    origin: str  # "wheel", "system" or "missing"
    error: str | None
    wheel: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_lock = threading.Lock()
_loaded: dict[str, LibraryStatus] = {}
_handles: list[ctypes.CDLL] = []  # kept so the libraries are never unloaded


def library_search_dirs() -> list[Path]:
    """Directories where pip's NVIDIA wheels put their libraries, in ``sys.path`` order (and the bundle's)."""
    roots = [Path(entry) for entry in sys.path if entry]
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle:
        roots.insert(0, Path(bundle))
    found: list[Path] = []
    for root in roots:
        nvidia = root / "nvidia"
        if nvidia.is_dir():
            found.extend(sorted(path for path in nvidia.glob("*/lib") if path.is_dir()))
    return found


def find_wheel_library(soname: str, search_dirs: list[Path] | None = None) -> Path | None:
    for directory in library_search_dirs() if search_dirs is None else search_dirs:
        candidate = directory / soname
        if candidate.is_file():
            return candidate
    return None


def _load(library: CudaLibrary, search_dirs: list[Path] | None) -> LibraryStatus:
    path = find_wheel_library(library.soname, search_dirs)
    try:
        if path is not None:
            _handles.append(ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL))
            return LibraryStatus(
                library.group, library.soname, library.required, True, str(path), "wheel", None, library.wheel
            )
        # Not from a wheel: the system's own CUDA installation (ldconfig, LD_LIBRARY_PATH) may have it.
        _handles.append(ctypes.CDLL(library.soname, mode=ctypes.RTLD_GLOBAL))
        return LibraryStatus(library.group, library.soname, library.required, True, None, "system", None, library.wheel)
    except OSError as error:
        return LibraryStatus(
            library.group,
            library.soname,
            library.required,
            False,
            str(path) if path else None,
            "missing",
            str(error),
            library.wheel,
        )


def preload_cuda_libraries(search_dirs: list[Path] | None = None) -> list[LibraryStatus]:
    """Load every library of :data:`CUDA_LIBRARIES` once per process and say where each came from.

    Loading needs no GPU and no driver (the libraries open ``libcuda.so.1`` only when first used), so this
    is safe, and meaningful, on a machine without a GPU.
    """
    with _lock:
        for library in CUDA_LIBRARIES:
            status = _loaded.get(library.soname)
            if status is None or (not status.loaded and search_dirs is not None):
                _loaded[library.soname] = _load(library, search_dirs)
        return [_loaded[library.soname] for library in CUDA_LIBRARIES]


def missing_required(statuses: list[LibraryStatus]) -> list[LibraryStatus]:
    return [status for status in statuses if status.required and not status.loaded]


def install_hint(statuses: list[LibraryStatus]) -> str:
    """What to install for the libraries that failed, as one pip command."""
    wheels = sorted({status.wheel for status in statuses if not status.loaded})
    if not wheels:
        return ""
    return "pip install " + " ".join(f"'{wheel}'" for wheel in wheels)
