"""The offload of some queued jobs as the window runs it, without Qt: the estimate, the checks before a run, the
run on its own thread (build the offload, then :class:`app.cloud.offload.queue_offload.QueueOffload` takes the
jobs and runs it), what its events add up to, and what is said when it ends. Also the start-up sweep's decision.

Threads: :meth:`OffloadController.start_estimate` and :meth:`OffloadController.begin` start threads that report only
through the callables they are given, and they report from those threads. A GUI hands in callables that carry
the news to its own thread, and there calls :meth:`OffloadController.accept`, :meth:`OffloadController.apply_event` and
:meth:`OffloadController.conclude`, which change the controller's state: so everything the window reads changes on
the window's thread.

Heavy imports (paramiko through :mod:`app.cloud.offload.run`) happen inside the functions that need them: the
window imports this module at start, before any offload is asked for.
"""

from __future__ import annotations

import logging
import re
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from app.cloud.offload.selection import SelectedJobs, summarize_jobs
from app.cloud.offload.wording import describe_error, teardown_text
from app.cloud.pricing.estimate import LOCAL_PROVIDER, SSH_PROVIDER, Estimate, Option, within_budget
from app.cloud.pricing.estimate import Job as EstimateJob
from app.cloud.pricing.spread import spread_over
from app.core.cancel import CancelToken
from app.core.errors import ScribaError
from app.core.queue.jobs import JobNotFoundError, JobOptions, JobState, JobStore
from app.core.transcript.times import clock

if TYPE_CHECKING:
    from app.cloud.offload.base import OffloadEvent, OffloadLike, OffloadResult, RemoteSetup
    from app.cloud.offload.run import Offload
    from app.cloud.types import Offer

log = logging.getLogger(__name__)

DEFAULT_BUDGET_USD = 5.0
DEFAULT_REMOTE_COMMAND = "scriba"
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"

_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

EstimateFunction = Callable[[EstimateJob], Estimate]
BuildOffload = Callable[[], "OffloadLike"]


class RentFactory(Protocol):
    """:func:`app.cloud.offload.launch.build_rented_offload`'s shape."""

    def __call__(
        self,
        provider_name: str,
        chosen: Offer,
        data_dir: Path,
        *,
        options: JobOptions,
        budget_usd: float | None,
        estimate_usd: float | None,
        hf_token: str | None = None,
    ) -> Offload: ...


class FleetFactory(Protocol):
    """:func:`app.cloud.fleet.rented.build_rented_fleet`'s shape (N machines; given by the layer above, which may
    import the fleet)."""

    def __call__(
        self,
        provider_name: str,
        chosen: Offer,
        count: int,
        data_dir: Path,
        *,
        options: JobOptions,
        budget_usd: float | None,
        estimate_usd: float | None,
        status: Callable[[str], None],
    ) -> OffloadLike: ...


class SshFactory(Protocol):
    """:func:`app.cloud.offload.launch.build_ssh_offload`'s shape."""

    def __call__(
        self,
        url: str,
        data_dir: Path,
        *,
        identity: Path | None,
        known_hosts: Path,
        options: JobOptions,
        hf_token: str | None = None,
        setup: RemoteSetup | None = None,
    ) -> Offload: ...


class ChoiceError(ScribaError):
    """What the user chose cannot run; the message says why, for them, and nothing was started."""


# ------------------------------------------------------------------------------------------------ the jobs


def default_estimate(job: EstimateJob) -> Estimate:
    """The price table, with live prices for every provider whose API key is stored (network: not on the main
    thread). A provider whose API fails falls back to the table, with a note saying so."""
    from app.cloud.pricing.estimate import Assumptions, estimate
    from app.cloud.providers import configured_providers
    from app.core.engine.models import BUNDLED_MODEL, cached_model_path, is_model_dir

    live = {name: provider.offers for name, provider in configured_providers().items()}
    on_disk = job.model == BUNDLED_MODEL or is_model_dir(cached_model_path(job.model))
    return estimate(
        job,
        assumptions=Assumptions(local_model_on_disk=on_disk),
        live=live or None,
        # Marketplaces list hundreds of near-identical live offers: the three cheapest per GPU are enough.
        max_per_gpu=3 if live else None,
    )


