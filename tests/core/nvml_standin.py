"""A stand-in for the pynvml module: replays readings and NVML errors (no NVIDIA GPU on the CI machines).

It implements only the pynvml calls Scriba makes, with pynvml's signatures, units (bytes, milliwatts, MHz)
and error codes. The readings below are what an H100 80GB reports under a transcription load according to
NVIDIA's published figures (80 GB, 700 W limit, 1980 MHz boost); they are typical values, not a capture.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass
class Frame:
    """One reading of one GPU; a field set to an int error code raises NVMLError(code) when read."""

    name: str = "NVIDIA H100 80GB HBM3"
    utilization: Any = 87
    memory_used: Any = 11_500 * 2**20
    memory_total: Any = 81_559 * 2**20
    temperature: Any = 61
    power_mw: Any = 412_000
    power_limit_mw: Any = 700_000
    sm_clock: Any = 1980
    processes: Any = ((4242, 10_900 * 2**20),)
    lost: bool = False


def _value(value: Any) -> Any:
    if isinstance(value, NVMLError):
        raise value
    return value


class NvmlStandIn:
    """``frames[i]`` is the list of GPUs returned by the i-th sample (the last one repeats)."""

    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU
    NVML_CLOCK_SM = NVML_CLOCK_SM
    NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_GPU_IS_LOST = NVML_ERROR_GPU_IS_LOST
    NVML_ERROR_LIBRARY_NOT_FOUND = NVML_ERROR_LIBRARY_NOT_FOUND
    NVML_ERROR_DRIVER_NOT_LOADED = NVML_ERROR_DRIVER_NOT_LOADED

    def __init__(self, frames: list[list[Frame]], init_error: int | None = None, driver: str = "580.95.05") -> None:
        self.frames = frames
        self.init_error = init_error
        self.driver = driver
        self.samples = -1
        self.shut_down = False

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        # Called once by open() and once per sample: each sample call advances to the next frame.
        self.samples += 1
        return len(self._frame())

    def _frame(self) -> list[Frame]:
        return self.frames[min(max(self.samples - 1, 0), len(self.frames) - 1)]

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Frame:
        gpu = self._frame()[index]
        if gpu.lost:
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        return gpu

    def nvmlDeviceGetName(self, gpu: Frame) -> bytes:
        return gpu.name.encode()  # older pynvml releases return bytes

    def nvmlDeviceGetUtilizationRates(self, gpu: Frame) -> SimpleNamespace:
        return SimpleNamespace(gpu=_value(gpu.utilization), memory=30)

    def nvmlDeviceGetMemoryInfo(self, gpu: Frame) -> SimpleNamespace:
        used, total = _value(gpu.memory_used), _value(gpu.memory_total)
        return SimpleNamespace(used=used, total=total, free=total - used)

    def nvmlDeviceGetTemperature(self, gpu: Frame, sensor: int) -> int:
        assert sensor == NVML_TEMPERATURE_GPU
        return int(_value(gpu.temperature))

    def nvmlDeviceGetPowerUsage(self, gpu: Frame) -> int:
        return int(_value(gpu.power_mw))

    def nvmlDeviceGetEnforcedPowerLimit(self, gpu: Frame) -> int:
        return int(_value(gpu.power_limit_mw))

    def nvmlDeviceGetClockInfo(self, gpu: Frame, clock: int) -> int:
        assert clock == NVML_CLOCK_SM
        return int(_value(gpu.sm_clock))

    def nvmlDeviceGetComputeRunningProcesses(self, gpu: Frame) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in _value(gpu.processes)]
