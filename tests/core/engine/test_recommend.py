"""The first screen's recommendation (app/core/engine/recommend.py) and `scriba models recommend`.

CPU machines are described by values written here; the GPU machines go through doctor's own checks with NVML
replayed by the stand-in (tests/core/nvml_standin.py) and CTranslate2's device count replayed as a machine with
a usable CUDA GPU reports it (there is none here). The expected minutes follow from the queue's estimate that the
test states: tiny.en at 0.07 s per audio second on 2 cores, small 5x, turbo 8x and large 25x tiny's cost, a GPU
25x faster, a CPU's speed growing with its cores up to 8."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.core import doctor
from app.core.engine import models
from app.core.engine.recommend import Machine, cannot_connect, machine_from_doctor, recommend
from tests.core.nvml_standin import Frame, NvmlStandIn
from tests.test_cli import scriba

GB = 1024 * 2**20


def picks(machine: Machine, on_disk: set[str] | None = None) -> dict[str, str]:
    advice = recommend(machine, on_disk=on_disk if on_disk is not None else {"tiny.en"})
    return {choice.tier: choice.model for choice in advice.choices} | {"recommended": advice.best.model}


def test_a_two_core_cpu_with_24_gb_is_advised_base_about_8_minutes_an_hour() -> None:
    advice = recommend(Machine("cpu", cpu_cores=2, ram_gb=24.0), on_disk={"tiny.en"})
    assert [(choice.tier, choice.model) for choice in advice.choices] == [
        ("fast", "base"),  # 0.07 * 2 * 60 = 8.4 min per hour of audio
        ("balanced", "small"),  # 21 min
        ("accurate", "turbo"),  # 33.6 min; large-v3 (105 min) is slower than the recording
    ]
    assert advice.recommended == "fast" and advice.best.model == "base"
    assert advice.best.time_words() == "about 8 minutes for an hour of audio here"
    assert advice.choice("accurate").time_words() == "about 34 minutes for an hour of audio here"
    text = " ".join(advice.reasons)
    assert "2 CPU cores and 24 GB of memory" in text and "no NVIDIA graphics card" in text
    assert "145 MB download" in text and "built-in tiny.en works" in text
    assert "2-core CPU" in advice.basis and "cores (2;" in advice.basis


def test_eight_cores_with_16_gb_get_turbo_and_large_v3_as_the_accurate_choice() -> None:
    advice = recommend(Machine("cpu", cpu_cores=8, ram_gb=16.0), on_disk={"tiny.en"})
    assert picks(Machine("cpu", cpu_cores=8, ram_gb=16.0)) == {
        "fast": "small",  # 0.07 * 5 * 60 / 4 = 5.25 min
        "balanced": "turbo",  # 8.4 min
        "accurate": "large-v3",  # 26.25 min
        "recommended": "turbo",
    }
    assert advice.best.time_words() == "about 8 minutes for an hour of audio here"
    assert "large-v3 is more accurate but needs about 26 minutes" in advice.reasons[1]
    # Only 8 GB of memory: large-v3 (10 GB in float16, about half in int8) is not offered.
    assert picks(Machine("cpu", cpu_cores=8, ram_gb=8.0))["accurate"] == "turbo"


@pytest.fixture
def usable_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """CTranslate2 as it reports on a machine with one CUDA GPU (the driver's readings come from the stand-in)."""
    monkeypatch.setattr(doctor, "_ctranslate2_cuda", lambda: (1, ["float16", "int8_float16", "int8"], None))


@pytest.mark.parametrize(
    ("card", "memory_gb", "expected"),
    [
        ("NVIDIA GeForce GTX 1650", 4, {"fast": "tiny", "balanced": "base", "accurate": "small"}),
        ("NVIDIA GeForce RTX 3070", 8, {"fast": "base", "balanced": "small", "accurate": "turbo"}),
        ("NVIDIA RTX A5000", 24, {"fast": "small", "balanced": "turbo", "accurate": "large-v3"}),
    ],
)
def test_gpus_of_4_8_and_24_gb_read_by_doctor_get_the_largest_model_that_fits(
    usable_gpu: None, card: str, memory_gb: int, expected: dict[str, str]
) -> None:
    nvml = NvmlStandIn([[Frame(name=card, memory_total=memory_gb * GB, memory_used=300 * 2**20, processes=())]])
    report, _code = doctor.run_doctor(nvml=nvml, smoke_test=False)
    machine = machine_from_doctor(report)
    assert (machine.device, machine.gpu_name, machine.gpu_memory_gb) == ("cuda", card, memory_gb)
    advice = recommend(machine, on_disk={"tiny.en"})
    assert {choice.tier: choice.model for choice in advice.choices} == expected
    assert advice.recommended == "accurate"  # every choice takes minutes at most on a GPU
    assert f"{card} with {memory_gb} GB of memory" in advice.reasons[0]
    assert f"of the GPU's {memory_gb} GB" in advice.reasons[1]
    if memory_gb < 10:
        assert "large-v3 would need 10 GB" in advice.reasons[1]


def test_a_gpu_doctor_finds_unusable_is_advised_for_the_cpu_and_says_why() -> None:
    nvml = NvmlStandIn([[Frame(name="NVIDIA A10G", memory_total=24 * GB, memory_used=500 * 2**20)]])
    report, _code = doctor.run_doctor(nvml=nvml, smoke_test=False)  # CTranslate2 here sees no CUDA device
    machine = machine_from_doctor(report, cpu_cores=2)
    assert machine.device == "cpu" and machine.gpu_name == "NVIDIA A10G"
    advice = recommend(machine, on_disk={"tiny.en"})
    assert "cannot be used by Scriba yet" in advice.reasons[0] and "CTranslate2 sees no CUDA GPU" in advice.reasons[0]
    assert advice.best.model == "base"  # the 2-core CPU's advice


def test_a_model_on_disk_is_flagged_and_not_offered_as_a_download(tmp_path: Path) -> None:
    for name in ("config.json", "model.bin"):
        (tmp_path / "turbo").mkdir(exist_ok=True)
        (tmp_path / "turbo" / name).write_text("{}")
    advice = recommend(Machine("cpu", cpu_cores=8, ram_gb=16.0), cache=tmp_path)
    assert advice.best.model == "turbo" and advice.best.on_disk
    assert not advice.choice("accurate").on_disk
    assert not any("download" in reason for reason in advice.reasons)


def test_no_connection_is_told_apart_from_other_failures(tmp_path: Path) -> None:
    with pytest.raises(models.ModelDownloadError) as offline:  # no network on this machine
        models.download_model("base", cache=tmp_path, timeout_s=5)
    assert cannot_connect(offline.value)
    assert not cannot_connect(models.ModelDownloadError("The download of 'base' is incomplete"))


def test_the_cli_prints_the_same_reasoning_in_words_and_json() -> None:
    words = scriba("models", "recommend")
    assert words.returncode == 0, words.stderr
    assert "Recommended:" in words.stdout and "for an hour of audio" in words.stdout
    assert "Times: tiny.en measured at 4.2 minutes per hour of audio" in words.stdout
    assert "no NVIDIA graphics card" in words.stdout  # this machine has none
    as_json = scriba("models", "recommend", "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["machine"]["device"] == "cpu" and data["machine"]["cpu_cores"] == os.cpu_count()
    assert [choice["tier"] for choice in data["choices"]] == ["fast", "balanced", "accurate"]
    assert f"Recommended: {data['recommended_model']} ({data['recommended']})" in words.stdout
    assert data["reasons"][0] in words.stdout
