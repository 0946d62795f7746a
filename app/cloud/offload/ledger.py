"""The teardown ledger: every rented GPU is written down before it exists, so none is forgotten while it bills.

The order is what makes it safe (CLOUD.md, "Never leave a rented GPU running"):

1. :meth:`Ledger.record_intent` *before* the launch request: a crash during the request leaves an intent with a
   label, and the label finds the machine later even though its id was never seen;
2. :meth:`Ledger.record_instance` the moment the provider returns the id;
3. :meth:`Ledger.record_ready`, :meth:`Ledger.record_terminate_requested`, and
   :meth:`Ledger.record_terminated` once the provider *confirms* the machine is gone.

At start-up :meth:`Ledger.sweep_orphans` takes every entry that is not verified terminated and whose process is no
longer running, tells the user, and terminates and verifies it. An entry whose machine cannot be confirmed gone
stays open with the reason, so the next start tries again. An intent without an instance id (the launch's outcome
is unknown) is closed as never launched only once the provider's list, which lags behind a create, has shown no
machine with its label in several reads over minutes since the intent (``unclear_reads``, ``unclear_read_at``).
The same sweep then reconciles the ledger with each provider's own list of Scriba's machines (by label): a machine
that is up although its entry says "never launched" or "terminated" (a ledger that was wrong, or could not be
written) is terminated too, and one that this ledger has never heard of is reported (it may belong to Scriba on
another computer with the same account).

"Its process is no longer running" is decided by pid *and* the process's start time (``owner_started_at``): after
a reboot or a container restart the pid is soon reused by an unrelated process. Entries written before the start
time was recorded (NULL) fall back to the pid alone.

SQLite in the data directory, WAL, ``synchronous=FULL`` (an intent written just before a launch must survive a
power cut), the same connection discipline as :mod:`app.core.queue.jobs`. The ledger holds provider names, offers,
labels and instance ids: never an API key (error texts are already redacted by the HTTP layer).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from app.cloud.providers.base import LABEL_PREFIX, Provider, ProviderError
from app.cloud.types import Instance, Offer
from app.core.errors import ScribaError
from app.core.queue.sqlite_db import SqliteDatabase, process_started_at
from app.core.queue.sqlite_db import owner_alive as process_alive

log = logging.getLogger(__name__)

# Still 1 after ``owner_started_at`` and the unclear-launch read counts were added: those columns are nullable or
# have defaults and every query names its columns, so an older Scriba can still open (and sweep) a ledger this one
# wrote; a bumped version would lock it out.
SCHEMA_VERSION = 1
DATABASE_NAME = "cloud-ledger.sqlite3"
# Providers whose "machine" is the user's own: nothing bills, so an open entry is closed without a word.
NOT_RENTED = frozenset({"ssh", "local"})
# An entry written by another machine (data directory on a network share) cannot be checked by pid: it counts as
# abandoned once its process has not touched it (``heartbeat``) for this long.
STALE_AFTER_SECONDS = 900.0
# Identifies this process beyond its pid: in a container every start may get the same pid, and an entry left by
# the previous run must not look like ours.
_PROCESS_TOKEN = uuid.uuid4().hex
# A launch whose outcome is unknown (no instance id) is closed as never launched only after this many empty reads
# of the provider's list, the last of them at least UNCLEAR_LAUNCH_SPAN_S after the intent was written.
UNCLEAR_LAUNCH_READS = 3
# CLOUD.md: provisioning and boot take minutes on every provider and a create can stall, so the list may show it late.
UNCLEAR_LAUNCH_SPAN_S = 600.0


class LaunchState(str, Enum):
    INTENDED = "intended"  # written before the launch request
    LAUNCHED = "launched"  # the provider gave an id
    READY = "ready"  # reachable over SSH
    TERMINATE_REQUESTED = "terminate_requested"
    TERMINATED = "terminated"  # closed only once ``verified``
    NOT_LAUNCHED = "not_launched"  # closed: the provider never created a machine


@dataclass(frozen=True)
class Owner:
    """The process that made an entry; its machine is not an orphan while that process lives."""

    host: str
    pid: int
    token: str
    # When the process started (epoch seconds): tells it from a later process that got the same pid. None in
    # entries written before it was recorded.
    started_at: float | None = None

    @classmethod
    def this_process(cls) -> Owner:
        return cls(socket.gethostname(), os.getpid(), _PROCESS_TOKEN, process_started_at())


@dataclass(frozen=True)
class LedgerEntry:
    id: int
    provider: str
    offer_name: str  # the provider's name or id for what was rented
    offer: Offer | None  # the whole row when the caller gave it (price, GPU), for messages and cost reports
    label: str
    job_ref: str | None
    budget_usd: float | None
    state: LaunchState
    instance_id: str | None
    verified: bool
    reason: str | None
    created_at: float
    launched_at: float | None
    ready_at: float | None
    terminate_requested_at: float | None
    terminated_at: float | None
    updated_at: float
    owner: Owner
    # Launch outcome unknown (no instance id): how many sweeps read the provider's list without finding the
    # machine, and when the last one did.
    unclear_reads: int = 0
    unclear_read_at: float | None = None

    @property
    def is_open(self) -> bool:
        """Launched or intended, and not verified gone."""
        if self.state is LaunchState.NOT_LAUNCHED:
            return False
        return not (self.state is LaunchState.TERMINATED and self.verified)


SweepOutcome = Literal["terminated", "never_launched", "asking_again", "failed", "skipped", "closed", "unknown_machine"]


@dataclass(frozen=True)
class SweepResult:
    ledger_id: int
    provider: str
    label: str
    instance_ids: tuple[str, ...]
    outcome: SweepOutcome
    message: str


class LedgerEntryNotFound(ScribaError, LookupError):
    def __init__(self, ledger_id: int) -> None:
        super().__init__(f"no entry {ledger_id} in the cloud ledger")
        self.ledger_id = ledger_id


class LedgerStateError(ScribaError, RuntimeError):
    """A change that would hide a machine (closing an entry that has an instance id as "never launched")."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS launches (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    provider TEXT NOT NULL,
    offer_name TEXT NOT NULL,
    offer TEXT,
    label TEXT NOT NULL,
    job_ref TEXT,
    budget_usd REAL,
    state TEXT NOT NULL,
    instance_id TEXT,
    verified INTEGER NOT NULL DEFAULT 0,
    reason TEXT,
    created_at REAL NOT NULL,
    launched_at REAL,
    ready_at REAL,
    terminate_requested_at REAL,
    terminated_at REAL,
    updated_at REAL NOT NULL,
    owner_host TEXT NOT NULL,
    owner_pid INTEGER NOT NULL,
    owner_token TEXT NOT NULL,
    owner_started_at REAL,
    unclear_reads INTEGER NOT NULL DEFAULT 0,
    unclear_read_at REAL
);
CREATE INDEX IF NOT EXISTS launches_state ON launches (state, verified);
CREATE INDEX IF NOT EXISTS launches_label ON launches (label);
"""

_OPEN_WHERE = "state != 'not_launched' AND NOT (state = 'terminated' AND verified = 1)"


def _offer_from_json(text: str | None) -> Offer | None:
    if not text:
        return None
    data = json.loads(text)
    known = {item.name for item in fields(Offer)}
    # Keys written by a newer Scriba are dropped rather than refused: an old version can still sweep the entry.
    return Offer(**{key: value for key, value in data.items() if key in known})


class Ledger(SqliteDatabase):
    """Safe to share between threads of one process, and between processes.

    ``location`` is the data directory (the database is ``cloud-ledger.sqlite3`` in it) or, when it names a
    ``.sqlite3`` file, the database itself.
    """

    def __init__(
        self,
        location: Path,
        *,
        now: Callable[[], float] = time.time,
        owner: Owner | None = None,
        stale_after_s: float = STALE_AFTER_SECONDS,
        unclear_reads: int = UNCLEAR_LAUNCH_READS,
        unclear_span_s: float = UNCLEAR_LAUNCH_SPAN_S,
    ) -> None:
        location = Path(location)
        self.path = location if location.suffix in (".sqlite3", ".sqlite", ".db") else location / DATABASE_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._now = now
        self.owner = owner or Owner.this_process()
        self.stale_after_s = stale_after_s
        self.unclear_reads = unclear_reads
        self.unclear_span_s = unclear_span_s
        super().__init__(self.path, _SCHEMA, SCHEMA_VERSION, "ledger")
        self._migrate()

    def _migrate(self) -> None:
        """Bring a ledger written by an older Scriba up to date; its rows keep NULL where nothing was recorded."""
        with self._transaction() as db:
            columns = {row["name"] for row in db.execute("PRAGMA table_info(launches)")}
            if "owner_started_at" not in columns:
                db.execute("ALTER TABLE launches ADD COLUMN owner_started_at REAL")
            if "unclear_reads" not in columns:
                db.execute("ALTER TABLE launches ADD COLUMN unclear_reads INTEGER NOT NULL DEFAULT 0")
            if "unclear_read_at" not in columns:
                db.execute("ALTER TABLE launches ADD COLUMN unclear_read_at REAL")

    @classmethod
    def open_default(cls) -> Ledger:
        """The ledger in the user's data directory."""
        from app.core.paths import data_dir

        return cls(data_dir())

    # ----------------------------------------------------------------------------------------- reading

    @staticmethod
    def _entry(row: sqlite3.Row) -> LedgerEntry:
        return LedgerEntry(
            id=row["id"],
            provider=row["provider"],
            offer_name=row["offer_name"],
            offer=_offer_from_json(row["offer"]),
            label=row["label"],
            job_ref=row["job_ref"],
            budget_usd=row["budget_usd"],
            state=LaunchState(row["state"]),
            instance_id=row["instance_id"],
            verified=bool(row["verified"]),
            reason=row["reason"],
            created_at=row["created_at"],
            launched_at=row["launched_at"],
            ready_at=row["ready_at"],
            terminate_requested_at=row["terminate_requested_at"],
            terminated_at=row["terminated_at"],
            updated_at=row["updated_at"],
            owner=Owner(row["owner_host"], row["owner_pid"], row["owner_token"], row["owner_started_at"]),
            unclear_reads=row["unclear_reads"] or 0,
            unclear_read_at=row["unclear_read_at"],
        )

    def get(self, ledger_id: int) -> LedgerEntry:
        with self._lock:
            row = self._db.execute("SELECT * FROM launches WHERE id = ?", (ledger_id,)).fetchone()
        if row is None:
            raise LedgerEntryNotFound(ledger_id)
        return self._entry(row)

    def entries(self) -> list[LedgerEntry]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM launches ORDER BY id").fetchall()
        return [self._entry(row) for row in rows]

    def open_entries(self) -> list[LedgerEntry]:
        """Everything launched or intended and not verified terminated, oldest first."""
        with self._lock:
            rows = self._db.execute(f"SELECT * FROM launches WHERE {_OPEN_WHERE} ORDER BY id").fetchall()
        return [self._entry(row) for row in rows]

    def owner_alive(self, entry: LedgerEntry) -> bool:
        """Whether the process that made ``entry`` still runs (then its machine is in use, not an orphan)."""
        if entry.owner.token == self.owner.token:
            return True
        if entry.owner.host == self.owner.host:
            # Our own pid with another token is an earlier process that had the same pid (containers). Another pid
            # that runs is the owner only if it started when the owner did: after a reboot or a container restart
            # an unrelated process soon has it.
            return entry.owner.pid != self.owner.pid and process_alive(entry.owner.pid, entry.owner.started_at)
        return self._now() - entry.updated_at <= self.stale_after_s

    # ----------------------------------------------------------------------------------------- writing

    def record_intent(
        self,
        provider: str,
        offer: Offer | str,
        label: str,
        job_ref: str | None = None,
        budget_usd: float | None = None,
    ) -> int:
        """Write the launch down before asking the provider. Returns the ledger id.

        ``offer`` is the :class:`Offer` row (kept whole, for messages and cost reports) or just its name."""
        now = self._now()
        row = offer if isinstance(offer, Offer) else None
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO launches (provider, offer_name, offer, label, job_ref, budget_usd, state, created_at, "
                "updated_at, owner_host, owner_pid, owner_token, owner_started_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    provider,
                    row.offer if row else str(offer),
                    json.dumps(row.to_dict()) if row else None,
                    label,
                    job_ref,
                    budget_usd,
                    LaunchState.INTENDED.value,
                    now,
                    now,
                    self.owner.host,
                    self.owner.pid,
                    self.owner.token,
                    self.owner.started_at,
                ),
            )
            assert cursor.lastrowid is not None
            return cursor.lastrowid

    def _update(self, ledger_id: int, assignments: str, values: tuple[Any, ...]) -> None:
        with self._transaction() as db:
            cursor = db.execute(
                f"UPDATE launches SET {assignments}, updated_at = ? WHERE id = ?",
                (*values, self._now(), ledger_id),
            )
            if cursor.rowcount == 0:
                raise LedgerEntryNotFound(ledger_id)

    def record_instance(self, ledger_id: int, instance_id: str) -> None:
        """The provider returned an id: from now on the machine can be ended by id."""
        self._update(
            ledger_id,
            "instance_id = ?, state = ?, launched_at = COALESCE(launched_at, ?)",
            (instance_id, LaunchState.LAUNCHED.value, self._now()),
        )

    def record_ready(self, ledger_id: int) -> None:
        self._update(ledger_id, "state = ?, ready_at = ?", (LaunchState.READY.value, self._now()))

    def record_terminate_requested(self, ledger_id: int) -> None:
        self._update(
            ledger_id,
            "state = ?, terminate_requested_at = ?",
            (LaunchState.TERMINATE_REQUESTED.value, self._now()),
        )

    def record_terminated(self, ledger_id: int, verified: bool = True) -> None:
        """``verified``: the provider confirmed the machine is gone. Unverified, the entry stays open."""
        self._update(
            ledger_id,
            "state = ?, verified = ?, terminated_at = ?",
            (LaunchState.TERMINATED.value, int(verified), self._now()),
        )

    def record_failed(self, ledger_id: int, reason: str) -> None:
        """Note what went wrong; the entry stays open (a failed step does not mean no machine exists)."""
        self._update(ledger_id, "reason = ?", (reason,))

    def record_not_launched(self, ledger_id: int, reason: str) -> None:
        """Close an entry whose launch the provider definitely refused (no capacity, bad key, bad request).
        Refused when an instance id is recorded: that machine exists and must be terminated instead."""
        with self._transaction() as db:
            # One statement checks and closes, so an id recorded meanwhile by another process is never hidden.
            cursor = db.execute(
                "UPDATE launches SET state = ?, reason = ?, updated_at = ? WHERE id = ? AND instance_id IS NULL",
                (LaunchState.NOT_LAUNCHED.value, reason, self._now(), ledger_id),
            )
            if cursor.rowcount:
                return
            row = db.execute("SELECT instance_id FROM launches WHERE id = ?", (ledger_id,)).fetchone()
        if row is None:
            raise LedgerEntryNotFound(ledger_id)
        raise LedgerStateError(
            f"ledger entry {ledger_id} has instance {row['instance_id']}: terminate it rather than close it"
        )

    def record_unclear_read(self, ledger_id: int, reason: str) -> int:
        """A read of the provider's list found no machine for an entry without an instance id: count it (the
        entry stays open). Returns how many such reads the entry has had."""
        with self._transaction() as db:
            now = self._now()
            cursor = db.execute(
                "UPDATE launches SET unclear_reads = unclear_reads + 1, unclear_read_at = ?, reason = ?, "
                "updated_at = ? WHERE id = ?",
                (now, reason, now, ledger_id),
            )
            if cursor.rowcount == 0:
                raise LedgerEntryNotFound(ledger_id)
            row = db.execute("SELECT unclear_reads FROM launches WHERE id = ?", (ledger_id,)).fetchone()
        return int(row["unclear_reads"])

    def record_found_running(self, ledger_id: int, instance_id: str, reason: str) -> None:
        """The provider lists a machine for an entry the ledger had closed (a wrong "never launched", or a
        termination that was not real): open the entry again with that machine, so that it is ended and checked."""
        self._update(
            ledger_id,
            "instance_id = ?, state = ?, verified = 0, reason = ?, launched_at = COALESCE(launched_at, ?)",
            (instance_id, LaunchState.LAUNCHED.value, reason, self._now()),
        )

    def heartbeat(self, ledger_id: int) -> None:
        """For a long job whose data directory other machines share: shows the entry is still in use."""
        self._update(ledger_id, "state = state", ())

    # ----------------------------------------------------------------------------------------- start-up sweep

    def sweep_orphans(
        self,
        providers: Mapping[str, Provider],
        notify: Callable[[str], None],
        *,
        include_live: bool = False,
        verify_timeout_s: float = 300.0,
        poll_s: float = 5.0,
        reconcile: bool = True,
    ) -> list[SweepResult]:
        """End every machine an earlier run left behind; tell the user about each one through ``notify``.

        Entries whose process still runs are left alone unless ``include_live``. An intent without an instance
        id (a crash between the launch request and its answer) is looked up by label: a machine found is
        terminated; none found is counted, and the entry is closed as never launched only once ``unclear_reads``
        reads have found none and ``unclear_span_s`` has passed since the intent (the provider's list lags behind
        a create); until then it stays open and the next sweep asks again. A machine that cannot be confirmed gone
        keeps its entry open, with the reason, for the next start. Then (``reconcile``) the ledger is checked against
        each provider's own list: see :meth:`reconcile`.
        """
        results: list[SweepResult] = []
        for entry in self.open_entries():
            if not include_live and self.owner_alive(entry):
                continue
            results.append(self._sweep_one(entry, providers, notify, verify_timeout_s, poll_s))
        if reconcile:
            results.extend(self.reconcile(providers, notify, verify_timeout_s=verify_timeout_s, poll_s=poll_s))
        return results

    def reconcile(
        self,
        providers: Mapping[str, Provider],
        notify: Callable[[str], None],
        *,
        verify_timeout_s: float = 300.0,
        poll_s: float = 5.0,
    ) -> list[SweepResult]:
        """Compare the ledger with each provider's own list of Scriba's machines (label ``scriba-…``).

        A machine that is up although its entry is closed ("never launched", or terminated) is what a wrong or
        unwritten ledger leaves billing: its entry is opened again and the machine terminated and verified. A
        machine with a label this ledger does not know is reported, not ended: it may be Scriba's on another
        computer that uses the same account. A provider whose list cannot be read is reported and skipped.
        """
        results: list[SweepResult] = []
        by_label: dict[str, list[LedgerEntry]] = {}
        for entry in self.entries():
            by_label.setdefault(entry.label, []).append(entry)
        for name, provider in providers.items():
            if name in NOT_RENTED:
                continue
            try:
                listed = provider.list_ours(LABEL_PREFIX)
            except ProviderError as error:
                _tell(
                    notify,
                    f"Could not read {provider.title}'s list of machines to check it against the ledger: {error} "
                    f"Look at {provider.console_url}; Scriba checks again at its next start.",
                )
                continue
            for instance in listed:
                if instance.state == "terminated" or not instance.label:
                    continue
                entries = by_label.get(instance.label, [])
                if any(entry.is_open for entry in entries):
                    continue  # an open entry: its run is alive, or the orphan sweep above has dealt with it
                if not entries:
                    message = (
                        f"{provider.title} machine {instance.instance_id} ({instance.label}, {instance.state}) was "
                        "started by Scriba but is not in this computer's ledger. If no other computer runs Scriba "
                        f"with this account, it is left over and may be billing: end it at {provider.console_url}."
                    )
                    _tell(notify, message)
                    results.append(
                        SweepResult(0, name, instance.label, (instance.instance_id,), "unknown_machine", message)
                    )
                    continue
                entry = entries[-1]
                was = "never launched" if entry.state is LaunchState.NOT_LAUNCHED else "terminated"
                self.record_found_running(
                    entry.id,
                    instance.instance_id,
                    f"the ledger said {was}, but {provider.title} lists the machine as {instance.state}",
                )
                results.append(
                    self._end_machines(
                        self.get(entry.id),
                        provider,
                        (instance.instance_id,),
                        notify,
                        verify_timeout_s,
                        poll_s,
                        why=f"the ledger said {was}, but {provider.title} still lists it ({instance.state})",
                    )
                )
        return results

    def _sweep_one(
        self,
        entry: LedgerEntry,
        providers: Mapping[str, Provider],
        notify: Callable[[str], None],
        verify_timeout_s: float,
        poll_s: float,
    ) -> SweepResult:
        def done(outcome: SweepOutcome, message: str, ids: tuple[str, ...] = ()) -> SweepResult:
            _tell(notify, message)
            return SweepResult(entry.id, entry.provider, entry.label, ids, outcome, message)

        if entry.provider in NOT_RENTED:
            # The user's own machine: nothing bills; the offload only left a work directory behind.
            self.record_terminated(entry.id, verified=True)
            return SweepResult(entry.id, entry.provider, entry.label, (), "closed", "")

        which = f"instance {entry.instance_id}" if entry.instance_id else "instance id never recorded"
        what = entry.offer.gpu if entry.offer else entry.offer_name
        provider = providers.get(entry.provider)
        if provider is None:
            message = (
                f"A {entry.provider} machine from an earlier run of Scriba ({entry.label}, {which}) may still be "
                f"running, but Scriba has no {entry.provider} API key to check it. Store the key with "
                f"`scriba offload key set {entry.provider}`, or end the machine in the provider's console."
            )
            self.record_failed(entry.id, message)
            return done("skipped", message)

        if entry.instance_id is None:
            try:
                found = [i for i in provider.list_ours(entry.label) if i.label == entry.label]
            except ProviderError as error:
                message = (
                    f"Could not check {provider.title} for a machine labelled {entry.label} left by an earlier run: "
                    f"{error} Look at {provider.console_url}; Scriba tries again at its next start."
                )
                self.record_failed(entry.id, str(error))
                return done("failed", message)
            if not found:
                return self._no_machine_listed(entry, provider, what, done)
            ids = tuple(instance.instance_id for instance in found)
            self.record_instance(entry.id, ids[0])
        else:
            ids = (entry.instance_id,)

        return self._end_machines(
            entry, provider, ids, notify, verify_timeout_s, poll_s, why="was left by an earlier run of Scriba"
        )

    def _no_machine_listed(
        self,
        entry: LedgerEntry,
        provider: Provider,
        what: str,
        done: Callable[[SweepOutcome, str], SweepResult],
    ) -> SweepResult:
        """The provider's list shows no machine with the label of an entry whose launch outcome is unknown: close
        it only after enough reads over enough time, since the list may not show a fresh machine yet."""
        now = self._now()
        reads = entry.unclear_reads + 1
        since_s = now - entry.created_at
        span_min = self.unclear_span_s / 60
        if reads >= self.unclear_reads and since_s >= self.unclear_span_s:
            self.record_unclear_read(entry.id, f"launch outcome unknown: {provider.title} listed no machine")
            message = (
                f"An earlier run of Scriba was about to rent {what} on {provider.title} ({entry.label}); "
                f"{provider.title} has listed no such machine in {reads} reads, the last {since_s / 60:.0f} min after "
                "the launch, so nothing is running or billing."
            )
            self.record_not_launched(
                entry.id, f"never launched: {provider.title} listed no machine with its label in {reads} reads"
            )
            return done("never_launched", message)
        intended = time.strftime("%H:%M", time.localtime(entry.created_at))
        message = (
            f"An earlier run of Scriba was about to rent {what} on {provider.title} ({entry.label}, at {intended}) "
            f"and stopped before {provider.title} answered, so whether a machine was created is unknown. "
            f"{provider.title} lists none yet (read {reads}; its list can lag behind a create), so Scriba keeps "
            f"this launch open and asks {provider.title} again at its next start and with `scriba offload sweep`, "
            f"ending the machine if it appears; it is closed as never launched only when {self.unclear_reads} or "
            f"more reads have found none, the last at least {span_min:.0f} min after the launch. To be sure now, "
            f"look at {provider.console_url}."
        )
        self.record_unclear_read(entry.id, f"launch outcome unknown: {message}")
        return done("asking_again", message)

    def _end_machines(
        self,
        entry: LedgerEntry,
        provider: Provider,
        ids: tuple[str, ...],
        notify: Callable[[str], None],
        verify_timeout_s: float,
        poll_s: float,
        *,
        why: str,
    ) -> SweepResult:
        def done(outcome: SweepOutcome, message: str, ids: tuple[str, ...] = ()) -> SweepResult:
            _tell(notify, message)
            return SweepResult(entry.id, entry.provider, entry.label, ids, outcome, message)

        what = entry.offer.gpu if entry.offer else entry.offer_name
        _tell(
            notify,
            f"{provider.title} machine {', '.join(ids)} ({entry.label}, {what}) {why} and may be billing: "
            "terminating it now.",
        )
        self.record_terminate_requested(entry.id)
        errors: list[str] = []
        for instance_id in ids:
            try:
                provider.terminate_verified(instance_id, timeout_s=verify_timeout_s, poll_s=poll_s)
            except ProviderError as error:
                log.warning("ledger: %s %s not terminated: %s", provider.name, instance_id, error)
                errors.append(str(error))
        if errors:
            reason = " ".join(errors)
            self.record_failed(entry.id, reason)
            return done(
                "failed",
                f"Could not confirm that {provider.title} machine {', '.join(ids)} ({entry.label}) is terminated. "
                f"{reason}",
                ids,
            )
        self.record_terminated(entry.id, verified=True)
        return done("terminated", f"{provider.title} machine {', '.join(ids)} ({entry.label}) is terminated.", ids)


