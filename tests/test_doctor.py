"""`scriba doctor` on this CPU-only machine (the real NVML, CTranslate2 and torch), and on a machine whose
driver lists a GPU that CTranslate2 cannot use (NVML replayed by the stand-in)."""

from __future__ import annotations

import json

from app.core.doctor import GPU_UNUSABLE, OK, format_report, run_doctor
from tests.core.nvml_standin import Frame, NvmlStandIn
from tests.test_cli import scriba

STABLE_KEYS = ("gpus", "nvml", "ctranslate2_cuda_devices", "torch_cuda", "selected", "verdict")


def test_doctor_json_here_is_a_passing_cpu_setup_that_says_why_there_is_no_gpu() -> None:
    result = scriba("doctor", "--json")
    assert result.returncode == OK, result.stderr
    report = json.loads(result.stdout)
    assert all(key in report for key in STABLE_KEYS)
    assert report["gpus"] == []
    assert report["nvml"]["available"] is False
    assert "libnvidia-ml.so.1" in report["nvml"]["reason"]
    assert report["ctranslate2_cuda_devices"] == 0
    assert report["torch_cuda"]["available"] is False
    assert "finds no NVIDIA driver" in report["torch_cuda"]["reason"]
    selected = report["selected"]
    assert (selected["device"], selected["compute_type"]) == ("cpu", "int8")
    assert "no usable NVIDIA GPU" in selected["reason"] and "libnvidia-ml.so.1" in selected["reason"]
    assert selected["batch_size"] == 0 and selected["diarization_device"] == "cpu"
    # The CUDA 12 cuBLAS that CTranslate2 needs is installed and loadable even here.
    cublas = [lib for lib in report["cuda_libraries"] if lib["soname"] == "libcublas.so.12"]
    assert cublas and cublas[0]["loaded"] and cublas[0]["origin"] == "wheel"
    assert report["smoke_test"]["passed"] and "tiny.en ran on cpu (int8)" in report["smoke_test"]["detail"]
    assert report["speaker_libraries"] == "ok"
    assert report["verdict"].startswith("CPU set-up OK: tiny.en ran on cpu (int8)")
    assert "libnvidia-ml.so.1" in report["verdict"]


def test_doctor_text_form_ends_with_the_verdict() -> None:
    result = scriba("doctor", "--no-smoke-test")
    assert result.returncode == OK, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1].startswith("CPU set-up OK")
    assert any(line.startswith("Selected: cpu / int8") for line in lines)
    assert any("libcublas.so.12" in line and "loaded from" in line for line in lines)


def test_a_gpu_the_driver_lists_but_ctranslate2_cannot_use_is_not_passed() -> None:
    nvml = NvmlStandIn([[Frame(name="NVIDIA A10G", memory_total=24_576 * 2**20, memory_used=500 * 2**20)]])
    report, code = run_doctor(nvml=nvml, smoke_test=False)
    assert code == GPU_UNUSABLE
    assert report["nvml"] == {
        "available": True,
        "reason": "NVIDIA driver 580.95.05, 1 GPU(s)",
        "driver_version": "580.95.05",
    }
    assert [gpu["name"] for gpu in report["gpus"]] == ["NVIDIA A10G"]
    assert report["gpus"][0]["memory_free_mb"] == 24_076
    assert report["selected"]["device"] == "cpu"
    assert report["verdict"].startswith("GPU NOT USED: CTranslate2 sees no CUDA GPU although the driver lists 1")
    assert "GPU 0: NVIDIA A10G, 23.5 GB free of 24.0 GB" in format_report(report)
