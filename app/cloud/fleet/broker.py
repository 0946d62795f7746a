"""The fleet's queue: a private Redis server on this machine, reached by the GPU nodes only through SSH.

Why Redis and Celery (issue 16's study; SkyPilot, Ray, Dask, RQ, Modal and dstack were compared): a node pulls
one job at a time from a list, and a job a dead node had taken comes back after a visibility timeout; Celery 5
with the JSON serializer alone never unpickles what a node sends. The server listens on 127.0.0.1 only; each
node reaches it through the reverse tunnel of the SSH connection Scriba already holds, so no port is opened
anywhere and a rented container behind NAT needs nothing.

Two users, each with a fresh random password: ``scriba`` (this machine: everything) and ``node`` (the GPU nodes:
the data commands the queue needs, never the server's administration: CONFIG, MODULE, DEBUG, SHUTDOWN, KEYS,
FLUSHALL … are refused by Redis itself). The default user is off, nothing is saved to disk, and the server dies
with this process's fleet.
"""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from app.cloud.offload.base import OffloadError

DRIVER_USER = "scriba"
NODE_USER = "node"
# What a node may run: every command but the administrative and dangerous ones. Lua scripts (kombu registers
# two for its bindings) run under the same rules, so a script cannot reach what the node cannot.
NODE_COMMANDS = "+@all -@admin -@dangerous"
INSTALL_HINT = (
    "Several machines at once need Redis on this computer (Scriba starts a private one for their queue): "
    "install it (Debian/Ubuntu: sudo apt install redis-server; Fedora: sudo dnf install redis; macOS: brew "
    "install redis) and try again"
)


class BrokerError(OffloadError):
    pass


def redis_server_path() -> Path | None:
    found = shutil.which("redis-server")
    return Path(found) if found else None


@dataclass(frozen=True)
class BrokerAccess:
    """How one side reaches the broker: host and port as seen from that side, user and password."""

    host: str
    port: int
    user: str
    password: str

    def url(self, database: int = 0) -> str:
        return f"redis://{self.user}:{self.password}@{self.host}:{self.port}/{database}"


class LocalBroker:
    """A private ``redis-server`` on a free loopback port; a context manager that stops it."""

    def __init__(self, executable: Path | None = None, start_timeout_s: float = 15.0) -> None:
        self.executable = executable or redis_server_path()
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self.driver_password = secrets.token_urlsafe(24)
        self.node_password = secrets.token_urlsafe(24)
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def driver(self) -> BrokerAccess:
        return BrokerAccess("127.0.0.1", self.port, DRIVER_USER, self.driver_password)

    def node(self, port: int) -> BrokerAccess:
        """The node's access, through its end of the tunnel (``port`` on the node's own loopback)."""
        return BrokerAccess("127.0.0.1", port, NODE_USER, self.node_password)

    def config_text(self, port: int, folder: Path) -> str:
        return "\n".join(
            [
                "bind 127.0.0.1",
                f"port {port}",
                "protected-mode yes",
                'save ""',
                "appendonly no",
                f"dir {folder}",
                "daemonize no",
                # Every node's connection arrives from this machine's loopback (the tunnel): "local" would let
                # them in, so these stay off for everyone.
                "enable-module-command no",
                "enable-debug-command no",
                "enable-protected-configs no",
                # Results are a transcript each (a few MB for hours of speech); a runaway node must not eat this
                # machine's memory: refuse writes rather than evict the queue.
                "maxmemory 1gb",
                "maxmemory-policy noeviction",
                "user default off",
                f"user {DRIVER_USER} on >{self.driver_password} ~* &* +@all",
                f"user {NODE_USER} on >{self.node_password} ~* &* {NODE_COMMANDS}",
                "",
            ]
        )

    def start(self) -> None:
        if self.executable is None:
            raise BrokerError(INSTALL_HINT)
        self._folder = tempfile.TemporaryDirectory(prefix="scriba-broker-")
        folder = Path(self._folder.name)
        config = folder / "redis.conf"
        last_error = ""
        for _attempt in range(5):  # a free port can be taken between the probe and the bind: try another
            self.port = _free_port()
            config.write_text(self.config_text(self.port, folder), encoding="utf-8")
            config.chmod(0o600)  # it holds both passwords
            log = folder / "redis.log"
            with log.open("wb") as output:
                self._process = subprocess.Popen(
                    [str(self.executable), str(config)], stdout=output, stderr=subprocess.STDOUT
                )
            if self._wait_until_ready():
                return
            lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            last_error = lines[-1] if lines else "it did not answer"
            self._stop_process()
        self.stop()
        raise BrokerError(f"could not start the fleet's Redis server ({self.executable}): {last_error}")

    def _wait_until_ready(self) -> bool:
        assert self._process is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            if self.ping(self.driver):
                return True
            time.sleep(0.05)
        return False

    @staticmethod
    def ping(access: BrokerAccess) -> bool:
        """True when the server answers ``access``'s AUTH and PING."""
        return ask(access, "PING") == b"+PONG"

    def _stop_process(self) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def stop(self) -> None:
        self._stop_process()
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> LocalBroker:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


def ask(access: BrokerAccess, *words: str, timeout_s: float = 2.0) -> bytes | None:
    """One command as ``access``, in RESP spoken by hand (no client needed, a timeout of its own): its one-line
    answer (``+PONG``, ``:3``), or None when the server cannot be reached or refuses the login."""
    try:
        with socket.create_connection((access.host, access.port), timeout=timeout_s) as connection:
            connection.sendall(command("AUTH", access.user, access.password) + command(*words))
            answer = b""
            while answer.count(b"\r\n") < 2:
                chunk = connection.recv(4096)
                if not chunk:
                    return None
                answer += chunk
    except OSError:
        return None
    login, reply = answer.split(b"\r\n")[:2]
    return reply if login == b"+OK" else None


def command(*parts: str) -> bytes:
    """One Redis command in RESP, the protocol's wire form."""
    encoded = [part.encode() for part in parts]
    return b"*%d\r\n" % len(encoded) + b"".join(b"$%d\r\n%s\r\n" % (len(part), part) for part in encoded)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
