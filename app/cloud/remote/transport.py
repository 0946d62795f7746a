"""SSH to a remote machine (paramiko): verified host keys, resumable checked uploads, quoted commands.

Host keys are never accepted silently. A host the user gives (``--provider ssh``) must already be in a
known-hosts file; a machine Scriba has just rented has no known key yet, so its first key is pinned to
Scriba's own known-hosts file and any later key for it (a reconnect to a different machine on the same
address, or a man in the middle) aborts the job.

Known-hosts files are read the way OpenSSH writes them, markers included: a key on an ``@revoked`` line is
refused wherever it turns up (before anything is sent), and ``@cert-authority`` lines are skipped (Scriba does
not check host certificates, so a host known only through its CA counts as unknown and is refused as such). A
line that cannot be read is skipped with a warning, never a traceback.

Every remote command is built from an argument list with :func:`shlex.quote`, so file names with spaces,
quotes, ``$(...)``, ``;`` or newlines never reach a shell as code; uploaded files get neutral remote names
anyway (``in/0001.wav``), and the user's names stay on the user's machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import shlex
import socket
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paramiko

from app.core.errors import ScribaError

log = logging.getLogger(__name__)

CHUNK = 256 * 1024
# What a dropped connection looks like from paramiko: its own errors, a closed socket, or EOF mid-read.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (paramiko.SSHException, EOFError, OSError, socket.timeout)


class TransportError(ScribaError):
    """The remote machine cannot be used; the message says why and what to do."""


def connection_failure(endpoint: SshEndpoint, error: BaseException) -> str:
    """One line that says why the SSH connection to ``endpoint`` did not open, and what to check."""
    where = f"{endpoint.host}:{endpoint.port}"
    if isinstance(error, socket.gaierror):
        return f"cannot find the host {endpoint.host!r} (name lookup failed): check the address"
    if isinstance(error, ConnectionRefusedError) or "Unable to connect" in str(error):
        return f"{where} refused the connection: is its SSH server running, and is {endpoint.port} its port?"
    if isinstance(error, socket.timeout | TimeoutError):
        return f"{where} did not answer: check the address, the network, a VPN or a firewall"
    if isinstance(error, paramiko.SSHException) and "banner" in str(error):
        return f"{where} answered, but not as an SSH server (or too slowly): check the port"
    if isinstance(error, OSError) and error.strerror:
        return f"cannot reach {where}: {error.strerror}"
    text = str(error).strip().splitlines()
    return f"cannot connect to {where}: {type(error).__name__}{': ' + text[0] if text else ''}"


class NoSftpError(TransportError):
    """The connection is up but the server runs no SFTP subsystem: files go over the command channel instead."""


class HostKeyError(TransportError):
    """An unknown or changed host key: this connection was refused before anything was sent on it.
    ``mid_session``: the session had been connected to the host with its expected key before (what was sent then
    went to that machine)."""

    def __init__(self, message: str, *, mid_session: bool = False) -> None:
        super().__init__(message)
        self.mid_session = mid_session


@dataclass(frozen=True)
class SshEndpoint:
    host: str
    port: int = 22
    user: str = "root"
    key_file: Path | None = None  # the private key; None: the SSH agent and ~/.ssh defaults

    @property
    def known_hosts_name(self) -> str:
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"

    def __str__(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


def parse_ssh_url(url: str, key_file: Path | None = None) -> SshEndpoint:
    """``ssh://user@host:port`` (user defaults to root, port to 22)."""
    if not url.startswith("ssh://"):
        raise TransportError(f"'{url}' is not an SSH address: write it as ssh://user@host:port")
    rest = url[len("ssh://") :].rstrip("/")
    user, _, hostport = rest.rpartition("@")
    if hostport.startswith("["):
        # An IPv6 address: [address] or [address]:port, nothing else (a missing "]" once read as host "::1:22").
        host, closed, after = hostport[1:].partition("]")
        if not closed or not host or (after and (not after.startswith(":") or len(after) == 1)):
            raise TransportError(
                f"'{url}' is not an SSH address: write an IPv6 address in brackets, as ssh://user@[::1]:22"
            )
        port = after[1:]
    else:
        host, _, port = hostport.partition(":")
    if not host:
        raise TransportError(f"'{url}' has no host: write it as ssh://user@host:port")
    try:
        port_number = int(port) if port else 22
    except ValueError:
        raise TransportError(f"'{url}': the port '{port}' is not a number") from None
    return SshEndpoint(host, port_number, user or "root", key_file)


