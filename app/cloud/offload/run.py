"""One offload: (rent a machine,) upload, run the engine there, bring the transcripts home, tear everything down.

The order of the teardown is the point of this module. The ledger hears of a launch before the provider does
and of the instance id the moment it exists; whatever happens after that (an error, a cancel, a lost
connection, a crash of this process) ends in ``finally`` with the remote work directory removed and the
machine terminated and verified terminated, and the ledger says so. A crash of this process is caught at the
next start by the ledger's orphan sweep; on the machine itself the watchdog stops the work when the heartbeat
this module sends stops (and ends the machine only where the provider lets a machine end itself without an
account-wide key: RunPod).

Three rules keep a machine from billing unnoticed:

* a launch whose outcome is unclear (Ctrl-C or SIGTERM during the request, a lost answer, an answer in a shape
  Scriba does not know) is never written down as "not launched" on a guess: the machine is looked for by its
  label in the provider's own list, read several times spaced out (that list lags a create), and ended when
  found; when it never shows, the entry stays open for the next sweep to ask again;
* the teardown needs no disk write to begin: it terminates first and records afterwards, best-effort, saying so
  when the ledger could not be written (a full or read-only data disk);
* in the main thread the teardown holds SIGINT and SIGTERM back (a second Ctrl-C says it is still tearing down),
  and :attr:`Offload.teardown` tells the caller whether the provider *confirmed* the machine gone.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from app.cloud.offload.base import (
    BudgetExceeded,
    LedgerLike,
    OffloadCancelled,
    OffloadConfig,
    OffloadError,
    OffloadEvent,
    OffloadResult,
    ProviderLike,
    Teardown,
)
from app.cloud.offload.results import store_locally
from app.cloud.remote.agent import SPEC_VERSION
from app.cloud.remote.transport import (
    CONNECTION_ERRORS,
    HostKeyError,
    SshEndpoint,
    SshSession,
    TransportError,
    connection_failure,
    forget_host,
    quote,
)
from app.cloud.types import Instance, Offer
from app.core.cancel import CancelToken
from app.core.errors import CancelledError
from app.core.queue.jobs import JobOptions
from app.core.transcript.document import Transcript

log = logging.getLogger(__name__)
T = TypeVar("T")


def new_label() -> str:
    """A label no other run shares, even one started in the same second: a machine is found by it exactly."""
    return f"scriba-{int(time.time())}-{secrets.token_hex(3)}"


def _launch_refused(error: BaseException | None) -> bool:
    """Whether the provider refused the launch outright, so that no machine can exist (no capacity, no credit, a
    bad key, a request it rejected). Anything else (an interrupt, a lost or strange answer) is unclear."""
    from app.cloud.providers.base import ApiError, AuthError, InsufficientBalance, NoCapacity

    if not isinstance(error, (NoCapacity, InsufficientBalance, AuthError, ApiError)):
        return False
    return not error.maybe_created and error.instance_id is None


def remote_name(index: int, source: Path) -> str:
    """A neutral remote name: the user's file name (spaces, quotes, ``$(...)``) never leaves this machine."""
    suffix = source.suffix.lower()
    safe = suffix if 1 < len(suffix) <= 9 and suffix[1:].isalnum() else ".bin"
    return f"in/{index:04d}{safe}"


