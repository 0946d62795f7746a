"""A private Wayland compositor (sway with its headless backend: no screen, no input devices) and a real Wayland
client on it (foot, a native Wayland terminal, running ``cat > FILE``), so that text typed on Wayland is checked
from the receiving program's side, as tests/xserver.py does for X11. Also a private D-Bus session bus.

sway refuses to run as root (it drops privileges it cannot regain): under root, as in CI's containers, it runs
as ``nobody`` in a runtime folder of its own, and the clients (root) still reach its socket.
Every process started here is stopped by its pid.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

_SWAY_CONFIG = """\
output HEADLESS-1 resolution 1024x768
xwayland disable
"""


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@contextmanager
def headless_sway() -> Iterator[dict[str, str]]:
    """Start sway headless; yield the environment its clients need (WAYLAND_DISPLAY, XDG_RUNTIME_DIR, SWAYSOCK)
    with no X display and no session bus. Skips only when sway is not installed here."""
    sway = shutil.which("sway")
    if sway is None:
        pytest.skip("sway is not installed, so no Wayland compositor can be started (`make test` installs sway)")
    runtime = Path(tempfile.mkdtemp(prefix="scriba-wayland-"))
    config = runtime / "sway.config"
    config.write_text(_SWAY_CONFIG)
    as_root = os.geteuid() == 0
    user = pwd.getpwnam("nobody") if as_root else None
    if user is not None:
        os.chown(runtime, user.pw_uid, user.pw_gid)
        os.chmod(config, 0o644)
    base = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS")}
    server_env = {
        **base,
        "XDG_RUNTIME_DIR": str(runtime),
        "HOME": str(runtime),
        "WLR_BACKENDS": "headless",
        "WLR_LIBINPUT_NO_DEVICES": "1",
        "WLR_RENDERER": "pixman",  # no GPU needed
    }
    log = open(runtime / "sway.log", "wb")  # noqa: SIM115 (closed below, after sway)
    server = subprocess.Popen(
        [sway, "-c", str(config)],
        env=server_env,
        stdout=log,
        stderr=subprocess.STDOUT,
        user=user.pw_uid if user else None,
        group=user.pw_gid if user else None,
        extra_groups=[] if user else None,
    )
    try:

        def sockets() -> tuple[list[Path], list[Path]]:
            return (
                [p for p in runtime.glob("wayland-*") if not p.name.endswith(".lock")],
                list(runtime.glob("sway-ipc.*.sock")),
            )

        deadline = time.monotonic() + 30
        while not all(sockets()):
            if server.poll() is not None or time.monotonic() > deadline:
                log.flush()
                said = (runtime / "sway.log").read_text(errors="replace")[-600:]
                pytest.fail(f"sway did not start: {said}")
            time.sleep(0.02)
        wayland, ipc = sockets()
        env = {**base, "XDG_RUNTIME_DIR": str(runtime), "WAYLAND_DISPLAY": wayland[0].name, "SWAYSOCK": str(ipc[0])}
        keyboard = _persons_keyboard(env)
        try:
            yield env
        finally:
            _stop(keyboard)
    finally:
        _stop(server)
        log.close()
        shutil.rmtree(runtime, ignore_errors=True)


def _persons_keyboard(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A keyboard that stays, as a person's does: a virtual one held by a wtype that waits a day.

    Without it the headless seat has a keyboard only while a typing tool runs, and each time one appears the
    focused client must first bind it, racing the tool's first key (seen: the first character lost)."""
    wtype = shutil.which("wtype")
    assert wtype, "wtype is missing: run `make test` (it installs the Debian packages the tests need)"
    keyboard = subprocess.Popen([wtype, "-s", str(24 * 3600 * 1000)], env=env)
    wait_until(lambda: "keyboard" in _input_types(env), "the keyboard to join sway's seat")
    return keyboard


def _input_types(env: dict[str, str]) -> list[str]:
    inputs = subprocess.run(["swaymsg", "-r", "-t", "get_inputs"], env=env, capture_output=True, timeout=10, check=True)
    return [str(device.get("type")) for device in json.loads(inputs.stdout)]


def focused_app_id(env: dict[str, str]) -> str | None:
    """The app_id of the window that has the keyboard focus in sway, or None."""
    tree = subprocess.run(["swaymsg", "-r", "-t", "get_tree"], env=env, capture_output=True, timeout=10, check=True)
    pending = [json.loads(tree.stdout)]
    while pending:
        node = pending.pop()
        if node.get("focused"):
            return node.get("app_id")
        pending.extend(node.get("nodes", []) + node.get("floating_nodes", []))
    return None


@contextmanager
def focused_foot(env: dict[str, str], received: Path, *, line_editing: bool = False) -> Iterator[str]:
    """foot (a native Wayland terminal) running ``cat > received``, with the keyboard focus; yields its app_id.

    Out of line mode by default (``stty -icanon``) so each typed character reaches the file at once; with
    ``line_editing`` the terminal edits the line (BackSpace erases) and hands it over at Return."""
    foot = shutil.which("foot")
    # Not a skip: `make test` installs foot with sway, and without it typing on Wayland would go untested.
    assert foot, "foot is missing: run `make test` (it installs the Debian packages the tests need)"
    app_id = f"scriba-typing-target-{os.getpid()}"
    config = received.with_name("foot.ini")
    config.write_text("")  # none of the person's own settings
    mode = "stty icanon" if line_editing else "stty -icanon min 1"
    terminal = subprocess.Popen(
        [foot, "--config", str(config), "--app-id", app_id, "sh", "-c", f"{mode}; exec cat > '{received}'"],
        env={**env, "LC_ALL": "C.UTF-8"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # The file exists once the shell has set up the terminal; the focus comes when sway maps the window.
        wait_until(lambda: terminal.poll() is None and received.exists(), "foot's shell to start")
        wait_until(lambda: focused_app_id(env) == app_id, "foot to have the keyboard focus")
        yield app_id
    finally:
        _stop(terminal)


def wait_for_text(path: Path, done: Callable[[str], bool], timeout_s: float = 30) -> str:
    """The file's text once ``done`` says so (or whatever it holds after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        if done(text) or time.monotonic() > deadline:
            return text
        time.sleep(0.02)


@contextmanager
def private_session_bus() -> Iterator[str]:
    """A D-Bus session bus of its own (dbus-daemon); yields its address."""
    daemon = shutil.which("dbus-daemon")
    assert daemon, "dbus-daemon is missing: run `make test` (it installs the Debian packages the tests need)"
    process = subprocess.Popen(
        [daemon, "--session", "--nofork", "--nopidfile", "--print-address=1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        address = process.stdout.readline().decode().strip()
        assert address, "dbus-daemon did not start"
        yield address
    finally:
        _stop(process)
