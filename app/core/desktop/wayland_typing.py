"""Text typed into other programs on a Wayland desktop, through the first route that works here:

1. the desktop's RemoteDesktop portal (GNOME, KDE: no root; the desktop asks the person once)  -- portal.py
2. wtype, the virtual-keyboard protocol of wlroots compositors (sway, Hyprland, river)
3. ydotool, through its daemon's socket, when this user may use that socket
4. the clipboard: each final is offered for one paste, and the person's own clipboard comes back once the
   paste has happened

XTest through XWayland (and so xdotool) is never used here: it reaches only X11 programs and reports success
while a native Wayland window receives nothing. Each route is checked before it is chosen, by a step that
fails where typing would: wtype connects and asks for a virtual keyboard (it exits with an error on a desktop
without the protocol, GNOME's), ydotool's socket must accept a connection from this user.
"""

from __future__ import annotations

import logging
import shutil
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal, Protocol

from app.core.desktop.display import DesktopError

log = logging.getLogger(__name__)

Route = Literal["portal", "wtype", "ydotool", "clipboard"]

NOTICES: dict[Route, str] = {
    "portal": "typing through the desktop's remote-desktop portal (the desktop asks once for permission)",
    "wtype": "typing through wtype (the compositor's virtual keyboard)",
    "ydotool": "typing through ydotool",
    "clipboard": (
        "nothing on this Wayland desktop lets Scriba type into other windows: each final goes to the clipboard "
        "for one paste (Ctrl+V), and your own clipboard comes back after that paste"
    ),
}
_TEXT_TYPE = "text/plain;charset=utf-8"
_TOOL_TIMEOUT_S = 30


class Typer(Protocol):
    def type_text(self, text: str) -> None: ...

    def erase(self, count: int) -> None: ...

    def focused_window_pid(self) -> int | None: ...

    def close(self) -> None: ...


def _tool(name: str, env: Mapping[str, str]) -> str | None:
    return shutil.which(name, path=env.get("PATH"))


# ---- wtype


def wtype_works(env: Mapping[str, str]) -> bool:
    """wtype is installed and the compositor gives it a virtual keyboard. ``wtype -s 1`` does all of typing's
    set-up (the connection, the virtual keyboard, its keymap), then waits a millisecond and types nothing."""
    wtype = _tool("wtype", env)
    if wtype is None:
        return False
    try:
        result = subprocess.run(
            [wtype, "-s", "1"], env=dict(env), capture_output=True, timeout=_TOOL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    if result.returncode != 0:
        log.info("wtype cannot type here: %s", result.stderr.decode(errors="replace").strip())
    return result.returncode == 0


class WtypeTyper:
    def __init__(self, env: Mapping[str, str]) -> None:
        wtype = _tool("wtype", env)
        if wtype is None:
            raise DesktopError("wtype is not installed (Debian/Ubuntu: apt install wtype)")
        self._wtype = wtype
        self._env = dict(env)

    def type_text(self, text: str) -> None:
        if text:
            self._run(["-"], text)  # from stdin: text starting with "-" is not read as an option

    def erase(self, count: int) -> None:
        if count > 0:
            self._run(["-k", "BackSpace"] * count)

    def focused_window_pid(self) -> int | None:
        return None  # Wayland does not tell other programs which window has the focus

    def close(self) -> None:
        pass

    def _run(self, arguments: list[str], stdin: str = "") -> None:
        _run_tool("wtype", [self._wtype, *arguments], self._env, stdin)


# ---- ydotool


def ydotool_socket(env: Mapping[str, str]) -> Path:
    """Where ydotool's client looks for its daemon: $YDOTOOL_SOCKET, else $XDG_RUNTIME_DIR/.ydotool_socket, else
    /tmp/.ydotool_socket (ydotool 1.x's order)."""
    if env.get("YDOTOOL_SOCKET"):
        return Path(env["YDOTOOL_SOCKET"])
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime, ".ydotool_socket").exists():
        return Path(runtime, ".ydotool_socket")
    return Path("/tmp/.ydotool_socket")


def ydotool_usable(env: Mapping[str, str]) -> bool:
    """ydotool is installed and its daemon's socket takes a connection from this user. The daemon runs as root
    (it writes to /dev/uinput); its socket is often root's alone, and the client then fails."""
    return _tool("ydotool", env) is not None and ydotool_socket_usable(ydotool_socket(env))


