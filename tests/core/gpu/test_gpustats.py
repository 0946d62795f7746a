"""GPU statistics: NVML through a stand-in that replays readings and errors, and the real pynvml here."""

from __future__ import annotations

import threading

import pytest

from app.core.gpu.gpustats import GpuStatsSampler, StatsSnapshot
from tests.core.nvml_standin import (
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    Frame,
    NVMLError,
    NvmlStandIn,
)

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers


def test_values_units_and_our_memory() -> None:
    nvml = NvmlStandIn([[Frame(), Frame(name="NVIDIA A10G", utilization=5, processes=((1, 2**30),))]])
    sampler = GpuStatsSampler(nvml, process_ids=lambda: {4242})
    snapshot = sampler.sample()
    assert snapshot.nvml_available and snapshot.driver_version == "580.95.05"
    assert snapshot.nvml_reason == "NVIDIA driver 580.95.05, 2 GPU(s)"
    h100, a10g = snapshot.gpus
    assert h100.name == "NVIDIA H100 80GB HBM3" and h100.utilization_pct == 87
    assert h100.memory_used_mb == pytest.approx(11_500) and h100.memory_total_mb == pytest.approx(81_559)
    assert h100.memory_free_mb == pytest.approx(70_059)
    assert h100.temperature_c == 61 and h100.power_w == pytest.approx(412) and h100.power_limit_w == 700
    assert h100.sm_clock_mhz == 1980 and h100.our_memory_mb == pytest.approx(10_900) and h100.error is None
    assert a10g.name == "NVIDIA A10G" and a10g.our_memory_mb == 0  # another program's process
    assert snapshot.host is not None and snapshot.host.ram_total_mb > 0
    sampler.close()
    assert nvml.shut_down


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (NVML_ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver: libnvidia-ml.so.1"),
        (NVML_ERROR_DRIVER_NOT_LOADED, "installed but not loaded"),
        (18, "versions differ: reboot"),
    ],
)
def test_missing_driver_says_which_part_is_missing(code: int, says: str) -> None:
    snapshot = GpuStatsSampler(NvmlStandIn([[Frame()]], init_error=code)).sample()
    assert not snapshot.nvml_available and says in snapshot.nvml_reason
    assert snapshot.gpus == () and snapshot.host is not None and snapshot.host.our_rss_mb > 0  # CPU/RAM instead


def test_no_gpu_and_no_module() -> None:
    assert "reports no GPU" in GpuStatsSampler(NvmlStandIn([[]])).sample().nvml_reason

    def missing() -> object:
        raise ImportError("No module named 'pynvml'")

    snapshot = GpuStatsSampler(nvml_loader=missing).sample()
    assert "nvidia-ml-py (pynvml) is not installed" in snapshot.nvml_reason


def test_errors_mid_run() -> None:
    nvml = NvmlStandIn(
        [
            [Frame(), Frame()],
            # Power unsupported on the first card; the second falls off the bus; then NVML hiccups on a clock.
            [Frame(power_mw=NVMLError(NVML_ERROR_NOT_SUPPORTED)), Frame(lost=True)],
            [Frame(sm_clock=NVMLError(999)), Frame(lost=True)],
        ]
    )
    sampler = GpuStatsSampler(nvml, process_ids=set)
    first = sampler.sample().gpus
    assert len(first) == 2 and all(gpu.error is None for gpu in first)
    unsupported, lost = sampler.sample().gpus
    assert unsupported.power_w is None and unsupported.error is None and unsupported.utilization_pct == 87
    assert lost.error is not None and "GPU is lost" in lost.error and lost.utilization_pct is None
    hiccup, _ = sampler.sample().gpus
    assert hiccup.sm_clock_mhz is None and hiccup.error == "SM clock: NVML error 999"
    assert hiccup.memory_used_mb == pytest.approx(11_500)  # the other readings still arrive


def test_real_nvml_on_this_machine_says_why_there_is_no_gpu() -> None:
    """The CI machines have no NVIDIA driver: the real pynvml must report that precisely, not crash."""
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:  # pragma: no cover - only on a GPU machine
        pynvml.nvmlShutdown()
        snapshot = GpuStatsSampler().sample()
        assert snapshot.nvml_available and snapshot.gpus
        return
    snapshot = GpuStatsSampler().sample()
    assert not snapshot.nvml_available
    assert snapshot.nvml_reason.startswith("no NVIDIA driver")
    assert snapshot.host is not None and 0 <= snapshot.host.cpu_pct <= 100


def test_background_sampling_at_an_interval() -> None:
    got: list[StatsSnapshot] = []
    enough = threading.Event()
    threads: set[threading.Thread] = set()

    def collect(snapshot: StatsSnapshot) -> None:
        threads.add(threading.current_thread())
        got.append(snapshot)
        if len(got) >= 3:
            enough.set()

    sampler = GpuStatsSampler(NvmlStandIn([[Frame()]]), process_ids=set)
    sampler.start(collect, interval=0.05)
    assert enough.wait(5)
    sampler.stop()
    count = len(got)
    assert all(snapshot.gpus[0].utilization_pct == 87 for snapshot in got)
    # Stopped means stopped: the one sampling thread has ended, so no snapshot can come after the count.
    (thread,) = threads
    assert thread is not threading.current_thread()
    thread.join(10)
    assert not thread.is_alive()
    assert len(got) == count
