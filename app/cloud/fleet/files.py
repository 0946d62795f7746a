"""The fleet's recordings, served to the nodes from this machine over HTTP on loopback (through each node's tunnel).

A node fetches a recording only when it has taken that recording's job from the queue, so the upload follows the
work: no file goes to two nodes unless a node dies with it. Each file is reachable only by an unguessable token
(the queue, which only the nodes can read, carries it), and nothing but registered files can be read.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class FileServer:
    """``register`` a file, get its token; the nodes GET ``/TOKEN``. ``start`` and ``stop`` it around the fleet."""

    def __init__(self) -> None:
        self._files: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.sent_bytes = 0

    def register(self, path: Path) -> str:
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._files[token] = path
        return token

    def path_of(self, token: str) -> Path | None:
        with self._lock:
            return self._files.get(token)

    def _count(self, sent: int) -> None:
        with self._lock:
            self.sent_bytes += sent

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the file server is not running")
        return int(self._server.server_address[1])

    def start(self) -> None:
        files = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = files.path_of(self.path.lstrip("/"))
                if path is None or not path.is_file():
                    self.send_error(HTTPStatus.NOT_FOUND)
                    return
                size = path.stat().st_size
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(size))
                self.end_headers()
                with path.open("rb") as source, contextlib.suppress(ConnectionError):
                    shutil.copyfileobj(source, self.wfile, 1 << 20)
                    files._count(size)

            def log_message(self, format: str, *args: object) -> None:
                return  # requests are not logged: the tokens are secrets

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="scriba-fleet-files")
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
