from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "0")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Stop at once when the speakers' libraries cannot load (a torchaudio for another torch): every test that
    finds speakers would fail, one timeout after another, and the reason would drown. Checked in a child process
    so that this one starts no torch threads before tests fork; the unit subset needs none of it."""
    if all(item.get_closest_marker("unit") for item in session.items):
        return
    check = (
        "from app.core.engine.diarize.speaker_stack import speaker_stack_problem; print(speaker_stack_problem() or '')"
    )
    result = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, cwd=Path(__file__).parents[1]
    )
    problem = result.stdout.strip()
    if result.returncode != 0:
        problem = (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
    if problem:
        pytest.exit(f"the test environment cannot find speakers: {problem}", returncode=3)


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    """pyannote.audio's real two-speaker phone call, with who-spoke-when (RTTM) and who-said-what (STM)."""
    spec = importlib.util.find_spec("pyannote.audio")
    assert spec is not None and spec.submodule_search_locations, "pyannote.audio is not installed"
    return Path(next(iter(spec.submodule_search_locations))) / "sample"


@pytest.fixture(scope="session")
def espeak() -> str:
    path = shutil.which("espeak-ng")
    # Not a skip: `make test` installs espeak-ng, so its absence is a broken set-up to report.
    assert path, "espeak-ng is missing: run `make test` (it installs the Debian packages the tests need)"
    return path


@pytest.fixture(scope="session")
def engine():  # type: ignore[no-untyped-def]
    from app.core.engine.pipeline import Engine

    return Engine()


@pytest.fixture(autouse=True, scope="session")
def _shared_compiled_models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The two networks exported once for the whole run (app/core/engine/diarize/bundled_models.py), not in every
    test's own cache folder: each would export them again (3 s), child processes included (they inherit it)."""
    folder = tmp_path_factory.mktemp("compiled-models")
    previous = os.environ.get("SCRIBA_COMPILED_CACHE")
    os.environ["SCRIBA_COMPILED_CACHE"] = str(folder)
    yield
    if previous is None:
        os.environ.pop("SCRIBA_COMPILED_CACHE", None)
    else:
        os.environ["SCRIBA_COMPILED_CACHE"] = previous


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own platformdirs locations: no test reads or writes the real user's files.

    Nor the user's secrets: no token or cloud API key from the environment, and every process a test starts
    has keyring's "fail" backend (a developer's desktop keyring may hold a real provider key, and a test of
    the missing-key message must never rent a real machine with it)."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    for name in (
        "SCRIBA_HF_TOKEN",
        "HF_TOKEN",
        "SCRIBA_LAMBDA_API_KEY",
        "SCRIBA_VAST_API_KEY",
        "SCRIBA_RUNPOD_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")


@pytest.fixture(scope="session")
def long_wav(sample_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four minutes of real speech (the sample call, eight times): a job that runs long enough to cancel."""
    import numpy as np
    import soundfile

    samples, rate = soundfile.read(sample_dir / "sample.wav", dtype="float32")
    path = tmp_path_factory.mktemp("long") / "long call.wav"
    soundfile.write(path, np.tile(samples, 8), rate)
    return path


@pytest.fixture
def corrupt_file(tmp_path: Path) -> Path:
    """Random bytes with an audio name: what a broken download looks like."""
    path = tmp_path / "broken download.mp3"
    path.write_bytes(np.random.default_rng(7).bytes(20000))
    return path


class MemoryKeyring:
    """A keyring backend that keeps secrets in this process (tests must never touch the user's keyring)."""

    @staticmethod
    def install() -> dict[tuple[str, str], str]:
        import keyring
        import keyring.backend
        import keyring.errors

        values: dict[tuple[str, str], str] = {}

        class Backend(keyring.backend.KeyringBackend):
            priority = 1  # type: ignore[assignment]

            def get_password(self, service: str, username: str) -> str | None:
                return values.get((service, username))

            def set_password(self, service: str, username: str, password: str) -> None:
                values[(service, username)] = password

            def delete_password(self, service: str, username: str) -> None:
                if (service, username) not in values:
                    raise keyring.errors.PasswordDeleteError(username)
                del values[(service, username)]

        keyring.set_keyring(Backend())
        return values


@pytest.fixture
def memory_keyring() -> dict[tuple[str, str], str]:
    import keyring

    previous = keyring.get_keyring()
    values = MemoryKeyring.install()
    yield values  # type: ignore[misc]
    keyring.set_keyring(previous)
