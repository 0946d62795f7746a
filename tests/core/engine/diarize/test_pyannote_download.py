"""Getting pyannote community-1: the access check, the download (and its resume), then offline use.

The real huggingface_hub client talks to a local stand-in for the hub (tests/hub_standin.py) that serves a
pipeline folder built here from pyannote's own classes with random weights (tests/pyannote_standin.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.engine.diarize import DiarizerOptions, choose_backend
from app.core.engine.diarize.pyannote_models import (
    PYANNOTE_REPO,
    TERMS_URL,
    PyannoteAccessError,
    check_access,
    download_pipeline,
    find_pipeline,
    pipeline_dir,
)
from tests.hub_standin import HubState, serve_hub
from tests.pyannote_standin import build_pipeline, folder_files

GOOD, NO_TERMS, REFUSED = "hf_good_token", "hf_account_without_terms", "hf_revoked"


@pytest.fixture(scope="module")
def served_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    return folder_files(build_pipeline(tmp_path_factory.mktemp("community-1")))


@pytest.fixture
def hub(served_files: dict[str, bytes]) -> Iterator[tuple[HubState, str]]:
    state = HubState(PYANNOTE_REPO, dict(served_files), {GOOD: True, NO_TERMS: False})
    with serve_hub(state) as endpoint:
        yield state, endpoint


def _file_requests(state: HubState) -> list[tuple[str, str, str]]:
    return [request for request in state.requests if "/resolve/" in request[1]]


def test_a_refused_token_is_named_before_anything_is_downloaded(hub: tuple[HubState, str]) -> None:
    state, endpoint = hub
    with pytest.raises(PyannoteAccessError) as caught:
        download_pipeline(REFUSED, endpoint=endpoint)
    assert caught.value.kind == "token"
    assert "token was refused" in str(caught.value) and REFUSED not in str(caught.value)
    assert _file_requests(state) == []
    assert find_pipeline() is None


def test_terms_not_accepted_gives_the_page_to_accept_them(hub: tuple[HubState, str]) -> None:
    state, endpoint = hub
    with pytest.raises(PyannoteAccessError) as caught:
        download_pipeline(NO_TERMS, endpoint=endpoint)
    assert caught.value.kind == "terms"
    assert TERMS_URL in str(caught.value)
    assert [method for method, _, _ in _file_requests(state)] == ["HEAD"]  # the check only, no download


def test_no_token_and_offline_are_told_apart() -> None:
    with pytest.raises(PyannoteAccessError) as caught:
        check_access(None)
    assert caught.value.kind == "no-token" and TERMS_URL in str(caught.value)
    with pytest.raises(PyannoteAccessError) as caught:
        check_access(GOOD, endpoint="http://127.0.0.1:9", timeout_s=2)  # nothing listens on port 9
    assert caught.value.kind == "offline"


def test_download_then_diarize_offline_from_the_cache(
    hub: tuple[HubState, str],
    served_files: dict[str, bytes],
    sample_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import huggingface_hub
    import soundfile

    state, endpoint = hub
    assert choose_backend(DiarizerOptions()).backend == "embedded"
    assert "scriba models download pyannote" in choose_backend(DiarizerOptions()).cli_hint  # the CLI's, not the reason
    seen: list[tuple[int, int]] = []
    started = time.perf_counter()
    path = download_pipeline(GOOD, progress=lambda done, total: seen.append((done, total)), endpoint=endpoint)
    print(f"download of {sum(map(len, served_files.values())) / 1e6:.1f} MB: {time.perf_counter() - started:.2f} s")
    assert path == pipeline_dir().absolute()
    assert folder_files(path) == served_files  # every byte, and nothing of the hub client's bookkeeping
    total = sum(len(data) for data in served_files.values())
    assert seen[-1] == (total, total)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)

    # From here on the hub is gone: the pipeline loads from the cache with no token and no network.
    state.files.clear()
    state.tokens.clear()
    choice = choose_backend(DiarizerOptions())
    assert choice.backend == "pyannote" and "downloaded" in choice.reason and "offline" in choice.reason
    samples, rate = soundfile.read(sample_dir / "sample.wav", dtype="float32")
    clip = tmp_path / "clip.wav"
    soundfile.write(clip, samples[: 8 * rate], rate)
    from app.core.engine.pipeline import Engine, PipelineOptions
    from app.core.engine.transcribe import TranscriptionOptions

    # Any hub call this process makes from here on goes to the stand-in (the client's default address, as
    # HF_ENDPOINT sets it), so that the count of its requests shows whether the run asked the hub for anything.
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", endpoint)
    requests_before = len(state.requests)
    started = time.perf_counter()
    transcript = Engine().run(clip, PipelineOptions(transcription=TranscriptionOptions(model="tiny.en")))
    print(f"transcription with pyannote from the cache: {time.perf_counter() - started:.2f} s")
    assert transcript.diarization is not None
    assert transcript.diarization.backend == "pyannote"
    assert "downloaded" in transcript.diarization.reason
    assert state.requests[requests_before:] == []
    # ... and the count would have seen one: a hub call made the same way reaches the stand-in.
    huggingface_hub.HfApi().model_info(PYANNOTE_REPO)
    assert [path for _, path, _ in state.requests[requests_before:]] == [f"/api/models/{PYANNOTE_REPO}"]


def test_an_interrupted_download_resumes_where_it_stopped(
    hub: tuple[HubState, str], served_files: dict[str, bytes]
) -> None:
    state, endpoint = hub
    big = "embedding/pytorch_model.bin"
    cut = len(served_files[big]) // 3
    # The connection drops part-way through the largest file: this attempt fails.
    state.drop_after[big] = cut
    with pytest.raises(PyannoteAccessError) as caught:
        download_pipeline(GOOD, endpoint=endpoint)
    assert caught.value.kind == "offline"
    assert find_pipeline() is None  # nothing that looks complete
    partial_bytes = [path.stat().st_size for path in pipeline_dir().parent.rglob("*.part")]
    assert len(partial_bytes) == 1 and 0 < partial_bytes[0] <= cut  # what arrived in whole chunks is kept
    print(f"interrupted at {cut} bytes, kept {partial_bytes[0]}")

    path = download_pipeline(GOOD, endpoint=endpoint)
    ranges = [wanted for method, name, wanted in _file_requests(state) if method == "GET" and name.endswith(big)]
    assert ranges == ["", f"bytes={partial_bytes[0]}-"]  # the second attempt asked only for the rest
    assert folder_files(path) == served_files
    assert not list(pipeline_dir().parent.glob(".*partial"))


def test_a_pipeline_in_the_current_directory_is_never_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.core.engine.diarize.pyannote_backend import PyannoteDiarizer
    from app.core.errors import DiarizationError

    # What the audit found: a folder named like the hub id in the working directory, whose config names code.
    planted = tmp_path / PYANNOTE_REPO
    planted.mkdir(parents=True)
    marker = tmp_path / "ran"
    (planted / "config.yaml").write_text(f"pipeline:\n  name: planted.Boom\n  params: {{path: {marker}}}\n")
    (tmp_path / "planted.py").write_text(
        "from pathlib import Path\nclass Boom:\n    def __init__(self, path, **kw):\n        Path(path).touch()\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert choose_backend(DiarizerOptions()).backend == "embedded"
    with pytest.raises(DiarizationError, match="not downloaded"):
        PyannoteDiarizer().load()
    with pytest.raises(DiarizationError, match="absolute path"):
        PyannoteDiarizer(PYANNOTE_REPO).load()
    assert not marker.exists()


def _scriba(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_the_command_line_checks_downloads_lists_and_removes(hub: tuple[HubState, str]) -> None:
    _, endpoint = hub
    # HF_ENDPOINT is the hub client's own setting: the child's huggingface_hub talks to the stand-in.
    env = {**os.environ, "HF_ENDPOINT": endpoint, "SCRIBA_HF_TOKEN": REFUSED}
    refused = _scriba("models", "download", "pyannote", env=env)
    assert refused.returncode == 1
    assert "token was refused" in refused.stderr and "Traceback" not in refused.stderr
    assert REFUSED not in refused.stderr + refused.stdout
    assert "not downloaded" in _scriba("models", "list", env=env).stdout.splitlines()[-1]

    done = _scriba("models", "download", "pyannote", env={**env, "SCRIBA_HF_TOKEN": GOOD})
    assert done.returncode == 0, done.stderr
    assert str(pipeline_dir()) in done.stdout
    listed = _scriba("models", "list", env=env).stdout.splitlines()[-1]
    assert listed.startswith("pyannote") and f"cache: {pipeline_dir()}" in listed and "CC-BY-4.0" in listed
    removed = _scriba("models", "remove", "pyannote", env=env)
    assert removed.returncode == 0 and not pipeline_dir().exists()


def test_the_packaged_app_finds_the_bundled_pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.core.engine.diarize.pyannote_models import _REQUIRED_FILES, PYANNOTE_DIR_NAME

    bundle = tmp_path / "_internal"
    for name in _REQUIRED_FILES:
        path = bundle / "models" / PYANNOTE_DIR_NAME / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"stand-in")
    assert find_pipeline() is None
    monkeypatch.setattr(sys, "_MEIPASS", str(bundle), raising=False)  # what PyInstaller sets when frozen
    found = find_pipeline()
    assert found is not None and found.origin == "bundled"
    assert found.path == bundle / "models" / PYANNOTE_DIR_NAME
    assert "bundled" in choose_backend(DiarizerOptions()).reason


def test_a_cancelled_download_keeps_what_arrived(hub: tuple[HubState, str], served_files: dict[str, bytes]) -> None:
    from app.core.cancel import CancelToken
    from app.core.errors import CancelledError

    _, endpoint = hub
    cancel = CancelToken()
    total = sum(map(len, served_files.values()))

    def progress(done: int, _: int) -> None:
        if done > total // 2:
            cancel.cancel()  # the person closed the dialog half-way

    with pytest.raises(CancelledError):
        download_pipeline(GOOD, progress=progress, cancel=cancel, endpoint=endpoint)
    kept = sum(path.stat().st_size for path in pipeline_dir().parent.rglob("*") if path.is_file())
    assert total // 2 < kept < total and find_pipeline() is None
    assert folder_files(download_pipeline(GOOD, endpoint=endpoint)) == served_files


def test_a_download_cancelled_after_a_files_last_byte_completes_next_time(
    hub: tuple[HubState, str], served_files: dict[str, bytes]
) -> None:
    """Cancelled right after the last chunk of the first file: its part holds every byte but was not renamed.
    The next attempt must finish it, not ask for a range past its end (which a server refuses with 416)."""
    from app.core.cancel import CancelToken
    from app.core.errors import CancelledError

    state, endpoint = hub
    # The smallest file first (the hub lists them in this order), so that its one chunk is the whole file.
    smallest = min(state.files, key=lambda name: len(state.files[name]))
    state.files = {smallest: state.files[smallest], **state.files}
    cancel = CancelToken()

    def progress(done: int, _: int) -> None:
        # Set at the first report (0 bytes), it is raised at the next one: after the first file's only chunk
        # was written, before the file is renamed into place.
        cancel.cancel()

    with pytest.raises(CancelledError):
        download_pipeline(GOOD, progress=progress, cancel=cancel, endpoint=endpoint)
    parts = [path for path in pipeline_dir().parent.rglob("*.part") if path.is_file()]
    assert [path.name for path in parts] == [f"{Path(smallest).name}.part"]
    assert parts[0].stat().st_size == len(served_files[smallest])  # every byte there, not yet renamed
    assert folder_files(download_pipeline(GOOD, endpoint=endpoint)) == served_files
