"""The GPU proof's kit: loads that fit a device call, joined byte for byte there, damaged or missing ones named;
and the random-weight Whisper that the proof sizes batches with loads and decodes in faster-whisper."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "gpu_kit"))

import make_kit  # noqa: E402
import random_whisper  # noqa: E402

DEVICE_SH = ROOT / "benchmarks" / "gpu_kit" / "device.sh"


def _device(kit: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"SCRIBA_GPU_KIT": str(kit), "SCRIBA_GPU_PYTHON": sys.executable}
    return subprocess.run(["bash", str(DEVICE_SH), *args], capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def kit_tar(tmp_path: Path) -> tuple[Path, bytes]:
    # 2.5 loads of 1000 bytes: the last load is partial, and no byte may be lost or repeated at the cuts.
    payload = bytes((index * 7 + index // 251) % 256 for index in range(2500))
    tar = tmp_path / "kit.tar"
    tar.write_bytes(payload)
    return tar, payload


@pytest.mark.unit
def test_split_cuts_into_loads_no_larger_than_asked(tmp_path: Path, kit_tar: tuple[Path, bytes]) -> None:
    tar, payload = kit_tar
    out = tmp_path / "out"
    out.mkdir()
    loads = make_kit.split(tar, out, 1000)
    sizes = [(load / "kit.tar.part").stat().st_size for load in loads]
    assert sizes == [1000, 1000, 500]
    infos = [json.loads((load / "load.json").read_text()) for load in loads]
    assert [(info["load"], info["loads"]) for info in infos] == [(1, 3), (2, 3), (3, 3)]
    assert b"".join((load / "kit.tar.part").read_bytes() for load in loads) == payload


def test_device_side_keeps_each_load_and_names_the_missing_ones(tmp_path: Path, kit_tar: tuple[Path, bytes]) -> None:
    tar, payload = kit_tar
    out = tmp_path / "out"
    out.mkdir()
    loads = make_kit.split(tar, out, 1000)
    kit = tmp_path / "device-kit"
    first = _device(kit, "receive", str(loads[0]))
    assert first.returncode == 0, first.stderr
    assert "load 1 of 3" in first.stdout and "still missing: 2 3" in first.stdout
    assert _device(kit, "receive", str(loads[2])).returncode == 0
    # The machine was kept warm for loads 1 and 3 only: installing must say which load to send again.
    early = _device(kit, "install")
    assert early.returncode == 4
    assert "loads missing here: 2" in early.stdout
    assert _device(kit, "receive", str(loads[1])).returncode == 0
    joined = b"".join((kit / "parts" / f"part-{number}").read_bytes() for number in (1, 2, 3))
    assert joined == payload


def test_a_damaged_load_is_refused_and_not_kept(tmp_path: Path, kit_tar: tuple[Path, bytes]) -> None:
    tar, _ = kit_tar
    out = tmp_path / "out"
    out.mkdir()
    loads = make_kit.split(tar, out, 1000)
    part = loads[1] / "kit.tar.part"
    damaged = bytearray(part.read_bytes())
    damaged[500] ^= 0xFF
    part.write_bytes(bytes(damaged))
    kit = tmp_path / "device-kit"
    result = _device(kit, "receive", str(loads[1]))
    assert result.returncode == 3
    assert "load 2 arrived damaged" in result.stdout
    assert not (kit / "parts" / "part-2").exists()


def test_loads_of_another_kit_start_the_gathering_over(tmp_path: Path, kit_tar: tuple[Path, bytes]) -> None:
    tar, _ = kit_tar
    old_out, new_out = tmp_path / "old", tmp_path / "new"
    old_out.mkdir()
    new_out.mkdir()
    old_loads = make_kit.split(tar, old_out, 1000)
    tar.write_bytes(b"another kit" * 150)
    new_loads = make_kit.split(tar, new_out, 1000)
    kit = tmp_path / "device-kit"
    assert _device(kit, "receive", str(old_loads[0])).returncode == 0
    assert _device(kit, "receive", str(old_loads[1])).returncode == 0
    result = _device(kit, "receive", str(new_loads[0]))
    assert "another kit" in result.stdout
    assert sorted(path.name for path in (kit / "parts").glob("part-*")) == ["part-1"]


def test_random_whisper_loads_and_decodes_in_faster_whisper(tmp_path: Path) -> None:
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    from app.core.engine.models import BUNDLED_MODEL, resolve_model

    tokenizer = resolve_model(BUNDLED_MODEL).path / "tokenizer.json"
    folder = random_whisper.build(random_whisper.TINY, tmp_path / "model", tokenizer)
    vocabulary = json.loads((folder / "vocabulary.json").read_text())
    assert len(vocabulary) == random_whisper.TINY.vocabulary
    # The special tokens sit where the tokenizer puts them, or decoding cannot start.
    document = json.loads(tokenizer.read_text())
    added = {entry["content"]: entry["id"] for entry in document["added_tokens"]}
    assert vocabulary[added["<|startoftranscript|>"]] == "<|startoftranscript|>"
    assert vocabulary[added["<|notimestamps|>"] + 1] == "<|0.00|>"
    model = WhisperModel(str(folder), device="cpu", compute_type="int8", cpu_threads=1)
    import numpy as np

    rng = np.random.default_rng(3)
    speechlike = (np.sin(np.arange(16000 * 8) * 0.05) * rng.uniform(0.2, 0.6, 16000 * 8)).astype(np.float32)
    segments, _ = BatchedInferencePipeline(model).transcribe(
        speechlike, batch_size=2, language="en", vad_filter=False, clip_timestamps=[{"start": 0.0, "end": 8.0}]
    )
    assert len(list(segments)) == 1