@dataclass(frozen=True)
class Prepared:
    selected: SelectedJobs
    estimate: Estimate | None
    why_no_estimate: str | None
    keyed: frozenset[str] | None = None  # the providers whose API key is stored (None: not looked at)


def stored_keys() -> frozenset[str]:
    """The providers Scriba can rent from now: their API key is in the keyring or the environment. Reads the
    keyring (a D-Bus call on a desktop): not on the main thread while it waits for something else."""
    from app.cloud.providers import PROVIDER_CLASSES, api_key

    return frozenset(name for name, cls in PROVIDER_CLASSES.items() if api_key(cls))


def prepare(
    store: JobStore, job_ids: Sequence[int], estimate_function: EstimateFunction, read_keys: bool = False
) -> Prepared:
    """Read the jobs' lengths (probing files where needed) and estimate. Reads files and maybe the network.
    ``read_keys``: also which providers have their API key stored (the rentals will use those keys)."""
    jobs = []
    for job_id in job_ids:
        try:
            jobs.append(store.get(job_id))
        except JobNotFoundError:
            continue
    selected = summarize_jobs(jobs)
    why_none: str | None = None
    result: Estimate | None = None
    if selected.audio_seconds <= 0:
        why_none = "no estimate: the length of the audio is unknown (the files' headers do not say)"
    else:
        try:
            result = estimate_function(selected.estimate_job())
        except ValueError as error:  # a model outside the catalog (a model directory), no audio
            why_none = f"no estimate: {error}"
    return Prepared(selected, result, why_none, stored_keys() if read_keys else None)


# ------------------------------------------------------------------------------------------------ the choice


def needs_key(option: Option, keyed: frozenset[str] | None) -> bool:
    """A row of a provider Scriba can rent from, but whose API key is not stored (``keyed``: those stored)."""
    from app.cloud.providers import PROVIDER_CLASSES

    provider = option.offer.provider
    return keyed is not None and provider in PROVIDER_CLASSES and provider not in keyed


def why_not_rentable(option: Option, keyed: frozenset[str] | None = None) -> str | None:
    """None when Scriba can rent this row in one click; otherwise why not, for the Run button's tooltip.
    ``keyed``: the providers whose API key is stored; a row of another one needs its key first."""
    from app.cloud.providers import PROVIDER_CLASSES

    offer = option.offer
    if offer.provider == LOCAL_PROVIDER:
        return "This computer: nothing to rent. Close this dialog and the local queue transcribes the jobs."
    if offer.provider == SSH_PROVIDER:
        return "Your own SSH host: choose “My SSH host” below."
    if not offer.launchable or offer.provider not in PROVIDER_CLASSES:
        rentable = ", ".join(cls.title for cls in PROVIDER_CLASSES.values())
        return (
            f"Estimate only: Scriba cannot rent from {offer.provider} (no adapter). "
            f"Pick a row of {rentable}, or your own SSH host."
        )
    if needs_key(option, keyed):
        title = PROVIDER_CLASSES[offer.provider].title
        return f"Renting from {title} needs an API key: add it with “API keys…” below, then Run."
    return None


def _fits(option: Option, budget: float, cost: float | None) -> bool:
    return within_budget(option, budget) if cost is None else cost <= budget + 1e-9


def over_budget_text(option: Option, budget: float, cost: float | None = None) -> str | None:
    """Why this row cannot run within ``budget``, for the Run button's tooltip; None when it can. ``cost``: the
    estimate for several machines, where it is not the row's own."""
    if _fits(option, budget, cost):
        return None
    return (
        f"The estimate (${option.est_cost_usd if cost is None else cost:.2f}) is over your budget (${budget:.2f}): "
        "raise the budget or pick a cheaper row"
    )


def refuse_rental(
    option: Option | None, budget: float, cost: float | None = None, keyed: frozenset[str] | None = None
) -> str | None:
    """Why the Run button must not rent ``option`` (said when it was pressed anyway); None when it may."""
    if option is None:
        return "Pick a row of the estimate, or choose “My SSH host”."
    reason = why_not_rentable(option, keyed)
    if reason is not None:
        return reason
    if not _fits(option, budget, cost):
        return (
            f"The estimate (${option.est_cost_usd if cost is None else cost:.2f}) is over your budget "
            f"(${budget:.2f}): nothing was rented. Raise the budget, pick a cheaper row, use fewer machines, or "
            "send fewer files."
        )
    return None


