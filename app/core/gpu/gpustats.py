"""GPU statistics over NVML (nvidia-ml-py), with CPU and RAM from psutil when there is no NVIDIA GPU.

The NVML module is a constructor parameter: the real ``pynvml`` by default, a stand-in that replays readings
and errors in tests. Only the pynvml functions below are used, and errors are told apart by their NVML error
code (``error.value``), so a stand-in needs no pynvml import.

A reading that a card does not support (power on some laptop GPUs, clocks on vGPUs) is None, not an error;
a GPU that falls off the bus mid-run is reported on its entry and the other GPUs go on being read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

# NVML error codes (nvml.h); the module's own constants are preferred when it has them.
_ERROR_CODES = {
    "NVML_ERROR_NOT_SUPPORTED": 3,
    "NVML_ERROR_NO_PERMISSION": 4,
    "NVML_ERROR_DRIVER_NOT_LOADED": 9,
    "NVML_ERROR_LIBRARY_NOT_FOUND": 12,
    "NVML_ERROR_GPU_IS_LOST": 15,
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": 18,
}
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1


@dataclass(frozen=True)
class GpuReading:
    index: int
    name: str
    utilization_pct: float | None = None
    memory_used_mb: float | None = None
    memory_total_mb: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    our_memory_mb: float | None = None  # held by this process and its children (the inference process)
    error: str | None = None

    @property
    def memory_free_mb(self) -> float | None:
        if self.memory_used_mb is None or self.memory_total_mb is None:
            return None
        return self.memory_total_mb - self.memory_used_mb


@dataclass(frozen=True)
class HostReading:
    cpu_pct: float
    ram_used_mb: float
    ram_total_mb: float
    our_rss_mb: float  # this process and its children


# Why there are no GPU readings, as a kind: each interface says it in its own words.
NVML_PROBLEMS = (
    "no-driver",  # no NVIDIA driver installed: a computer without an NVIDIA GPU
    "driver-not-loaded",  # installed, not loaded: no NVIDIA GPU, or its kernel module failed
    "no-gpu",  # the driver runs and reports no GPU
    "driver-updated",  # the driver's library and kernel module differ until a restart
    "no-permission",  # the GPU's device files are not this user's to open
    "reader-missing",  # the package that reads NVML is not installed
    "failed",  # anything else
)


@dataclass(frozen=True)
class StatsSnapshot:
    time: float
    nvml_available: bool
    nvml_reason: str  # why NVML is not available, or the driver version when it is
    gpus: tuple[GpuReading, ...] = ()
    host: HostReading | None = None
    driver_version: str | None = None
    errors: tuple[str, ...] = field(default_factory=tuple)
    # Why, as a kind the window words itself (NVML_PROBLEMS): the reason names the driver's library for doctor.
    nvml_problem: str = ""


def _load_pynvml() -> Any:
    import pynvml

    return pynvml


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class GpuStatsSampler:
    """Reads every GPU once per :meth:`sample`; :meth:`start` samples on a thread at ``interval`` seconds."""

    def __init__(
        self,
        nvml: Any | None = None,
        *,
        nvml_loader: Callable[[], Any] = _load_pynvml,
        process_ids: Callable[[], set[int]] | None = None,
    ) -> None:
        self._nvml: Any = nvml  # None until open() loads pynvml
        self._nvml_loader = nvml_loader
        self._process_ids = process_ids or _own_process_ids
        self._initialised = False
        self.available = False
        self.reason = "not opened"
        self.problem = ""  # one of NVML_PROBLEMS while NVML is not available
        self.driver_version: str | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------------------- NVML

    def _code(self, name: str) -> int:
        return int(getattr(self._nvml, name, _ERROR_CODES[name]))

    def _error_code(self, error: BaseException) -> int | None:
        value = getattr(error, "value", None)
        return value if isinstance(value, int) else None

    def open(self) -> bool:
        """Initialise NVML; on failure, :attr:`reason` says which of module, driver or GPU is missing."""
        with self._lock:
            if self._initialised:
                return self.available
            self._initialised = True
            if self._nvml is None:
                try:
                    self._nvml = self._nvml_loader()
                except ImportError:
                    self.reason = "nvidia-ml-py (pynvml) is not installed, so GPU statistics cannot be read"
                    self.problem = "reader-missing"
                    return False
            nvml = self._nvml
            try:
                nvml.nvmlInit()
            except Exception as error:
                self.reason, self.problem = self._describe_init_error(error)
                return False
            try:
                count = int(nvml.nvmlDeviceGetCount())
                self.driver_version = _text(nvml.nvmlSystemGetDriverVersion())
            except Exception as error:
                self.reason, self.problem = f"NVML started but could not list GPUs ({error})", "failed"
                return False
            if count == 0:
                self.reason = f"the NVIDIA driver ({self.driver_version}) is loaded but reports no GPU"
                self.problem = "no-gpu"
                return False
            self.available = True
            self.reason = f"NVIDIA driver {self.driver_version}, {count} GPU(s)"
            return True

    def _describe_init_error(self, error: BaseException) -> tuple[str, str]:
        """The reason in doctor's words, and its kind (NVML_PROBLEMS)."""
        code = self._error_code(error)
        if code == self._code("NVML_ERROR_LIBRARY_NOT_FOUND"):
            return "no NVIDIA driver: libnvidia-ml.so.1 (installed with the driver) was not found", "no-driver"
        if code == self._code("NVML_ERROR_DRIVER_NOT_LOADED"):
            return (
                "the NVIDIA driver is installed but not loaded (no NVIDIA GPU, or the kernel module failed)",
                "driver-not-loaded",
            )
        if code == self._code("NVML_ERROR_LIB_RM_VERSION_MISMATCH"):
            return (
                "the NVIDIA driver library and kernel module versions differ: reboot after a driver update",
                "driver-updated",
            )
        if code == self._code("NVML_ERROR_NO_PERMISSION"):
            return "no permission to use the NVIDIA driver (check /dev/nvidia* access)", "no-permission"
        return f"NVML could not start ({type(error).__name__}: {error})", "failed"

    def close(self) -> None:
        self.stop()
        with self._lock:
            if self.available and self._nvml is not None:
                # Shutting down a lost driver fails: there is nothing left to release then.
                with contextlib.suppress(Exception):
                    self._nvml.nvmlShutdown()
            self.available = False
            self._initialised = False

    def _field(self, read: Callable[[], Any], errors: list[str], what: str) -> Any:
        try:
            return read()
        except Exception as error:
            if self._error_code(error) == self._code("NVML_ERROR_NOT_SUPPORTED"):
                return None
            if self._error_code(error) == self._code("NVML_ERROR_GPU_IS_LOST"):
                raise
            errors.append(f"{what}: {error}")
            return None

    def _read_gpu(self, index: int, our_pids: set[int]) -> GpuReading:
        nvml = self._nvml
        errors: list[str] = []
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = _text(nvml.nvmlDeviceGetName(handle))
            utilization = self._field(lambda: nvml.nvmlDeviceGetUtilizationRates(handle), errors, "utilization")
            memory = self._field(lambda: nvml.nvmlDeviceGetMemoryInfo(handle), errors, "memory")
            temperature = self._field(
                lambda: nvml.nvmlDeviceGetTemperature(handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0)),
                errors,
                "temperature",
            )
            power = self._field(lambda: nvml.nvmlDeviceGetPowerUsage(handle), errors, "power")
            limit = self._field(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle), errors, "power limit")
            clock = self._field(
                lambda: nvml.nvmlDeviceGetClockInfo(handle, getattr(nvml, "NVML_CLOCK_SM", 1)), errors, "SM clock"
            )
            processes = self._field(lambda: nvml.nvmlDeviceGetComputeRunningProcesses(handle), errors, "processes")
        except Exception as error:
            if self._error_code(error) == self._code("NVML_ERROR_GPU_IS_LOST"):
                return GpuReading(index, "?", error="the GPU fell off the bus (NVML: GPU is lost); reboot needed")
            return GpuReading(index, "?", error=f"{type(error).__name__}: {error}")
        ours = None
        if processes is not None:
            ours = sum((process.usedGpuMemory or 0) for process in processes if process.pid in our_pids) / 2**20
        return GpuReading(
            index=index,
            name=name,
            utilization_pct=float(utilization.gpu) if utilization is not None else None,
            memory_used_mb=memory.used / 2**20 if memory is not None else None,
            memory_total_mb=memory.total / 2**20 if memory is not None else None,
            temperature_c=float(temperature) if temperature is not None else None,
            power_w=power / 1000.0 if power is not None else None,
            power_limit_w=limit / 1000.0 if limit is not None else None,
            sm_clock_mhz=float(clock) if clock is not None else None,
            our_memory_mb=ours,
            error="; ".join(errors) or None,
        )

    # ------------------------------------------------------------------------------------------- sampling

    def sample(self) -> StatsSnapshot:
        self.open()
        our_pids = self._process_ids()
        gpus: list[GpuReading] = []
        errors: list[str] = []
        if self.available:
            try:
                count = int(self._nvml.nvmlDeviceGetCount())
            except Exception as error:
                errors.append(f"NVML stopped answering: {error}")
                count = 0
            gpus = [self._read_gpu(index, our_pids) for index in range(count)]
        return StatsSnapshot(
            time=time.time(),
            nvml_available=self.available,
            nvml_reason=self.reason,
            nvml_problem="" if self.available else self.problem,
            gpus=tuple(gpus),
            host=_host_reading(our_pids),
            driver_version=self.driver_version,
            errors=tuple(errors),
        )

    def start(self, callback: Callable[[StatsSnapshot], None], interval: float = 1.0) -> None:
        """Sample on a background thread; ``callback`` runs on that thread (the GUI re-emits it as a signal)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    callback(self.sample())
                except Exception:
                    # A bug in one reading (or in the callback) must not end the statistics for the session.
                    log.exception("GPU statistics sample failed; trying again in %.1f s", interval)
                self._stop.wait(interval)

        self._thread = threading.Thread(target=loop, name="scriba-gpu-stats", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
            self._thread = None


def _own_process_ids() -> set[int]:
    import psutil

    me = psutil.Process(os.getpid())
    try:
        return {me.pid, *(child.pid for child in me.children(recursive=True))}
    except psutil.Error:
        return {me.pid}


def _host_reading(our_pids: set[int]) -> HostReading:
    import psutil

    memory = psutil.virtual_memory()
    rss = 0
    for pid in our_pids:
        try:
            rss += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            continue
    # interval=None: the CPU use since the previous call (the first call after start-up reads 0).
    return HostReading(
        cpu_pct=psutil.cpu_percent(interval=None),
        ram_used_mb=(memory.total - memory.available) / 2**20,
        ram_total_mb=memory.total / 2**20,
        our_rss_mb=rss / 2**20,
    )
