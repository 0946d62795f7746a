"""A real HTTP server on 127.0.0.1 that replays providers' documented JSON answers, for the cloud tests.

Each test scripts routes: ``server.route("GET", "/instances/i-1", Reply(body=booting), Reply(body=active))``.
Answers for a route are given in order and the last one repeats (a poll that keeps seeing "active").
Every request is recorded (method, path, query, headers, body) for assertions; one that matches no route is
answered 404 and also listed in :attr:`ReplayServer.unmatched`, which tests check is empty.

A reply may be a function of the request (a list that shows the machine with the label the client just sent),
and ``Reply(hold=event)`` is answered only once the test sets ``event``: a provider that has done the work but
has not answered yet (a create that stalls), which is when a Ctrl-C or a SIGTERM lands. Held replies are let go
when the server stops.

:class:`FakeClock` stands in for ``time.sleep``/``time.monotonic``: sleeping advances the clock at once and
records how long was asked for, so a fifteen-minute boot or a ``Retry-After`` takes no time.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: Any = None  # JSON-serialisable, or bytes sent as they are; None: empty body
    headers: dict[str, str] = field(default_factory=dict)
    hold: threading.Event | None = None  # answered once set (or when the server stops)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


Answer = Reply | dict[str, Any] | list[Any] | Callable[[Recorded], Any]


def _as_reply(answer: Any) -> Reply:
    return answer if isinstance(answer, Reply) else Reply(body=answer)


class ReplayServer:
    def __init__(self) -> None:
        self._routes: dict[tuple[str, str], list[Answer]] = {}
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.requests: list[Recorded] = []
        self.unmatched: list[Recorded] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="replay-server", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ReplayServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def route(self, method: str, path: str, *replies: Answer) -> None:
        """Answers for ``method path`` (path without the query), in order; the last repeats. A callable answer is
        called with the request and returns the reply (or its body)."""
        with self._lock:
            self._routes.setdefault((method.upper(), path), []).extend(replies)

    def calls(self, method: str, path: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.method == method.upper() and r.path == path]

    def _answer(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            replies = self._routes.get((recorded.method, recorded.path))
            if not replies:
                self.unmatched.append(recorded)
                return Reply(404, {"error": "no route in the replay server"})
            answer = replies.pop(0) if len(replies) > 1 else replies[0]
        reply = _as_reply(answer(recorded) if callable(answer) else answer)
        if reply.hold is not None:
            while not reply.hold.wait(0.05) and not self._stopping.is_set():
                pass
        return reply

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urllib.parse.urlsplit(self.path)
                recorded = Recorded(
                    method=self.command,
                    path=parts.path,
                    query=urllib.parse.parse_qs(parts.query),
                    headers={key.lower(): value for key, value in self.headers.items()},
                    body=body,
                )
                reply = server._answer(recorded)
                if server._stopping.is_set() and reply.hold is not None:
                    return  # let go at shutdown: the client has long given up on this answer
                payload = (
                    reply.body
                    if isinstance(reply.body, bytes)
                    else (b"" if reply.body is None else json.dumps(reply.body).encode())
                )
                self.send_response(reply.status)
                if payload:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                try:
                    self.end_headers()
                    if payload:
                        self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up (an interrupted request): nothing to answer

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

            def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest shows failures anyway
                pass

        return Handler


class FakeClock:
    """``sleep`` advances ``monotonic`` at once; ``sleeps`` lists every wait asked for."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