def parse_remote_command(text: str) -> RemoteSetup:
    """``[NAME=VALUE …] command [args …]``: leading assignments become the remote environment (like env(1))."""
    from app.cloud.offload.base import RemoteSetup

    words = shlex.split(text)
    env: list[tuple[str, str]] = []
    while words and _ENV_WORD.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env.append((name, value))
    if not words:
        raise ValueError("give the command that runs Scriba on the host, for example: scriba")
    return RemoteSetup(command=tuple(words), env=tuple(env))


@dataclass(frozen=True)
class SshHostChoice:
    """The user's own host as typed in the window; empty fields mean the defaults."""

    url: str
    identity: str = ""
    known_hosts: str = ""
    command: str = ""
    # The user's consent to install Scriba on the host where it is missing (a private venv there).
    install: bool = False

    @classmethod
    def remembered(cls, entry: Any) -> SshHostChoice:
        """From the remembered entry (``OffloadPreferences.ssh_host``), with the defaults filled in."""
        host = entry if isinstance(entry, dict) else {}
        return cls(
            url=str(host.get("url", "")),
            identity=str(host.get("identity", "")),
            known_hosts=str(host.get("known_hosts") or DEFAULT_KNOWN_HOSTS),
            command=str(host.get("command") or DEFAULT_REMOTE_COMMAND),
            install=host.get("install") is True,
        )

    def to_remember(self) -> dict[str, str | bool]:
        return {
            "url": self.url.strip(),
            "identity": self.identity.strip(),
            "known_hosts": self.known_hosts.strip() or DEFAULT_KNOWN_HOSTS,
            "command": self.command.strip() or DEFAULT_REMOTE_COMMAND,
            "install": self.install,
        }


@dataclass(frozen=True)
class CheckedSshHost:
    url: str
    identity: Path | None
    known_hosts: Path
    setup: RemoteSetup


def check_ssh_host(choice: SshHostChoice) -> CheckedSshHost:
    """The host's fields made into paths and a remote command; :class:`ChoiceError` says what is wrong."""
    from app.cloud.remote.transport import TransportError, parse_ssh_url

    fields = {name: value for name, value in choice.to_remember().items() if isinstance(value, str)}
    identity = Path(fields["identity"]).expanduser() if fields["identity"] else None
    known_hosts = Path(fields["known_hosts"]).expanduser()
    try:
        parse_ssh_url(fields["url"], identity)
        setup = replace(parse_remote_command(fields["command"]), install_missing=choice.install)
    except (TransportError, ValueError) as error:
        raise ChoiceError(str(error)) from error
    if identity is not None and not identity.is_file():
        raise ChoiceError(f"The identity file {identity} does not exist.")
    if not known_hosts.is_file():
        raise ChoiceError(
            f"The known-hosts file {known_hosts} does not exist. Scriba never accepts a host key silently: "
            "connect once with ssh, or add the key with ssh-keyscan."
        )
    return CheckedSshHost(fields["url"], identity, known_hosts, setup)


def huggingface_token_if(send: bool) -> str | None:
    """Read on the run thread (the keyring can be slow): only when the user ticked the box, for this job."""
    if not send:
        return None
    from app.core.secrets import huggingface_token

    token, _ = huggingface_token()
    return token


# ------------------------------------------------------------------------------------------------ the run


@dataclass(frozen=True)
class RunOutcome:
    result: OffloadResult | None = None
    error: BaseException | None = None
    cancelled: bool = False


