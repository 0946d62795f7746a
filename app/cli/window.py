"""Whether the window can open here, asked before Qt is loaded: Qt aborts the process (no exception, no
message a user can act on) when it finds no display or its xcb plugin cannot load."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from app.core.errors import ExitCode

HEADLESS_HINT = "the headless commands work without one (`scriba transcribe`, `scriba queue`; see `scriba --help`)"


def display_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """One line saying why the window cannot open and what to do, or None when it can (or we cannot tell)."""
    env = os.environ if environ is None else environ
    if not sys.platform.startswith("linux"):
        return None
    platform = env.get("QT_QPA_PLATFORM", "")
    if platform and not platform.startswith("xcb"):
        return None  # offscreen, wayland, eglfs…: the user chose it, Qt reports on it itself
    if env.get("WAYLAND_DISPLAY") and not platform:
        return None
    display = env.get("DISPLAY")
    if not display:
        return (
            "no display to open the window on (neither DISPLAY nor WAYLAND_DISPLAY is set): start Scriba in a "
            f"desktop session or over `ssh -X`; {HEADLESS_HINT}"
        )
    return _xcb_problem(display)


# What Qt's xcb plugin (libqxcb.so and libQt6XcbQpa, PySide6 6.7-6.11) links against, by the name
# ctypes.util.find_library knows it, with the Debian/Ubuntu and Fedora packages that hold it. Read from the
# libraries' NEEDED entries; a fresh Debian desktop lacked the first three.
XCB_LIBRARIES: tuple[tuple[str, str, str], ...] = (
    ("xcb-cursor", "libxcb-cursor0", "xcb-util-cursor"),
    ("xcb-icccm", "libxcb-icccm4", "xcb-util-wm"),
    ("xcb-keysyms", "libxcb-keysyms1", "xcb-util-keysyms"),
    ("xcb-image", "libxcb-image0", "xcb-util-image"),
    ("xcb-render-util", "libxcb-render-util0", "xcb-util-renderutil"),
    ("xcb-util", "libxcb-util1", "xcb-util"),
    ("xkbcommon-x11", "libxkbcommon-x11-0", "libxkbcommon-x11"),
    ("xcb-randr", "libxcb-randr0", "libxcb"),
    ("xcb-shape", "libxcb-shape0", "libxcb"),
    ("xcb-xkb", "libxcb-xkb1", "libxcb"),
    ("X11-xcb", "libx11-xcb1", "libX11-xcb"),
)


def missing_xcb_packages() -> tuple[list[str], list[str]]:
    """The Debian and the Fedora packages that hold the xcb libraries this machine lacks."""
    missing = [entry for entry in XCB_LIBRARIES if ctypes.util.find_library(entry[0]) is None]
    return list(dict.fromkeys(entry[1] for entry in missing)), list(dict.fromkeys(entry[2] for entry in missing))


def _xcb_problem(display: str) -> str | None:
    """Qt's xcb plugin needs its libraries and a reachable X server."""
    debian, fedora = missing_xcb_packages()
    if debian:
        return (
            f"the window needs libraries that are not installed: `sudo apt install {' '.join(debian)}` "
            f"(Debian/Ubuntu), `sudo dnf install {' '.join(fedora)}` (Fedora); or run `make run`, which installs them"
        )
    library = ctypes.util.find_library("xcb")
    if library is None:
        return "the window needs the library libxcb, which is not installed (Debian/Ubuntu: `sudo apt install libxcb1`)"
    try:
        xcb = ctypes.CDLL(library)
    except OSError:
        return None  # it exists but does not load here: leave the verdict to Qt
    xcb.xcb_connect.restype = ctypes.c_void_p
    xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
    xcb.xcb_disconnect.argtypes = [ctypes.c_void_p]
    connection = xcb.xcb_connect(display.encode(), None)
    try:
        failed = connection is None or xcb.xcb_connection_has_error(connection) != 0
    finally:
        if connection is not None:
            xcb.xcb_disconnect(connection)  # also frees the error object xcb hands out on failure
    if failed:
        return (
            f"cannot reach the display {display} (no X server answers there, or it refused us): check DISPLAY "
            f"and that the desktop session is running; {HEADLESS_HINT}"
        )
    return None


def open_window(data_dir: Path, open_files: list[Path]) -> int:
    """`scriba` with no command (or with files): the window, or one line saying why it cannot open here."""
    problem = display_problem()
    if problem is not None:
        print(f"scriba: error: {problem}", file=sys.stderr)
        return ExitCode.FAILED
    from app.gui.main import create_application, run_gui
    from app.gui.quit_signals import closed_by_signals

    create_application()  # the signals' notifier needs it; run_gui takes this one
    with closed_by_signals():
        return run_gui(data_dir, open_files)
