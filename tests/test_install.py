"""Scriba installed the way people install apps: the wheel `make dist` builds, installed by `uv tool install` into
an environment of its own (what `pipx install` does too), answers as `scriba`, puts itself in the applications
menu with its icon, and opens its window on a real X server from that menu entry's command.

Offline: uv builds from its cache (the build backend) and installs the dependencies from its cache, which `make
venv` filled; nothing is downloaded. The installed copy is checked to be the one that runs, not the checkout.
"""

from __future__ import annotations

import configparser
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app import __version__
from app.core.config.settings import Settings, SettingsStore
from tests.xserver import xvfb

ROOT = Path(__file__).resolve().parents[1]


def uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    assert Path(found).exists(), "uv is missing: `make venv` installs it"
    return found


def run(command: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run from a folder of the test's own: from the checkout, ``python -c`` would import its ``app`` instead."""
    result = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=timeout, cwd=env.get("SCRIBA_DATA_DIR", "/")
    )
    assert result.returncode == 0, f"{shlex.join(command)}:\n{result.stdout}\n{result.stderr}"
    return result


def wait_for(condition: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting: {what()}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """`make dist`'s build (the sdist, then the wheel from it) and `uv tool install` of that wheel into a tool
    folder of its own; yields the `scriba` it installed and the environment to run it in."""
    base = tmp_path_factory.mktemp("install")
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(
        UV_TOOL_DIR=str(base / "tools"),
        UV_TOOL_BIN_DIR=str(base / "bin"),
        UV_OFFLINE="1",
        UV_NO_PROGRESS="1",
        XDG_DATA_HOME=str(base / "share"),
        XDG_CONFIG_HOME=str(base / "config"),
        XDG_CACHE_HOME=str(base / "cache"),
        SCRIBA_DATA_DIR=str(base / "data"),
    )
    (base / "data").mkdir()
    # uv's own cache, where `make venv` left the wheels: read before the XDG folders are the test's (a module
    # fixture is set up before the function-scoped isolation of conftest.py).
    env["UV_CACHE_DIR"] = run([uv(), "cache", "dir"], {**os.environ, "SCRIBA_DATA_DIR": str(base)}).stdout.strip()
    dist = base / "dist"
    run([uv(), "build", "--quiet", "--out-dir", str(dist), str(ROOT)], env)
    (wheel,) = dist.glob("scriba-*.whl")
    assert wheel.name.startswith(f"scriba-{__version__}-") and list(dist.glob("scriba-*.tar.gz"))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {"app/resources/scriba.desktop", "app/resources/scriba.svg", "app/resources/prices.toml"} <= names
    assert not any(name.startswith("tests/") for name in names)
    run([uv(), "tool", "install", "--python", sys.executable, str(wheel)], env)
    script = base / "bin" / "scriba"
    assert script.exists(), sorted(p.name for p in (base / "bin").iterdir())
    yield script, env


def test_the_installed_scriba_answers_from_its_own_environment(installed: tuple[Path, dict[str, str]]) -> None:
    script, env = installed
    assert run([str(script), "--version"], env).stdout.strip() == f"scriba {__version__}"
    help_text = " ".join(run([str(script), "--help"], env).stdout.split())
    assert "--install-desktop-entry" in help_text and "opens the window" in help_text
    # The code that runs is the installed copy, not this checkout (an editable install would hide a missing file).
    python = script.resolve().parent / "python"
    where = run([str(python), "-c", "import app, app.resources as r; print(app.__file__); print(r.icon_path())"], env)
    tools = Path(env["UV_TOOL_DIR"]).resolve()
    for line in where.stdout.splitlines():
        assert Path(line).resolve().is_relative_to(tools), where.stdout
        assert Path(line).exists()


def read_entry(path: Path) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read_string(path.read_text(encoding="utf-8"))
    return parser["Desktop Entry"]


def test_the_menu_entry_and_icon_are_installed_valid_and_removed(installed: tuple[Path, dict[str, str]]) -> None:
    script, env = installed
    share = Path(env["XDG_DATA_HOME"])
    entry_file = share / "applications" / "scriba.desktop"
    icon_file = share / "icons" / "hicolor" / "scalable" / "apps" / "scriba.svg"
    run([str(script), "--install-desktop-entry"], env)
    first = entry_file.read_bytes()
    run([str(script), "--install-desktop-entry"], env)  # again: the same files, nothing added
    assert entry_file.read_bytes() == first

    validator = shutil.which("desktop-file-validate")
    assert validator, "desktop-file-validate is missing: `make test` installs desktop-file-utils"
    checked = subprocess.run([validator, str(entry_file)], capture_output=True, text=True)
    assert checked.returncode == 0 and not checked.stdout.strip(), checked.stdout + checked.stderr

    entry = read_entry(entry_file)
    assert entry["Type"] == "Application" and entry["Name"] == "Scriba" and entry["Terminal"] == "false"
    assert entry["Icon"] == "scriba"
    command = shlex.split(entry["Exec"])
    assert command[-1] == "%F"
    program = Path(command[0])
    assert program.is_absolute() and os.access(program, os.X_OK), entry["Exec"]
    assert program.resolve() == script.resolve()  # this installed scriba, not the checkout's
    assert entry["TryExec"] == command[0]
    assert icon_file.read_bytes().startswith(b"<svg") or b"<svg" in icon_file.read_bytes()[:200]
    assert icon_file.read_bytes() == (ROOT / "resources" / "scriba.svg").read_bytes()

    assert "removed" in run([str(script), "--uninstall-desktop-entry"], env).stdout
    assert not entry_file.exists() and not icon_file.exists()
    again = run([str(script), "--uninstall-desktop-entry"], env)
    assert "no Scriba menu entry was installed" in again.stdout


def test_the_menu_entrys_command_opens_the_window(installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """From the menu entry's own Exec line, on a real X server (Xvfb): the window is mapped, then closes on
    SIGTERM as File > Quit does (exit 0, its settings saved)."""
    from Xlib import X, display

    script, env = installed
    env = {**env, "XDG_DATA_HOME": str(tmp_path / "share"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    run([str(script), "--install-desktop-entry"], env)
    entry = read_entry(tmp_path / "share" / "applications" / "scriba.desktop")
    command = [part for part in shlex.split(entry["Exec"]) if part != "%F"]
    settings = SettingsStore(tmp_path / "config" / "scriba")
    # The window alone: the first-run page (tests/gui/test_first_run.py) reads the machine in a thread, and a
    # window closed before that reading ends prints "Signal source has been deleted" from that thread.
    settings.save(Settings().with_window(first_run_done=True))
    assert settings.load().window.geometry is None
    with xvfb() as screen:
        window_env = {**env, "DISPLAY": screen, "QT_QPA_PLATFORM": "xcb", "PYTHONUNBUFFERED": "1"}
        window_env.pop("WAYLAND_DISPLAY", None)
        app = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=window_env, cwd=tmp_path
        )
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(app.stdout or []), daemon=True)
        reader.start()
        connection = display.Display(screen)
        try:

            def shown() -> bool:
                """A window titled Scriba that is mapped (Qt also makes unmapped helper windows of that name)."""
                assert app.poll() is None, "scriba exited at start:\n" + "".join(lines)
                pending = [connection.screen().root]
                while pending:
                    window = pending.pop()
                    if window.get_wm_name() == "Scriba" and window.get_attributes().map_state == X.IsViewable:
                        return True
                    pending.extend(window.query_tree().children)
                return False

            wait_for(shown, 120, lambda: "".join(lines))
            app.send_signal(signal.SIGTERM)
            code = app.wait(timeout=60)
        finally:
            connection.close()
            if app.poll() is None:
                app.kill()
                app.wait()
        reader.join(10)
    output = "".join(lines)
    assert code == 0 and "Traceback" not in output, output
    assert settings.load().window.geometry is not None  # closed as Quit closes it: its size and place saved


@pytest.mark.unit
def test_an_install_path_with_spaces_is_quoted_as_the_desktop_entry_spec_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.cli import desktop_entry

    script = tmp_path / "My Apps (2)" / "bin" / "scriba"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(script), "--install-desktop-entry"])
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    entry_file, _icon = desktop_entry.install()
    assert entry_file == tmp_path / "share" / "applications" / "scriba.desktop"
    entry = read_entry(entry_file)
    assert entry["Exec"] == f'"{script}" %F'
    assert shlex.split(entry["Exec"]) == [str(script), "%F"]
    validator = shutil.which("desktop-file-validate")
    assert validator, "desktop-file-validate is missing: `make test` installs desktop-file-utils"
    checked = subprocess.run([validator, str(entry_file)], capture_output=True, text=True)
    assert checked.returncode == 0 and not checked.stdout.strip(), checked.stdout
