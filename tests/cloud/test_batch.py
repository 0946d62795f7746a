"""A batch over two SSH hosts (issue 16, part 2), all real: two OpenSSH servers on loopback, the private Redis
that Scriba starts, a Celery worker per host reached only through its SSH reverse tunnel, the real engine.

Each host runs this checkout in an environment of its own (tests/cloud/sshd.py); the transcripts are compared
with a local run of the same files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import soundfile

from app.cloud.batch.broker import LocalBroker, command
from app.cloud.batch.run import Batch, BatchConfig, BatchNode, BatchTiming
from app.cloud.offload.base import RemoteSetup
from app.cloud.remote.transport import parse_ssh_url
from app.core.queue.jobs import JobOptions
from tests.cloud.sshd import LoopbackSshd, free_port, host_environment
from tests.test_cli import scriba

OPTIONS = JobOptions(model="tiny.en", language="en", diarize=True, diarizer="embedded", formats=("json",))


@pytest.fixture(autouse=True)
def _redis_server() -> None:
    # Not a skip: `make test` installs redis-server, so its absence is a broken set-up to report.
    assert shutil.which("redis-server"), "redis-server is missing: run `make test` (it installs it)"


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Any:
    servers = [LoopbackSshd(tmp_path_factory.mktemp(f"host{index}")) for index in range(2)]
    servers[0].start()
    # One key for both hosts, as a user's own machines usually have (`--identity` is given once).
    for name in ("client_key", "client_key.pub", "authorized_keys"):
        shutil.copy(servers[0].directory / name, servers[1].directory / name)
    servers[1].start()
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> list[Path]:
    folder = tmp_path_factory.mktemp("batch-inputs")
    paths = []
    for index in range(4):
        path = folder / f"call {index}.wav"
        shutil.copy(sample_dir / "sample.wav", path)
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def short_recordings(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> list[Path]:
    """Three 12-second stretches of the call: long enough to be killed mid-job, short enough to redo."""
    samples, rate = soundfile.read(sample_dir / "sample.wav", dtype="float32")
    folder = tmp_path_factory.mktemp("batch-short")
    paths = []
    for index in range(3):
        path = folder / f"part {index}.wav"
        soundfile.write(path, samples[(5 + 6 * index) * rate : (17 + 6 * index) * rate], rate)
        paths.append(path)
    return paths


def _batch(hosts: list[LoopbackSshd], tmp_path: Path, said: list[str], **timing: Any) -> Batch:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("".join(server.known_hosts_line() for server in hosts))
    setup = RemoteSetup((sys.executable, "-m", "app"), tuple(host_environment(tmp_path, numeric=True).items()))
    config = BatchConfig(OPTIONS, known_hosts, setup, BatchTiming(**timing))
    endpoints = [parse_ssh_url(server.url, server.client_key) for server in hosts]
    return Batch(endpoints, config, status=said.append)


def _workers_left() -> list[str]:
    listing = subprocess.run(["pgrep", "-af", "worker batch-node"], capture_output=True, text=True).stdout
    return [line for line in listing.splitlines() if "pgrep" not in line]


def test_every_file_is_done_once_over_two_hosts_and_nothing_is_left_running(
    hosts: list[LoopbackSshd], recordings: list[Path], corrupt_file: Path, tmp_path: Path
) -> None:
    """`scriba offload run FILES --host A --host B`: written where a local run writes, the same text."""
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("".join(server.known_hosts_line() for server in hosts))
    env = host_environment(tmp_path, numeric=True)
    common = ["--model", "tiny.en", "--language", "en", "--diarizer", "embedded", "-f", "txt,json"]
    result = scriba(
        "--data-dir",
        str(tmp_path / "data"),
        "offload",
        "run",
        *map(str, [*recordings, corrupt_file]),
        "--provider",
        "ssh",
        *("--host", hosts[0].url, "--host", hosts[1].url),
        *("--identity", str(hosts[0].client_key), "--known-hosts", str(known_hosts)),
        *("--remote-command", f"{sys.executable} -m app"),
        *(argument for name, value in env.items() for argument in ("--remote-env", f"{name}={value}")),
        *common,
        *("-o", str(tmp_path / "batch")),
    )
    assert result.returncode == 1, result.stderr  # one file is damaged: said, and the others done
    assert f"failed: {corrupt_file}" in result.stderr
    local = scriba("transcribe", str(recordings[0]), *common, "-o", str(tmp_path / "local"), "-q")
    assert local.returncode == 0, local.stderr
    expected = (tmp_path / "local" / f"{recordings[0].stem}.txt").read_text()
    for path in recordings:
        assert (tmp_path / "batch" / f"{path.stem}.txt").read_text() == expected
        assert json.loads((tmp_path / "batch" / f"{path.stem}.json").read_text())["source"] == str(path.absolute())
    # Every file answered once, by one node or the other (a job may start and end between two looks at the queue,
    # so "started" is not always seen; the answer always is).
    answered = re.findall(r"\[batch\] (node\d): (.+?) (?:done|failed)", result.stderr)
    assert sorted(name for _, name in answered) == sorted(path.name for path in [*recordings, corrupt_file])
    started = [name for _, name in re.findall(r"\[batch\] (node\d): (.+) started", result.stderr)]
    assert len(started) == len(set(started))
    assert not _workers_left()


def test_a_node_killed_mid_job_has_its_job_done_by_the_other(
    hosts: list[LoopbackSshd], short_recordings: list[Path], tmp_path: Path
) -> None:
    said: list[str] = []
    killed: list[str] = []
    batch = _batch(hosts, tmp_path, said)

    def kill_the_first_to_start(text: str) -> None:
        said.append(text)
        started = re.fullmatch(r"(node\d+): .+ started", text)
        if killed or started is None:
            return
        name = started.group(1)
        node = next(node for node in batch.nodes if node.name == name)
        assert node.pid is not None
        os.kill(node.pid, signal.SIGKILL)  # the host's worker dies with the job in hand, as on a preempted GPU
        killed.append(name)

    batch.status = kill_the_first_to_start
    result = batch.run(short_recordings)

    assert killed, said
    assert sorted(result.transcripts) == [0, 1, 2] and not result.failures, said
    assert any("goes to another node" in line for line in said), said
    survivor = next(node for node in batch.nodes if node.name != killed[0])
    assert survivor.jobs_done == 3
    assert not _workers_left()


def test_a_node_cannot_administer_the_broker() -> None:
    """The nodes' Redis user may use the queue but not the server: a hostile node cannot reconfigure it, load a
    module, read every key name at once or shut it down; the default user (no password) is off."""
    with LocalBroker() as broker:
        node = broker.node(broker.port)

        def ask(user: str, password: str, *words: str) -> bytes:
            with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as connection:
                connection.sendall(command("AUTH", user, password) + command(*words))
                answer = b""
                while answer.count(b"\r\n") < 2:
                    answer += connection.recv(4096)
                return answer.split(b"\r\n", 1)[1]

        assert ask(node.user, node.password, "LPUSH", "scriba-test", "x") == b":1\r\n"
        for words in (
            ("CONFIG", "SET", "dir", "/tmp"),
            ("MODULE", "LOAD", "/tmp/evil.so"),
            ("KEYS", "*"),
            ("FLUSHALL",),
            ("SHUTDOWN",),
            ("ACL", "SETUSER", "node", "+@all"),
        ):
            answer = ask(node.user, node.password, *words)
            assert answer.startswith(b"-NOPERM") or b"command not allowed" in answer, (words, answer)
        assert ask("default", "", "PING").startswith(b"-")
        assert broker.running
    assert not broker.running


def test_a_host_that_cannot_be_reached_is_left_out_in_one_line_and_the_others_work(
    hosts: list[LoopbackSshd], short_recordings: list[Path], tmp_path: Path
) -> None:
    said: list[str] = []
    batch = _batch(hosts[:1], tmp_path, said)
    batch.nodes.append(BatchNode("node2", parse_ssh_url(f"ssh://nobody@127.0.0.1:{free_port()}", hosts[0].client_key)))
    result = batch.run(short_recordings[:1])
    assert sorted(result.transcripts) == [0] and not result.failures, said
    left_out = [line for line in said if "left out" in line]
    assert len(left_out) == 1 and left_out[0].startswith("node2 (127.0.0.1) left out: ") and "\n" not in left_out[0]
    assert "refused" in left_out[0]
    assert not _workers_left()