def ydotool_socket_usable(path: Path) -> bool:
    try:
        if not stat.S_ISSOCK(path.stat().st_mode):
            return False
    except OSError:
        return False
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):  # ydotool 1.x: datagrams; 0.1: a stream
        with socket.socket(socket.AF_UNIX, kind) as probe:
            probe.settimeout(2)
            try:
                probe.connect(str(path))
                return True
            except OSError as error:
                log.info("ydotool's socket %s refused a connection: %s", path, error)
    return False


class YdotoolTyper:
    """ydotool types through key codes of a US layout: it is kept to printable ASCII, new lines and tabs."""

    def __init__(self, env: Mapping[str, str]) -> None:
        ydotool = _tool("ydotool", env)
        if ydotool is None:
            raise DesktopError("ydotool is not installed")
        self._ydotool = ydotool
        self._env = dict(env)

    @staticmethod
    def can_type(text: str) -> bool:
        return all(char in "\n\t" or 0x20 <= ord(char) <= 0x7E for char in text)

    def type_text(self, text: str) -> None:
        if not text:
            return
        if not self.can_type(text):
            raise DesktopError("ydotool types only ASCII; this text has other characters")
        self._run(["type", "--file", "/dev/stdin"], text)

    def erase(self, count: int) -> None:
        if count > 0:
            self._run(["key", *(["14:1", "14:0"] * count)])  # 14: KEY_BACKSPACE (linux/input-event-codes.h)

    def focused_window_pid(self) -> int | None:
        return None

    def close(self) -> None:
        pass

    def _run(self, arguments: list[str], stdin: str = "") -> None:
        _run_tool("ydotool", [self._ydotool, *arguments], self._env, stdin)


# ---- the clipboard, one paste at a time


