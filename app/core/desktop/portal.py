"""Keys typed through the desktop's RemoteDesktop portal (xdg-desktop-portal, over D-Bus): the way to type into
other programs on GNOME and KDE's Wayland sessions without root.

The flow is the portal's documented one (org.freedesktop.portal.RemoteDesktop, version 2):
CreateSession, SelectDevices (keyboard, persist until revoked, the restore token of the last session), Start
(the desktop asks the person once; with a valid restore token it does not ask again), then
NotifyKeyboardKeysym per key press and release. Each of the first three calls returns a Request object whose
Response signal carries the answer; the Request's path is known before the call (it is built from the
caller's bus name and a token the caller picks), so the signal is listened for before the call is made and
cannot be missed. Start hands back a new restore token each time (a token is good for one session): it is
kept in a file of the config folder.

Keysyms, not key codes: the desktop finds the key (and Shift) for each character in the person's own layout.
A character the layout has no key for may be dropped by the desktop; that is the portal's limit.

jeepney speaks D-Bus in pure Python; keyring brings it on Linux (through secretstorage), and Scriba names it
as a dependency of its own.
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.core.desktop.display import DesktopError
from app.core.desktop.x11_typing import char_keysym

log = logging.getLogger(__name__)

PORTAL_BUS_NAME = "org.freedesktop.portal.Desktop"
PORTAL_PATH = "/org/freedesktop/portal/desktop"
REMOTE_DESKTOP = "org.freedesktop.portal.RemoteDesktop"
REQUEST = "org.freedesktop.portal.Request"
SESSION = "org.freedesktop.portal.Session"
KEYBOARD = 1  # the device-type bit of a keyboard (AvailableDeviceTypes, SelectDevices' types, Start's devices)
PERSIST_UNTIL_REVOKED = 2
_RESPONSE_WORDS = {1: "the person said no to the desktop's request", 2: "the desktop ended the request"}
_tokens = itertools.count(1)


class PortalRefused(DesktopError):
    """The portal answered, but not with a keyboard: the person said no, or the desktop ended the request."""


def _connect(bus_address: str, timeout_s: float) -> Any:
    try:
        from jeepney.io.blocking import open_dbus_connection
    except ImportError as error:  # a dependency of Scriba on Linux; absent only in a broken install
        broken = DesktopError("this installation of Scriba cannot talk to the desktop: reinstall Scriba")
        broken.cli_hint = "(jeepney is missing: `pip install jeepney`)"
        raise broken from error
    try:
        return open_dbus_connection(bus_address, auth_timeout=timeout_s)
    except (OSError, ValueError, KeyError) as error:
        raise DesktopError(f"cannot reach the session's D-Bus ({bus_address}): {error}") from error


def session_bus_address(env: Mapping[str, str]) -> str | None:
    """The session bus of the environment the text is typed in (DBUS_SESSION_BUS_ADDRESS), or None."""
    address = env.get("DBUS_SESSION_BUS_ADDRESS")
    if address:
        return address
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime, "bus").exists():  # systemd's user bus, where the variable is not exported
        return f"unix:path={runtime}/bus"
    return None


def portal_offers_keyboard(bus_address: str, timeout_s: float = 3.0) -> bool:
    """Whether the desktop's portal has the RemoteDesktop interface with a keyboard among its device types.

    False on every failure (no portal, a portal backend without RemoteDesktop as on wlroots desktops): the next
    route is tried then."""
    from jeepney import DBusAddress, Properties

    try:
        connection = _connect(bus_address, timeout_s)
    except DesktopError:
        return False
    try:
        portal = DBusAddress(PORTAL_PATH, bus_name=PORTAL_BUS_NAME, interface=REMOTE_DESKTOP)
        reply = connection.send_and_get_reply(Properties(portal).get("AvailableDeviceTypes"), timeout=timeout_s)
        _, types = reply.body[0]
        return bool(int(types) & KEYBOARD)
    except Exception as error:  # any D-Bus error or a timeout means: not this route
        log.info("no RemoteDesktop portal with a keyboard: %s", error)
        return False
    finally:
        connection.close()


class PortalKeyboard:
    """A RemoteDesktop session with a keyboard. ``start()`` asks the desktop (blocks until the person answers,
    at most ``approval_timeout_s``); then ``type_text`` and ``erase`` send keysyms. One thread at a time."""

    def __init__(
        self,
        bus_address: str,
        token_path: Path,
        *,
        approval_timeout_s: float = 120.0,
        call_timeout_s: float = 10.0,
    ) -> None:
        from jeepney import DBusAddress

        self._connection = _connect(bus_address, call_timeout_s)
        self._token_path = token_path
        self._approval_timeout_s = approval_timeout_s
        self._call_timeout_s = call_timeout_s
        self._portal = DBusAddress(PORTAL_PATH, bus_name=PORTAL_BUS_NAME, interface=REMOTE_DESKTOP)
        # The Request path's sender part: the unique name without its ':' and with '_' for '.'.
        self._sender = self._connection.unique_name.lstrip(":").replace(".", "_")
        self._session: str | None = None

    def start(self) -> None:
        try:
            created = self._request("CreateSession", "a{sv}", [], {"session_handle_token": ("s", _token())})
            session = str(created.get("session_handle", ""))
            if not session:
                raise DesktopError("the RemoteDesktop portal made no session (no session_handle in its answer)")
            self._session = session
            options: dict[str, tuple[str, Any]] = {
                "types": ("u", KEYBOARD),
                "persist_mode": ("u", PERSIST_UNTIL_REVOKED),
            }
            restore = self._read_token()
            if restore:
                options["restore_token"] = ("s", restore)
            self._request("SelectDevices", "oa{sv}", [("o", session)], options)
            started = self._request(
                "Start", "osa{sv}", [("o", session), ("s", "")], {}, timeout_s=self._approval_timeout_s
            )
        except BaseException:
            self.close()
            raise
        token = started.get("restore_token")
        if isinstance(token, str) and token:
            self._write_token(token)
        if not int(started.get("devices", 0)) & KEYBOARD:
            self.close()
            raise PortalRefused("the desktop started the remote-desktop session without a keyboard")

    def type_text(self, text: str) -> None:
        for char in text:
            self._key(char_keysym(char))

    def erase(self, count: int) -> None:
        for _ in range(max(0, count)):
            self._key(char_keysym("\b"))

    def focused_window_pid(self) -> int | None:
        return None  # the portal does not say which window has the focus

    def close(self) -> None:
        session, self._session = self._session, None
        try:
            if session is not None and self._connection is not None:
                from jeepney import DBusAddress, new_method_call

                address = DBusAddress(session, bus_name=PORTAL_BUS_NAME, interface=SESSION)
                self._connection.send_and_get_reply(new_method_call(address, "Close"), timeout=self._call_timeout_s)
        except Exception:  # the desktop closed it already (the person revoked it): nothing is left to close
            log.info("closing the RemoteDesktop session failed", exc_info=True)
        finally:
            connection, self._connection = self._connection, None
            if connection is not None:
                connection.close()

    def _key(self, keysym: int) -> None:
        from jeepney import DBusErrorResponse, new_method_call

        if self._session is None or self._connection is None:
            raise DesktopError("the remote-desktop session is not started")
        for state in (1, 0):  # pressed, released
            call = new_method_call(self._portal, "NotifyKeyboardKeysym", "oa{sv}iu", (self._session, {}, keysym, state))
            try:
                self._connection.send_and_get_reply(call, timeout=self._call_timeout_s)
            except DBusErrorResponse as error:
                raise DesktopError(
                    f"the desktop refused a key ({error.name}): the remote-desktop permission may have been "
                    "revoked; start dictation again to ask for it"
                ) from error

    def _request(
        self,
        method: str,
        signature: str,
        leading: list[tuple[str, Any]],
        options: dict[str, tuple[str, Any]],
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Call a portal method that answers through a Request's Response signal; its results, unwrapped."""
        from jeepney import DBusErrorResponse, HeaderFields, MatchRule, message_bus, new_method_call
        from jeepney.io.blocking import Proxy

        handle = _token()
        path = f"/org/freedesktop/portal/desktop/request/{self._sender}/{handle}"
        rule = MatchRule(type="signal", interface=REQUEST, member="Response", path=path)
        Proxy(message_bus, self._connection).AddMatch(rule)
        body = (*(value for _, value in leading), {**options, "handle_token": ("s", handle)})
        with self._connection.filter(rule) as responses:
            try:
                reply = self._connection.send_and_get_reply(
                    new_method_call(self._portal, method, signature, body), timeout=self._call_timeout_s
                )
            except DBusErrorResponse as error:
                raise DesktopError(f"the RemoteDesktop portal refused {method}: {error.name} {error.data}") from error
            if reply.body and reply.body[0] != path:  # a portal older than 0.9, where the path was not fixed
                raise DesktopError(f"the RemoteDesktop portal answered {method} on an unexpected path {reply.body[0]}")
            try:
                signal = self._connection.recv_until_filtered(
                    responses, timeout=timeout_s if timeout_s is not None else self._call_timeout_s
                )
            except TimeoutError as error:
                raise PortalRefused(f"the desktop did not answer {method} in time") from error
        assert signal.header.fields.get(HeaderFields.path) == path
        response, results = signal.body
        if response != 0:
            raise PortalRefused(f"{_RESPONSE_WORDS.get(response, f'response {response}')} ({method})")
        return {key: value for key, (_, value) in results.items()}

    def _read_token(self) -> str | None:
        try:
            return self._token_path.read_text(encoding="utf-8").strip() or None
        except (OSError, UnicodeDecodeError):
            return None

    def _write_token(self, token: str) -> None:
        """Replace the stored token (private to the user: it grants typing without asking)."""
        try:
            self._token_path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self._token_path.parent, prefix=".portal-token-")
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                file.write(token)
            os.replace(temporary, self._token_path)
        except OSError as error:  # the session works; only the next one asks again
            log.warning("cannot keep the remote-desktop restore token in %s: %s", self._token_path, error)


def _token() -> str:
    return f"scriba{next(_tokens)}_{secrets.token_hex(4)}"
