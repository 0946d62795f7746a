"""Ports of this machine made reachable on a node's own loopback, through the node's SSH connection.

The node connects to 127.0.0.1:PORT on its side; sshd there hands the connection to this process over the
encrypted SSH connection, and it is joined here to 127.0.0.1:LOCAL. sshd binds the port on the node's loopback
only (GatewayPorts is off by default), so nothing else on the node's network can reach it, and no port is
opened on this machine at all.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading

import paramiko

log = logging.getLogger(__name__)


class ReverseTunnels:
    """Remote forwards on one SSH transport; :meth:`close` (or the transport's end) closes them all."""

    def __init__(self, transport: paramiko.Transport) -> None:
        self._transport = transport
        self._targets: dict[int, int] = {}  # port on the node -> port on this machine's loopback
        self._lock = threading.Lock()

    def open(self, local_port: int) -> int:
        """Forward a free port on the node's loopback to ``local_port`` here; returns the node's port."""
        with self._lock:
            remote_port = self._transport.request_port_forward("127.0.0.1", 0, handler=self._accept)
            if not remote_port:
                raise paramiko.SSHException("the SSH server refused the port forward (AllowTcpForwarding no?)")
            self._targets[int(remote_port)] = local_port
        return int(remote_port)

    def _accept(self, channel: paramiko.Channel, origin: tuple[str, int], server: tuple[str, int]) -> None:
        with self._lock:
            local_port = self._targets.get(int(server[1]))
        if local_port is None:
            channel.close()
            return
        threading.Thread(target=_join, args=(channel, local_port), daemon=True, name="scriba-tunnel").start()

    def close(self) -> None:
        with self._lock:
            ports, self._targets = list(self._targets), {}
        for port in ports:
            with contextlib.suppress(Exception):  # the connection may be gone already: then so is the forward
                self._transport.cancel_port_forward("127.0.0.1", port)


def _join(channel: paramiko.Channel, local_port: int) -> None:
    """Copy bytes both ways between the SSH channel and a new connection to ``local_port`` until one side ends."""
    try:
        local = socket.create_connection(("127.0.0.1", local_port), timeout=10)
    except OSError as error:
        log.warning("tunnel to 127.0.0.1:%d: %s", local_port, error)
        channel.close()
        return
    local.settimeout(None)
    try:
        while True:
            readable, _, _ = select.select([local, channel], [], [], 30)
            if local in readable:
                data = local.recv(65536)
                if not data:
                    break
                channel.sendall(data)
            if channel in readable:
                data = channel.recv(65536)
                if not data:
                    break
                local.sendall(data)
    except (OSError, EOFError, paramiko.SSHException):
        pass
    finally:
        with contextlib.suppress(Exception):
            channel.close()
        with contextlib.suppress(Exception):
            local.close()
