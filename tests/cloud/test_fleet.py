"""A fleet over two SSH hosts (issue 16, part 2), all real: two OpenSSH servers on loopback, the private Redis
that Scriba starts, a Celery worker per host reached only through its SSH reverse tunnel, the real engine.

Each host runs this checkout in an environment of its own (tests/cloud/sshd.py); the transcripts are compared
with a local run of the same files.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile

from app.cloud.fleet.broker import LocalBroker, command
from app.cloud.fleet.run import Fleet, FleetConfig, FleetNode, FleetTiming
from app.cloud.offload.base import RemoteSetup
from app.cloud.remote.transport import parse_ssh_url
from app.core.queue.jobs import JobOptions
from tests.cloud.runpod_pods import ReplayedPods
from tests.cloud.sshd import LoopbackSshd, NetworkNamespace, free_port, host_environment
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
    folder = tmp_path_factory.mktemp("fleet-inputs")
    paths = []
    for index in range(4):
        path = folder / f"call {index}.wav"
        shutil.copy(sample_dir / "sample.wav", path)
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def long_recording(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> Path:
    """The call five times over (150 s), about 10 s warm: the fleet ends with no node released only when the two
    nodes' cold first jobs end about that far apart."""
    samples, rate = soundfile.read(sample_dir / "sample.wav", dtype="float32")
    path = tmp_path_factory.mktemp("fleet-long") / "call five times.wav"
    soundfile.write(path, np.tile(samples, 5), rate)
    return path


@pytest.fixture(scope="module")
def short_recordings(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> list[Path]:
    """Three 12-second stretches of the call: long enough to be killed mid-job, short enough to redo."""
    samples, rate = soundfile.read(sample_dir / "sample.wav", dtype="float32")
    folder = tmp_path_factory.mktemp("fleet-short")
    paths = []
    for index in range(3):
        path = folder / f"part {index}.wav"
        soundfile.write(path, samples[(5 + 6 * index) * rate : (17 + 6 * index) * rate], rate)
        paths.append(path)
    return paths


def _fleet(hosts: list[LoopbackSshd], tmp_path: Path, said: list[str], **timing: Any) -> Fleet:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("".join(server.known_hosts_line() for server in hosts))
    setup = RemoteSetup((sys.executable, "-m", "app"), tuple(host_environment(tmp_path, numeric=True).items()))
    config = FleetConfig(OPTIONS, known_hosts, setup, FleetTiming(**timing))
    endpoints = [parse_ssh_url(server.url, server.client_key) for server in hosts]
    return Fleet(endpoints, config, status=said.append)


def _workers_left() -> list[str]:
    listing = subprocess.run(["pgrep", "-af", "worker fleet-node"], capture_output=True, text=True).stdout
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
        *("-o", str(tmp_path / "fleet")),
    )
    assert result.returncode == 1, result.stderr  # one file is damaged: said, and the others done
    assert f"failed: {corrupt_file}" in result.stderr
    local = scriba("transcribe", str(recordings[0]), *common, "-o", str(tmp_path / "local"), "-q")
    assert local.returncode == 0, local.stderr
    expected = (tmp_path / "local" / f"{recordings[0].stem}.txt").read_text()
    for path in recordings:
        assert (tmp_path / "fleet" / f"{path.stem}.txt").read_text() == expected
        assert json.loads((tmp_path / "fleet" / f"{path.stem}.json").read_text())["source"] == str(path.absolute())
    # Every file answered once, by one node or the other (a job may start and end between two looks at the queue,
    # so "started" is not always seen; the answer always is).
    answered = re.findall(r"\[fleet\] (node\d): (.+?) (?:done|failed)", result.stderr)
    assert sorted(name for _, name in answered) == sorted(path.name for path in [*recordings, corrupt_file])
    started = [name for _, name in re.findall(r"\[fleet\] (node\d): (.+) started", result.stderr)]
    assert len(started) == len(set(started))
    assert not _workers_left()