def fingerprint(key: paramiko.PKey) -> str:
    """The SHA256 fingerprint as OpenSSH prints it (``ssh-keygen -lf``)."""
    import base64

    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


@dataclass
class KnownHosts:
    """A known-hosts file as paramiko can use it, plus what paramiko cannot read."""

    keys: paramiko.HostKeys
    revoked: set[tuple[str, str]]  # (key type, base64) of every @revoked key
    cert_authority_lines: int  # @cert-authority lines, skipped

    def is_revoked(self, key: paramiko.PKey) -> bool:
        return (key.get_name(), key.get_base64()) in self.revoked


def read_known_hosts(path: Path, into: paramiko.HostKeys | None = None) -> KnownHosts:
    """Read an OpenSSH known-hosts file (its keys added to ``into`` when given); a missing file is an empty one."""
    known = KnownHosts(into if into is not None else paramiko.HostKeys(), set(), 0)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return known
    except OSError as error:
        raise TransportError(f"cannot read the known-hosts file {path}: {error.strerror or error}") from None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("@"):
            marker, *fields = line.split()
            if marker == "@revoked" and len(fields) >= 3:
                known.revoked.add((fields[1], fields[2]))
            elif marker == "@cert-authority":
                known.cert_authority_lines += 1
            else:
                log.warning("%s line %d: unknown marker %s, line skipped", path, number, marker)
            continue
        try:
            entry = paramiko.hostkeys.HostKeyEntry.from_line(line, number)
        except Exception as error:  # paramiko's InvalidHostKey, bad base64, an unsupported key type
            log.warning("%s line %d cannot be read (%s): skipped", path, number, type(error).__name__)
            continue
        if entry is None or entry.key is None:
            continue
        for hostname in entry.hostnames:
            known.keys.add(hostname, entry.key.get_name(), entry.key)
    return known


def _revoked_error(endpoint: SshEndpoint, known_hosts: Path, key: paramiko.PKey) -> HostKeyError:
    return HostKeyError(
        f"The host key of {endpoint.host}:{endpoint.port} ({key.get_name()} {fingerprint(key)}) is marked @revoked "
        f"in {known_hosts}: refusing to connect. Nothing was sent. Ask the machine's owner for its new key."
    )


class _RefuseUnknown(paramiko.MissingHostKeyPolicy):
    def __init__(self, endpoint: SshEndpoint, known_hosts: Path, known: KnownHosts) -> None:
        self.endpoint = endpoint
        self.known_hosts = known_hosts
        self.known = known

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if self.known.is_revoked(key):
            raise _revoked_error(self.endpoint, self.known_hosts, key)
        port = "" if self.endpoint.port == 22 else f"-p {self.endpoint.port} "
        ca = (
            " (Scriba does not check host certificates: the @cert-authority lines there are not used.)"
            if self.known.cert_authority_lines
            else ""
        )
        raise HostKeyError(
            f"The host key of {self.endpoint.host}:{self.endpoint.port} is not in {self.known_hosts} "
            f"({key.get_name()} {fingerprint(key)}).{ca} Check that fingerprint with the machine's owner, then add "
            f"it: ssh-keyscan {port}{self.endpoint.host} >> {self.known_hosts}"
        )


class _PinFirstKey(paramiko.MissingHostKeyPolicy):
    """For a machine rented moments ago: its first key is recorded; later keys must match (checked by paramiko)."""

    def __init__(self, endpoint: SshEndpoint, known_hosts: Path, known: KnownHosts) -> None:
        self.endpoint = endpoint
        self.known_hosts = known_hosts
        self.known = known

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if self.known.is_revoked(key):
            raise _revoked_error(self.endpoint, self.known_hosts, key)
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
        # Appended, not rewritten: the file's other lines (markers, comments) stay as they are.
        with self.known_hosts.open("a", encoding="utf-8") as handle:
            handle.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)
        log.info("pinned host key of new instance %s: %s", hostname, fingerprint(key))


def forget_host(known_hosts: Path, endpoint: SshEndpoint) -> None:
    """Drop a pinned key once its instance is terminated: the address will belong to someone else's machine."""
    if not known_hosts.is_file():
        return
    lines = known_hosts.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    # Pinned lines are written unhashed, one host per line; every other line (markers too) is kept as it was.
    kept = [line for line in lines if line.split(" ", 1)[0] != endpoint.known_hosts_name]
    if len(kept) != len(lines):
        known_hosts.write_text("".join(kept), encoding="utf-8")


