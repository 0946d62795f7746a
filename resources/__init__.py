"""Data files (icons, price table), installed as the package ``app.resources`` (see pyproject.toml).

Code finds them only through :func:`resource_path`, in a checkout, an installed wheel and a PyInstaller
bundle alike.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path


def resource_path(name: str) -> Path:
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:  # PyInstaller bundle: the spec collects this folder as app/resources
        return Path(frozen) / "app" / "resources" / name
    return Path(str(resources.files(__name__).joinpath(name)))


def icon_path() -> Path:
    return resource_path("scriba.svg")