class Offload:
    """Run one set of files on one machine. ``run()`` blocks; ``cancel()`` from another thread stops it."""

    def __init__(self, provider: ProviderLike, offer: Offer, ledger: LedgerLike, config: OffloadConfig) -> None:
        self.provider = provider
        self.offer = offer
        self.ledger = ledger
        self.config = config
        self.timing = config.timing
        # How Scriba runs there: a fresh rented machine's install replaces the command with the venv's.
        self.setup = config.setup
        self._on_event: Callable[[OffloadEvent], None] | None = None  # the sink of the run under way
        self.teardown = Teardown()
        self._cancel = CancelToken()  # the run's: run() may be given one shared with its caller
        self._file_options: list[JobOptions] | None = None
        self._self_terminate: list[str] | None = None
        self._launched_at: float | None = None
        self._session: SshSession | None = None
        self.work: str | None = None
        self.reconnects = 0
        self.uploaded_bytes = 0
        self.ended_at: float | None = None  # when the teardown finished (what a fleet node's bill runs to)
        # Why the transcripts could not be stored on this computer (None: stored, or nothing to store): the remote
        # work folder is then kept on the user's own host instead of removed.
        self.unstored: str | None = None

    def __repr__(self) -> str:  # never shows the token
        return f"Offload(provider={self.provider.name!r}, offer={self.offer.offer!r})"

    def cancel(self) -> None:
        self._cancel.cancel()

    @property
    def session(self) -> SshSession:
        if self._session is None:
            raise OffloadError("not connected to the remote machine")
        return self._session

    # ------------------------------------------------------------------------------------------- events

    def _elapsed(self) -> float:
        return time.monotonic() - self._launched_at if self._launched_at is not None else 0.0

    def _emit(self, kind: str, message: str = "", **fields: Any) -> None:
        event = OffloadEvent(
            kind,
            message,
            elapsed_s=self._elapsed(),
            cost_usd=self.offer.usd_per_hour * self._elapsed() / 3600,
            **fields,
        )
        if kind == "status":
            log.info("%s", message)
        if self._on_event is not None:
            self._on_event(event)

    def _check_cancel(self) -> None:
        if self._cancel.cancelled:
            raise OffloadCancelled("cancelled by the user")

    # ------------------------------------------------------------------------------------------- main

    def run(
        self,
        files: Sequence[Path],
        job_ref: str = "",
        file_options: Sequence[JobOptions] | None = None,
        on_event: Callable[[OffloadEvent], None] | None = None,
        cancel: CancelToken | None = None,
    ) -> OffloadResult:
        """Transcribe ``files`` remotely; ``file_options`` gives each file its own options (default: the config's).
        ``on_event`` hears this run's events, the teardown's included, on the thread that calls ``run``.
        ``cancel``: the caller's token, so one cancel reaches every layer (as :meth:`cancel` does)."""
        self._on_event = on_event
        if cancel is not None:
            if self._cancel.cancelled:  # cancel() came before the run: the caller's token hears of it
                cancel.cancel()
            self._cancel = cancel
        self._file_options = list(file_options) if file_options is not None else None
        budget, estimate = self.config.budget_usd, self.config.estimate_usd
        if budget is not None and estimate is not None and estimate > budget:
            raise BudgetExceeded(
                f"the estimate (${estimate:.2f}) is over the budget (${budget:.2f}): nothing was "
                "launched. Raise --budget, pick a cheaper offer, or send fewer files."
            )
        for path in files:
            if not path.is_file():
                raise OffloadError(f"{path}: no such file; nothing was launched")
        started = time.monotonic()
        with self.machine(job_ref) as instance:
            result = self._run_on(instance, files)
            result.seconds = time.monotonic() - started
            result.cost_usd = self.offer.usd_per_hour * self._elapsed() / 3600
            result.instance = instance
            if self.provider.rents_machines:
                self._record_speeds(result)
            return result

    @contextlib.contextmanager
    def machine(self, job_ref: str = "", on_event: Callable[[OffloadEvent], None] | None = None) -> Iterator[Instance]:
        """The machine, from the ledger's intent to its verified end: launched, in the ledger, ready to connect
        to; whatever ends the body (its end, an error, a cancel, Ctrl-C), the machine is torn down on the way out.
        A fleet holds one per node and leaves each as soon as that node has nothing left to do."""
        if on_event is not None:
            self._on_event = on_event
        label = new_label()
        try:
            ledger_id = self.ledger.record_intent(
                self.provider.name, self.offer, label, job_ref or label, self.config.budget_usd
            )
        except Exception as error:  # sqlite3.Error, OSError: a full or read-only data disk
            # Without the intent a crash could leave a machine nobody looks for: rent nothing.
            raise OffloadError(
                f"the cloud ledger could not be written ({_one_line(error)}): nothing was launched. Free space in "
                "Scriba's data folder (or make it writable) and try again."
            ) from error
        instance: Instance | None = None
        failure: BaseException | None = None
        try:
            rents = self.provider.rents_machines
            self._emit("status", f"launching {self.offer.gpu} on {self.provider.name}" if rents else "connecting")
            instance = self.provider.launch(self.offer, self.config.public_key, label)
            self._launched_at = time.monotonic()
            try:
                self.ledger.record_instance(ledger_id, instance.instance_id)
            except Exception as error:
                raise OffloadError(
                    f"the cloud ledger could not be written ({_one_line(error)}); Scriba does not run a rented "
                    "machine it cannot keep track of: tearing it down"
                ) from error
            self._check_cancel()
            try:
                instance = self.provider.wait_ready(instance.instance_id, cancel=self._cancel)
            except CancelledError:
                raise OffloadCancelled("cancelled by the user while the machine booted") from None
            self.ledger.record_ready(ledger_id)
            yield instance
        except BaseException as error:
            failure = error
            raise
        finally:
            self._teardown(ledger_id, label, instance, failure)
            self.ended_at = time.monotonic()

    def _run_on(self, instance: Instance, files: Sequence[Path]) -> OffloadResult:
        if not instance.host:
            raise OffloadError(
                f"{self.provider.name} reported instance {instance.instance_id} ready without an address"
            )
        endpoint = SshEndpoint(instance.host, instance.port, instance.user, self.config.key_file)
        self._session = SshSession(endpoint, self.config.known_hosts, pin_new_host=self.config.pin_new_host)
        self._connect_until_ready(retry=self.provider.rents_machines)
        self._check_remote()
        self._check_cancel()
        _, out, _ = self._session.run(["mktemp", "-d", f"{self.setup.work_parent}/scriba-XXXXXXXX"])
        work = out.strip()
        if not work.startswith(f"{self.setup.work_parent}/scriba-"):
            raise OffloadError(f"unexpected remote work directory {work!r}")
        self.work = work
        self._self_terminate = self.provider.self_terminate_command(instance.instance_id)
        self._session.run(["mkdir", "-p", f"{work}/in", f"{work}/out"])
        self._session.touch(f"{work}/heartbeat")

        names = [remote_name(index, path) for index, path in enumerate(files)]
        total = sum(path.stat().st_size for path in files)
        done_before = 0
        for index, (path, name) in enumerate(zip(files, names, strict=True)):
            self._check_cancel()
            self._emit("upload", f"uploading {path.name}", index=index, fraction=done_before / total if total else 1)
            self._upload(path, f"{work}/{name}", done_before, total)
            done_before += path.stat().st_size
        self._write_spec(work, names)
        self._start_remote(work)
        return self._follow(work, files)

    # ------------------------------------------------------------------------------------------- steps

    def _connect_until_ready(self, timeout_s: float = 300.0, retry: bool = True) -> None:
        """A machine reported running may not answer SSH yet (sshd starts last): keep trying, except on a host key.

        ``retry=False``: the first connection to the user's own host, which is up or is not: waiting for it, as
        for a machine still booting, would only delay the same answer. (A connection lost later is retried.)"""
        assert self._session is not None
        deadline = time.monotonic() + timeout_s
        wait = self.timing.reconnect_wait_s
        while True:
            self._check_cancel()
            try:
                self._session.connect()
                return
            except (HostKeyError, TransportError):
                raise
            except CONNECTION_ERRORS as error:
                if not retry:
                    raise OffloadError(connection_failure(self._session.endpoint, error)) from error
                if time.monotonic() > deadline:
                    raise OffloadError(
                        f"{connection_failure(self._session.endpoint, error)} (for {timeout_s:.0f} s after the "
                        "machine was reported running)"
                    ) from error
                time.sleep(wait)
                wait = min(wait * 2, 10.0)

    def _reconnecting(self, what: str, action: Callable[[], T]) -> T:
        """Run ``action``; after a dropped connection, reconnect and run it again (every step is resumable)."""
        assert self._session is not None
        for attempt in range(self.timing.max_reconnects + 1):
            try:
                return action()
            except HostKeyError:
                raise
            except CONNECTION_ERRORS as error:
                if attempt == self.timing.max_reconnects:
                    raise OffloadError(
                        f"lost the connection to {self._session.endpoint} during {what} {attempt + 1} times "
                        f"({_one_line(error)})"
                    ) from error
                self.reconnects += 1
                self._emit("status", f"connection lost during {what} ({_one_line(error)}); reconnecting")
                time.sleep(self.timing.reconnect_wait_s * (2**attempt))
                with contextlib.suppress(*CONNECTION_ERRORS):
                    self._connect_until_ready(timeout_s=60.0)
        raise AssertionError("unreachable")

    def _record_speeds(self, result: OffloadResult) -> None:
        """Measured speeds of this card replace the table's estimates in the next estimate."""
        from app.cloud.pricing.prices import MeasuredSpeeds

        speeds = MeasuredSpeeds()
        source = f"Scriba job on {self.provider.name}"
        for transcript in result.transcripts.values():
            for task, key in (("transcribe", "transcribe"), ("diarize", "diarize")):
                seconds = transcript.timings.get(key, 0.0)
                if seconds > 0 and transcript.duration > 0 and (task == "transcribe" or transcript.diarization):
                    with contextlib.suppress(OSError, ValueError):
                        speeds.record(
                            self.offer.gpu,
                            transcript.model,
                            transcript.duration / seconds,
                            source,
                            task=task,  # type: ignore[arg-type]
                            audio_seconds=transcript.duration,
                        )

    def _check_remote(self) -> None:
        from app.cloud.offload.remote_install import build_wheel, ensure_remote_scriba

        def status(text: str) -> None:
            self._emit("status", text)

        @contextlib.contextmanager
        def wheel() -> Iterator[Path]:
            if self.setup.wheel is not None:
                yield self.setup.wheel
                return
            with _temporary_dir() as folder:
                yield build_wheel(folder)

        self.setup = self._reconnecting(
            "the set-up check", lambda: ensure_remote_scriba(self.session, self.setup, status, wheel)
        )

    def _upload(self, path: Path, remote: str, done_before: int, total: int) -> None:
        assert self._session is not None

        def progress(position: int, size: int) -> None:
            if self.config.upload_hook is not None and self._session is not None:
                self.config.upload_hook(self._session, position, size)
            self._emit("upload", index=None, fraction=(done_before + position) / total if total else 1.0)

        def send() -> None:
            assert self._session is not None
            self.uploaded_bytes += self._session.upload(path, remote, on_bytes=progress)

        self._reconnecting(f"the upload of {path.name}", send)

    def _write_spec(self, work: str, names: list[str]) -> None:
        assert self._session is not None
        spec = {
            "version": SPEC_VERSION,
            "files": [
                {"index": index, "name": name}
                | (
                    {"options": self._file_options[index].to_dict() | {"output_dir": None}}
                    if self._file_options
                    else {}
                )
                for index, name in enumerate(names)
            ],
            "options": self.config.options.to_dict() | {"output_dir": None},
            "gpu_interval": 2.0,
        }

        def write() -> None:
            assert self._session is not None
            self._session.write_text(f"{work}/spec.json", json.dumps(spec))
            if self.config.hf_token:
                # A file only the remote user can read, deleted by the worker as soon as it has read it: never
                # on a command line (visible in `ps`) nor in the spec.
                self._session.write_text(f"{work}/hf_token", self.config.hf_token, private=True)

        self._reconnecting("writing the job", write)

    def _start_remote(self, work: str) -> None:
        assert self._session is not None
        deadline = None
        if self.config.budget_usd is not None and self.offer.usd_per_hour > 0:
            # The watchdog ends the work when the money runs out, even if this computer is gone.
            deadline = time.time() + self.config.budget_usd / self.offer.usd_per_hour * 3600 - self._elapsed()
        watchdog = self.setup.argv(
            "worker",
            "watchdog",
            "--dir",
            work,
            "--heartbeat-timeout",
            str(self.timing.heartbeat_timeout_s),
            "--done-grace",
            str(self.timing.done_grace_s),
            *(["--deadline", f"{deadline:.0f}"] if deadline else []),
            *([] if self.provider.rents_machines else ["--remove-work"]),
            *(["--on-expire", *self._self_terminate] if self._self_terminate else []),  # last: it takes the rest
        )
        worker = self.setup.argv("worker", "run", "--dir", work)
        command = (
            f"cd {quote([work])} && "
            f"(nohup setsid {quote(watchdog)} >/dev/null 2>&1 </dev/null &) && "
            f"(nohup setsid {quote(worker)} >{quote([work + '/worker.log'])} 2>&1 </dev/null &)"
        )
        self._reconnecting("starting the worker", lambda: self.session.run_shell(command))
        self._emit("status", "the remote worker started")

    def _follow(self, work: str, files: Sequence[Path]) -> OffloadResult:
        """Read the worker's events until it finishes; send the heartbeat; notice a worker that died."""
        assert self._session is not None
        offset = 0
        pending = b""
        finished = False
        done: dict[int, str] = {}
        failures: dict[int, str] = {}
        speeds: dict[int, float] = {}
        last_heartbeat = 0.0
        quiet_since = time.monotonic()
        while not finished:
            if self._cancel.cancelled:
                self._reconnecting("the cancel", lambda: self._kill_remote_worker(work))
                raise OffloadCancelled("cancelled by the user; the remote worker was stopped")
            now = time.monotonic()
            if now - last_heartbeat >= self.timing.heartbeat_s:
                self._reconnecting("the heartbeat", lambda: self.session.touch(f"{work}/heartbeat"))
                last_heartbeat = now
            chunk = self._reconnecting(
                "reading progress", functools.partial(self._read_events, f"{work}/events.jsonl", offset)
            )
            offset += len(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                event = json.loads(line)
                kind = event.get("type")
                index = event.get("index")
                if kind == "progress":
                    self._emit("progress", index=index, fraction=event.get("fraction"), speed=event.get("speed"))
                elif kind == "gpu":
                    self._emit("gpu", data=event)
                elif kind == "started":
                    self._emit("started", f"{files[index].name}: started", index=index)
                elif kind == "done":
                    done[index] = str(event["transcript"])
                    if event.get("speed"):
                        speeds[index] = float(event["speed"])
                    self._emit("done", f"{files[index].name}: done", index=index, speed=event.get("speed"))
                elif kind == "failed":
                    failures[index] = f"{files[index].name}: {event.get('error')}"
                    self._emit("failed", failures[index], index=index)
                elif kind == "finished":
                    finished = True
                    if event.get("error"):
                        raise OffloadError(f"the remote worker refused the job: {event['error']}")
            if lines:
                quiet_since = time.monotonic()
            elif not finished and time.monotonic() - quiet_since > 2.0:
                quiet_since = time.monotonic()
                alive = self._reconnecting("checking the worker", lambda: self._worker_alive(work))
                if not alive:
                    # One last read: the worker may have finished between the read above and the check.
                    if b'"finished"' in self._session.read_from(f"{work}/events.jsonl", offset):
                        continue
                    log_tail = self._reconnecting("reading the worker log", lambda: self._log_tail(work))
                    reason = f"the remote worker stopped unexpectedly{': ' + log_tail if log_tail else ''}"
                    for index, path in enumerate(files):
                        if index not in done and index not in failures:
                            failures[index] = f"{path.name}: {reason}"
                    break
            if not finished:
                time.sleep(self.timing.poll_s)

        transcripts: dict[int, Transcript] = {}
        with _temporary_dir() as local_tmp:
            for index, remote in done.items():
                local = local_tmp / f"{index:04d}.json"
                self._reconnecting(
                    f"downloading {files[index].name}'s transcript",
                    functools.partial(self._download, f"{work}/{remote}", local),
                )
                transcript = Transcript.from_dict(json.loads(local.read_text(encoding="utf-8")))
                transcripts[index] = replace(transcript, source=str(files[index].absolute()))
        # Paid work: stored here before the teardown may remove the remote copy.
        stored, self.unstored = store_locally(self.config.keep_dir, Path(work).name, transcripts)
        if self.unstored is not None:
            self._emit("status", f"the transcripts could not be stored in {self.config.keep_dir} ({self.unstored})")
        self._emit("finished", f"{len(transcripts)} done, {len(failures)} failed")
        return OffloadResult(transcripts, failures, 0.0, 0.0, None, speeds, stored)

    def _read_events(self, remote: str, offset: int) -> bytes:
        return self.session.read_from(remote, offset)

    def _download(self, remote: str, local: Path) -> None:
        self.session.download(remote, local)

    def _worker_alive(self, work: str) -> bool:
        assert self._session is not None
        status, out, _ = self._session.run_shell(
            f'pid=$(cat {quote([work + "/worker.pid"])} 2>/dev/null) && kill -0 "$pid" 2>/dev/null && echo alive',
            check=False,
        )
        if "alive" in out:
            return True
        # No pid file yet: the worker is still starting (imports take seconds on a cold machine).
        status, _, _ = self._session.run(["test", "-e", f"{work}/worker.pid"], check=False)
        return status != 0 and self._elapsed_since_start(work) < 120

    def _elapsed_since_start(self, work: str) -> float:
        assert self._session is not None
        modified = self._session.modified_at(f"{work}/spec.json")
        return 0.0 if modified is None else time.time() - modified

    def _log_tail(self, work: str) -> str:
        assert self._session is not None
        text = self._session.read_from(f"{work}/worker.log", 0).decode(errors="replace").strip()
        return " / ".join(text.splitlines()[-3:])[-400:]

    def _kill_remote_worker(self, work: str) -> None:
        assert self._session is not None
        self._session.run_shell(
            f"pid=$(cat {quote([work + '/worker.pid'])} 2>/dev/null) && "
            f'(kill -KILL -- -"$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null); true',
            check=False,
        )

    # ------------------------------------------------------------------------------------------- teardown

    def _teardown(self, ledger_id: int, label: str, instance: Instance | None, failure: BaseException | None) -> None:
        """Remove the remote work, then end the machine and verify; record it afterwards. Never raises (it runs in
        ``finally``), needs no disk write to begin, and holds SIGINT/SIGTERM back until it is done."""
        with signals_held(self._still_tearing_down) as held:
            try:
                self._tear_down(ledger_id, label, instance, failure)
            except Exception as error:  # a bug here must not hide the machine: say what is known
                log.exception("offload: teardown failed")
                self.teardown.state = "unconfirmed"
                self.teardown.message = (
                    f"the teardown failed ({_one_line(error)}): check {self.provider.name}'s console for a machine "
                    f"labelled {label}; Scriba looks for it again at its next start."
                )
                self._emit("status", self.teardown.message)
        self.teardown.signals_held = len(held)
        if self.teardown.ledger_errors:
            self._emit(
                "status",
                "the cloud ledger could not be written during the teardown ("
                + "; ".join(self.teardown.ledger_errors)
                + "): it may still list this run as open; the next `scriba offload sweep` or start asks the "
                "provider and closes it.",
            )

    def _still_tearing_down(self) -> None:
        what = ", ".join(self.teardown.machines) or "the machine"
        _write_stderr(
            f"scriba: still tearing down ({self.provider.name} {what}): waiting until the provider confirms it is "
            "gone, so that nothing keeps billing. Interrupting is held back until then.\n"
        )

    def _record(self, what: str, write: Callable[..., None], *args: Any) -> bool:
        """A ledger write in the teardown: best-effort, because ending the machine must not depend on the disk."""
        try:
            write(*args)
            return True
        except Exception as error:  # sqlite3.Error, OSError: a full or read-only data disk
            log.warning("offload: ledger write (%s) failed: %s", what, error)
            self.teardown.ledger_errors.append(f"{what}: {_one_line(error)}")
            return False

    def _tear_down(self, ledger_id: int, label: str, instance: Instance | None, failure: BaseException | None) -> None:
        session = self._session
        if session is not None and self.work is not None:
            work = self.work
            try:
                if not session.connected:
                    session.connect()
                self._kill_remote_worker(work)
                if self.unstored is not None and not self.provider.rents_machines:
                    # The transcripts are not safe on this computer: the user's own host keeps them (renamed, so
                    # that the watchdog, which removes the work folder it watches, leaves them alone).
                    kept = f"{work}-kept"
                    session.run(["mv", "--", work, kept])
                    self._emit(
                        "status",
                        f"the transcripts could not be stored on this computer ({self.unstored}): the remote work "
                        f"folder was kept as {session.endpoint}:{kept} (its out/ folder holds them)",
                    )
                else:
                    session.run(["rm", "-rf", "--", work])
                    self._emit("status", "remote work directory removed")
            except Exception as error:  # the machine is terminated next anyway; an SSH host keeps a temp dir
                self._emit("status", f"could not remove {work} on the remote ({_one_line(error)})")
        if session is not None:
            session.close()

        ids = self._machines_to_end(ledger_id, label, instance, failure)
        if ids is None:
            return
        if not ids:
            self.teardown.state = "nothing_to_end"
            return
        self.teardown.machines = ids
        # Terminate first: the records (why the run failed, the termination) come after, if the disk takes them.
        gone = [instance_id for instance_id in ids if self._terminate_verified(instance_id)]
        if failure is not None:
            self._record("the failure", self.ledger.record_failed, ledger_id, _one_line(failure))
        if len(gone) == len(ids):
            self.teardown.state = "terminated"
            self._record("the verified termination", self.ledger.record_terminated, ledger_id, True)
            if self.provider.rents_machines:
                self.teardown.message = f"{self.provider.name} instance {', '.join(ids)} terminated (verified)"
                self._emit("status", self.teardown.message)
            if self.config.pin_new_host and instance is not None and instance.host:
                with contextlib.suppress(Exception):  # a stale pin is harmless; the machine is gone
                    forget_host(self.config.known_hosts, SshEndpoint(instance.host, instance.port, instance.user))
            return
        missing = [instance_id for instance_id in ids if instance_id not in gone]
        self.teardown.state = "unconfirmed"
        self.teardown.message = (
            f"COULD NOT VERIFY that {self.provider.name} instance {', '.join(missing)} ({label}) is terminated "
            f"after {self.timing.terminate_attempts} attempts: it may still be billing. Terminate it in the provider's "
            "console; Scriba tries again at its next start and with `scriba offload sweep`."
        )
        self._record("the terminate request", self.ledger.record_terminate_requested, ledger_id)
        self._record("the failed termination", self.ledger.record_failed, ledger_id, self.teardown.message)
        self._emit("status", self.teardown.message)

    def _machines_to_end(
        self, ledger_id: int, label: str, instance: Instance | None, failure: BaseException | None
    ) -> tuple[str, ...] | None:
        """The instance ids to terminate; () when no machine exists; None when that cannot be known now (the
        entry stays open for the next sweep and ``teardown`` says so)."""
        if not self.provider.rents_machines:
            # The user's own host: nothing bills; its work directory is removed above.
            if failure is not None:
                self._record("the failure", self.ledger.record_failed, ledger_id, _one_line(failure))
            self._record("the end of the run", self.ledger.record_terminated, ledger_id, True)
            return ()
        if instance is not None:
            return (instance.instance_id,)
        known = getattr(failure, "instance_id", None)  # e.g. created, then its SSH key was refused
        if isinstance(known, str) and known:
            self._record("the instance id", self.ledger.record_instance, ledger_id, known)
            return (known,)
        if failure is not None and _launch_refused(failure):
            self._record("the refused launch", self.ledger.record_not_launched, ledger_id, _one_line(failure))
            return ()
        # The launch may have created a machine (an interrupt or a lost answer mid-request): only the provider's
        # own list can tell, and it may lag the create, so it is read several times. Never guess "not launched".
        self._emit("status", f"the launch was interrupted; looking for a machine labelled {label}")
        live, errors, reads = self._look_for_launched(label)
        if live:
            self._record("the instance id", self.ledger.record_instance, ledger_id, live[0].instance_id)
            self._emit("status", f"the interrupted launch did create {', '.join(i.instance_id for i in live)}")
            return tuple(item.instance_id for item in live)
        window = self.timing.unclear_launch_spacing_s * max(0, self.timing.unclear_launch_reads - 1)
        name = self.provider.name
        if reads == 0:
            looked = f"{name}'s list of machines could not be read ({errors[-1]})"
        else:
            looked = f"{name} did not list a machine labelled {label} in {reads} reads over {window:.0f} s"
        # The entry stays open (launch outcome unknown), so that the next sweep asks again.
        self.teardown.state = "unconfirmed"
        self.teardown.message = (
            f"the launch of {label} was interrupted and {looked}: the outcome is unknown, and a machine may be "
            f"billing (a provider's list can lag behind a create). Scriba keeps this launch open and asks {name} "
            "again at its next start and with `scriba offload sweep`, ending the machine if it appears; to be sure "
            "now, check the provider's console."
        )
        unknown = f"launch outcome unknown: {self.teardown.message}"
        self._record("the unclear launch", self.ledger.record_failed, ledger_id, unknown)
        self._emit("status", self.teardown.message)
        return None

    def _look_for_launched(self, label: str) -> tuple[list[Instance], list[str], int]:
        """Read the provider's list for a machine labelled ``label``, several times spaced out (its list may lag
        the create). Returns the live machines found (stops at the first read that shows one), the read errors,
        and how many reads answered."""
        errors: list[str] = []
        reads = 0
        attempts = max(1, self.timing.unclear_launch_reads)
        for attempt in range(attempts):
            try:
                found = [item for item in self.provider.list_ours(label) if item.label == label]
            except Exception as error:
                errors.append(_one_line(error))
            else:
                reads += 1
                live = [item for item in found if item.state != "terminated"]
                if live:
                    return live, errors, reads
            if attempt + 1 < attempts:
                time.sleep(self.timing.unclear_launch_spacing_s)
        return [], errors, reads

    def _terminate_verified(self, instance_id: str) -> bool:
        for attempt in range(self.timing.terminate_attempts):
            try:
                self.provider.terminate(instance_id)
                if self._verify_terminated(instance_id):
                    return True
            except Exception as error:
                self._emit("status", f"terminate attempt {attempt + 1} failed: {_one_line(error)}")
            if attempt + 1 < self.timing.terminate_attempts:
                time.sleep(min(30.0, self.timing.reconnect_wait_s * (2**attempt)))
        return False

    def _verify_terminated(self, instance_id: str) -> bool:
        deadline = time.monotonic() + self.timing.verify_timeout_s
        while True:
            if self.provider.is_terminated(instance_id):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(5.0, self.timing.reconnect_wait_s * 2))


# Ctrl-C, a service manager's stop and a closed terminal (SIGHUP does not exist on Windows).
_HELD_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def signals_held(tell: Callable[[], None]) -> Iterator[list[int]]:
    """Hold SIGINT, SIGTERM and SIGHUP back while the body runs: a second Ctrl-C (or a service manager's stop) during a
    teardown must not leave a machine half-ended. Each one is counted and ``tell`` says why nothing happens.
    Only the main thread can set handlers; elsewhere (the window's worker) there is no signal to hold."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def hold(signum: int, frame: Any) -> None:
        received.append(signum)
        tell()

    previous: dict[signal.Signals, Any] = {}
    for which in _HELD_SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            previous[which] = signal.signal(which, hold)
    try:
        yield received
    finally:
        for which, handler in previous.items():
            signal.signal(which, handler if handler is not None else signal.SIG_DFL)


def _write_stderr(text: str) -> None:
    """From a signal handler: a plain write, never print (which may be in the middle of a write itself)."""
    with contextlib.suppress(OSError, ValueError):
        os.write(sys.stderr.fileno(), text.encode("utf-8", "replace"))


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


@contextlib.contextmanager
def _temporary_dir() -> Any:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="scriba-offload-") as directory:
        yield Path(directory)
