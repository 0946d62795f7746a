"""View › Theme: dark and light are applied (Fusion with Scriba's palette), remembered with the window, and
"System" gives the platform's own look back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from app.core.queue.jobs import Job, JobOptions, JobState
from app.gui.queue.model import state_colour
from app.gui.theme import apply_theme


def base_lightness() -> int:
    return QApplication.palette().color(QPalette.ColorRole.Base).lightness()


def test_dark_and_light_themes_apply_and_are_remembered(open_window: Any) -> None:
    window = open_window(start_worker=False)
    system = base_lightness()
    try:
        dark = next(action for action in window.menu_actions.theme_actions.actions() if action.text() == "Dark")
        dark.trigger()
        assert base_lightness() < 60 and window.settings.window.theme == "dark"
        # The queue's state colours follow the palette: light enough to read on the dark base.
        done = Job(id=1, source=Path("a.wav"), options=JobOptions(), state=JobState.DONE, position=1)
        colour = state_colour(done)
        assert colour is not None and colour.lightness() > 100
        window.close()
        apply_theme("system")
        again = open_window(start_worker=False)  # the same config folder: the theme comes back
        assert again.settings.window.theme == "dark" and base_lightness() < 60
        again.set_theme("light")
        assert base_lightness() > 200
        again.set_theme("system")
        assert base_lightness() == system
    finally:
        apply_theme("system")  # the palette is the whole application's: later tests get the usual one