class ClipboardHandOver:
    """Each text is offered on the clipboard for exactly one paste (``wl-copy --paste-once``); once the paste has
    been served (the target read the selection), the person's previous clipboard is put back.

    Finals that come while an offer is still waiting join it: the next paste gets all of them. The restore
    happens only when the clipboard is empty after the offer ended: when another program copied something
    meanwhile, that copy wins. Offers, joins and restores are under one lock, so a restore never overwrites a
    newer offer. Should Scriba end while an offer waits, a small detached shell takes over the restore.
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        copy, paste = _tool("wl-copy", env), _tool("wl-paste", env)
        if copy is None or paste is None:
            raise DesktopError(
                "no clipboard tool found: install wl-clipboard (Debian/Ubuntu: apt install wl-clipboard)"
            )
        self._copy, self._paste = copy, paste
        self._env = dict(env)
        self._lock = threading.Lock()
        self._offer: subprocess.Popen[bytes] | None = None
        self._pending = ""  # the text the waiting offer holds
        self._saved: tuple[str, bytes] | None = None  # the person's clipboard: (MIME type, content)
        self._served = threading.Condition(self._lock)
        self.offers_served = 0  # offers that ended (pasted, or replaced by someone else's copy)

    def type_text(self, text: str) -> None:
        if text:
            self._offer_text(lambda pending: pending + text)

    def erase(self, count: int) -> None:
        if count > 0:
            self._offer_text(lambda pending: pending[: len(pending) - count], erasing=count)

    def focused_window_pid(self) -> int | None:
        return None

    def wait_served(self, count: int, timeout_s: float) -> bool:
        """Block until ``count`` offers have ended (and their restores are done); False on timeout."""
        with self._served:
            return self._served.wait_for(lambda: self.offers_served >= count, timeout=timeout_s)

    def close(self) -> None:
        """Leave a waiting offer for its paste, with a detached watcher that restores the clipboard after it."""
        with self._lock:
            offer = self._offer
            if offer is None or offer.poll() is not None or self._saved is None:
                return
            self._offer = None  # the watcher thread leaves the restore to the detached shell
            mime, content = self._saved
        # Waits for the offer's process to end (gone, or a zombie while Scriba lives), then restores as _watch.
        script = (
            'while [ -e "/proc/$1" ] && [ "$(cut -d" " -f3 "/proc/$1/stat" 2>/dev/null)" != Z ]; do sleep 0.1; done; '
            '[ -z "$("$2" --list-types 2>/dev/null)" ] && exec "$3" --type "$4"'
        )
        watcher = subprocess.Popen(
            ["/bin/sh", "-c", script, "scriba-clipboard-restore", str(offer.pid), self._paste, self._copy, mime],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=self._env,
            start_new_session=True,  # outlives Scriba, and a terminal's hang-up
        )
        assert watcher.stdin is not None
        watcher.stdin.write(content)
        watcher.stdin.close()

    # ---- under the hood

    def _waiting(self) -> bool:
        return self._offer is not None and self._offer.poll() is None

    def _offer_text(self, change: Callable[[str], str], erasing: int = 0) -> None:
        with self._lock:
            if erasing and (not self._waiting() or erasing > len(self._pending)):
                raise DesktopError(
                    "cannot take back text that was pasted already: this desktop lets Scriba use only the clipboard"
                )
            if self._waiting():
                assert self._offer is not None
                self._offer.terminate()  # replaced by the longer offer below; its watcher sees it is not current
                self._offer.wait()
            else:
                self._pending = ""
                self._saved = self._read_clipboard()
            self._pending = change(self._pending)
            self._run([self._copy, "--clear"])
            if not self._pending:
                self._offer = None
                self._restore()
                return
            offer = subprocess.Popen(
                [self._copy, "--foreground", "--paste-once", "--type", _TEXT_TYPE],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=self._env,
            )
            assert offer.stdin is not None
            offer.stdin.write(self._pending.encode("utf-8"))
            offer.stdin.close()
            self._offer = offer
            self._wait_until_offered(offer)
        threading.Thread(target=self._watch, args=(offer,), name="clipboard-offer", daemon=True).start()

    def _wait_until_offered(self, offer: subprocess.Popen[bytes]) -> None:
        """Return once the offer holds the selection: the clipboard was cleared before, so any type listed now
        is the offer's (or, should the person copy in this moment, theirs, which then wins anyway)."""
        while offer.poll() is None:
            listed = subprocess.run(
                [self._paste, "--list-types"], env=self._env, capture_output=True, timeout=_TOOL_TIMEOUT_S, check=False
            )
            if listed.returncode == 0 and listed.stdout.strip():
                return
            time.sleep(0.01)  # the compositor has not taken the offer yet: look again
        assert offer.stderr is not None
        said = offer.stderr.read().decode(errors="replace").strip()
        if offer.returncode:
            raise DesktopError(f"wl-copy could not offer the text (exit status {offer.returncode}): {said}")

    def _watch(self, offer: subprocess.Popen[bytes]) -> None:
        offer.wait()
        with self._lock:
            if offer is self._offer:  # pasted, or another program's copy took the selection
                self._offer = None
                self._pending = ""
                if not self._clipboard_types():  # empty: the paste took it; someone else's copy stays
                    self._restore()
                self.offers_served += 1
                self._served.notify_all()

    def _restore(self) -> None:
        if self._saved is None:
            return
        mime, content = self._saved
        result = subprocess.run(
            [self._copy, "--type", mime],
            input=content,
            env=self._env,
            stdout=subprocess.DEVNULL,  # the forked owner keeps its pipes: none to wait for
            stderr=subprocess.DEVNULL,
            timeout=_TOOL_TIMEOUT_S,
            check=False,
        )
        if result.returncode != 0:
            log.warning("wl-copy could not put the previous clipboard back (exit status %s)", result.returncode)

    def _clipboard_types(self) -> list[str]:
        listed = subprocess.run(
            [self._paste, "--list-types"], env=self._env, capture_output=True, timeout=_TOOL_TIMEOUT_S, check=False
        )
        if listed.returncode != 0:
            return []
        return [line.strip() for line in listed.stdout.decode(errors="replace").splitlines() if line.strip()]

    def _read_clipboard(self) -> tuple[str, bytes] | None:
        """The person's clipboard in one of its types (text when it has text), or None when it is empty."""
        types = self._clipboard_types()
        if not types:
            return None
        preferred = next((t for t in (_TEXT_TYPE, "text/plain", "UTF8_STRING") if t in types), types[0])
        content = subprocess.run(
            [self._paste, "--no-newline", "--type", preferred],
            env=self._env,
            capture_output=True,
            timeout=_TOOL_TIMEOUT_S,
            check=False,
        )
        return (preferred, content.stdout) if content.returncode == 0 else None

    def _run(self, command: list[str]) -> None:
        subprocess.run(
            command,
            env=self._env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=_TOOL_TIMEOUT_S,
            check=False,
        )