class SshSession:
    """One SSH connection; files over SFTP, or over the command channel (``cat``) where the server has no SFTP.

    ``pin_new_host`` is for freshly rented machines only."""

    def __init__(
        self,
        endpoint: SshEndpoint,
        known_hosts: Path,
        *,
        pin_new_host: bool = False,
        connect_timeout_s: float = 15.0,
    ) -> None:
        self.endpoint = endpoint
        self.known_hosts = known_hosts
        self.pin_new_host = pin_new_host
        self.connect_timeout_s = connect_timeout_s
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        # Learnt once per session: some hardened or minimal images run sshd without the SFTP subsystem.
        self.has_sftp = True
        self._was_connected = False  # a key refused after this is a key that changed in the middle of the work

    # ----------------------------------------------------------------------------------------- connection

    def connect(self) -> None:
        self.close()
        client = paramiko.SSHClient()
        known = read_known_hosts(self.known_hosts, into=client.get_host_keys())
        client.set_missing_host_key_policy(
            _PinFirstKey(self.endpoint, self.known_hosts, known)
            if self.pin_new_host
            else _RefuseUnknown(self.endpoint, self.known_hosts, known)
        )
        try:
            client.connect(
                self.endpoint.host,
                port=self.endpoint.port,
                username=self.endpoint.user,
                key_filename=str(self.endpoint.key_file) if self.endpoint.key_file else None,
                timeout=self.connect_timeout_s,
                banner_timeout=self.connect_timeout_s,
                auth_timeout=self.connect_timeout_s,
                allow_agent=self.endpoint.key_file is None,
                look_for_keys=self.endpoint.key_file is None,
            )
        except paramiko.BadHostKeyException as error:
            client.close()
            where = f"{self.endpoint.host}:{self.endpoint.port}"
            keys = f"expected {fingerprint(error.expected_key)}, got {fingerprint(error.key)}"
            if self._was_connected:
                raise HostKeyError(
                    f"HOST KEY CHANGED for {where} during the session: {keys}. Refusing to reconnect: this may be a "
                    "different machine or someone in between. Nothing was sent after the change; what was sent "
                    "before the change (files uploaded so far, the job) went to the machine with the expected key.",
                    mid_session=True,
                ) from None
            raise HostKeyError(
                f"HOST KEY CHANGED for {where}: {keys}. Refusing to connect: this may be a different machine or "
                "someone in between. Nothing was uploaded."
            ) from None
        except HostKeyError:
            client.close()
            raise
        except paramiko.AuthenticationException as error:
            client.close()
            raise TransportError(
                f"{self.endpoint}: the key {self.endpoint.key_file or '(agent/default)'} was refused ({error})"
            ) from None
        transport = client.get_transport()
        assert transport is not None
        server_key = transport.get_remote_server_key()
        if known.is_revoked(server_key):  # a known host whose key was revoked since: refused all the same
            client.close()
            raise _revoked_error(self.endpoint, self.known_hosts, server_key)
        transport.set_keepalive(15)  # a NAT that forgets idle connections would otherwise cut a long job
        self._client = client
        self._was_connected = True

    def close(self) -> None:
        if self._sftp is not None:
            with contextlib.suppress(Exception):
                self._sftp.close()
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
        self._sftp, self._client = None, None

    @property
    def connected(self) -> bool:
        transport = self._client.get_transport() if self._client else None
        return bool(transport and transport.is_active())

    @property
    def transport(self) -> paramiko.Transport:
        transport = self._client.get_transport() if self._client else None
        if transport is None or not transport.is_active():
            raise TransportError(f"{self.endpoint}: not connected")
        return transport

    def drop(self) -> None:
        """Cut the connection abruptly (what a network failure does); used by tests of the reconnect path."""
        transport = self._client.get_transport() if self._client else None
        if transport is not None:
            transport.close()

    @property
    def sftp(self) -> paramiko.SFTPClient:
        if self._client is None:
            raise TransportError("not connected")
        if self._sftp is None:
            try:
                self._sftp = self._client.open_sftp()
            except paramiko.SSHException:
                transport = self._client.get_transport()
                if transport is None or not transport.is_active():
                    raise  # the connection itself dropped: the caller's reconnect path handles that
                # The connection is up but the server closed the SFTP channel: its sshd runs no SFTP subsystem.
                raise NoSftpError(
                    f"{self.endpoint}: the SSH server offers no SFTP (file transfer). Enable it in the host's "
                    "/etc/ssh/sshd_config with `Subsystem sftp internal-sftp` (or the sftp-server path), then "
                    "restart sshd."
                ) from None
        return self._sftp

    def _files(self) -> paramiko.SFTPClient | None:
        """SFTP when the server offers it; None: use the command channel (``cat``, ``tail``, ``wc``)."""
        if not self.has_sftp:
            return None
        try:
            return self.sftp
        except NoSftpError:
            log.info("%s has no SFTP: files go over the command channel", self.endpoint)
            self.has_sftp = False
            return None

    # ----------------------------------------------------------------------------------------- commands

    def run(self, argv: Sequence[str], *, check: bool = True, timeout_s: float = 120.0) -> tuple[int, str, str]:
        """Run a command given as arguments (each quoted); returns exit status, stdout, stderr."""
        return self.run_shell(quote(argv), check=check, timeout_s=timeout_s)

    def run_shell(self, command: str, *, check: bool = True, timeout_s: float = 120.0) -> tuple[int, str, str]:
        """Run a shell line built only from :func:`quote`d parts and fixed text (never raw user input)."""
        if self._client is None:
            raise TransportError("not connected")
        _, stdout, stderr = self._client.exec_command(command, timeout=timeout_s)
        out = stdout.read().decode(errors="replace")
        err = stderr.read().decode(errors="replace")
        status = stdout.channel.recv_exit_status()
        if check and status != 0:
            raise TransportError(f"remote command failed ({status}): {command[:200]}: {err.strip()[-500:]}")
        return status, out, err

    # ----------------------------------------------------------------------------------------- files

    def upload(
        self,
        local: Path,
        remote: str,
        *,
        on_bytes: Callable[[int, int], None] | None = None,
    ) -> int:
        """Upload ``local`` to ``remote``, continuing a partial upload; returns the bytes sent this time.

        The remote sha256 is compared with the local one at the end; a mismatch restarts the file once.
        """
        size = local.stat().st_size
        for attempt in range(2):
            offset = self._remote_size(remote)
            if offset > size:
                offset = 0  # not our partial file: start over
            sent = self._send_from(local, remote, offset, size, on_bytes)
            if self.remote_sha256(remote) == sha256_file(local):
                return sent
            log.warning("sha256 of %s differs after upload (attempt %d): uploading it again", remote, attempt + 1)
            self.remove(remote)
        raise TransportError(f"{local.name}: the uploaded copy does not match (sha256) after two attempts")

    def remove(self, remote: str) -> None:
        files = self._files()
        if files is None:
            self.run(["rm", "-f", "--", remote])
            return
        with contextlib.suppress(FileNotFoundError):
            files.remove(remote)

    def _remote_size(self, remote: str) -> int:
        files = self._files()
        if files is None:
            path = quote([remote])
            _, out, _ = self.run_shell(
                f"if [ ! -e {path} ]; then echo 0; elif [ -f {path} ]; then wc -c < {path}; else echo not-a-file; fi"
            )
            if out.strip() == "not-a-file":
                raise TransportError(f"remote path {remote} exists and is not a file")
            return int(out.strip() or 0)
        try:
            attributes = files.stat(remote)
        except FileNotFoundError:
            return 0
        if attributes.st_mode is not None and not stat.S_ISREG(attributes.st_mode):
            raise TransportError(f"remote path {remote} exists and is not a file")
        return int(attributes.st_size or 0)

    def _send_from(
        self, local: Path, remote: str, offset: int, size: int, on_bytes: Callable[[int, int], None] | None
    ) -> int:
        sent = 0
        files = self._files()
        with local.open("rb") as source:
            source.seek(offset)
            position = offset
            with contextlib.ExitStack() as stack:
                if files is not None:
                    target = stack.enter_context(files.open(remote, "ab" if offset else "wb"))
                    target.set_pipelined(True)  # don't wait for each chunk's acknowledgement: several times faster
                    write: Callable[[bytes], object] = target.write
                else:
                    command = f"cat {'>>' if offset else '>'} {quote([remote])}"
                    channel = stack.enter_context(self._command_channel(command))
                    write = channel.sendall
                while chunk := source.read(CHUNK):
                    write(chunk)
                    position += len(chunk)
                    sent += len(chunk)
                    if on_bytes is not None:
                        on_bytes(position, size)
        return sent

    def _started(self, command: str) -> paramiko.Channel:
        """A channel of its own running ``command`` (a dropped connection raises what the reconnect path expects)."""
        if self._client is None:
            raise TransportError("not connected")
        transport = self._client.get_transport()
        if transport is None or not transport.is_active():
            raise paramiko.SSHException("the connection is closed")
        channel = transport.open_session()
        try:
            channel.exec_command(command)
        except BaseException:
            channel.close()
            raise
        return channel

    @contextlib.contextmanager
    def _command_channel(self, command: str) -> Iterator[paramiko.Channel]:
        """A command whose standard input the caller writes; its end of input, exit status and errors are checked."""
        channel = self._started(command)
        try:
            yield channel
            channel.shutdown_write()
            status = channel.recv_exit_status()
            if status != 0:
                error = channel.makefile_stderr("rb").read().decode(errors="replace").strip()
                raise TransportError(f"remote command failed ({status}): {command[:200]}: {error[-300:]}")
        finally:
            channel.close()

    def _read_command(self, command: str, into: Any) -> int:
        """Stream a command's standard output into ``into``; returns its exit status."""
        channel = self._started(command)
        try:
            while chunk := channel.recv(CHUNK):
                into.write(chunk)
            return int(channel.recv_exit_status())
        finally:
            channel.close()

    def remote_sha256(self, remote: str) -> str:
        _, out, _ = self.run(["sha256sum", "--", remote])
        return out.split()[0] if out.strip() else ""

    def download(self, remote: str, local: Path) -> None:
        """Download to a temporary name beside ``local``, then rename: never a half-written result."""
        local.parent.mkdir(parents=True, exist_ok=True)
        partial = local.with_name(f".{local.name}.part")
        files = self._files()
        try:
            if files is not None:
                files.get(remote, str(partial))
            else:
                with partial.open("wb") as handle:
                    status = self._read_command(f"cat -- {quote([remote])}", handle)
                if status != 0:
                    raise TransportError(f"could not read {remote} on {self.endpoint} (cat exited with {status})")
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        partial.replace(local)

    def read_from(self, remote: str, offset: int) -> bytes:
        """The bytes of ``remote`` after ``offset`` (empty when it does not exist yet)."""
        files = self._files()
        if files is None:
            buffer = io.BytesIO()
            path = quote([remote])
            self._read_command(f"if [ -f {path} ]; then tail -c +{int(offset) + 1} -- {path}; fi", buffer)
            return buffer.getvalue()
        try:
            with files.open(remote, "rb") as handle:
                handle.seek(offset)
                return bytes(handle.read())
        except FileNotFoundError:
            return b""

    def write_text(self, remote: str, text: str, *, private: bool = False) -> None:
        """Create or replace a small remote file; ``private``: only the remote user can read it, from the start."""
        files = self._files()
        if files is None:
            umask = "umask 077 && " if private else ""
            with self._command_channel(f"{umask}cat > {quote([remote])}") as channel:
                channel.sendall(text.encode("utf-8"))
            return
        with files.open(remote, "w") as handle:
            if private:
                handle.chmod(0o600)
            handle.write(text)

    def modified_at(self, remote: str) -> float | None:
        """The remote file's modification time (seconds since the epoch), or None when it does not exist."""
        files = self._files()
        if files is None:
            status, out, _ = self.run(["stat", "-c", "%Y", "--", remote], check=False)
            return float(out.strip()) if status == 0 and out.strip().isdigit() else None
        try:
            return float(files.stat(remote).st_mtime or time.time())
        except FileNotFoundError:
            return None

    def touch(self, remote: str) -> None:
        files = self._files()
        if files is None:
            self.run(["touch", "--", remote])
            return
        now = time.time()
        try:
            files.utime(remote, (now, now))
        except FileNotFoundError:
            with files.open(remote, "wb"):
                pass


def quote(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(str(part)) for part in argv)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def session(endpoint: SshEndpoint, known_hosts: Path, **kwargs: Any) -> Iterator[SshSession]:
    opened = SshSession(endpoint, known_hosts, **kwargs)
    opened.connect()
    try:
        yield opened
    finally:
        opened.close()
