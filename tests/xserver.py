"""A private X server (Xvfb) and a real second program on it (xterm running ``cat > FILE``), so that text typed
through XTest and a global hotkey can be checked from the other side: what the program received.

Xvfb picks a free display number itself (``-displayfd``), so tests never collide with a running desktop or
with each other. Every process started here is stopped by its pid.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


@contextmanager
def xvfb() -> Iterator[str]:
    """Start Xvfb; yield its display name (":N"). Skips only when no X server can be started here."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed, so no X server can be started (`make test` installs xvfb)")
    read_end, write_end = os.pipe()
    server = subprocess.Popen(
        # -noreset: by default the server resets when its last client leaves, and a test connecting during that
        # reset has its connection refused.
        ["Xvfb", "-displayfd", str(write_end), "-nolisten", "tcp", "-noreset", "-screen", "0", "1024x768x24"],
        pass_fds=(write_end,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    os.close(write_end)
    try:
        with os.fdopen(read_end) as announced:
            number = announced.readline().strip()  # Xvfb writes the number once it accepts connections
        if not number:
            server.kill()
            stderr = server.communicate()[1].decode(errors="replace")
            pytest.skip(f"Xvfb could not start an X server here: {stderr.strip()[-300:]}")
        yield f":{number}"
    finally:
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def find_window(display: Any, title: str) -> Any:
    """The first window named ``title`` under the root (depth-first), or None."""
    pending = [display.screen().root]
    while pending:
        window = pending.pop()
        if window.get_wm_name() == title:
            return window
        pending.extend(window.query_tree().children)
    return None


@contextmanager
def focused_xterm(
    display_name: str, received: Path, title: str = "scriba-typing-target", *, line_mode: bool = False
) -> Iterator[Any]:
    """An xterm running ``cat > received``, with the keyboard focus; yields its window.

    The terminal is put out of line mode (``stty -icanon``) so every typed character reaches the file at once,
    without an Enter that the test would have to add itself. ``line_mode``: the terminal's own line editing
    stays on (BackSpace erases, a line reaches the file at Return), with the erase character set to what the
    xterm's BackSpace key sends, as a shell's prompt would take it.
    """
    from Xlib import X, display

    xterm = shutil.which("xterm")
    # Not a skip: `make test` installs xterm, and without it typing would go untested.
    assert xterm, "xterm is missing: run `make test` (it installs the Debian packages the tests need)"
    # Line mode's erase character is DEL (^?), what xterm's BackSpace key sends on a Linux pty.
    setup = "icanon erase '^?'" if line_mode else "-icanon min 1"
    terminal = subprocess.Popen(
        [xterm, "-u8", "-T", title, "-e", "sh", "-c", f"stty {setup}; exec cat > '{received}'"],
        env={**os.environ, "DISPLAY": display_name, "LC_ALL": "C.UTF-8"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    connection = display.Display(display_name)
    try:
        deadline = time.monotonic() + 30
        window = None
        # The file exists once the shell has set up the terminal: keys typed from then on reach cat.
        while (window is None or not received.exists()) and time.monotonic() < deadline:
            assert terminal.poll() is None, "xterm exited at start"
            window = window or find_window(connection, title)
            time.sleep(0.05)
        assert window is not None and received.exists(), "xterm did not come up"
        window.set_input_focus(X.RevertToParent, X.CurrentTime)
        connection.sync()
        yield window
    finally:
        connection.close()
        terminal.terminate()
        try:
            terminal.wait(timeout=10)
        except subprocess.TimeoutExpired:
            terminal.kill()
            terminal.wait()


def focus_of(display_name: str) -> int:
    """The id of the window that has the keyboard focus now."""
    from Xlib import display

    connection = display.Display(display_name)
    try:
        return int(connection.get_input_focus().focus.id)
    finally:
        connection.close()


def press_keys(display_name: str, *names: str, release: bool = True) -> None:
    """Press the keys (X keysym names) in order through XTest, as a keyboard would, then release them in
    reverse order (unless ``release`` is False: the keys stay held for ``release_keys``)."""
    from Xlib import XK, X, display
    from Xlib.ext import xtest

    connection = display.Display(display_name)
    try:
        codes = [connection.keysym_to_keycode(XK.string_to_keysym(name)) for name in names]
        assert all(codes), names
        for code in codes:
            xtest.fake_input(connection, X.KeyPress, code)
        if release:
            for code in reversed(codes):
                xtest.fake_input(connection, X.KeyRelease, code)
        connection.sync()
    finally:
        connection.close()


def release_keys(display_name: str, *names: str) -> None:
    from Xlib import XK, X, display
    from Xlib.ext import xtest

    connection = display.Display(display_name)
    try:
        for name in reversed(names):
            xtest.fake_input(connection, X.KeyRelease, connection.keysym_to_keycode(XK.string_to_keysym(name)))
        connection.sync()
    finally:
        connection.close()


def wait_for_text(path: Path, predicate: Any, timeout_s: float = 30.0) -> str:
    """The file's text once ``predicate(text)`` holds (or when the time is up: the caller's assert says why)."""
    deadline = time.monotonic() + timeout_s
    text = path.read_text(encoding="utf-8", errors="replace")
    while not predicate(text) and time.monotonic() < deadline:
        time.sleep(0.1)
        text = path.read_text(encoding="utf-8", errors="replace")
    return text
