"""What the SSH side says when the address or the host's key is wrong (issue 38, low items): a malformed address is
refused before anything is tried, and a host key that changes in the middle of a session is reported as what it
is, against a real OpenSSH server on loopback (tests/cloud/sshd.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

from app.cloud.offload.base import OffloadConfig, OffloadTiming, RemoteSetup
from app.cloud.offload.ledger import Ledger
from app.cloud.offload.run import Offload
from app.cloud.offload.wording import describe_error
from app.cloud.providers.ssh_host import SshHostProvider
from app.cloud.remote.transport import HostKeyError, SshSession, TransportError, parse_ssh_url
from app.core.queue.jobs import JobOptions
from tests.cloud.sshd import LoopbackSshd, host_environment


@pytest.mark.parametrize(
    "url",
    ["ssh://root@[::1:22", "ssh://root@[::1", "ssh://root@[]:22", "ssh://root@[::1]x22", "ssh://root@[::1]:"],
)
def test_a_bracketed_host_that_is_not_closed_or_followed_by_a_port_is_refused(url: str) -> None:
    with pytest.raises(TransportError, match=r"ssh://user@\[::1\]:22") as caught:
        parse_ssh_url(url)
    assert url in str(caught.value)


def test_bracketed_addresses_that_are_well_formed_still_parse() -> None:
    assert (parse_ssh_url("ssh://me@[::1]:2222").host, parse_ssh_url("ssh://me@[::1]:2222").port) == ("::1", 2222)
    assert (parse_ssh_url("ssh://me@[fe80::1]").host, parse_ssh_url("ssh://me@[fe80::1]").port) == ("fe80::1", 22)


def test_a_host_key_that_changes_mid_session_says_what_had_been_sent(tmp_path: Path) -> None:
    """The upload had begun when the host came back with another key: "Nothing was uploaded" was not true."""
    server = LoopbackSshd(tmp_path / "sshd")
    server.start()
    try:
        recording = tmp_path / "long.wav"
        noise = np.random.default_rng(7).uniform(-0.1, 0.1, 16000 * 200).astype(np.float32)
        soundfile.write(recording, noise, 16000, subtype="FLOAT")  # about 12 MB: uploaded in many chunks
        changed: list[int] = []

        def change_the_key(session: SshSession, position: int, size: int) -> None:
            if not changed and position > size * 0.3:
                changed.append(position)
                server.restart(new_host_key=True)  # the same address answers with another machine's key
                session.drop()

        provider = SshHostProvider(parse_ssh_url(server.url, server.client_key))
        config = OffloadConfig(
            options=JobOptions(model="tiny.en", language="en"),
            key_file=server.client_key,
            known_hosts=server.write_known_hosts(tmp_path / "known_hosts"),
            pin_new_host=False,
            setup=RemoteSetup((sys.executable, "-m", "app"), tuple(host_environment(tmp_path).items())),
            timing=OffloadTiming(reconnect_wait_s=0.05),
            upload_hook=change_the_key,
        )
        offload = Offload(provider, provider.offer(), Ledger(tmp_path / "ledger.sqlite3"), config)
        with pytest.raises(HostKeyError) as caught:
            offload.run([recording])
    finally:
        server.stop()
    assert changed
    text = str(caught.value)
    assert "HOST KEY CHANGED" in text and "Nothing was uploaded" not in text
    assert "during the session" in text and "before the change" in text
    said = describe_error(caught.value)  # what the window shows
    assert "nothing was sent." not in said.lower() and "changed during the session" in said
