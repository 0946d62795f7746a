"""A real OpenSSH server on 127.0.0.1 for offload tests: a free port, a temporary host key, one authorized key.

It runs as the test's own user (root on CI, where privilege separation needs /run/sshd) with its own
configuration file, so it touches neither the system's sshd nor ~/.ssh. ``restart(new_host_key=True)``
brings it back on the same port with a different host key: the "changed host key" case.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"
REPO = Path(__file__).resolve().parents[2]


def host_environment(tmp_path: Path, pythonpath: str = str(REPO), numeric: bool = False) -> dict[str, str]:
    """The remote side's environment: its own cache and data folders under ``tmp_path`` (nothing of the user's),
    and ``pythonpath`` (default: this checkout).

    ``numeric``: also the kernel choices of the numeric libraries, as this process has them: sshd starts the
    worker with a bare environment, and e.g. OPENBLAS_CORETYPE alone changes tiny.en's words on the sample (13
    segments here, 6 in a bare environment), so a run compared word for word with a local one needs them."""
    home = tmp_path / "remote-home"
    env = {
        "PYTHONPATH": pythonpath,
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_DATA_HOME": str(home / "data"),
        "PYANNOTE_METRICS_ENABLED": "0",
    }
    if numeric:
        env |= {
            name: value
            for name, value in sorted(os.environ.items())
            if name.startswith(("OPENBLAS_", "OMP_", "MKL_", "NVPL_", "GOTO", "KMP_"))
        }
    return env


def remote_command(tmp_path: Path) -> str:
    """What the user types as the remote command: this checkout, with its own cache and data folders there."""
    env = host_environment(tmp_path)
    return shlex.join([*(f"{name}={value}" for name, value in env.items()), sys.executable, "-m", "app"])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _keygen(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.with_suffix(".pub").unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


@dataclass
class LoopbackSshd:
    directory: Path
    port: int = field(default_factory=free_port)
    # False: a host whose sshd offers no SFTP subsystem (some hardened or minimal images).
    sftp: bool = True
    process: subprocess.Popen[bytes] | None = None
    # A machine of its own: sshd (and all it starts) runs in this network namespace and listens on ``address``,
    # its end of the namespace's link (see NetworkNamespace); its 127.0.0.1 is not this machine's.
    namespace: NetworkNamespace | None = None

    @property
    def address(self) -> str:
        return self.namespace.inside if self.namespace is not None else "127.0.0.1"

    @property
    def user(self) -> str:
        return getpass.getuser()

    @property
    def client_key(self) -> Path:
        return self.directory / "client_key"

    @property
    def host_key(self) -> Path:
        return self.directory / "host_key"

    @property
    def url(self) -> str:
        return f"ssh://{self.user}@{self.address}:{self.port}"

    def known_hosts_line(self) -> str:
        kind, key = self.host_key.with_suffix(".pub").read_text().split()[:2]
        return f"[{self.address}]:{self.port} {kind} {key}\n"

    def write_known_hosts(self, path: Path) -> Path:
        path.write_text(self.known_hosts_line())
        return path

    def start(self, new_host_key: bool = False) -> None:
        assert shutil.which("ssh-keygen") and Path(SSHD).exists(), "openssh-server missing: run `make test`"
        self.directory.mkdir(parents=True, exist_ok=True)
        if new_host_key or not self.host_key.exists():
            _keygen(self.host_key)
        if not self.client_key.exists():
            _keygen(self.client_key)
            (self.directory / "authorized_keys").write_text(self.client_key.with_suffix(".pub").read_text())
            (self.directory / "authorized_keys").chmod(0o600)
        config = self.directory / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    f"ListenAddress {self.address}",
                    f"HostKey {self.host_key}",
                    f"AuthorizedKeysFile {self.directory / 'authorized_keys'}",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "StrictModes no",
                    "PermitRootLogin prohibit-password",
                    f"PidFile {self.directory / 'sshd.pid'}",
                    *(["Subsystem sftp internal-sftp"] if self.sftp else []),
                    "LogLevel ERROR",
                    "MaxSessions 50",
                    "MaxStartups 50",
                ]
            )
            + "\n"
        )
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation directory
        prefix = ["ip", "netns", "exec", self.namespace.name] if self.namespace is not None else []
        self.process = subprocess.Popen([*prefix, SSHD, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"sshd exited: {self.process.stderr.read().decode() if self.process.stderr else ''}")
            with socket.socket() as probe:
                if probe.connect_ex((self.address, self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("sshd did not listen within 10 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def restart(self, new_host_key: bool = False) -> None:
        self.stop()
        self.start(new_host_key=new_host_key)


@dataclass
class NetworkNamespace:
    """A network namespace joined to this one by a veth pair: ``outside`` (here) and ``inside`` (there), a /30
    of their own. What runs inside has its own loopback and reaches nothing of this machine's but ``outside``:
    a node in it reaches Scriba's broker (on this machine's 127.0.0.1) only through an SSH tunnel, as a rented
    machine does. Needs root (CAP_NET_ADMIN), as the test sshd does."""

    number: int  # 1-250: which /30 and which interface names
    _link: str = field(default="", init=False)

    @property
    def name(self) -> str:
        return f"scriba-t{os.getpid() % 100000}-{self.number}"

    @property
    def outside(self) -> str:
        return f"10.231.{self.number}.1"

    @property
    def inside(self) -> str:
        return f"10.231.{self.number}.2"

    def create(self) -> NetworkNamespace:
        self._remove_leftovers()
        host, peer = f"sv{os.getpid() % 10000}h{self.number}", f"sv{os.getpid() % 10000}n{self.number}"
        for command in (
            ["ip", "netns", "add", self.name],
            ["ip", "link", "add", host, "type", "veth", "peer", "name", peer],
            ["ip", "link", "set", peer, "netns", self.name],
            ["ip", "addr", "add", f"{self.outside}/30", "dev", host],
            ["ip", "link", "set", host, "up"],
            ["ip", "netns", "exec", self.name, "ip", "addr", "add", f"{self.inside}/30", "dev", peer],
            ["ip", "netns", "exec", self.name, "ip", "link", "set", peer, "up"],
            ["ip", "netns", "exec", self.name, "ip", "link", "set", "lo", "up"],
        ):
            subprocess.run(command, check=True, capture_output=True)
        self._link = host
        return self

    def set_link(self, up: bool) -> None:
        """Cut (or restore) the namespace's only way out, as a network that drops does."""
        subprocess.run(["ip", "link", "set", self._link, "up" if up else "down"], check=True, capture_output=True)

    def run(self, *command: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", self.name, *command], capture_output=True, text=True, timeout=timeout
        )

    def delete(self) -> None:
        _delete_namespace(self.name)
        if self._link:
            subprocess.run(["ip", "link", "del", self._link], capture_output=True)

    def _remove_leftovers(self) -> None:
        """What an earlier run that was killed left with this number (its subnet would clash with ours)."""
        listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        for line in listing.splitlines():
            name = line.split()[0] if line.split() else ""
            if re.fullmatch(rf"scriba-t\d+-{self.number}", name):
                _delete_namespace(name)
        links = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
        for line in links.splitlines():
            if f" {self.outside}/30 " in line:
                subprocess.run(["ip", "link", "del", line.split()[1].split("@")[0]], capture_output=True)


def _delete_namespace(name: str) -> None:
    """End every process inside (an sshd, a worker), then the namespace, which takes its veth pair with it."""
    pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