# ---- the choice


class WaylandKeyboard:
    """The first Wayland route that works here. Cheap checks choose it at construction (``route``, ``notice``);
    the portal's session, which waits for the person's answer, is opened by ``start()`` on the typing thread,
    and when it is refused the next route takes over (``start()`` returns the line that says so)."""

    def __init__(
        self,
        env: Mapping[str, str],
        *,
        token_path: Path,
        approval_timeout_s: float = 120.0,
    ) -> None:
        from app.core.desktop.portal import portal_offers_keyboard, session_bus_address

        self._env = dict(env)
        self._token_path = token_path
        self._approval_timeout_s = approval_timeout_s
        self._bus = session_bus_address(self._env)
        self._routes: list[Route] = []
        if self._bus is not None and portal_offers_keyboard(self._bus):
            self._routes.append("portal")
        self._routes.extend(self._fallbacks())
        if not self._routes:
            raise DesktopError(
                "nothing here can type into other programs on Wayland, and no clipboard tool was found: install "
                "wtype (wlroots desktops) or wl-clipboard (Debian/Ubuntu: apt install wtype wl-clipboard)"
            )
        self.route: Route = self._routes[0]
        self.notice = NOTICES[self.route]
        self._typer: Typer | None = None
        self._clipboard: ClipboardHandOver | None = None

    def _fallbacks(self) -> list[Route]:
        routes: list[Route] = []
        if wtype_works(self._env):
            routes.append("wtype")
        if ydotool_usable(self._env):
            routes.append("ydotool")
        if _tool("wl-copy", self._env) is not None and _tool("wl-paste", self._env) is not None:
            routes.append("clipboard")
        return routes

    def start(self) -> str | None:
        """Open the chosen route; when it fails, the next one. The line for the person when the route changed."""
        said: list[str] = []
        while self._typer is None:
            route = self._routes[0]
            try:
                self._typer = self._open(route)
            except Exception as error:  # a D-Bus or tool failure: this route does not work here
                self._routes.pop(0)
                if not self._routes:
                    raise DesktopError(f"cannot type here: {error}") from error
                self.route = self._routes[0]
                said.append(f"{error}; {NOTICES[self.route]} instead")
        return "; ".join(said) or None

    def _open(self, route: Route) -> Typer:
        if route == "portal":
            from app.core.desktop.portal import PortalKeyboard

            assert self._bus is not None
            portal = PortalKeyboard(self._bus, self._token_path, approval_timeout_s=self._approval_timeout_s)
            portal.start()
            return portal
        if route == "wtype":
            return WtypeTyper(self._env)
        if route == "ydotool":
            return YdotoolTyper(self._env)
        self._clipboard = ClipboardHandOver(self._env)
        return self._clipboard

    def type_text(self, text: str) -> None:
        typer = self._ensure()
        if isinstance(typer, YdotoolTyper) and not typer.can_type(text):
            # ydotool would drop these characters and say nothing: this text goes through the clipboard
            if self._clipboard is None:
                self._clipboard = ClipboardHandOver(self._env)
            self._clipboard.type_text(text)
            return
        typer.type_text(text)

    def erase(self, count: int) -> None:
        self._ensure().erase(count)

    def focused_window_pid(self) -> int | None:
        return None

    @property
    def clipboard(self) -> ClipboardHandOver | None:
        return self._clipboard

    def close(self) -> None:
        typer, self._typer = self._typer, None
        if typer is not None:
            typer.close()
        if self._clipboard is not None and self._clipboard is not typer:
            self._clipboard.close()

    def _ensure(self) -> Typer:
        if self._typer is None:
            self.start()
        assert self._typer is not None
        return self._typer


def default_token_path() -> Path:
    from app.core.paths import config_dir

    return config_dir() / "remote-desktop-token"


def _run_tool(name: str, command: list[str], env: Mapping[str, str] | None, stdin: str) -> None:
    """Run a typing tool; its failure, with what it said, is a DesktopError naming it."""
    result = subprocess.run(
        command, input=stdin.encode("utf-8"), env=env, capture_output=True, timeout=_TOOL_TIMEOUT_S, check=False
    )
    if result.returncode != 0:
        said = result.stderr.decode(errors="replace").strip()
        raise DesktopError(f"{name} could not type (exit status {result.returncode}): {said}")
