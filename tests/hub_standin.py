"""A local HTTP server that answers the Hugging Face hub's requests for one gated model repository.

The real huggingface_hub client talks to it (its ``endpoint`` parameter, or ``HF_ENDPOINT`` in a child
process). It answers what the client asks for: ``/api/whoami-v2``, ``/api/models/{repo}/revision/{rev}``
and ``/{repo}/resolve/{rev}/{file}`` (HEAD for metadata, GET with ranges for the bytes), with the hub's own
status codes and error headers for a refused token (401) and a gated repository without access (403).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class HubState:
    repo: str
    files: dict[str, bytes]
    tokens: dict[str, bool]  # token -> whether its account accepted the repository's terms
    drop_after: dict[str, int] = field(default_factory=dict)  # file -> close the connection after this many bytes
    refuse_next: dict[str, int] = field(default_factory=dict)  # file -> answer 503 to this many GETs
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, Range header
    # file -> (bytes, event): send that many bytes, then wait for the event before the rest (a slow download
    # that a test can cancel part-way, deterministically)
    hold_after: dict[str, tuple[int, threading.Event]] = field(default_factory=dict)
    public: bool = False  # a public repository (the Whisper models): files need no token


def _handler(state: HubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
            return None

        def _token(self) -> str | None:
            value = self.headers.get("Authorization", "")
            return value.removeprefix("Bearer ").strip() or None

        def _json(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def do_HEAD(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            path = unquote(urlsplit(self.path).path)
            state.requests.append((self.command, path, self.headers.get("Range", "")))
            token = self._token()
            if path == "/api/whoami-v2":
                if token not in state.tokens:
                    self._json(401, {"error": "Invalid credentials in Authorization header"})
                    return
                self._json(200, {"type": "user", "name": "scriba-tester", "auth": {"type": "access_token"}})
                return
            if path == f"/api/models/{state.repo}" or path.startswith(f"/api/models/{state.repo}/revision/"):
                siblings = [{"rfilename": name, "size": len(data)} for name, data in state.files.items()]
                self._json(
                    200,
                    {
                        "id": state.repo,
                        "sha": COMMIT,
                        "gated": False if state.public else "manual",
                        "siblings": siblings,
                    },
                )
                return
            prefix = f"/{state.repo}/resolve/"
            if not path.startswith(prefix):
                self._json(404, {"error": "not found"}, {"X-Error-Code": "EntryNotFound"})
                return
            name = path[len(prefix) :].split("/", 1)[1]
            if not state.public and token not in state.tokens:
                self._json(401, {"error": "Access to this model is restricted"}, {"X-Error-Code": "GatedRepo"})
                return
            if not state.public and not state.tokens[token]:
                self._json(
                    403,
                    {"error": "Access restricted: you are not in the authorized list"},
                    {"X-Error-Code": "GatedRepo", "X-Error-Message": "Access to model is restricted."},
                )
                return
            if name not in state.files:
                self._json(404, {"error": "not found"}, {"X-Error-Code": "EntryNotFound"})
                return
            self._file(name, state.files[name])

        def _file(self, name: str, data: bytes) -> None:
            common = {
                "X-Repo-Commit": COMMIT,
                "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                "Accept-Ranges": "bytes",
            }
            # A pending drop comes first: then the client's retry meets the refusal.
            if self.command == "GET" and name not in state.drop_after and state.refuse_next.get(name, 0) > 0:
                state.refuse_next[name] -= 1
                self._json(503, {"error": "service unavailable"})
                return
            start = 0
            wanted = self.headers.get("Range", "")
            if self.command == "GET" and wanted.startswith("bytes="):
                start = int(wanted.removeprefix("bytes=").split("-")[0])
            if start >= len(data) > 0:
                # What a real server answers for a range past the end of the file.
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = data[start:]
            self.send_response(206 if start else 200)
            for key, value in common.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            if self.command == "HEAD":
                return
            held = state.hold_after.pop(name, None)
            if held is not None and held[0] < len(body):
                self.wfile.write(body[: held[0]])
                self.wfile.flush()
                held[1].wait(30)
                body = body[held[0] :]
            cut = state.drop_after.pop(name, None)
            if cut is not None and cut < len(body):
                # A dropped connection part-way: some bytes, then the socket closes under the client.
                self.wfile.write(body[:cut])
                self.wfile.flush()
                self.close_connection = True
                self.connection.close()
                return
            self.wfile.write(body)

    return Handler


@contextmanager
def serve_hub(state: HubState) -> Iterator[str]:
    """Run the stand-in hub on a free local port; yields its endpoint URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
