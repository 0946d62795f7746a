from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.core.jobs import JobStore
from app.core.settings import SettingsStore
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
