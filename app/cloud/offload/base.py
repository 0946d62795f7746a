"""What an offload is made of and what it tells: its errors, what it needs of a provider and a ledger
(protocols, so that tests hand in a loopback host and a file-backed ledger), how Scriba is run on the remote,
and the events, result and teardown state a run reports."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from app.cloud.types import Instance, Offer
from app.core.errors import ScribaError
from app.core.queue.jobs import JobOptions
from app.core.transcript.document import Transcript

if TYPE_CHECKING:
    from app.cloud.remote.transport import SshSession
    from app.core.cancel import CancelToken


class OffloadError(ScribaError):
    """The offload could not be done; the message says which step failed and why."""


class OffloadCancelled(OffloadError):
    pass


class BudgetExceeded(OffloadError):
    pass


class ProviderLike(Protocol):
    """What the offload needs from a provider (see app/cloud/providers/base.py)."""

    name: str
    rents_machines: bool  # False for the user's own SSH host: nothing to terminate, its work directory is removed

    def launch(self, offer: Offer, ssh_public_key: str, label: str) -> Instance: ...

    def wait_ready(
        self, instance_id: str, timeout_s: float = ..., poll_s: float = ..., cancel: CancelToken | None = ...
    ) -> Instance: ...

    def terminate(self, instance_id: str) -> None: ...

    def is_terminated(self, instance_id: str) -> bool: ...

    def self_terminate_command(self, instance_id: str) -> list[str] | None: ...

    def list_ours(self, label_prefix: str = ...) -> list[Instance]: ...


class LedgerLike(Protocol):
    def record_intent(
        self, provider: str, offer: Offer, label: str, job_ref: str | None, budget_usd: float | None
    ) -> int: ...

    def record_instance(self, ledger_id: int, instance_id: str) -> None: ...

    def record_ready(self, ledger_id: int) -> None: ...

    def record_terminate_requested(self, ledger_id: int) -> None: ...

    def record_terminated(self, ledger_id: int, verified: bool = True) -> None: ...

    def record_failed(self, ledger_id: int, reason: str) -> None: ...

    def record_not_launched(self, ledger_id: int, reason: str) -> None: ...


@dataclass(frozen=True)
class RemoteSetup:
    """How to run Scriba on the remote machine (it must be installed there; see :meth:`Offload._check_remote`)."""

    command: tuple[str, ...] = ("scriba",)
    env: tuple[tuple[str, str], ...] = ()  # e.g. PYTHONPATH for a checkout
    work_parent: str = "/tmp"
    # Consent to install Scriba where it is missing (a rented machine always; the user's own host when asked):
    # this wheel, or one built from this installation, into a private venv there (remote_install.py).
    install_missing: bool = False
    wheel: Path | None = None
    python: str = "python3"  # the host's Python that the private venv is made from

    def argv(self, *args: str) -> list[str]:
        return self.with_env(*self.command, *args)

    def with_env(self, *argv: str) -> list[str]:
        """Any command on the host, in this set-up's environment."""
        prefix = ["env", *(f"{name}={value}" for name, value in self.env)] if self.env else []
        return [*prefix, *argv]


@dataclass(frozen=True)
class OffloadTiming:
    """How a run paces its conversation with the remote (tests shorten these; users never set them)."""

    heartbeat_s: float = 5.0  # how often the heartbeat file is touched
    heartbeat_timeout_s: float = 180.0  # the remote watchdog stops the work when the heartbeat is this old
    done_grace_s: float = 900.0  # how long a finished remote waits for its results to be fetched
    poll_s: float = 0.5  # how often the remote's event log is read
    max_reconnects: int = 6
    reconnect_wait_s: float = 1.0
    terminate_attempts: int = 5
    verify_timeout_s: float = 120.0  # how long the provider's list is watched for the machine to be gone
    # After a launch whose outcome is unclear, the provider's list is read this many times, this far apart:
    # providers' lists are eventually consistent and may show a machine only some seconds after its create.
    unclear_launch_reads: int = 6
    unclear_launch_spacing_s: float = 8.0


@dataclass(frozen=True)
class OffloadConfig:
    """Everything one :class:`app.cloud.offload.run.Offload` needs besides its provider, offer and ledger: the
    job options, how to reach and trust the machine, how Scriba runs there, the money limits, and the pacing."""

    options: JobOptions
    known_hosts: Path
    pin_new_host: bool  # a machine rented a minute ago: its first key is pinned (never the user's own host)
    key_file: Path | None = None
    public_key: str = ""  # the line a rented machine is told to accept
    setup: RemoteSetup = RemoteSetup()
    # Sent only when the user agreed, for this job; never shown in a repr or a log.
    hf_token: str | None = field(default=None, repr=False)
    budget_usd: float | None = None
    estimate_usd: float | None = None
    timing: OffloadTiming = OffloadTiming()
    # Called after each uploaded chunk (session, file index, bytes so far): tests cut the connection here.
    upload_hook: Callable[[SshSession, int, int], None] | None = None
    # Where each transcript's JSON is stored as soon as it is downloaded, before the remote copy is removed
    # (results.py); None: not stored (the caller keeps the transcripts itself).
    keep_dir: Path | None = None


@dataclass(frozen=True)
class OffloadEvent:
    kind: str  # status | upload | started | progress | gpu | done | failed | finished
    message: str = ""
    index: int | None = None
    fraction: float | None = None
    speed: float | None = None
    elapsed_s: float = 0.0
    cost_usd: float = 0.0  # what the machine has cost so far (its $/h times the time since launch)
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class OffloadResult:
    transcripts: dict[int, Transcript]
    failures: dict[int, str]
    seconds: float
    cost_usd: float
    instance: Instance | None
    speeds: dict[int, float]  # x real time per file, as measured on the remote machine
    # Each transcript's JSON as stored on this computer before the remote copy was removed (OffloadConfig.keep_dir).
    stored: dict[int, Path] = field(default_factory=dict)


TeardownState = Literal["not_started", "nothing_to_end", "terminated", "unconfirmed"]


@dataclass
class Teardown:
    """How the teardown ended, for the caller to tell the user the truth.

    ``terminated``: the provider confirmed every machine gone. ``nothing_to_end``: no machine was rented (the
    user's own host, or a launch the provider refused). ``unconfirmed``: a machine may still be billing (one
    that would not end, or an unclear launch the provider's list never showed); ``message`` says which and
    what to do.
    ``ledger_errors``: ledger writes that failed (the teardown went on without them)."""

    state: TeardownState = "not_started"
    machines: tuple[str, ...] = ()
    message: str = ""
    ledger_errors: list[str] = field(default_factory=list)
    signals_held: int = 0  # SIGINT/SIGTERM that arrived during the teardown and were held back


class OffloadLike(Protocol):
    """What the queue and the window run: one machine (:class:`app.cloud.offload.run.Offload`) or several
    (:class:`app.cloud.fleet.rented.RentedFleet`)."""

    @property
    def provider(self) -> ProviderLike: ...

    @property
    def offer(self) -> Offer: ...

    @property
    def teardown(self) -> Teardown: ...

    def cancel(self) -> None: ...

    def run(
        self,
        files: Sequence[Path],
        job_ref: str = ...,
        file_options: Sequence[JobOptions] | None = ...,
        on_event: Callable[[OffloadEvent], None] | None = ...,
        cancel: CancelToken | None = ...,
    ) -> OffloadResult: ...
