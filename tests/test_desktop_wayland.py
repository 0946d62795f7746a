"""Dictation typed into another program on Wayland, checked from that program's side: a real compositor (sway,
headless), a real Wayland client with the keyboard focus (foot running ``cat > FILE``), finals sent through
DesktopTextOutput. The RemoteDesktop portal's route runs against a stand-in service on a private D-Bus session
bus (tests/portal_standin.py), as no GNOME or KDE portal backend can run here."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.desktop.display import DesktopError
from app.core.desktop.output import DesktopTextOutput
from tests.wayland import focused_foot, headless_sway, private_session_bus, wait_for_text, wait_until

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sway() -> Iterator[dict[str, str]]:
    with headless_sway() as env:
        yield env


def _paste(env: dict[str, str]) -> str | None:
    """The clipboard's text as a program reading it would get it, or None when nothing is copied."""
    result = subprocess.run(["wl-paste", "--no-newline"], env=env, capture_output=True, timeout=10, check=False)
    return result.stdout.decode("utf-8") if result.returncode == 0 else None


def _path_without(tmp_path: Path, *missing: str) -> str:
    """A PATH with every program of this one but ``missing`` (as on a desktop where those are not installed)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            target = folder / entry.name
            if entry.name not in missing and not target.exists() and os.access(entry.path, os.X_OK):
                target.symlink_to(entry.path)
    return str(folder)


def test_wtype_types_each_final_into_a_native_wayland_window(sway: dict[str, str], tmp_path: Path) -> None:
    """On sway (wlroots) the route is wtype; what the terminal receives is exactly the finals, one space apart,
    characters outside a US layout included. DISPLAY points to an X server (XWayland's, as on a real session):
    XTest through it would type nowhere, and is not used."""
    received = tmp_path / "received.txt"
    finals = ["Grüße, café – naïve 你好?", ' ~{}|"<> -dash first', "The END."]
    expected = 'Grüße, café – naïve 你好? ~{}|"<> -dash first The END.'
    env = {**sway, "DISPLAY": ":93"}
    with focused_foot(sway, received):
        with DesktopTextOutput("type", env, portal_token_path=tmp_path / "token") as output:
            assert output.notice is not None and "wtype" in output.notice
            for final in finals:
                output.send(final)
        typed = wait_for_text(received, lambda text: text == expected)
    assert typed == expected


def test_taking_back_on_wayland_erases_in_the_window(sway: dict[str, str], tmp_path: Path) -> None:
    """A command's edit presses BackSpace through the same route: the terminal edits its line and hands over
    what is left when Return comes."""
    received = tmp_path / "received.txt"
    with focused_foot(sway, received, line_editing=True):
        with DesktopTextOutput("type", sway, portal_token_path=tmp_path / "token") as output:
            output.send("Send it to Bob")
            output.take_back(3)
            output.edit(0, "Alice.\n")
        typed = wait_for_text(received, lambda text: text.endswith("\n"))
    assert typed == "Send it to Alice.\n"


def test_clipboard_route_gives_the_persons_clipboard_back_after_the_paste(sway: dict[str, str], tmp_path: Path) -> None:
    """Where nothing can type (no wtype, ydotool or portal), finals are offered for one paste: two finals before
    the paste arrive together, and the clipboard holds what the person had copied before once the paste is
    done, not while it waits."""
    env = {**sway, "PATH": _path_without(tmp_path, "wtype", "ydotool")}
    person = {**sway}
    subprocess.run(["wl-copy", "before"], env=person, check=True, timeout=10)
    wait_until(lambda: _paste(person) == "before", "the person's clipboard")
    received = tmp_path / "received.txt"
    with focused_foot(sway, received):
        output = DesktopTextOutput("type", env, portal_token_path=tmp_path / "token")
        try:
            assert output.notice is not None and "clipboard" in output.notice and "Ctrl+V" in output.notice
            output.send("First sentence.")
            output.send("Second, with café.")
            wait_until(lambda: output.delivered == "First sentence. Second, with café.", "both finals offered")
            assert received.read_text() == ""  # nothing typed: it waits for the paste
            # The person pastes (foot: Ctrl+Shift+V), with a keyboard of their own.
            subprocess.run(["wtype", "-M", "ctrl", "-M", "shift", "-k", "v"], env=person, check=True, timeout=10)
            typed = wait_for_text(received, lambda text: text == "First sentence. Second, with café.")
            assert typed == "First sentence. Second, with café."
            wait_until(lambda: _paste(person) == "before", "the person's clipboard to come back")
        finally:
            output.close()


def test_an_offer_left_when_dictation_ends_still_gives_the_clipboard_back(sway: dict[str, str], tmp_path: Path) -> None:
    """Dictation ends (the output closes) before the person pastes: the paste still gets the text, and the
    clipboard they had comes back after it."""
    env = {**sway, "PATH": _path_without(tmp_path, "wtype", "ydotool")}
    person = {**sway}
    subprocess.run(["wl-copy", "mine"], env=person, check=True, timeout=10)
    wait_until(lambda: _paste(person) == "mine", "the person's clipboard")
    received = tmp_path / "received.txt"
    with focused_foot(sway, received):
        with DesktopTextOutput("type", env, portal_token_path=tmp_path / "token") as output:
            output.send("Last words.")
            wait_until(lambda: output.delivered == "Last words.", "the final offered")
        subprocess.run(["wtype", "-M", "ctrl", "-M", "shift", "-k", "v"], env=person, check=True, timeout=10)
        typed = wait_for_text(received, lambda text: text == "Last words.")
        assert typed == "Last words."
        wait_until(lambda: _paste(person) == "mine", "the person's clipboard to come back")


def test_a_copy_made_while_the_offer_waits_is_not_overwritten(sway: dict[str, str], tmp_path: Path) -> None:
    env = {**sway, "PATH": _path_without(tmp_path, "wtype", "ydotool")}
    person = {**sway}
    subprocess.run(["wl-copy", "before"], env=person, check=True, timeout=10)
    wait_until(lambda: _paste(person) == "before", "the person's clipboard")
    with DesktopTextOutput("type", env, portal_token_path=tmp_path / "token") as output:
        output.send("Never pasted.")
        wait_until(lambda: output.delivered == "Never pasted.", "the final offered")
        subprocess.run(["wl-copy", "theirs"], env=person, check=True, timeout=10)
        clipboard = output._typer.clipboard  # type: ignore[union-attr]
        assert clipboard is not None and clipboard.wait_served(1, timeout_s=30)  # the offer ended, decided
    assert _paste(person) == "theirs"


def _keysym_text(keysym: int) -> str:
    """The character a keysym stands for, by the X keysym rules (written out here, not taken from the code)."""
    named = {0xFF08: "\b", 0xFF0D: "\n", 0xFF09: "\t"}
    if keysym in named:
        return named[keysym]
    if keysym & 0xFF000000 == 0x01000000:
        return chr(keysym & 0xFFFFFF)
    assert keysym < 0x100, hex(keysym)
    return chr(keysym)


@pytest.fixture()
def standin_portal(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, Path]]:
    answer = getattr(request, "param", "allow")
    record = tmp_path / "portal-calls.jsonl"
    with private_session_bus() as address:
        service = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "portal_standin.py"), address, str(record), answer],
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            assert service.stdout is not None and service.stdout.readline().strip() == b"ready"
            yield address, record
        finally:
            service.terminate()
            service.wait(timeout=10)


def _calls(record: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in record.read_text().splitlines()]


def test_portal_route_types_keysyms_and_keeps_the_restore_token(
    standin_portal: tuple[str, Path], tmp_path: Path
) -> None:
    """The route GNOME and KDE take, against a stand-in for their portal replaying its documented behaviour:
    each character is one keysym pressed and released, an edit is BackSpace keysyms; the restore token the
    desktop hands back is kept in the config folder's file and offered the next time, so the person is asked
    once; the session is closed at the end."""
    address, record = standin_portal
    token = tmp_path / "config" / "remote-desktop-token"
    env = {"WAYLAND_DISPLAY": "wayland-standin", "DBUS_SESSION_BUS_ADDRESS": address, "PATH": str(tmp_path)}
    with DesktopTextOutput("type", env, portal_token_path=token) as output:
        assert output.notice is not None and "portal" in output.notice
        output.send("Hi, café 你好")
        output.edit(2, "!\n")
    calls = _calls(record)
    keys = [call for call in calls if call["method"] == "NotifyKeyboardKeysym"]
    assert [call["state"] for call in keys] == [1, 0] * (len(keys) // 2)  # each key pressed, then released
    typed = "".join(_keysym_text(int(str(call["keysym"]))) for call in keys[::2])
    assert typed == "Hi, café 你好\b\b!\n"
    selected = next(call for call in calls if call["method"] == "SelectDevices")
    assert selected["options"] == {"types": 1, "persist_mode": 2}  # keyboard, kept until revoked; no token yet
    assert token.read_text() == "restore-1"
    assert calls[-1]["method"] == "Close"

    with DesktopTextOutput("type", env, portal_token_path=token) as output:
        output.send("Again.")
    second = _calls(record)[len(calls) :]
    selected = next(call for call in second if call["method"] == "SelectDevices")
    assert selected["options"] == {"types": 1, "persist_mode": 2, "restore_token": "restore-1"}
    assert token.read_text() == "restore-2"  # a token is good once: the new one is kept


@pytest.mark.parametrize("standin_portal", ["refuse"], indirect=True)
def test_a_refused_portal_hands_over_to_the_next_route_and_says_so(
    standin_portal: tuple[str, Path], sway: dict[str, str], tmp_path: Path
) -> None:
    address, record = standin_portal
    said: list[str] = []
    received = tmp_path / "received.txt"
    env = {**sway, "DBUS_SESSION_BUS_ADDRESS": address}
    with focused_foot(sway, received):
        with DesktopTextOutput("type", env, on_error=said.append, portal_token_path=tmp_path / "token") as output:
            assert output.notice is not None and "portal" in output.notice
            output.send("Typed anyway.")
        typed = wait_for_text(received, lambda text: text == "Typed anyway.")
    assert typed == "Typed anyway."
    assert len(said) == 1 and "said no" in said[0] and "wtype" in said[0], said
    assert not (tmp_path / "token").exists()
    assert not [call for call in _calls(record) if call["method"] == "NotifyKeyboardKeysym"]


@pytest.mark.unit
def test_ydotool_is_used_only_when_its_socket_takes_a_connection(tmp_path: Path) -> None:
    from app.core.desktop.wayland_typing import ydotool_socket, ydotool_socket_usable

    path = tmp_path / ".ydotool_socket"
    assert ydotool_socket({"XDG_RUNTIME_DIR": str(tmp_path)}) == Path("/tmp/.ydotool_socket")  # none there
    assert not ydotool_socket_usable(path)  # no daemon
    path.write_text("")
    assert not ydotool_socket_usable(path)  # a file, not a socket
    path.unlink()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    stale.bind(str(path))
    stale.close()  # the daemon ended and left its socket behind
    assert not ydotool_socket_usable(path)
    path.unlink()
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as daemon:
        daemon.bind(str(path))
        assert ydotool_socket({"XDG_RUNTIME_DIR": str(tmp_path)}) == path
        assert ydotool_socket({"YDOTOOL_SOCKET": "/elsewhere", "XDG_RUNTIME_DIR": str(tmp_path)}) == Path("/elsewhere")
        assert ydotool_socket_usable(path)


@pytest.mark.unit
def test_without_any_route_wayland_says_what_to_install(tmp_path: Path) -> None:
    env = {"WAYLAND_DISPLAY": "wayland-0", "PATH": str(tmp_path)}  # no tools, no session bus
    with pytest.raises(DesktopError, match=r"wtype .*wl-clipboard"):
        DesktopTextOutput("type", env, portal_token_path=tmp_path / "token")