def end_labelled_machines(
    providers: Mapping[str, Provider],
    notify: Callable[[str], None],
    ledger: Ledger | None = None,
    *,
    verify_timeout_s: float = 300.0,
    poll_s: float = 5.0,
) -> list[SweepResult]:
    """The sweep when the ledger cannot be read: every machine that carries Scriba's label (``scriba-…``) in a
    provider's own list is terminated and verified, since nothing can tell a left-over machine from one in use.

    ``ledger``: a fresh ledger to record what is done in (best-effort: a write that fails does not stop the
    termination); a machine that cannot be confirmed gone then stays open there for the next sweep."""
    results: list[SweepResult] = []
    for name, provider in providers.items():
        if name in NOT_RENTED:
            continue
        try:
            listed = provider.list_ours(LABEL_PREFIX)
        except ProviderError as error:
            message = (
                f"Could not read {provider.title}'s list of machines: {error} A machine of Scriba's there may be "
                f"billing: look at {provider.console_url}, or run `scriba offload sweep` again."
            )
            _tell(notify, message)
            results.append(SweepResult(0, name, "", (), "failed", message))
            continue
        for instance in listed:
            label = instance.label or ""
            if instance.state == "terminated" or not label.startswith(LABEL_PREFIX):
                continue
            results.append(_end_without_entry(ledger, name, provider, instance, notify, verify_timeout_s, poll_s))
    return results


