from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "0")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


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
    from app.core.pipeline import Engine

    return Engine()


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own platformdirs locations: no test reads or writes the real user's files."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    for name in ("SCRIBA_HF_TOKEN", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