def test_a_node_killed_mid_job_has_its_job_done_by_the_other(
    hosts: list[LoopbackSshd], short_recordings: list[Path], tmp_path: Path
) -> None:
    said: list[str] = []
    killed: list[str] = []
    fleet = _fleet(hosts, tmp_path, said)

    def kill_the_first_to_start(text: str) -> None:
        said.append(text)
        started = re.fullmatch(r"(node\d+): .+ started", text)
        if killed or started is None:
            return
        name = started.group(1)
        node = next(node for node in fleet.nodes if node.name == name)
        assert node.pid is not None
        os.kill(node.pid, signal.SIGKILL)  # the host's worker dies with the job in hand, as on a preempted GPU
        killed.append(name)

    fleet.status = kill_the_first_to_start
    result = fleet.run(short_recordings)

    assert killed, said
    assert sorted(result.transcripts) == [0, 1, 2] and not result.failures, said
    assert any("goes to another node" in line for line in said), said
    survivor = next(node for node in fleet.nodes if node.name != killed[0])
    assert survivor.jobs_done == 3
    assert not _workers_left()


@pytest.mark.parametrize("action", ["fleet-node", "batch-node"])
def test_the_node_action_answers_to_its_old_name_too(action: str) -> None:
    """`scriba worker batch-node` (the name before "batch" was kept for batched decoding) still starts a node:
    both names reach the node, which refuses to start without the broker password on standard input."""
    result = scriba("worker", action, "--broker-port", "1", "--files-port", "2", "--name", "node1", stdin="")
    assert result.returncode == 2, result.stderr
    assert "no broker password and signing key on standard input" in result.stderr
    assert "Traceback" not in result.stderr


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
    fleet = _fleet(hosts[:1], tmp_path, said)
    fleet.nodes.append(FleetNode("node2", parse_ssh_url(f"ssh://nobody@127.0.0.1:{free_port()}", hosts[0].client_key)))
    result = fleet.run(short_recordings[:1])
    assert sorted(result.transcripts) == [0] and not result.failures, said
    left_out = [line for line in said if "left out" in line]
    assert len(left_out) == 1 and left_out[0].startswith("node2 (127.0.0.1) left out: ") and "\n" not in left_out[0]
    assert "refused" in left_out[0]
    assert not _workers_left()


