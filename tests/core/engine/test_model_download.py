"""Downloading a Whisper model: progress, cancel and resume, removal, against a local stand-in for the hub.

The real huggingface_hub client talks to tests/hub_standin.py (public repository mode), which serves the real
files of the bundled tiny.en under tiny.en's own repository; the download lands in a test cache folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.cancel import CancelToken
from app.core.engine import models
from app.core.errors import CancelledError
from tests.hub_standin import HubState, serve_hub


def bundled_files() -> dict[str, bytes]:
    folder = models.bundled_model_path()
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


@pytest.fixture(scope="module")
def served_files() -> dict[str, bytes]:
    return bundled_files()


@pytest.fixture
def hub(served_files: dict[str, bytes]) -> Iterator[tuple[HubState, str]]:
    state = HubState(models.CATALOG["tiny.en"].repo_id, dict(served_files), {}, public=True)
    with serve_hub(state) as endpoint:
        yield state, endpoint


def test_download_reports_progress_and_lands_complete(
    hub: tuple[HubState, str], served_files: dict[str, bytes], tmp_path: Path
) -> None:
    _, endpoint = hub
    seen: list[tuple[int, int]] = []
    model = models.download_model("tiny.en", cache=tmp_path, endpoint=endpoint, progress=lambda *p: seen.append(p))
    assert model.origin == "cache" and model.path == tmp_path / "tiny.en"
    assert {path.name: path.read_bytes() for path in model.path.iterdir()} == served_files  # every byte, no extras
    total = sum(map(len, served_files.values()))
    assert seen[-1] == (total, total)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    assert models.resolve_model("tiny.en", cache=tmp_path).origin == "cache"  # used from the cache from now on
    assert not models.partial_dir("tiny.en", tmp_path).exists()


def test_a_cancelled_download_continues_where_it_stopped(
    hub: tuple[HubState, str], served_files: dict[str, bytes], tmp_path: Path
) -> None:
    state, endpoint = hub
    cancel = CancelToken()
    stopped_at = 0

    def stop_half_way(done: int, total: int) -> None:
        nonlocal stopped_at
        if done > total // 2 and not cancel.cancelled:
            stopped_at = done
            cancel.cancel()

    with pytest.raises(CancelledError):
        models.download_model("tiny.en", cache=tmp_path, endpoint=endpoint, progress=stop_half_way, cancel=cancel)
    assert not models.is_model_dir(tmp_path / "tiny.en")  # nothing that looks complete
    assert models.resolve_model("tiny.en", cache=tmp_path).origin == "bundled"
    kept = sum(path.stat().st_size for path in models.partial_dir("tiny.en", tmp_path).rglob("*") if path.is_file())
    assert kept >= stopped_at - (1 << 20)  # what arrived is kept (up to the chunk in flight)

    partial = models.partial_dir("tiny.en", tmp_path)
    finished = {path.name for path in partial.iterdir() if path.is_file() and not path.name.endswith(".part")}
    [part] = [path for path in partial.iterdir() if path.name.endswith(".part")]
    have = part.stat().st_size

    state.requests.clear()
    model = models.download_model("tiny.en", cache=tmp_path, endpoint=endpoint)
    assert {path.name: path.read_bytes() for path in model.path.iterdir()} == served_files
    gets = [(path.rsplit("/", 1)[-1], wanted) for method, path, wanted in state.requests if method == "GET"]
    # The interrupted file continues from the byte after what was kept; finished files are not fetched again.
    assert (part.name.removesuffix(".part"), f"bytes={have}-") in gets
    assert [wanted for _, wanted in gets if wanted] == [f"bytes={have}-"]
    assert not finished & {name for name, _ in gets}


def test_remove_deletes_the_model_and_an_interrupted_download(hub: tuple[HubState, str], tmp_path: Path) -> None:
    _, endpoint = hub
    models.download_model("tiny.en", cache=tmp_path, endpoint=endpoint)
    models.partial_dir("tiny.en", tmp_path).mkdir()
    models.remove_model("tiny.en", cache=tmp_path)
    assert not (tmp_path / "tiny.en").exists() and not models.partial_dir("tiny.en", tmp_path).exists()
