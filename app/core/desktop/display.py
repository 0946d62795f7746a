"""Which display system the desktop runs, and the errors of this package."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Literal

from app.core.errors import ScribaError

DisplaySystem = Literal["x11", "wayland", "windows", "macos", "none"]


class DesktopError(ScribaError):
    """Typing, copying or a hotkey cannot work here; the message says why and what to do."""


def display_system(env: Mapping[str, str], platform: str = sys.platform) -> DisplaySystem:
    """The display system the focused program lives on.

    A Wayland session usually sets DISPLAY too (XWayland), but keys sent through XWayland's XTest reach only
    the X11 programs of the session, not the Wayland ones that a person mostly types into: so Wayland wins.
    """
    if platform == "win32":
        return "windows"
    if platform == "darwin":
        return "macos"
    if env.get("WAYLAND_DISPLAY") or env.get("XDG_SESSION_TYPE") == "wayland":
        return "wayland"
    if env.get("DISPLAY"):
        return "x11"
    return "none"
