"""A stand-in for the desktop's RemoteDesktop portal (xdg-desktop-portal with a GNOME or KDE backend), which
cannot run here: a small real D-Bus service on a private session bus that replays the portal's documented
behaviour (https://flatpak.github.io/xdg-desktop-portal/docs/doc-org.freedesktop.portal.RemoteDesktop.html,
version 2) and records what it was asked.

- CreateSession(a{sv}) -> o request; Response(0, {session_handle: s}); the request's path is
  /org/freedesktop/portal/desktop/request/SENDER/handle_token (SENDER: the caller's unique name, ':' dropped,
  '.' as '_'), the session's .../session/SENDER/session_handle_token.
- SelectDevices(o, a{sv}: types u, persist_mode u, restore_token s) -> o request; Response(0, {}).
- Start(o, s, a{sv}) -> o request; Response(0, {devices: u, restore_token: s}) when the person allows it
  (a restore token is good for one session: each Start issues a new one), Response(1, {}) when they say no.
- NotifyKeyboardKeysym(o, a{sv}, i keysym, u state) -> (); an error before the session started.
- org.freedesktop.portal.Session.Close() on the session's path.
- Properties.Get(org.freedesktop.portal.RemoteDesktop, AvailableDeviceTypes) -> v (u 7: keyboard, pointer,
  touchscreen).

Run: ``python tests/portal_standin.py BUS_ADDRESS RECORD_FILE allow|refuse``. Each call is a JSON line in
RECORD_FILE, written before the reply, so a caller that got its reply finds its call recorded. It prints
"ready" once it owns the portal's name.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from jeepney import (
    DBusAddress,
    HeaderFields,
    MessageType,
    message_bus,
    new_error,
    new_method_return,
    new_signal,
)
from jeepney.io.blocking import Proxy, open_dbus_connection

PORTAL_BUS_NAME = "org.freedesktop.portal.Desktop"
PORTAL_PATH = "/org/freedesktop/portal/desktop"


def _respond(connection: Any, call: Any, options: dict[str, tuple[str, Any]], response: int, results: Any) -> None:
    """Reply with the Request's path, then send its Response signal to the caller."""
    caller = str(call.header.fields[HeaderFields.sender])
    request = f"{PORTAL_PATH}/request/{caller.lstrip(':').replace('.', '_')}/{options['handle_token'][1]}"
    connection.send(new_method_return(call, "o", (request,)))
    signal = new_signal(
        DBusAddress(request, interface="org.freedesktop.portal.Request"), "Response", "ua{sv}", (response, results)
    )
    signal.header.fields[HeaderFields.destination] = caller
    connection.send(signal)


def main(address: str, record_path: str, answer: str) -> None:
    with Path(record_path).open("a", encoding="utf-8") as record:
        _serve(address, record, answer)


def _serve(address: str, record: Any, answer: str) -> None:
    connection = open_dbus_connection(address)
    Proxy(message_bus, connection).RequestName(PORTAL_BUS_NAME, 4)  # 4: do not queue
    started: set[str] = set()
    sessions: set[str] = set()
    issued = 0
    print("ready", flush=True)

    def note(method: str, **args: Any) -> None:
        record.write(json.dumps({"method": method, **args}) + "\n")
        record.flush()

    while True:
        message = connection.receive()
        if message.header.message_type != MessageType.method_call:
            continue
        fields = message.header.fields
        interface, member = fields.get(HeaderFields.interface), fields.get(HeaderFields.member)
        sender = str(fields.get(HeaderFields.sender, "")).lstrip(":").replace(".", "_")

        if interface == "org.freedesktop.DBus.Properties" and member == "Get":
            note("Get", property=message.body[1])
            if tuple(message.body) == ("org.freedesktop.portal.RemoteDesktop", "AvailableDeviceTypes"):
                connection.send(new_method_return(message, "v", (("u", 7),)))
            else:
                connection.send(new_error(message, "org.freedesktop.DBus.Error.UnknownProperty"))
        elif interface == "org.freedesktop.portal.RemoteDesktop" and member == "CreateSession":
            (options,) = message.body
            session = f"{PORTAL_PATH}/session/{sender}/{options['session_handle_token'][1]}"
            sessions.add(session)
            note("CreateSession", session=session)
            _respond(connection, message, options, 0, {"session_handle": ("s", session)})
        elif interface == "org.freedesktop.portal.RemoteDesktop" and member == "SelectDevices":
            session, options = message.body
            plain = {key: value for key, (_, value) in options.items() if key != "handle_token"}
            note("SelectDevices", session=session, options=plain)
            _respond(connection, message, options, 0 if session in sessions else 2, {})
        elif interface == "org.freedesktop.portal.RemoteDesktop" and member == "Start":
            session, _parent, options = message.body
            note("Start", session=session)
            if answer == "allow" and session in sessions:
                issued += 1
                started.add(session)
                _respond(
                    connection, message, options, 0, {"devices": ("u", 1), "restore_token": ("s", f"restore-{issued}")}
                )
            else:
                _respond(connection, message, options, 1, {})
        elif interface == "org.freedesktop.portal.RemoteDesktop" and member == "NotifyKeyboardKeysym":
            session, _options, keysym, state = message.body
            if session not in started:
                connection.send(new_error(message, "org.freedesktop.DBus.Error.AccessDenied", "s", ("not started",)))
                continue
            note("NotifyKeyboardKeysym", keysym=keysym, state=state)
            connection.send(new_method_return(message))
        elif interface == "org.freedesktop.portal.Session" and member == "Close":
            path = str(fields.get(HeaderFields.path))
            started.discard(path)
            sessions.discard(path)
            note("Close", session=path)
            connection.send(new_method_return(message))
        else:
            connection.send(new_error(message, "org.freedesktop.DBus.Error.UnknownMethod"))


if __name__ == "__main__":
    main(*sys.argv[1:4])
