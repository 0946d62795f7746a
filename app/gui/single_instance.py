"""One window per queue: a second `scriba FILE…` hands its files to the window already open on that data folder.

The running window listens on a local socket named after the user and the data folder (two users, or two data
folders, are two queues and may each have a window). A launch first tries to connect: when a window answers,
the file list is sent as one JSON line, the window replies "ok\\n" once the files are queued, and the launch
exits. No answer within a moment means no window is running (a stale socket left by a crash is removed).
"""

from __future__ import annotations

import getpass
import hashlib
import json
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

CONNECT_TIMEOUT_MS = 1000
# The window answers once the files are in the queue; a folder of hundreds of files takes a moment.
REPLY_TIMEOUT_MS = 10_000


def server_name(data_dir: Path) -> str:
    key = f"{getpass.getuser()}:{Path(data_dir).absolute()}".encode()
    return f"scriba-{hashlib.sha256(key).hexdigest()[:16]}"


def hand_over(name: str, files: list[Path]) -> bool:
    """Give ``files`` to the window listening on ``name``; False when none is running (start one then)."""
    socket = QLocalSocket()
    socket.connectToServer(name)
    if not socket.waitForConnected(CONNECT_TIMEOUT_MS):
        return False
    message = json.dumps({"files": [str(Path(path).absolute()) for path in files]}) + "\n"
    socket.write(message.encode("utf-8"))
    socket.flush()
    answered = False
    while socket.state() == QLocalSocket.LocalSocketState.ConnectedState and socket.waitForReadyRead(REPLY_TIMEOUT_MS):
        if socket.canReadLine():
            answered = bytes(socket.readLine().data()).strip() == b"ok"
            break
    socket.disconnectFromServer()
    return answered


class InstanceServer(QObject):
    """Listens for later launches; ``files_received`` carries their files (maybe none: "show the window")."""

    files_received = Signal(list)  # list[Path]

    def __init__(self, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self.server.newConnection.connect(self._connection)

    def listen(self) -> bool:
        if self.server.listen(self.name):
            return True
        # A socket file left by a window that crashed: nobody answers on it (hand_over was tried first).
        QLocalServer.removeServer(self.name)
        return self.server.listen(self.name)

    def close(self) -> None:
        self.server.close()

    def _connection(self) -> None:
        while self.server.hasPendingConnections():
            socket = self.server.nextPendingConnection()
            socket.readyRead.connect(lambda socket=socket: self._read(socket))
            # The socket stays the server's child until the server goes (one small object per later launch).
            # Deleting it on disconnect (deleteLater) made PySide 6.11 crash when the server was destroyed
            # afterwards ("shared QObject was deleted directly").

    def _read(self, socket: QLocalSocket) -> None:
        if not socket.canReadLine():
            return  # the rest of the line is still on its way
        line = bytes(socket.readLine().data())
        try:
            files = [Path(item) for item in json.loads(line.decode("utf-8"))["files"]]
        except (ValueError, KeyError, TypeError):
            socket.write(b"error\n")
            socket.flush()
            return
        self.files_received.emit(files)
        socket.write(b"ok\n")
        socket.flush()
