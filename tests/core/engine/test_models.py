"""Model catalog: resolution, the default, and downloads that are explicit and fail fast offline."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.core.engine import models
from app.core.errors import ModelDownloadError, ModelNotFoundError

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers


def test_bundled_tiny_en_is_the_default_on_a_fresh_machine(tmp_path: Path) -> None:
    chosen = models.default_model(cache=tmp_path)
    assert chosen.name == "tiny.en" and chosen.origin == "bundled"
    assert models.is_model_dir(chosen.path)


def test_the_best_model_on_disk_wins(tmp_path: Path) -> None:
    # A real CTranslate2 directory copied into the cache under a catalog name stands for a download.
    shutil.copytree(models.bundled_model_path(), tmp_path / "small.en")
    shutil.copytree(models.bundled_model_path(), tmp_path / "base")
    assert models.default_model(cache=tmp_path).name == "small.en"
    assert models.default_model(cache=tmp_path, max_vram_gb=1.0).name == "base"
    assert models.resolve_model("small.en", cache=tmp_path).origin == "cache"


def test_an_incomplete_download_is_not_a_model(tmp_path: Path) -> None:
    (tmp_path / "large-v3").mkdir()
    (tmp_path / "large-v3" / "config.json").write_text("{}")
    assert models.default_model(cache=tmp_path).name == "tiny.en"
    with pytest.raises(ModelNotFoundError, match="scriba models download large-v3"):
        models.resolve_model("large-v3", cache=tmp_path)


def test_local_directory_and_bad_paths(tmp_path: Path) -> None:
    resolved = models.resolve_model(str(models.bundled_model_path()))
    assert resolved.origin == "path"
    with pytest.raises(ModelNotFoundError, match="not a CTranslate2 Whisper model directory"):
        models.resolve_model(str(tmp_path))
    with pytest.raises(ModelNotFoundError, match="Unknown model 'huge'"):
        models.resolve_model("huge")


def test_download_fails_clearly_when_the_hub_cannot_be_reached(tmp_path: Path) -> None:
    # Nothing listens on port 9: the connection is refused, as on a machine with no network.
    with pytest.raises(ModelDownloadError, match=r"Could not download 'base\.en'.*internet"):
        models.download_model("base.en", cache=tmp_path, timeout_s=5, endpoint="http://127.0.0.1:9")
    assert list(tmp_path.iterdir()) == []  # nothing half-downloaded left in the cache


def test_download_gives_up_on_a_hub_that_never_answers(tmp_path: Path) -> None:
    """A connection that opens and then stays silent (a captive portal, a dead proxy) ends in the same clear
    error after the timeout instead of hanging; pytest-timeout would fail a hang."""
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepted by the kernel, never read or answered
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(ModelDownloadError, match=r"Could not download 'base\.en'.*internet"):
            models.download_model("base.en", cache=tmp_path, timeout_s=1, endpoint=endpoint)
    assert list(tmp_path.iterdir()) == []


def test_remove(tmp_path: Path) -> None:
    shutil.copytree(models.bundled_model_path(), tmp_path / "base")
    models.remove_model("base", cache=tmp_path)
    assert not (tmp_path / "base").exists()
    with pytest.raises(ModelNotFoundError, match="nothing to remove"):
        models.remove_model("base", cache=tmp_path)
