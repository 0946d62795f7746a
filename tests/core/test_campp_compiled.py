"""CAM++ compiled for the CPU (TorchScript, frozen and optimised; cached in Scriba's cache folder): the same
voice prints as the model as it is, for any number of windows and any window length, made once and loaded
after, and a damaged cache file costs nothing but the time to make it again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import app.core.engine.diarize.bundled_models as bundled
from app.core.engine.audio import decode_audio
from tests.real_speech import real_speech_dir


@pytest.fixture(scope="module")
def features() -> np.ndarray:
    import types

    import torch

    audio = decode_audio(real_speech_dir() / "ami_ES2003a_0-30.wav")
    return bundled.SpeakerEmbedding.filterbank(types.SimpleNamespace(_torch=torch), audio.samples)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRIBA_TORCHSCRIPT_CACHE", str(tmp_path / "torchscript"))


def _eager(monkeypatch: pytest.MonkeyPatch) -> bundled.SpeakerEmbedding:
    with monkeypatch.context() as patch:
        patch.setattr(bundled, "compiled_for_cpu", lambda model, weights: model)
        return bundled.SpeakerEmbedding("cpu")


def _cached_files() -> list[Path]:
    import os

    return sorted(Path(os.environ["SCRIBA_TORCHSCRIPT_CACHE"]).glob("campp-*.pt"))


def test_the_compiled_model_gives_the_same_voice_prints_and_is_made_once(
    features: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    eager = _eager(monkeypatch)
    compiled = bundled.SpeakerEmbedding("cpu")
    assert isinstance(compiled._model, torch.jit.ScriptModule)
    (made,) = _cached_files()
    stamp = made.stat().st_mtime_ns
    starts = np.arange(0, len(features) - 300, 37)
    for count, length in ((1, 150), (3, 40), (16, 150), (21, 151), (5, 300)):
        ours, theirs = compiled.embed(features, starts[:count], length), eager.embed(features, starts[:count], length)
        assert np.abs(ours - theirs).max() < 1e-5, (count, length)
    again = bundled.SpeakerEmbedding("cpu")  # from the cache: not traced again
    assert _cached_files() == [made] and made.stat().st_mtime_ns == stamp
    assert np.abs(again.embed(features, starts[:4], 150) - eager.embed(features, starts[:4], 150)).max() < 1e-5


def test_a_damaged_cache_file_is_made_again(features: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    bundled.SpeakerEmbedding("cpu")
    (made,) = _cached_files()
    made.write_bytes(b"not a TorchScript archive")
    embedding = bundled.SpeakerEmbedding("cpu")
    starts = np.arange(0, 600, 75)
    eager = _eager(monkeypatch)
    assert np.abs(embedding.embed(features, starts, 150) - eager.embed(features, starts, 150)).max() < 1e-5
    assert made.stat().st_size > 1_000_000  # a real module again
