"""Text put on the desktop clipboard through the system's own clipboard tool.

On X11 and Wayland the clipboard is not a store but a promise: the program that owns the selection must stay
alive to hand the text over when someone pastes. ``xclip``/``xsel`` (X11) and ``wl-copy`` (Wayland) fork a small
owner that keeps serving after Scriba's command has ended, which a connection held by Scriba could not do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

from app.core.desktop.display import DesktopError, DisplaySystem

# (tool, arguments to take the clipboard's text from stdin), in order of preference
_COPY_COMMANDS: dict[DisplaySystem, list[list[str]]] = {
    "x11": [["xclip", "-selection", "clipboard", "-in"], ["xsel", "--clipboard", "--input"]],
    "wayland": [["wl-copy"]],
}
_INSTALL_HINT: dict[DisplaySystem, str] = {
    "x11": "install xclip or xsel (Debian/Ubuntu: apt install xclip)",
    "wayland": "install wl-clipboard (Debian/Ubuntu: apt install wl-clipboard)",
}


def copy_command(system: DisplaySystem, env: Mapping[str, str] | None = None) -> list[str]:
    """The command that puts stdin on the clipboard here; DesktopError when none is installed.

    Looked up on the PATH of ``env``, the environment the tool will run in (default: this process's)."""
    search_path = (os.environ if env is None else env).get("PATH")
    for command in _COPY_COMMANDS.get(system, []):
        if shutil.which(command[0], path=search_path):
            return command
    if system in _INSTALL_HINT:
        raise DesktopError(f"no clipboard tool found: {_INSTALL_HINT[system]}")
    raise DesktopError(f"copying to the clipboard is not built for {system} yet")


def copy_text(text: str, system: DisplaySystem, env: Mapping[str, str] | None = None) -> None:
    """Replace the clipboard's content with ``text``."""
    command = copy_command(system, env)
    # No pipes back: the tool's forked owner keeps them open for as long as it serves the clipboard, and a
    # read would wait for that.
    result = subprocess.run(
        command,
        input=text.encode("utf-8"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(env) if env is not None else None,
        timeout=10,
        check=False,
    )
    if result.returncode != 0:
        raise DesktopError(f"{command[0]} could not set the clipboard (exit status {result.returncode})")