class OffloadRun:
    """One offload, shared by the thread that cancels it and the thread that runs it."""

    def __init__(self) -> None:
        # Shared with the QueueOffload and the Offload it runs: one cancel reaches every layer.
        self.cancel_token = CancelToken()
        self.offload: OffloadLike | None = None
        self.thread: threading.Thread | None = None
        self.started_at = time.monotonic()

    def cancel(self) -> None:
        # Thread-safe; the offload checks the token between steps and tears down in its finally, on the run thread.
        self.cancel_token.cancel()

    def execute(
        self,
        data_dir: Path,
        job_ids: Sequence[int],
        build: BuildOffload,
        on_event: Callable[[OffloadEvent], None],
    ) -> RunOutcome:
        """Build the offload (where a missing key or no capacity fails without taking any job from the queue),
        then let QueueOffload take the jobs and run it. Blocks; never raises."""
        from app.cloud.offload.queue_offload import QueueOffload

        store: JobStore | None = None
        try:
            offload = build()
            self.offload = offload
            # A connection of its own: the window polls SQLite's data_version, which moves only on commits made by
            # other connections, so progress written here reaches the queue's rows within its poll.
            store = JobStore(data_dir, recover=False)
            if self.cancel_token.cancelled:
                return RunOutcome(cancelled=True)  # before anything ran: the jobs were never taken
            queue = QueueOffload(store, job_ids, lambda: offload, on_event=on_event, cancel=self.cancel_token)
            result = queue.run()
            return RunOutcome(result=result, cancelled=result is None)
        except BaseException as error:  # shown to the user; QueueOffload has already failed or requeued the jobs
            log.info("offload ended with %s: %s", type(error).__name__, error)
            return RunOutcome(error=error)
        finally:
            if store is not None:
                store.close()


@dataclass(frozen=True)
class ProgressShown:
    """The progress bar after an event: its label (Qt's ``%p`` is the percentage) and its fraction."""

    label: str
    fraction: float


@dataclass(frozen=True)
class Conclusion:
    """What the window shows when a run has ended."""

    status: str  # the final status line
    error: str | None  # the error text to show ("" hides it); None leaves what is shown as it is
    progress_label: str
    complete: bool  # the progress bar shows everything done
    spent: bool  # the run took the jobs from the queue: nothing is left to run from this window
    notification: str  # one line for the window's notification


