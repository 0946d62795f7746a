"""A fleet of SSH hosts on one set of recordings at once: each node pulls the next job from one queue.

This machine starts a private Redis (broker.py) and a file server (files.py), both on its loopback; each node is
reached over SSH as for a single offload (its host key checked, Scriba installed there with consent), gets two
reverse tunnels (the queue, the files) and runs one Celery worker (node.py). Jobs go on the queue in order; a
node takes one, fetches that recording through its tunnel, transcribes it and puts the transcript back as JSON.
A node that dies mid-job leaves its job unacknowledged and another node gets it after the visibility timeout; a
node whose worker has exited is noticed here and reported; when no node is left the fleet stops and says which
files were not done. Whatever happens, ``finally`` stops every worker, closes every tunnel and connection, and
stops the broker: nothing keeps running on any host.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.cloud.fleet.broker import LocalBroker
from app.cloud.fleet.files import FileServer
from app.cloud.fleet.node import QUEUE, RESULT_VERSION, TASK_NAME, beat_key, celery_app, done_key, signed_by
from app.cloud.fleet.pieces import Assembly, Unit, plan_units, read_voices
from app.cloud.fleet.tunnel import ReverseTunnels
from app.cloud.offload.base import OffloadError, OffloadResult, RemoteSetup
from app.cloud.remote.transport import (
    CONNECTION_ERRORS,
    SshEndpoint,
    SshSession,
    TransportError,
    connection_failure,
    quote,
)
from app.core.engine.stitch import DEFAULT_OVERLAP_S, DEFAULT_PIECE_S
from app.core.queue.jobs import JobOptions
from app.core.transcript.document import Transcript

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FleetTiming:
    """Pacing (tests shorten these). The visibility timeout must exceed the longest job, or a slow job is given
    to a second node while the first still works on it (no harm to the result: the first answer wins)."""

    visibility_timeout_s: float = 3 * 3600.0
    poll_s: float = 0.5
    node_start_timeout_s: float = 600.0
    # A node whose queue has not answered this long ends itself (and its machine, where the provider allows it).
    broker_timeout_s: float = 180.0
    # A node whose heartbeat has not moved for this long has lost its link (a connection can drop without a word:
    # packets lost, not refused): it counts as stopped and its job goes to another node. Its heartbeat comes every
    # broker_timeout_s / 4 (5 s at most).
    node_silent_s: float = 60.0
    # When the fleet has several nodes, a long file is cut into pieces between these lengths (pieces.py's
    # piece_length; piece_s 0: never), each with this much of its neighbours' audio on either side of a cut
    # (app/core/engine/stitch.py).
    piece_s: float = DEFAULT_PIECE_S
    min_piece_s: float = 300.0
    overlap_s: float = DEFAULT_OVERLAP_S
    # How long a node's SSH may be refused before it counts as down: 0 for the user's own hosts (up or not), a few
    # minutes for a machine the provider just reported running (sshd starts last).
    connect_wait_s: float = 0.0


@dataclass
class FleetNode:
    name: str
    endpoint: SshEndpoint
    session: SshSession | None = None
    tunnels: ReverseTunnels | None = None
    setup: RemoteSetup | None = None
    pid: int | None = None
    channel: Any = None  # the worker's command channel (paramiko.Channel)
    on_expire: list[str] | None = None  # the command with which the node's machine ends itself (RunPod)
    failure: str | None = None
    released: bool = False  # stopped early because the queue had nothing left for it
    key: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)  # signs its answers (node.py)
    last_beat: Any = None  # the node's heartbeat count as last read, and when it last moved (time.monotonic)
    heard_at: float = field(default_factory=time.monotonic)
    jobs_done: int = 0
    output: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=20))

    @property
    def alive(self) -> bool:
        return (
            self.failure is None
            and not self.released
            and self.channel is not None
            and not self.channel.exit_status_ready()
        )


@dataclass
class FleetConfig:
    options: JobOptions
    known_hosts: Path
    setup: RemoteSetup = field(default_factory=RemoteSetup)
    timing: FleetTiming = field(default_factory=FleetTiming)
    pin_new_host: bool = False  # True for machines rented a minute ago: their first host key is pinned
    deadline: float | None = None  # epoch seconds: the budget's hard stop, kept by each node's watchdog


class Fleet:
    """``run(files)`` over ``endpoints``; returns the transcripts by file index and the failures, like an offload."""

    def __init__(
        self,
        endpoints: Sequence[SshEndpoint],
        config: FleetConfig,
        status: Callable[[str], None] = lambda text: None,
        wheel: Callable[[], contextlib.AbstractContextManager[Path]] | None = None,
        release: Callable[[int], None] | None = None,
        on_expire: Sequence[list[str] | None] | None = None,
    ) -> None:
        """``release(i)``: called (on a thread of its own) once node ``i`` is stopped because the queue has nothing
        left for it, so that its machine can be ended before the fleet is over; without it idle nodes wait.
        ``on_expire[i]``: how node ``i``'s machine ends itself when this computer is gone."""
        if not endpoints:
            raise OffloadError("a fleet needs at least one host")
        self.config = config
        self.status = status
        self._wheel = wheel
        self._release = release
        # Hears each file's "started", "done" and "failed" (kind, file index, the status line) besides ``status``.
        self.on_file: Callable[[str, int, str], None] | None = None
        self._releasing: list[threading.Thread] = []  # ending the machines of idle nodes
        self._ending: list[threading.Thread] = []  # ending the machines of nodes that died
        self._sources: list[Path] = []
        self.broker: LocalBroker | None = None  # the run's, while it runs
        self._assemblies: dict[int, Assembly] = {}
        expire = list(on_expire) if on_expire is not None else [None] * len(endpoints)
        self.nodes = [
            FleetNode(f"node{index + 1}", endpoint, on_expire=expire[index]) for index, endpoint in enumerate(endpoints)
        ]
        self._cancelled = threading.Event()
        self.uploaded_bytes = 0

    def cancel(self) -> None:
        self._cancelled.set()

    def run(self, files: Sequence[Path], file_options: Sequence[JobOptions] | None = None) -> OffloadResult:
        """``file_options``: each file's own options (a queue's jobs may differ); default: the config's."""
        started = time.monotonic()
        broker = self.broker = LocalBroker()
        server = FileServer()
        try:
            broker.start()
            server.start()
            self._start_nodes(broker, server)
            self._sources = list(files)
            result = self._collect(files, broker, server, started, file_options)
            self.uploaded_bytes = server.sent_bytes
            return result
        finally:
            self._stop_nodes()
            server.stop()
            broker.stop()
            for thread in [*self._releasing, *self._ending]:
                thread.join()

    # ------------------------------------------------------------------------------------------------ nodes

    def _start_nodes(self, broker: LocalBroker, server: FileServer) -> None:
        """Connect, install (with consent) and start a worker on every node at once; a node that cannot start
        is reported and left out; none at all is an error."""
        threads = [
            threading.Thread(target=self._start_node, args=(node, broker, server), daemon=True) for node in self.nodes
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(self.config.timing.node_start_timeout_s)
        for node in self.nodes:
            if node.channel is None and node.failure is None:
                node.failure = "did not start in time"
        if not any(node.alive for node in self.nodes):
            reasons = "; ".join(f"{node.endpoint}: {node.failure}" for node in self.nodes)
            raise OffloadError(f"no host could start: {reasons}")

    def _start_node(self, node: FleetNode, broker: LocalBroker, server: FileServer) -> None:
        from app.cloud.offload.remote_install import ensure_remote_scriba

        try:
            session = SshSession(node.endpoint, self.config.known_hosts, pin_new_host=self.config.pin_new_host)
            node.session = session
            self._connect(session)
            node.setup = ensure_remote_scriba(
                session, self.config.setup, lambda text: self.status(f"{node.name}: {text}"), self._wheel_context
            )
            node.tunnels = ReverseTunnels(session.transport)
            broker_port = node.tunnels.open(broker.port)
            files_port = node.tunnels.open(server.port)
            worker = node.setup.argv(
                "worker",
                "fleet-node",
                "--broker-port",
                str(broker_port),
                "--files-port",
                str(files_port),
                "--name",
                node.name,
                "--visibility-timeout",
                str(self.config.timing.visibility_timeout_s),
                "--broker-timeout",
                str(self.config.timing.broker_timeout_s),
                *(["--deadline", f"{self.config.deadline:.0f}"] if self.config.deadline else []),
                *(["--on-expire", *node.on_expire] if node.on_expire else []),  # last: it takes the rest
            )
            # `echo $$; exec …`: the shell's pid is the worker's, so the teardown can end exactly that process.
            channel = session.transport.open_session()
            channel.exec_command(f"echo $$; exec {quote(worker)}")
            # On stdin, never in `ps`: the broker's node password and this node's own signing key.
            channel.sendall(f"{broker.node_password}\n{node.key}\n".encode())
            node.pid = int(_read_line(channel, 60.0))
            node.heard_at = time.monotonic()  # silence is counted from here until the first heartbeat is read
            node.channel = channel
            threading.Thread(target=_drain, args=(channel, node.output), daemon=True, name=node.name).start()
            self.status(f"{node.name} ({node.endpoint.host}): worker started")
        except Exception as error:  # this thread's end: any failure leaves this host out, said in one line
            node.failure = str(error) or type(error).__name__
            self.status(f"{node.name} ({node.endpoint.host}) left out: {node.failure}")

    def _connect(self, session: SshSession) -> None:
        """Connect; a machine just reported running may refuse SSH for a while (``connect_wait_s``)."""
        deadline = time.monotonic() + self.config.timing.connect_wait_s
        wait = 1.0
        while True:
            try:
                session.connect()
                return
            except CONNECTION_ERRORS as error:
                if time.monotonic() + wait > deadline or self._cancelled.is_set():
                    raise TransportError(connection_failure(session.endpoint, error)) from None
                time.sleep(wait)
                wait = min(wait * 2, 10.0)

    @contextlib.contextmanager
    def _wheel_context(self) -> Iterator[Path]:
        if self.config.setup.wheel is not None:
            yield self.config.setup.wheel
            return
        if self._wheel is not None:
            with self._wheel() as path:
                yield path
            return
        from app.cloud.offload.remote_install import build_wheel
        from app.cloud.offload.run import _temporary_dir

        with _temporary_dir() as folder:
            yield build_wheel(folder)

    def _stop_nodes(self) -> None:
        for node in self.nodes:
            _stop_node(node)

    def _release_idle(self, running_on: dict[int, str], pending: bool) -> None:
        """Stop every node the queue has nothing left for (no job waiting, none running there) and hand it to
        ``release``, so that a rented machine stops billing as soon as it is idle rather than at the fleet's end."""
        if self._release is None or pending:
            return
        busy = set(running_on.values())
        for node in self.nodes:
            if node.alive and node.name not in busy:
                node.released = True
                _stop_node(node)
                self.status(f"{node.name} ({node.endpoint.host}) released: nothing left for it in the queue")
                self._releasing.append(self._start_release(node))

    def _start_release(self, node: FleetNode) -> threading.Thread:
        assert self._release is not None
        thread = threading.Thread(target=self._release, args=(self.nodes.index(node),), name=f"release-{node.name}")
        thread.start()
        return thread

    # ------------------------------------------------------------------------------------------------ jobs

    def _collect(
        self,
        files: Sequence[Path],
        broker: LocalBroker,
        server: FileServer,
        started: float,
        file_options: Sequence[JobOptions] | None,
    ) -> OffloadResult:
        app = celery_app(broker.driver.url(), self.config.timing.visibility_timeout_s)
        options = [file_options[index] if file_options else self.config.options for index in range(len(files))]
        timing = self.config.timing
        # A long file is cut only when another node can take a piece of it.
        nodes = sum(node.alive for node in self.nodes) if timing.piece_s > 0 else 1
        lengths = (timing.piece_s, min(timing.min_piece_s, timing.piece_s), timing.overlap_s)
        with tempfile.TemporaryDirectory(prefix="scriba-pieces-") as folder:
            units, self._assemblies, failures = plan_units(files, options, nodes, lengths, Path(folder), self.status)
            return self._run_units(app, units, files, options, server, started, failures)

    def _run_units(
        self,
        app: Any,
        units: list[Unit],
        files: Sequence[Path],
        options: list[JobOptions],
        server: FileServer,
        started: float,
        failures: dict[int, str],
    ) -> OffloadResult:
        fleet_id = secrets.token_hex(8)
        jobs = {
            unit.job: {
                "fleet": fleet_id,
                "index": unit.job,
                "token": server.register(unit.path),
                "name": unit.path.name,
                "options": options[unit.file].to_dict() | {"output_dir": None},
                "voices": unit.piece is not None,
            }
            for unit in units
        }
        handles: dict[int, list[Any]] = {
            job: [app.send_task(TASK_NAME, args=[spec], queue=QUEUE)] for job, spec in jobs.items()
        }
        self.status(f"{len(units)} job(s) queued for {sum(node.alive for node in self.nodes)} node(s)")
        transcripts: dict[int, Transcript] = {}
        speeds: dict[int, float] = {}
        running_on: dict[int, str] = {}  # job -> the node that started it (from the task's STARTED state)
        gone: set[str] = set()
        try:
            while handles:
                if self._cancelled.is_set():
                    raise OffloadError("cancelled")
                for job in list(handles):
                    unit = units[job]
                    for handle in handles[job]:
                        state = handle.state
                        if state == "FAILURE" and handle is not handles[job][-1]:
                            continue  # an older copy (its node died); the copy sent again still counts
                        if state in ("SUCCESS", "FAILURE"):
                            # FAILURE: the task raised on the node outside transcribe_job (which never raises):
                            # its answer is not a transcript, and _take fails the file saying so.
                            value = handle.result if state == "SUCCESS" else None
                            if isinstance(value, dict) and value.get("skipped") and self._signer(value):
                                continue  # a second copy of a job that was already done
                            del handles[job]
                            running_on.pop(job, None)
                            # Any copy still queued (a job re-sent after its node died) is skipped by the nodes.
                            app.backend.client.set(done_key(fleet_id, job), 1, ex=7 * 24 * 3600)
                            self._take(unit, value, transcripts, failures, speeds)
                            break
                        if state == "STARTED" and job not in running_on:
                            taker = str((handle.info or {}).get("hostname", "?")).split("@")[0]
                            if taker in gone:
                                continue  # the copy a dead node left STARTED for ever: its job was sent again
                            running_on[job] = taker
                            self._file_event("started", unit.file, f"{taker}: {unit.label} started")
                self._notice_silent_nodes(app.backend.client)
                # A job not seen STARTED may be waiting or just taken: either way its node is not idle yet. Once
                # every file is in, the fleet's own end stops them all.
                if handles:
                    self._release_idle(running_on, pending=any(job not in running_on for job in handles))
                for node in self.nodes:
                    if node.channel is None or node.alive or node.released or node.name in gone:
                        continue
                    gone.add(node.name)
                    said = f" ({node.failure or 'its worker ended'})"
                    self.status(f"{node.name} ({node.endpoint.host}) stopped{said}")
                    if self._release is not None:  # a dead node's machine bills for nothing: ended now
                        self._ending.append(self._start_release(node))
                    for job, name in list(running_on.items()):
                        if name == node.name and job in handles:
                            # Sent again at once rather than after the visibility timeout; whichever copy ends
                            # first is taken.
                            handles[job].append(app.send_task(TASK_NAME, args=[jobs[job]], queue=QUEUE))
                            del running_on[job]
                            self.status(f"{units[job].label} goes to another node")
                if handles and not any(node.alive for node in self.nodes):
                    why = "its node stopped after the others were released" if self._releasing else "every node stopped"
                    for job in handles:
                        failures.setdefault(units[job].file, f"{files[units[job].file]}: not done: {why}; run it again")
                    break
                time.sleep(self.config.timing.poll_s)
        finally:
            with contextlib.suppress(Exception):
                app.close()
        for index in failures:
            transcripts.pop(index, None)  # a file with a failed piece is failed, whatever its other pieces did
        return OffloadResult(
            transcripts=transcripts,
            failures=failures,
            seconds=time.monotonic() - started,
            cost_usd=0.0,
            instance=None,
            speeds=speeds,
        )

    def _notice_silent_nodes(self, client: Any) -> None:
        """A node whose heartbeat stopped is stopped (in the background: a dead connection can take its time to
        refuse the kill), so that its job is sent to another node at once."""
        alive = [node for node in self.nodes if node.alive]
        if not alive:
            return
        try:
            beats = client.mget([beat_key(node.name) for node in alive])
        except Exception:  # the broker is this machine's: an error here is a hiccup, seen again at the next poll
            return
        now = time.monotonic()
        for node, beat in zip(alive, beats, strict=True):
            # Before its first beat a node may still be importing its libraries (a cold disk takes a while).
            limit = (
                self.config.timing.node_silent_s
                if node.last_beat is not None
                else self.config.timing.node_start_timeout_s
            )
            if beat != node.last_beat:
                node.last_beat, node.heard_at = beat, now
            elif now - node.heard_at > limit:
                node.failure = f"no word from it for {limit:.0f} s: its link dropped"
                threading.Thread(target=_stop_node, args=(node,), daemon=True, name=f"stop-{node.name}").start()

    def _signer(self, value: Any) -> FleetNode | None:
        """The node of this fleet whose key signed ``value`` (the node it names), or None."""
        if not isinstance(value, dict):
            return None
        node = next((node for node in self.nodes if node.name == value.get("node")), None)
        return node if node is not None and signed_by(value, node.key) else None

    def _file_event(self, kind: str, index: int, text: str) -> None:
        if self.on_file is not None:
            self.on_file(kind, index, text)  # which says it too
        else:
            self.status(text)

    def _take(
        self,
        unit: Unit,
        value: Any,
        transcripts: dict[int, Transcript],
        failures: dict[int, str],
        speeds: dict[int, float],
    ) -> None:
        """One job's answer, checked before it is believed: a node's reply is untrusted JSON."""
        source = self._sources[unit.file]
        if not isinstance(value, dict) or value.get("version") != RESULT_VERSION or value.get("index") != unit.job:
            failures.setdefault(unit.file, f"{source}: the node's answer was not a transcript of this file")
            return
        signer = self._signer(value)
        if signer is None:
            failures.setdefault(
                unit.file,
                f"{source}: an answer no node of this fleet signed was found in the queue (forged?); not used",
            )
            self.status(f"{unit.label}: an unsigned answer was refused")
            return
        node = signer.name
        signer.jobs_done += 1
        if "error" in value:
            failures.setdefault(unit.file, f"{source}: {value['error']}")
            self._file_event("failed", unit.file, f"{node}: {unit.label} failed: {value['error']}")
            return
        try:
            transcript = Transcript.from_dict(value["transcript"])
            voices = read_voices(value.get("voices")) if unit.piece is not None else {}
            seconds = max(0.0, float(value.get("seconds") or 0))
        except (KeyError, TypeError, ValueError) as error:
            failures.setdefault(unit.file, f"{source}: the node's transcript could not be read ({error})")
            return
        if unit.piece is not None:
            assembly = self._assemblies[unit.file]
            if not assembly.add(unit, transcript, voices, seconds):
                self.status(f"{node}: {unit.label} done")
                return
            transcript, seconds = assembly.transcript(), assembly.seconds
        transcripts[unit.file] = replace(transcript, source=str(source.absolute()))  # not the node's copy
        if seconds > 0:
            speeds[unit.file] = transcript.duration / seconds
        self._file_event("done", unit.file, f"{node}: {source.name} done")


def _stop_node(node: FleetNode) -> None:
    """End the node's worker (by the pid it reported), its channel, tunnels and connection; never raises."""
    if node.session is not None and node.pid is not None and node.session.connected:
        with contextlib.suppress(Exception):
            node.session.run_shell(f"kill -KILL {node.pid} 2>/dev/null; true", check=False, timeout_s=15)
    if node.channel is not None:
        with contextlib.suppress(Exception):
            node.channel.close()
    if node.tunnels is not None:
        node.tunnels.close()
    if node.session is not None:
        node.session.close()


def _read_line(channel: Any, timeout_s: float) -> str:
    """The first line the command prints (its pid); '' when it ends or says nothing in time."""
    deadline = time.monotonic() + timeout_s
    data = b""
    while b"\n" not in data and time.monotonic() < deadline:
        if channel.recv_ready():
            data += channel.recv(256)
        elif channel.exit_status_ready():
            break
        else:
            time.sleep(0.02)
    line = data.split(b"\n", 1)[0].decode(errors="replace").strip()
    if not line.isdigit():
        raise OffloadError(f"the worker did not start: {line or 'no answer'}")
    return line


def _drain(channel: Any, into: collections.deque[str]) -> None:
    """Read the worker's output as it comes (a full SSH window would stall it), keeping the last lines."""
    pending = b""
    with contextlib.suppress(Exception):
        while True:
            if channel.recv_ready() or channel.recv_stderr_ready():
                pending += channel.recv(65536) if channel.recv_ready() else channel.recv_stderr(65536)
                *lines, pending = pending.split(b"\n")
                into.extend(line.decode(errors="replace").strip() for line in lines if line.strip())
            elif channel.exit_status_ready() or channel.closed:
                return
            else:
                time.sleep(0.1)
