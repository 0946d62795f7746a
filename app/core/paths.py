"""Where Scriba keeps its files (platformdirs), in one place."""

from __future__ import annotations

from pathlib import Path

import platformdirs

APP_NAME = "scriba"


def cache_dir() -> Path:
    """Downloaded models and other re-creatable data."""
    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def models_dir() -> Path:
    return cache_dir() / "models"


def data_dir() -> Path:
    """The job queue and transcripts: the user's work, never deleted by Scriba on its own."""
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def config_dir() -> Path:
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))