class OffloadController:
    """Estimate, check, run and conclude the offload of some queued jobs; one run at a time, and once a run has
    taken the jobs from the queue, no other."""

    def __init__(
        self,
        store: JobStore,
        job_ids: Sequence[int],
        *,
        estimate_function: EstimateFunction = default_estimate,
        rent_factory: RentFactory | None = None,
        ssh_factory: SshFactory | None = None,
        fleet_factory: FleetFactory | None = None,
        keys_from_keyring: bool = False,
    ) -> None:
        """``keys_from_keyring``: rentals use the API keys stored for each provider (not a factory's own), so a
        provider without one is said to need it before anything is asked."""
        self.store = store
        self._keys_from_keyring = keys_from_keyring
        self.job_ids = tuple(job_ids)
        self.data_dir = store.directory
        self._estimate_function = estimate_function
        self._rent_factory = rent_factory
        self._ssh_factory = ssh_factory
        self._fleet_factory = fleet_factory
        self.selected: SelectedJobs | None = None
        self.estimate: Estimate | None = None
        self.keyed: frozenset[str] | None = None  # the providers whose API key is stored, once estimated
        self.offload_run: OffloadRun | None = None
        self.outcome: RunOutcome | None = None
        self.spent = False
        self.running_ids: list[int] = []  # the jobs of the current run (those still queued when it started)
        self.last_message = ""
        self.cost_usd = 0.0
        self._file_fractions: dict[int, float] = {}
        self._estimate_thread: threading.Thread | None = None

    # -------------------------------------------------------------------------------------------- estimate

    def start_estimate(self, deliver: Callable[[Prepared | Exception], None]) -> None:
        """Estimate on a thread; ``deliver`` gets the :class:`Prepared` or the exception that stopped it."""

        def work() -> None:
            try:
                prepared = prepare(self.store, self.job_ids, self._estimate_function, self._keys_from_keyring)
            except Exception as error:
                log.exception("offload estimate failed")
                deliver(error)
                return
            deliver(prepared)

        self._estimate_thread = threading.Thread(
            target=work,
            daemon=True,  # reads headers and prices only: nothing to clean up if the program ends meanwhile
            name="offload-estimate",
        )
        self._estimate_thread.start()

    def accept(self, prepared: Prepared) -> None:
        self.selected = prepared.selected
        self.estimate = prepared.estimate
        self.keyed = prepared.keyed

    # -------------------------------------------------------------------------------------------- choosing

    def still_queued(self) -> list[int]:
        queued = []
        for job_id in self.job_ids:
            try:
                if self.store.get(job_id).state is JobState.QUEUED:
                    queued.append(job_id)
            except JobNotFoundError:
                continue
        return queued

    def ssh_build(self, host: CheckedSshHost, options: JobOptions, send_token: bool) -> BuildOffload:
        factory = self._ssh_factory
        if factory is None:
            from app.cloud.offload.launch import build_ssh_offload

            factory = build_ssh_offload
        data_dir = self.data_dir

        def build() -> Offload:
            return factory(
                host.url,
                data_dir,
                identity=host.identity,
                known_hosts=host.known_hosts,
                options=options,
                hf_token=huggingface_token_if(send_token),
                setup=host.setup,
            )

        return build

    def rent_build(
        self, option: Option, options: JobOptions, budget: float, send_token: bool, machines: int = 1
    ) -> BuildOffload:
        """``machines`` > 1: that many machines share the jobs (``estimate_usd`` is then the spread's)."""
        if machines > 1:
            return self._fleet_build(option, options, budget, machines)
        factory = self._rent_factory
        if factory is None:
            from app.cloud.offload.launch import build_rented_offload

            factory = build_rented_offload
        data_dir = self.data_dir

        def build() -> Offload:
            # On the run thread: the provider's key is read and its live offers fetched here (network).
            return factory(
                option.offer.provider,
                option.offer,
                data_dir,
                options=options,
                budget_usd=budget,
                estimate_usd=option.est_cost_usd,
                hf_token=huggingface_token_if(send_token),
            )

        return build

    def _fleet_build(self, option: Option, options: JobOptions, budget: float, machines: int) -> BuildOffload:
        fleet_factory = self._fleet_factory
        if fleet_factory is None:
            raise ChoiceError("several machines at once need the fleet, which this controller was not given")
        data_dir = self.data_dir
        files = len(self.selected.job_ids) if self.selected is not None else 1
        estimate_usd = spread_over(option, machines, files).cost_usd

        def build() -> OffloadLike:
            return fleet_factory(
                option.offer.provider,
                option.offer,
                machines,
                data_dir,
                options=options,
                budget_usd=budget,
                estimate_usd=estimate_usd,
                status=lambda text: log.info("fleet: %s", text),
            )

        return build

    # -------------------------------------------------------------------------------------------- running

    @property
    def running(self) -> bool:
        return self.offload_run is not None and self.outcome is None

    def begin(
        self,
        job_ids: list[int],
        build: BuildOffload,
        where: str,
        on_event: Callable[[OffloadEvent], None],
        on_ended: Callable[[RunOutcome], None],
    ) -> None:
        """Run on a thread; ``on_event`` hears each event and ``on_ended`` the outcome, always last, on it."""
        self.outcome = None
        self.running_ids = job_ids
        run = self.offload_run = OffloadRun()
        self.last_message = f"starting on {where}"
        self.cost_usd = 0.0
        self._file_fractions = {}

        def work() -> None:
            on_ended(run.execute(self.data_dir, job_ids, build, on_event))

        run.thread = threading.Thread(
            target=work,
            # Not a daemon: a program ending mid-run waits for the teardown in the offload's finally, so a
            # rented machine is destroyed rather than left for the next start's orphan sweep.
            daemon=False,
            name="offload-run",
        )
        run.thread.start()

    def cancel(self) -> bool:
        """Stop the offload; the machine is torn down (and the jobs marked cancelled) on the run thread. False
        when nothing runs."""
        if not self.running or self.offload_run is None:
            return False
        self.offload_run.cancel()
        return True

    def wait_until_ended(self, timeout_s: float | None = None) -> bool:
        """Block until the run thread has ended (tests, and a caller that must not leave before the teardown)."""
        if self.offload_run is None or self.offload_run.thread is None:
            return True
        self.offload_run.thread.join(timeout_s)
        return not self.offload_run.thread.is_alive()

    def apply_event(self, event: OffloadEvent) -> ProgressShown | None:
        """Fold an event into the run's message, cost and progress; the progress to show, when it moved."""
        if event.message:
            self.last_message = event.message
        self.cost_usd = max(self.cost_usd, event.cost_usd)
        count = max(len(self.running_ids), 1)
        if event.kind == "upload" and event.fraction is not None:
            return ProgressShown("Uploading %p%", event.fraction)
        if event.kind in ("started", "progress", "done", "failed") and event.index is not None:
            fraction = 1.0 if event.kind in ("done", "failed") else float(event.fraction or 0.0)
            self._file_fractions[event.index] = max(self._file_fractions.get(event.index, 0.0), fraction)
            return ProgressShown("Transcribing %p%", sum(self._file_fractions.values()) / count)
        return None

    def status_text(self) -> str | None:
        """The status line while the run goes on (None when none does): its last message, time and cost."""
        if not self.running or self.offload_run is None:
            return None
        elapsed = time.monotonic() - self.offload_run.started_at
        # Until run() returns, the offload's finally is removing the work and destroying the machine.
        prefix = "Tearing down… " if self.offload_run.cancel_token.cancelled else ""
        return f"{prefix}{self.last_message} · {clock(elapsed)} · ${self.cost_usd:.3f} so far"

    def conclude(self, outcome: RunOutcome) -> Conclusion:
        """The run has ended: record it, and say how."""
        self.outcome = outcome
        run = self.offload_run
        elapsed = time.monotonic() - run.started_at if run is not None else 0.0
        offload = run.offload if run is not None else None
        where = f"{offload.offer.gpu} ({offload.provider.name})" if offload is not None else "the remote"
        teardown = offload.teardown if offload is not None else None
        # A machine that may still bill must not hide behind "failed" or "finished" (a cancel's status says so).
        billing_warning = (
            teardown_text(teardown)
            if teardown is not None and teardown.state == "unconfirmed" and not outcome.cancelled
            else ""
        )
        still_queued = self.still_queued()
        # A run that took nothing from the queue (no key, no capacity, a refused host key) may be tried again.
        self.spent = not still_queued
        if outcome.error is not None:
            text = describe_error(outcome.error)
            if set(self.running_ids) <= set(still_queued):
                text += " The jobs are still queued."
            error = f"{text}\n{billing_warning}".strip()
            status = f"Offload failed after {clock(elapsed)}."
            return Conclusion(status, error, "Failed", False, self.spent, f"{status} {error}")
        if outcome.cancelled:
            status = f"Cancelled after {clock(elapsed)}; {teardown_text(teardown)} · ${self.cost_usd:.3f}"
            return Conclusion(status, None, "Cancelled", False, self.spent, status)
        result = outcome.result
        assert result is not None
        done, failed = len(result.transcripts), len(result.failures)
        status = (
            f"Finished on {where}: {done} transcribed"
            + (f", {failed} failed" if failed else "")
            + f" in {clock(result.seconds or elapsed)} · ${result.cost_usd:.3f}"
        )
        failures = "\n".join(result.failures.values()) if failed else ""
        error = f"{failures}\n{billing_warning}".strip()
        return Conclusion(status, error, "Done", True, self.spent, f"{status} {billing_warning}".strip())


# ------------------------------------------------------------------------------------------------ start-up sweep


def sweep_is_due(data_dir: Path) -> bool:
    """Whether the start-up sweep has anything to look at: only where a ledger exists (something was offloaded
    from this data folder once); otherwise it would read the keyring and ask every provider for nothing."""
    from app.cloud.offload.ledger import DATABASE_NAME

    return (data_dir / DATABASE_NAME).is_file()


def sweep_at_start(data_dir: Path, notify: Callable[[str], None]) -> int:
    """End any rented machine an earlier run left behind (:func:`app.cloud.offload.launch.sweep_left_behind`, the
    CLI's sweep); how many ledger entries are still open, or -1 when the sweep failed (``notify`` says why).
    Never raises: the sweep must never stop the window; it runs again at the next start."""
    from app.cloud.offload.launch import sweep_left_behind

    try:
        # Run even when the ledger has no open entry: a machine the ledger wrongly closed (as "never launched",
        # or terminated) shows only in the provider's own list, and it bills until it is ended.
        return sweep_left_behind(data_dir, notify)
    except Exception as error:
        log.exception("orphan sweep failed")
        notify(f"Could not check for cloud machines left by an earlier run: {error}")
        return -1