def _end_without_entry(
    ledger: Ledger | None,
    name: str,
    provider: Provider,
    instance: Instance,
    notify: Callable[[str], None],
    verify_timeout_s: float,
    poll_s: float,
) -> SweepResult:
    label = instance.label or ""
    entry_id = 0

    def write(action: Callable[[], Any]) -> Any:
        # Best-effort: ending the machine must not depend on a ledger write.
        try:
            return action()
        except (sqlite3.Error, OSError, ScribaError) as error:
            log.warning("ledger: a write during the ledger-less sweep failed: %s", error)
            return None

    if ledger is not None:
        entry_id = write(lambda: ledger.record_intent(name, instance.offer or "unknown", label, "offload sweep")) or 0
        if entry_id:
            write(lambda: ledger.record_instance(entry_id, instance.instance_id))
            write(lambda: ledger.record_terminate_requested(entry_id))
    _tell(
        notify,
        f"{provider.title} machine {instance.instance_id} ({label}, {instance.state}) carries Scriba's label and may "
        "be billing: terminating it now.",
    )
    try:
        provider.terminate_verified(instance.instance_id, timeout_s=verify_timeout_s, poll_s=poll_s)
    except ProviderError as error:
        reason = str(error)
        if ledger is not None and entry_id:
            write(lambda: ledger.record_failed(entry_id, reason))
        message = (
            f"Could not confirm that {provider.title} machine {instance.instance_id} ({label}) is terminated: "
            f"{reason} End it at {provider.console_url}."
        )
        _tell(notify, message)
        return SweepResult(entry_id, name, label, (instance.instance_id,), "failed", message)
    if ledger is not None and entry_id:
        write(lambda: ledger.record_terminated(entry_id, verified=True))
    message = f"{provider.title} machine {instance.instance_id} ({label}) is terminated."
    _tell(notify, message)
    return SweepResult(entry_id, name, label, (instance.instance_id,), "terminated", message)


def _tell(notify: Callable[[str], None], message: str) -> None:
    """A notifier that fails (a closed window) must not stop the sweep from ending machines."""
    try:
        notify(message)
    except Exception:
        log.exception("ledger: notify failed; message was: %s", message)