def test_a_node_whose_queue_stops_answering_ends_itself_and_its_machine(tmp_path: Path) -> None:
    """The computer that started the fleet is gone (here: its broker stops): the node's watchdog runs the
    provider's self-termination command (here one that leaves a mark) and the worker exits, instead of retrying
    the broker forever on a machine that bills."""
    mark = tmp_path / "machine-ended"
    with LocalBroker() as broker:
        node = subprocess.Popen(
            [
                *(sys.executable, "-m", "app", "worker", "fleet-node"),
                *("--broker-port", str(broker.port), "--files-port", str(free_port()), "--name", "node1"),
                *("--broker-timeout", "2", "--on-expire", "touch", str(mark)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        assert node.stdin is not None and node.stdout is not None
        node.stdin.write(broker.node_password + "\n" + "node-signing-key\n")
        node.stdin.flush()
        assert '"ready": true' in node.stdout.readline()
        broker.stop()
        try:
            code = node.wait(timeout=60)
        finally:
            node.kill()
    output = node.stdout.read()
    assert code == 3, output
    assert mark.exists(), output
    assert "has not answered for 2 s" in output


@pytest.mark.parametrize("kill", [False, True], ids=["idle-release", "a-node-killed"])
def test_rented_machines_share_the_queue_and_each_ends_as_soon_as_it_is_idle(
    hosts: list[LoopbackSshd], short_recordings: list[Path], long_recording: Path, tmp_path: Path, kill: bool
) -> None:
    """`offload run --gpus 2` on RunPod (its documented API replayed; each "pod" is a real sshd here): both pods in
    the ledger, both running the queue, the one the queue has nothing left for destroyed while the other still
    works, both destroyed and verified, the ledger closed, nothing left running. ``kill``: the first node to
    start a file is killed: its file is done by the other (which must not be released while that file waits,
    whatever the dead node's copy still says), and the dead node's pod is destroyed at once."""
    import time

    from app.cloud.fleet.rented import RentedFleet
    from app.cloud.offload.base import OffloadConfig
    from app.cloud.offload.ledger import Ledger
    from app.cloud.providers import RunPod
    from app.cloud.types import Offer
    from tests.cloud.replay_server import ReplayServer

    pods = ReplayedPods([server.port for server in hosts])
    said: list[tuple[float, str]] = []
    killed: list[str] = []

    def hear(text: str) -> None:
        said.append((time.monotonic(), text))
        started = re.fullmatch(r"(node\d+): .+ started", text)
        if kill and started and not killed and fleet._fleet is not None:
            node = next(node for node in fleet._fleet.nodes if node.name == started.group(1))
            assert node.pid is not None
            os.kill(node.pid, signal.SIGKILL)
            killed.append(node.name)

    with ReplayServer() as api:
        pods.route(api)
        provider = RunPod("runpod-key-DO-NOT-LEAK", base_url=api.url + "/v2")
        offer = Offer(
            "runpod", "NVIDIA GeForce RTX 4090", "RTX 4090", 1, 24.0, 0.69, None, "per-second", 1.0,
            "api:runpod", "2026-11-24", True,
        )  # fmt: skip
        ledger = Ledger(tmp_path / "ledger.sqlite3")
        config = OffloadConfig(
            options=OPTIONS,
            key_file=hosts[0].client_key,
            public_key=hosts[0].client_key.with_suffix(".pub").read_text().strip(),
            known_hosts=tmp_path / "scriba_known_hosts",
            pin_new_host=True,
            setup=RemoteSetup((sys.executable, "-m", "app"), tuple(host_environment(tmp_path, numeric=True).items())),
            budget_usd=5.0,
        )
        fleet = RentedFleet(
            provider,
            [offer, offer],
            ledger,
            config,
            status=hear,
            timing=FleetTiming(connect_wait_s=30.0),
        )
        # The last file is the longest: whichever node does not take it has nothing left while it runs.
        result = fleet.run(short_recordings if kill else [*short_recordings[:2], long_recording])
        assert not api.unmatched

    lines = [text for _, text in said]
    assert sorted(result.transcripts) == [0, 1, 2] and not result.failures, lines
    assert pods.created == ["pod0", "pod1"] and sorted(pods.ended_at) == ["pod0", "pod1"], lines
    last_done = max(when for when, text in said if re.fullmatch(r"node\d: .+ done", text))
    assert min(pods.ended_at.values()) < last_done, lines  # one pod ended while the other still transcribed
    if kill:
        assert killed and any("goes to another node" in line for line in lines), lines
        assert not any("released" in line for line in lines), lines  # the survivor had work to the end
    else:
        assert len([text for text in lines if "released: nothing left for it" in text]) == 1, lines
    assert [item.state for item in fleet.teardowns] == ["terminated", "terminated"]
    assert all(not entry.is_open for entry in ledger.entries()) and len(ledger.entries()) == 2
    assert 0 < result.cost_usd < 0.69 * 2 * result.seconds / 3600 + 0.01
    assert not _workers_left()


CRASHING_FLEET = """
import sys
from pathlib import Path
from app.cloud.fleet.rented import RentedFleet
from app.cloud.offload.base import OffloadConfig
from app.cloud.offload.ledger import Ledger
from app.cloud.providers import RunPod
from app.cloud.types import Offer
from app.core.queue.jobs import JobOptions

url, ledger_path, recording = sys.argv[1:4]
offer = Offer("runpod", "NVIDIA GeForce RTX 3090", "RTX 3090", 1, 24.0, 0.44, None, "per-second", 1.0,
              "api:runpod", "2026-11-24", True)
config = OffloadConfig(options=JobOptions(model="tiny.en"), known_hosts=Path(ledger_path).with_name("known_hosts"),
                       pin_new_host=True, public_key="ssh-ed25519 AAAA scriba")
RentedFleet(RunPod("runpod-key", base_url=url), [offer] * 3, Ledger(Path(ledger_path)), config, print).run(
    [Path(recording)])
"""


def test_a_fleet_killed_while_its_machines_boot_leaves_all_of_them_to_the_sweep(
    tmp_path: Path, sample_dir: Path
) -> None:
    """SIGKILL (nothing in the process runs) once three pods exist: the next start's sweep finds all three in the
    ledger and destroys each one."""
    import time

    from app.cloud.offload.ledger import Ledger
    from app.cloud.providers import RunPod
    from tests.cloud.replay_server import ReplayServer

    pods = ReplayedPods([0, 0, 0], booting=True)  # booting for ever: the crash comes first

    ledger_path = tmp_path / "cloud-ledger.sqlite3"
    with ReplayServer() as api:
        pods.route(api)
        child = subprocess.Popen(
            [sys.executable, "-c", CRASHING_FLEET, api.url + "/v2", str(ledger_path), str(sample_dir / "sample.wav")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        # Each instance id is written down before its first status poll: once all three are polled, all are known.
        while time.monotonic() < deadline and not all(api.calls("GET", f"/v2/pods/pod{i}") for i in range(3)):
            time.sleep(0.1)
        child.kill()
        child.wait()
        assert len(pods.created) == 3 and not pods.ended_at
        ledger = Ledger(ledger_path)
        assert sorted(entry.instance_id or "" for entry in ledger.open_entries()) == ["pod0", "pod1", "pod2"]
        messages: list[str] = []
        ledger.sweep_orphans({"runpod": RunPod("runpod-key", base_url=api.url + "/v2")}, messages.append, poll_s=0.1)
        assert not api.unmatched
    assert sorted(pods.ended_at) == ["pod0", "pod1", "pod2"], messages
    assert not ledger.open_entries(), messages


def test_a_long_file_is_cut_across_both_hosts_and_its_speakers_stay_consistent(
    hosts: list[LoopbackSshd], sample_dir: Path, recordings: list[Path], tmp_path: Path
) -> None:
    """A recording of six voices (pyannote's real call, a four-voice espeak-ng meeting, the call again: its two
    speakers come back after the meeting) cut into pieces that go to both hosts, beside a whole file: the
    stitched transcript's who-spoke-when is as good as one run over the whole file (DER against the truth at
    most 0.05 above it, the same number of speakers), and the call's speakers keep their labels when they return.
    """
    from app.core.engine.pipeline import Engine
    from tests import metrics, synth

    call, rate = soundfile.read(sample_dir / "sample.wav", dtype="float32")
    call_turns = [(start, end, f"call_{who}") for start, end, who in _rttm(sample_dir / "sample.rttm")]
    meeting, utterances = synth.meeting(4, 14)
    gap = np.zeros(rate, dtype=np.float32)
    parts = [call, gap, meeting.astype(np.float32), gap, call]
    samples = np.concatenate(parts)
    offsets = np.cumsum([0, *(len(part) for part in parts)]) / rate
    truth = [(offsets[0] + s, offsets[0] + e, who) for s, e, who in call_turns]
    truth += [(offsets[2] + u.start, offsets[2] + u.end, f"espeak_{u.speaker}") for u in utterances]
    truth += [(offsets[4] + s, offsets[4] + e, who) for s, e, who in call_turns]
    long_file = synth.write_wav(tmp_path / "long meeting.wav", samples)

    said: list[str] = []
    fleet = _fleet(hosts, tmp_path, said, piece_s=45.0, overlap_s=8.0)
    result = fleet.run([long_file, recordings[0]])
    assert sorted(result.transcripts) == [0, 1] and not result.failures, said
    pieces = [line for line in said if re.fullmatch(r"node\d: long meeting\.wav \(part \d of \d\) started", line)]
    assert {line.split(":")[0] for line in pieces} == {"node1", "node2"}, said  # both hosts took pieces
    stitched = result.transcripts[0]
    assert stitched.source == str(long_file.absolute()) and abs(stitched.duration - len(samples) / rate) < 0.01

    local = Engine().run(long_file, OPTIONS.to_pipeline(None))
    reference = metrics.turns_annotation(truth)

    def der_and_count(transcript: Any) -> tuple[float, int]:
        turns = [(t.start, t.end, t.speaker) for t in transcript.diarization.turns]
        return metrics.der(reference, metrics.turns_annotation(turns)), len({who for _, _, who in turns})

    (fleet_der, fleet_found), (local_der, local_found) = der_and_count(stitched), der_and_count(local)
    assert fleet_der <= local_der + 0.05, (fleet_der, local_der, stitched.diarization.reason)
    assert fleet_found == local_found, (fleet_found, local_found)
    assert "agree on" in stitched.diarization.reason

    # The call's speakers, heard first in the first piece and again in the last: the same labels both times.
    def who_speaks(start: float, end: float) -> str:
        overlap: dict[str, float] = {}
        for turn in stitched.diarization.turns:
            shared = min(end, turn.end) - max(start, turn.start)
            if shared > 0:
                overlap[turn.speaker] = overlap.get(turn.speaker, 0.0) + shared
        return max(overlap, key=overlap.__getitem__) if overlap else "?"

    for start, end, _ in call_turns:
        if end - start > 2.0:
            assert who_speaks(offsets[0] + start, offsets[0] + end) == who_speaks(offsets[4] + start, offsets[4] + end)
    assert not _workers_left()


def _rttm(path: Path) -> list[tuple[float, float, str]]:
    from tests.real_speech import rttm_turns

    return rttm_turns(path)


def test_answers_a_hostile_node_forges_in_the_queue_are_refused(
    hosts: list[LoopbackSshd], short_recordings: list[Path], tmp_path: Path
) -> None:
    """A node holds the broker's node password, so it can write the queue's result keys: here it reads the
    queued jobs' ids (LRANGE) and writes a finished answer for each before any node has run it, one claiming to
    come from another node, one with no signature. Neither is believed: those files fail, saying why, nothing
    forged is written, and the fleet ends."""
    said: list[str] = []
    fleet = _fleet(hosts[:1], tmp_path, said)
    forged: list[str] = []

    def forge_on_queue(text: str) -> None:
        said.append(text)
        if not re.fullmatch(r"\d+ job\(s\) queued for .*", text) or fleet.broker is None:
            return
        import redis

        node = fleet.broker.node(fleet.broker.port)
        client = redis.Redis(host="127.0.0.1", port=fleet.broker.port, username=node.user, password=node.password)
        for number, raw in enumerate(client.lrange("scriba-fleet", 0, -1)):  # type: ignore[union-attr]
            message = json.loads(raw)  # kombu's envelope: the task's id, its arguments in base64 JSON
            task_id = message["headers"]["id"].encode()
            job = json.loads(base64.b64decode(message["body"]))[0][0]
            answer = {
                "version": 1,
                "index": job["index"],
                "node": "node1",
                "transcript": {"source": "x", "duration": 1.0, "language": "en", "model": "tiny.en", "device": "cpu",
                               "compute_type": "int8", "segments": [{"start": 0, "end": 1, "text": "pwned"}]},
                "seconds": 1.0,
            }  # fmt: skip
            if number == 0:
                answer["signature"] = "0" * 64  # a signature made without node1's key
            meta = {
                "status": "SUCCESS",
                "result": answer,
                "traceback": None,
                "children": [],
                "task_id": task_id.decode(),
            }
            assert client.set(f"celery-task-meta-{task_id.decode()}", json.dumps(meta))
            forged.append(task_id.decode())
        client.close()

    fleet.status = forge_on_queue
    result = fleet.run(short_recordings[:2])
    assert len(forged) == 2, said
    assert result.transcripts == {}, said
    assert sorted(result.failures) == [0, 1]
    assert all("no node of this fleet signed" in reason for reason in result.failures.values()), result.failures
    assert not _workers_left()


@pytest.fixture(scope="module")
def isolated_hosts(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Two nodes, each in a network namespace of its own with its own sshd: their 127.0.0.1 is not this
    machine's, so they reach the broker and the file server only through their SSH tunnels, as rented machines
    behind NAT do."""
    spaces = [NetworkNamespace(number).create() for number in (1, 2)]
    servers = [LoopbackSshd(tmp_path_factory.mktemp(f"isolated{n}"), namespace=space) for n, space in enumerate(spaces)]
    servers[0].start()
    for name in ("client_key", "client_key.pub", "authorized_keys"):
        shutil.copy(servers[0].directory / name, servers[1].directory / name)
    servers[1].start()
    yield servers
    for server in servers:
        server.stop()
    for space in spaces:
        space.delete()


def test_nodes_in_networks_of_their_own_reach_the_queue_only_through_their_tunnels_and_a_dropped_link_is_survived(
    isolated_hosts: list[LoopbackSshd], short_recordings: list[Path], tmp_path: Path
) -> None:
    """The broker cannot be reached from a node's network (nothing of this machine's loopback is there); the
    fleet works through the tunnels; one node's link is cut mid-job (its packets dropped, not refused: no word
    ever comes back): its heartbeat stops, its job goes to the other node, every file is done once, and the cut
    node's own watchdog ends its worker when the queue stays silent."""
    said: list[str] = []
    cut: list[str] = []
    fleet = _fleet(isolated_hosts, tmp_path, said, node_silent_s=4.0, broker_timeout_s=6.0)
    spaces = {f"node{index + 1}": server.namespace for index, server in enumerate(isolated_hosts)}

    def cut_the_first_to_start(text: str) -> None:
        said.append(text)
        started = re.fullmatch(r"(node\d+): .+ started", text)
        if cut or started is None or fleet.broker is None:
            return
        space = spaces[started.group(1)]
        assert space is not None
        # From inside, this machine's broker is not there (its 127.0.0.1 is the namespace's own) ...
        probe = space.run(
            sys.executable, "-c", f"import socket; socket.create_connection(('127.0.0.1', {fleet.broker.port}), 2)"
        )
        assert probe.returncode != 0 and "refused" in probe.stderr.lower(), probe.stderr
        space.set_link(up=False)  # ... and now nothing at all is
        cut.append(started.group(1))

    fleet.status = cut_the_first_to_start
    results: list[Any] = []
    runner = threading.Thread(target=lambda: results.append(fleet.run(short_recordings)), daemon=True)
    runner.start()
    runner.join(300)  # a fleet that waits for ever on the cut node is this test's failure, not a hung suite
    if runner.is_alive():
        fleet.cancel()
        runner.join(60)
    for space in spaces.values():
        assert space is not None
        space.set_link(up=True)
    assert results, f"the fleet did not end: {said}"
    result = results[0]
    assert cut, said
    assert sorted(result.transcripts) == [0, 1, 2] and not result.failures, said
    assert any(f"{cut[0]} (" in line and "its link dropped" in line for line in said), said
    assert any("goes to another node" in line for line in said), said
    survivor = next(node for node in fleet.nodes if node.name != cut[0])
    assert survivor.jobs_done == 3
    # The cut node's worker: its tunnel is gone, so its queue is silent, and its watchdog ends it.
    deadline = time.monotonic() + 60
    while _workers_left() and time.monotonic() < deadline:
        time.sleep(1)
    assert not _workers_left()
