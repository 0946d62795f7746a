from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.core.config.settings import SettingsStore
from app.core.queue.jobs import JobStore
from tests.conftest import MemoryKeyring


@pytest.fixture(autouse=True)
def _test_keyring() -> Iterator[dict[tuple[str, str], str]]:
    """The window reads the Hugging Face token from the keyring: give it one that lives in this process."""
    import keyring

    previous = keyring.get_keyring()
    values = MemoryKeyring.install()
    yield values
    keyring.set_keyring(previous)


@pytest.fixture
def open_window(qtbot, tmp_path: Path) -> Callable[..., object]:  # type: ignore[no-untyped-def]
    """Open a main window on a data and config folder (default: this test's); the same folders = a restart."""
    from app.gui.window import MainWindow

    def open_(data: Path | None = None, config: Path | None = None, start_worker: bool = True) -> MainWindow:
        window = MainWindow(
            JobStore(data or tmp_path / "data"), SettingsStore(config or tmp_path / "config"), start_worker=start_worker
        )
        qtbot.addWidget(window)
        window.show()
        qtbot.waitExposed(window)
        return window

    return open_


@pytest.fixture(scope="session")
def call_transcript(sample_dir: Path):  # type: ignore[no-untyped-def]
    """The real engine's transcript of the sample phone call (tiny.en, word timings, built-in diarizer), made
    once: tests that are about reading and editing start from it instead of queueing a job each."""
    from app.core.engine.pipeline import Engine, PipelineOptions
    from app.core.engine.transcribe import TranscriptionOptions
    from app.core.transcript.document import Transcript

    engine = Engine()
    try:
        made = engine.run(sample_dir / "sample.wav", PipelineOptions(transcription=TranscriptionOptions(language="en")))
    finally:
        engine.unload()
    return Transcript.from_dict(made.to_dict())  # as the queue stores it (rounded times), so tests compare exactly
