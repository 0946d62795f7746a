"""The teardown ledger: written before a launch, swept at start-up, against real adapters and a replay server."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cloud.offload.ledger import (
    LaunchState,
    Ledger,
    LedgerEntryNotFound,
    LedgerStateError,
    Owner,
    end_labelled_machines,
)
from app.cloud.providers import LambdaCloud, RunPod
from app.cloud.types import Offer
from tests.cloud.replay_server import FakeClock, ReplayServer, Reply

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers

KEY = "ledger-test-key-91c2-SECRET"
LAMBDA_ID = "0920582c7ff041399e34823a0be62549"
LABEL = "scriba-job-7-1"


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with ReplayServer() as replay:
        yield replay
    assert not replay.unmatched, [f"{r.method} {r.path}" for r in replay.unmatched]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="module")
def dead_pid() -> int:
    """The pid of a process that has exited: what a crashed Scriba leaves in the ledger."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def crashed_owner(dead_pid: int) -> Owner:
    return Owner(socket.gethostname(), dead_pid, "token-of-a-crashed-run")


OFFER = Offer(
    provider="lambda",
    offer="gpu_1x_a10",
    gpu="A10",
    gpu_count=1,
    vram_gb=24.0,
    usd_per_hour=0.75,
    spot_usd_per_hour=None,
    billing="per-minute",
    boot_minutes=5.0,
    price_source="api:lambda",
    price_date="2026-01-01",
    launchable=True,
    region="us-east-1",
)


def lambda_instance(status: str, name: str = LABEL) -> dict:
    return {"id": LAMBDA_ID, "name": name, "ip": "198.51.100.7", "status": status, "ssh_key_names": []}


def make_lambda(server: ReplayServer, clock: FakeClock) -> LambdaCloud:
    return LambdaCloud(KEY, base_url=server.url + "/api/v1", sleep=clock.sleep, clock=clock.monotonic)


def crashed_run(directory: Path, dead_pid: int) -> Ledger:
    """The ledger as a run that was killed mid-job would have written it."""
    return Ledger(directory, owner=crashed_owner(dead_pid))


# ------------------------------------------------------------------------------------------------ recording


def test_a_launch_is_open_from_intent_until_verified_terminated(tmp_path: Path) -> None:
    with Ledger(tmp_path) as ledger:
        ledger_id = ledger.record_intent("lambda", OFFER, LABEL, job_ref="job 7", budget_usd=2.5)
        assert [e.id for e in ledger.open_entries()] == [ledger_id]
        entry = ledger.get(ledger_id)
        assert (entry.state, entry.instance_id, entry.offer, entry.budget_usd) == (
            LaunchState.INTENDED,
            None,
            OFFER,
            2.5,
        )

        ledger.record_instance(ledger_id, LAMBDA_ID)
        ledger.record_ready(ledger_id)
        ledger.record_terminate_requested(ledger_id)
        ledger.record_terminated(ledger_id, verified=False)
        assert ledger.get(ledger_id).is_open  # asked to end, not confirmed: still open

        ledger.record_terminated(ledger_id, verified=True)
        entry = ledger.get(ledger_id)
        assert not ledger.open_entries()
        assert entry.state is LaunchState.TERMINATED and entry.verified and entry.instance_id == LAMBDA_ID
        assert entry.launched_at and entry.ready_at and entry.terminate_requested_at and entry.terminated_at


def test_the_database_is_durable_and_versioned(tmp_path: Path) -> None:
    Ledger(tmp_path).close()
    db = sqlite3.connect(tmp_path / "cloud-ledger.sqlite3")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(RuntimeError, match="newer Scriba"):
        Ledger(tmp_path)


def test_a_refused_launch_closes_but_a_machine_with_an_id_cannot_be_hidden(tmp_path: Path) -> None:
    with Ledger(tmp_path) as ledger:
        refused = ledger.record_intent("lambda", OFFER, LABEL)
        ledger.record_not_launched(refused, "no capacity")
        assert not ledger.get(refused).is_open

        launched = ledger.record_intent("lambda", OFFER, "scriba-job-7-2")
        ledger.record_instance(launched, LAMBDA_ID)
        with pytest.raises(LedgerStateError):
            ledger.record_not_launched(launched, "oops")
        assert ledger.get(launched).is_open


def test_an_entry_of_a_running_process_is_not_an_orphan(tmp_path: Path, dead_pid: int) -> None:
    with Ledger(tmp_path) as ours, crashed_run(tmp_path, dead_pid) as crashed:
        mine = ours.record_intent("lambda", OFFER, LABEL)
        theirs = crashed.record_intent("lambda", OFFER, "scriba-job-8-1")
        earlier_same_pid = Ledger(tmp_path, owner=Owner(ours.owner.host, ours.owner.pid, "a-previous-run"))
        previous = earlier_same_pid.record_intent("lambda", OFFER, "scriba-job-9-1")
        earlier_same_pid.close()
        alive = {entry.id: ours.owner_alive(entry) for entry in ours.open_entries()}
        assert alive == {mine: True, theirs: False, previous: False}


# ------------------------------------------------------------------------------------------------ start-up sweep


def test_an_orphan_left_by_a_crash_is_terminated_and_the_ledger_is_clean(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int
) -> None:
    with crashed_run(tmp_path, dead_pid) as crashed:
        ledger_id = crashed.record_intent("lambda", OFFER, LABEL, job_ref="job 7")
        crashed.record_instance(ledger_id, LAMBDA_ID)
        crashed.record_ready(ledger_id)
    server.route("POST", "/api/v1/instance-operations/terminate", {"data": {"terminated_instances": []}})
    server.route(
        "GET",
        f"/api/v1/instances/{LAMBDA_ID}",
        {"data": lambda_instance("terminating")},
        {"data": lambda_instance("terminated")},
    )
    # The reconciliation after the sweep: Lambda's own list agrees that the machine is gone.
    server.route("GET", "/api/v1/instances", {"data": [lambda_instance("terminated")]})
    messages: list[str] = []

    with Ledger(tmp_path) as ledger:
        results = ledger.sweep_orphans({"lambda": make_lambda(server, clock)}, messages.append)
        assert not ledger.open_entries()
        entry = ledger.get(ledger_id)
        assert entry.state is LaunchState.TERMINATED and entry.verified

    assert [(r.ledger_id, r.outcome, r.instance_ids) for r in results] == [(ledger_id, "terminated", (LAMBDA_ID,))]
    assert LAMBDA_ID in messages[0] and "terminating it now" in messages[0]
    assert "is terminated" in messages[-1]
    assert server.calls("POST", "/api/v1/instance-operations/terminate")[0].json() == {"instance_ids": [LAMBDA_ID]}


def test_an_intent_without_an_id_is_found_by_its_label(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int
) -> None:
    with crashed_run(tmp_path, dead_pid) as crashed:
        ledger_id = crashed.record_intent("runpod", OFFER, LABEL)  # crashed before the id came back
    pod = {"id": "7h9k2m4n6p", "name": LABEL, "status": "STARTING", "ssh": {"proxy": None, "direct": None}}
    other = {**pod, "id": "zz", "name": "scriba-job-7-10"}  # same prefix, another job: not touched
    # Before the terminate both pods are listed; after it, only the other job's.
    server.route("GET", "/v2/pods", {"pods": [other, pod]}, {"pods": [other]})
    server.route("DELETE", "/v2/pods/7h9k2m4n6p", Reply(204))
    server.route("GET", "/v2/pods/7h9k2m4n6p", Reply(404, {"title": "Not Found", "status": 404}))
    provider = RunPod(KEY, base_url=server.url + "/v2", sleep=clock.sleep, clock=clock.monotonic)
    messages: list[str] = []

    with Ledger(tmp_path) as ledger:
        result, unknown = ledger.sweep_orphans({"runpod": provider}, messages.append)
        entry = ledger.get(ledger_id)

    assert (result.outcome, result.instance_ids) == ("terminated", ("7h9k2m4n6p",))
    assert entry.instance_id == "7h9k2m4n6p" and entry.verified and not entry.is_open
    # A Scriba machine this ledger never wrote down (another computer's, perhaps) is reported, never ended.
    assert (unknown.outcome, unknown.instance_ids) == ("unknown_machine", ("zz",))
    assert "not in this computer's ledger" in messages[-1]
    assert not server.calls("DELETE", "/v2/pods/zz")
    assert any("7h9k2m4n6p" in message for message in messages)


def test_an_intent_whose_machine_never_shows_is_closed_only_after_several_reads_over_ten_minutes(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int
) -> None:
    """Issue 38, D1: a provider's list lags a create, so one empty read (or three in a minute) proves nothing."""
    now = [50_000.0]
    with Ledger(tmp_path, owner=crashed_owner(dead_pid), now=lambda: now[0]) as crashed:
        ledger_id = crashed.record_intent("lambda", OFFER, LABEL)  # killed before Lambda answered
    server.route("GET", "/api/v1/instances", {"data": [lambda_instance("active", name="scriba-job-99-1")]})

    def sweep(at_s: float) -> tuple[str, list[str]]:
        now[0] = 50_000.0 + at_s
        messages: list[str] = []
        with Ledger(tmp_path, now=lambda: now[0]) as ledger:
            result, other = ledger.sweep_orphans({"lambda": make_lambda(server, clock)}, messages.append)
        assert other.outcome == "unknown_machine"  # scriba-job-99-1: not this ledger's, reported only
        return result.outcome, messages

    # Three empty reads in the first three minutes, and a fourth at 9 min 30 s: the launch stays open.
    for read, at_s in enumerate((60.0, 120.0, 180.0, 570.0), start=1):
        outcome, messages = sweep(at_s)
        with Ledger(tmp_path) as ledger:
            entry = ledger.get(ledger_id)
        assert outcome == "asking_again" and entry.is_open and entry.state is LaunchState.INTENDED, messages
        assert (entry.unclear_reads, entry.unclear_read_at) == (read, 50_000.0 + at_s)
        assert "asks Lambda Cloud again" in messages[0] and "nothing is running" not in messages[0]
    # 10 min 30 s after the intent, with more than three empty reads: nothing was launched.
    outcome, messages = sweep(630.0)
    with Ledger(tmp_path) as ledger:
        entry = ledger.get(ledger_id)
    assert outcome == "never_launched" and entry.state is LaunchState.NOT_LAUNCHED and entry.unclear_reads == 5
    assert "nothing is running or billing" in messages[0]
    assert not server.calls("POST", "/api/v1/instance-operations/terminate")


def test_ten_minutes_with_a_single_empty_read_do_not_close_an_intent(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int
) -> None:
    now = [50_000.0]
    with Ledger(tmp_path, owner=crashed_owner(dead_pid), now=lambda: now[0]) as crashed:
        ledger_id = crashed.record_intent("lambda", OFFER, LABEL)
    server.route("GET", "/api/v1/instances", {"data": []})
    outcomes = []
    for at_s in (3600.0, 3601.0, 3602.0):  # the first start an hour later, then two sweeps in a row
        now[0] = 50_000.0 + at_s
        with Ledger(tmp_path, now=lambda: now[0]) as ledger:
            [result] = ledger.sweep_orphans({"lambda": make_lambda(server, clock)}, lambda message: None)
            outcomes.append(result.outcome)
            reads = ledger.get(ledger_id).unclear_reads
    assert outcomes == ["asking_again", "asking_again", "never_launched"] and reads == 3


def test_the_read_counts_leave_the_ledger_open_to_an_older_scriba(tmp_path: Path, dead_pid: int) -> None:
    """The counts are columns with defaults, the schema version is unchanged: an older Scriba's inserts (which
    name only the columns it knows) and reads still work, and it does not refuse the file as newer."""
    with Ledger(tmp_path, owner=crashed_owner(dead_pid)) as ledger:
        ledger.record_intent("lambda", OFFER, LABEL)
    db = sqlite3.connect(tmp_path / "cloud-ledger.sqlite3")
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    db.execute(
        "INSERT INTO launches (provider, offer_name, offer, label, job_ref, budget_usd, state, created_at, "
        "updated_at, owner_host, owner_pid, owner_token, owner_started_at) "
        "VALUES ('vast', '4020', NULL, 'scriba-old', NULL, NULL, 'intended', 1, 1, 'h', 1, 't', NULL)"
    )
    db.commit()
    db.close()
    with Ledger(tmp_path) as ledger:
        old = [entry for entry in ledger.entries() if entry.label == "scriba-old"]
        assert [(entry.unclear_reads, entry.unclear_read_at) for entry in old] == [(0, None)]


def test_a_terminate_that_keeps_failing_leaves_the_entry_open_with_the_reason(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int
) -> None:
    with crashed_run(tmp_path, dead_pid) as crashed:
        ledger_id = crashed.record_intent("lambda", OFFER, LABEL)
        crashed.record_instance(ledger_id, LAMBDA_ID)
    server.route(
        "POST",
        "/api/v1/instance-operations/terminate",
        Reply(500, {"error": {"code": "global/unknown", "message": "Something went wrong"}}),
    )
    server.route("GET", f"/api/v1/instances/{LAMBDA_ID}", {"data": lambda_instance("active")})
    server.route("GET", "/api/v1/instances", {"data": [lambda_instance("active")]})
    messages: list[str] = []

    with Ledger(tmp_path) as ledger:
        [result] = ledger.sweep_orphans(
            {"lambda": make_lambda(server, clock)}, messages.append, verify_timeout_s=120, poll_s=10
        )
        [entry] = ledger.open_entries()

    assert result.outcome == "failed" and entry.id == ledger_id
    assert entry.state is LaunchState.TERMINATE_REQUESTED and not entry.verified
    assert entry.reason and "HTTP 500" in entry.reason
    assert "Could not confirm" in messages[-1] and "https://cloud.lambda.ai/instances" in messages[-1]
    assert "still be billing" in messages[-1]
    assert len(server.calls("POST", "/api/v1/instance-operations/terminate")) > 5  # retried, not given up at once


def test_entries_of_live_processes_and_providers_without_a_key(tmp_path: Path, dead_pid: int) -> None:
    messages: list[str] = []
    with Ledger(tmp_path) as ledger, crashed_run(tmp_path, dead_pid) as crashed:
        ledger.record_intent("lambda", OFFER, LABEL)  # this process: in use, not swept
        orphan = crashed.record_intent("vast", OFFER, "scriba-job-8-1")
        results = ledger.sweep_orphans({}, messages.append)
        assert [(r.ledger_id, r.outcome) for r in results] == [(orphan, "skipped")]
        assert "no vast API key" in messages[0]
        assert ledger.get(orphan).is_open  # still there for the next start


def test_a_failing_notifier_does_not_stop_the_sweep(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int
) -> None:
    with crashed_run(tmp_path, dead_pid) as crashed:
        crashed.record_intent("lambda", OFFER, LABEL)
    server.route("GET", "/api/v1/instances", {"data": []})

    def broken(message: str) -> None:
        raise RuntimeError("window closed")

    with Ledger(tmp_path) as ledger:
        [result] = ledger.sweep_orphans({"lambda": make_lambda(server, clock)}, broken)
        assert ledger.get(result.ledger_id).unclear_reads == 1  # the read was recorded all the same
    assert result.outcome == "asking_again"


def test_no_secret_reaches_the_ledger(tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int) -> None:
    with crashed_run(tmp_path, dead_pid) as crashed:
        ledger_id = crashed.record_intent("lambda", OFFER, LABEL)
        crashed.record_instance(ledger_id, LAMBDA_ID)
    # A provider that echoes the key in its error text: the reason stored must not carry it.
    server.route(
        "POST",
        "/api/v1/instance-operations/terminate",
        Reply(400, {"error": {"code": "global/invalid-parameters", "message": f"bad request for key {KEY}"}}),
    )
    server.route("GET", f"/api/v1/instances/{LAMBDA_ID}", {"data": lambda_instance("active")})
    server.route("GET", "/api/v1/instances", {"data": [lambda_instance("active")]})
    with Ledger(tmp_path) as ledger:
        ledger.sweep_orphans({"lambda": make_lambda(server, clock)}, lambda message: None, verify_timeout_s=10)
        assert ledger.get(ledger_id).reason
    for path in tmp_path.iterdir():
        assert KEY.encode() not in path.read_bytes(), path


def test_an_offer_given_by_name_and_a_database_path_as_the_offload_passes_them(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int
) -> None:
    database = tmp_path / "data" / "cloud-ledger.sqlite3"
    with Ledger(database, owner=crashed_owner(dead_pid)) as crashed:
        ledger_id = crashed.record_intent("lambda", "gpu_1x_a10", LABEL, "job 7", None)
    assert database.is_file()
    server.route("GET", "/api/v1/instances", {"data": []})
    messages: list[str] = []
    with Ledger(database) as ledger:
        entry = ledger.get(ledger_id)
        assert (entry.offer_name, entry.offer) == ("gpu_1x_a10", None)
        ledger.sweep_orphans({"lambda": make_lambda(server, clock)}, messages.append)
    assert "gpu_1x_a10" in messages[0]


def test_an_entry_for_the_users_own_ssh_host_is_closed_quietly(tmp_path: Path, dead_pid: int) -> None:
    with crashed_run(tmp_path, dead_pid) as crashed:
        ledger_id = crashed.record_intent("ssh", "me@gpu-box:22", "scriba-1700000000")
    messages: list[str] = []
    with Ledger(tmp_path) as ledger:
        [result] = ledger.sweep_orphans({}, messages.append)
        assert result.outcome == "closed" and not ledger.get(ledger_id).is_open
    assert messages == []


# ------------------------------------------------------------------------------------------------ issue 18


@pytest.fixture
def unrelated_process() -> Iterator[subprocess.Popen[bytes]]:
    """A process that now has the pid a crashed run had (after a reboot or a container restart)."""
    process = subprocess.Popen(["sleep", "300"])
    yield process
    process.kill()
    process.wait()


def test_a_reused_pid_does_not_keep_an_orphan_alive(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, unrelated_process: subprocess.Popen[bytes]
) -> None:
    from app.core.queue.sqlite_db import process_started_at

    now_started = process_started_at(unrelated_process.pid)
    assert now_started is not None
    # The crashed run had this pid an hour before the process that has it now started.
    before_reboot = Owner(socket.gethostname(), unrelated_process.pid, "token-before-reboot", now_started - 3600)
    with Ledger(tmp_path, owner=before_reboot) as crashed:
        ledger_id = crashed.record_intent("lambda", OFFER, LABEL)
        crashed.record_instance(ledger_id, LAMBDA_ID)
    server.route("POST", "/api/v1/instance-operations/terminate", {"data": {"terminated_instances": []}})
    server.route("GET", f"/api/v1/instances/{LAMBDA_ID}", {"data": lambda_instance("terminated")})
    server.route("GET", "/api/v1/instances", {"data": []})

    with Ledger(tmp_path) as ledger:
        assert not ledger.owner_alive(ledger.get(ledger_id))
        [result] = ledger.sweep_orphans({"lambda": make_lambda(server, clock)}, lambda message: None)
        assert result.outcome == "terminated" and not ledger.open_entries()
        # The process that really made an entry is still told apart: its start time matches.
        mine = ledger.record_intent("lambda", OFFER, "scriba-job-7-2")
        same_process = Ledger(tmp_path, owner=Owner(ledger.owner.host, unrelated_process.pid, "t", now_started))
        theirs = same_process.record_intent("lambda", OFFER, "scriba-job-7-3")
        same_process.close()
        assert ledger.owner_alive(ledger.get(mine)) and ledger.owner_alive(ledger.get(theirs))


def test_a_ledger_from_before_start_times_is_migrated_and_falls_back_to_the_pid(
    tmp_path: Path, unrelated_process: subprocess.Popen[bytes], dead_pid: int
) -> None:
    database = tmp_path / "cloud-ledger.sqlite3"
    old = sqlite3.connect(database)
    old.executescript(
        """
        CREATE TABLE launches (
            id INTEGER PRIMARY KEY AUTOINCREMENT, provider TEXT NOT NULL, offer_name TEXT NOT NULL, offer TEXT,
            label TEXT NOT NULL, job_ref TEXT, budget_usd REAL, state TEXT NOT NULL, instance_id TEXT,
            verified INTEGER NOT NULL DEFAULT 0, reason TEXT, created_at REAL NOT NULL, launched_at REAL,
            ready_at REAL, terminate_requested_at REAL, terminated_at REAL, updated_at REAL NOT NULL,
            owner_host TEXT NOT NULL, owner_pid INTEGER NOT NULL, owner_token TEXT NOT NULL
        );
        PRAGMA user_version = 1;
        """
    )
    for pid, label in ((unrelated_process.pid, "scriba-live"), (dead_pid, "scriba-dead")):
        old.execute(
            "INSERT INTO launches (provider, offer_name, label, state, created_at, updated_at, owner_host, owner_pid, "
            "owner_token) VALUES ('lambda', 'gpu_1x_a10', ?, 'intended', 1, 1, ?, ?, 'old-run')",
            (label, socket.gethostname(), pid),
        )
    old.commit()
    old.close()

    with Ledger(tmp_path) as ledger:
        live, dead = ledger.entries()
        assert live.owner.started_at is None and dead.owner.started_at is None
        # Without a start time only the pid can tell: a running pid is taken as the owner (as before).
        assert ledger.owner_alive(live) and not ledger.owner_alive(dead)
        added = ledger.record_intent("lambda", OFFER, LABEL)
        assert ledger.get(added).owner.started_at is not None
    columns = [row[1] for row in sqlite3.connect(database).execute("PRAGMA table_info(launches)")]
    assert "owner_started_at" in columns


def test_a_machine_the_ledger_wrongly_closed_is_found_in_the_providers_list_and_ended(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int
) -> None:
    """What an older Scriba left after a Ctrl-C during a create: "never launched", while the machine bills."""
    with crashed_run(tmp_path, dead_pid) as crashed:
        ledger_id = crashed.record_intent("lambda", OFFER, LABEL)
        crashed.record_not_launched(ledger_id, "KeyboardInterrupt")
    terminated: list[bool] = []

    def terminate(request: object) -> dict:
        terminated.append(True)
        return {"data": {"terminated_instances": []}}

    def listing(request: object) -> dict:
        return {"data": [] if terminated else [lambda_instance("active")]}

    server.route("GET", "/api/v1/instances", listing)
    server.route("POST", "/api/v1/instance-operations/terminate", terminate)
    server.route("GET", f"/api/v1/instances/{LAMBDA_ID}", {"data": lambda_instance("terminated")})
    messages: list[str] = []

    with Ledger(tmp_path) as ledger:
        assert not ledger.open_entries()  # the ledger alone says all is well
        [result] = ledger.sweep_orphans({"lambda": make_lambda(server, clock)}, messages.append)
        entry = ledger.get(ledger_id)
        assert not ledger.open_entries()

    assert (result.outcome, result.instance_ids) == ("terminated", (LAMBDA_ID,))
    assert entry.instance_id == LAMBDA_ID and entry.state is LaunchState.TERMINATED and entry.verified
    assert "the ledger said never launched" in messages[0] and "terminating it now" in messages[0]
    assert entry.reason == "the ledger said never launched, but Lambda Cloud lists the machine as running"


# ------------------------------------------------------------------------------------------------ ledger-less sweep

OTHER_ID = "5c1b1ae1e4d54b4e9d1f1f3c1e0e9b77"


def test_without_a_ledger_every_labelled_machine_is_ended_and_written_down(
    tmp_path: Path, server: ReplayServer, clock: FakeClock
) -> None:
    """The sweep when the ledger could not be read: the provider's own list is all there is to go by."""
    priced = {**lambda_instance("active"), "instance_type": {"name": "gpu_1x_a10"}}
    unpriced = {**lambda_instance("booting", name="scriba-job-9-1"), "id": OTHER_ID}
    gone = {**lambda_instance("terminated", name="scriba-job-8-1"), "id": "gone-already"}
    mine = {**lambda_instance("active", name="my-own-box"), "id": "not-scribas"}
    server.route("GET", "/api/v1/instances", {"data": [gone, priced, mine, unpriced]})
    server.route("POST", "/api/v1/instance-operations/terminate", {"data": {"terminated_instances": []}})
    server.route("GET", f"/api/v1/instances/{LAMBDA_ID}", {"data": lambda_instance("terminated")})
    server.route("GET", f"/api/v1/instances/{OTHER_ID}", {"data": {**unpriced, "status": "terminated"}})
    lambda_cloud = make_lambda(server, clock)
    messages: list[str] = []

    with Ledger(tmp_path) as ledger:
        # A provider filed under the user's own SSH host is never asked: nothing there bills.
        results = end_labelled_machines({"ssh": lambda_cloud, "lambda": lambda_cloud}, messages.append, ledger)
        entries = ledger.entries()

    assert [(r.ledger_id, r.provider, r.label, r.instance_ids, r.outcome) for r in results] == [
        (1, "lambda", LABEL, (LAMBDA_ID,), "terminated"),
        (2, "lambda", "scriba-job-9-1", (OTHER_ID,), "terminated"),
    ]
    assert messages == [
        f"Lambda Cloud machine {LAMBDA_ID} ({LABEL}, running) carries Scriba's label and may be billing: "
        "terminating it now.",
        f"Lambda Cloud machine {LAMBDA_ID} ({LABEL}) is terminated.",
        f"Lambda Cloud machine {OTHER_ID} (scriba-job-9-1, booting) carries Scriba's label and may be billing: "
        "terminating it now.",
        f"Lambda Cloud machine {OTHER_ID} (scriba-job-9-1) is terminated.",
    ]
    assert [r.message for r in results] == [messages[1], messages[3]]
    assert [(e.provider, e.offer_name, e.label, e.job_ref, e.instance_id) for e in entries] == [
        ("lambda", "gpu_1x_a10", LABEL, "offload sweep", LAMBDA_ID),
        ("lambda", "unknown", "scriba-job-9-1", "offload sweep", OTHER_ID),
    ]
    for entry in entries:
        assert entry.state is LaunchState.TERMINATED and entry.verified and entry.terminate_requested_at
    assert [call.json() for call in server.calls("POST", "/api/v1/instance-operations/terminate")] == [
        {"instance_ids": [LAMBDA_ID]},
        {"instance_ids": [OTHER_ID]},
    ]


def test_without_a_ledger_a_machine_that_will_not_end_is_left_open_with_the_reason(
    tmp_path: Path, server: ReplayServer, clock: FakeClock
) -> None:
    server.route("GET", "/api/v1/instances", {"data": [lambda_instance("active")]})
    server.route(
        "POST",
        "/api/v1/instance-operations/terminate",
        Reply(500, {"error": {"code": "global/unknown", "message": "Something went wrong"}}),
    )
    server.route("GET", f"/api/v1/instances/{LAMBDA_ID}", {"data": lambda_instance("active")})
    messages: list[str] = []

    with Ledger(tmp_path) as ledger:
        [result] = end_labelled_machines(
            {"lambda": make_lambda(server, clock)}, messages.append, ledger, verify_timeout_s=30, poll_s=10
        )
        [entry] = ledger.open_entries()

    assert (result.ledger_id, result.provider, result.label, result.outcome, result.instance_ids) == (
        entry.id,
        "lambda",
        LABEL,
        "failed",
        (LAMBDA_ID,),
    )
    assert entry.state is LaunchState.TERMINATE_REQUESTED and not entry.verified and entry.instance_id == LAMBDA_ID
    assert entry.reason and entry.reason.startswith(
        f"Lambda Cloud did not confirm that instance {LAMBDA_ID} is terminated after 30 s."
    )  # it kept trying until the deadline it was given
    assert (
        messages[-1]
        == result.message
        == (
            f"Could not confirm that Lambda Cloud machine {LAMBDA_ID} ({LABEL}) is terminated: {entry.reason} "
            "End it at https://cloud.lambda.ai/instances."
        )
    )


def test_without_a_ledger_an_unreadable_list_is_reported(server: ReplayServer, clock: FakeClock) -> None:
    server.route("GET", "/api/v1/instances", Reply(403, {"error": {"code": "global/invalid-api-key", "message": "x"}}))
    messages: list[str] = []
    [result] = end_labelled_machines({"lambda": make_lambda(server, clock)}, messages.append)
    assert (result.ledger_id, result.provider, result.label, result.instance_ids, result.outcome) == (
        0,
        "lambda",
        "",
        (),
        "failed",
    )
    assert messages == [result.message]
    assert result.message.startswith("Could not read Lambda Cloud's list of machines: ")
    assert result.message.endswith(
        " A machine of Scriba's there may be billing: look at https://cloud.lambda.ai/instances, or run "
        "`scriba offload sweep` again."
    )


def test_a_ledger_that_cannot_be_written_does_not_stop_the_ledger_less_sweep(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    server.route("GET", "/api/v1/instances", {"data": [lambda_instance("active")]})
    server.route("POST", "/api/v1/instance-operations/terminate", {"data": {"terminated_instances": []}})
    server.route("GET", f"/api/v1/instances/{LAMBDA_ID}", {"data": lambda_instance("terminated")})
    broken = Ledger(tmp_path)
    broken.close()  # every write now raises sqlite3.ProgrammingError
    for ledger in (broken, None):
        with caplog.at_level("WARNING", logger="app.cloud.offload.ledger"):
            [result] = end_labelled_machines({"lambda": make_lambda(server, clock)}, lambda message: None, ledger)
        assert (result.ledger_id, result.outcome, result.instance_ids) == (0, "terminated", (LAMBDA_ID,))
    assert [record.getMessage() for record in caplog.records] == [
        "ledger: a write during the ledger-less sweep failed: Cannot operate on a closed database."
    ]
    with Ledger(tmp_path) as ledger:
        assert ledger.entries() == []


# ------------------------------------------------------------------------------------------------ what each sweep says


@pytest.fixture
def utc() -> Iterator[None]:
    """Local time is UTC, so that a time of day in a message is known."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


SECOND_ID = "77a0c2bd3b1e4c5f8e9d0a1b2c3d4e5f"
LAMBDA_CONSOLE = "https://cloud.lambda.ai/instances"


def test_an_orphan_with_its_instance_is_ended_with_these_words(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int
) -> None:
    with crashed_run(tmp_path, dead_pid) as crashed:
        with_offer = crashed.record_intent("lambda", OFFER, LABEL, job_ref="job 7")
        crashed.record_instance(with_offer, LAMBDA_ID)
        by_name = crashed.record_intent("lambda", "gpu_1x_h100", "scriba-job-8-1")
        crashed.record_instance(by_name, SECOND_ID)
    server.route("POST", "/api/v1/instance-operations/terminate", {"data": {"terminated_instances": []}})
    for instance_id in (LAMBDA_ID, SECOND_ID):
        server.route("GET", f"/api/v1/instances/{instance_id}", {"data": lambda_instance("terminated")})
    server.route("GET", "/api/v1/instances", {"data": []})
    messages: list[str] = []

    with Ledger(tmp_path) as ledger:
        results = ledger.sweep_orphans({"lambda": make_lambda(server, clock)}, messages.append)
        entry = ledger.get(with_offer)

    assert messages == [
        f"Lambda Cloud machine {LAMBDA_ID} ({LABEL}, A10) was left by an earlier run of Scriba and may be billing: "
        "terminating it now.",
        f"Lambda Cloud machine {LAMBDA_ID} ({LABEL}) is terminated.",
        f"Lambda Cloud machine {SECOND_ID} (scriba-job-8-1, gpu_1x_h100) was left by an earlier run of Scriba and "
        "may be billing: terminating it now.",
        f"Lambda Cloud machine {SECOND_ID} (scriba-job-8-1) is terminated.",
    ]
    assert [(r.ledger_id, r.provider, r.label, r.instance_ids, r.outcome, r.message) for r in results] == [
        (with_offer, "lambda", LABEL, (LAMBDA_ID,), "terminated", messages[1]),
        (by_name, "lambda", "scriba-job-8-1", (SECOND_ID,), "terminated", messages[3]),
    ]
    assert (entry.job_ref, entry.offer_name, entry.verified) == ("job 7", "gpu_1x_a10", True)


def test_an_intent_whose_label_shows_two_machines_ends_both_or_says_why_not(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int, caplog: pytest.LogCaptureFixture
) -> None:
    with crashed_run(tmp_path, dead_pid) as crashed:
        ledger_id = crashed.record_intent("lambda", OFFER, LABEL)
    twins = [lambda_instance("active"), {**lambda_instance("active"), "id": SECOND_ID}]
    server.route("GET", "/api/v1/instances", {"data": twins})
    server.route(
        "POST",
        "/api/v1/instance-operations/terminate",
        Reply(500, {"error": {"code": "global/unknown", "message": "Something went wrong"}}),
    )
    for instance_id in (LAMBDA_ID, SECOND_ID):
        server.route("GET", f"/api/v1/instances/{instance_id}", {"data": {**twins[0], "id": instance_id}})
    messages: list[str] = []

    with caplog.at_level("WARNING", logger="app.cloud.offload.ledger"), Ledger(tmp_path) as ledger:
        [result] = ledger.sweep_orphans(
            {"lambda": make_lambda(server, clock)}, messages.append, verify_timeout_s=20, poll_s=10, reconcile=False
        )
        entry = ledger.get(ledger_id)

    both = f"{LAMBDA_ID}, {SECOND_ID}"
    assert (result.ledger_id, result.outcome, result.instance_ids) == (ledger_id, "failed", (LAMBDA_ID, SECOND_ID))
    assert entry.instance_id == LAMBDA_ID and entry.is_open and entry.state is LaunchState.TERMINATE_REQUESTED
    assert entry.reason and entry.reason.startswith(f"Lambda Cloud did not confirm that instance {LAMBDA_ID} is ")
    # One reason per machine, one after the other.
    assert (
        f"Scriba tries again the next time it starts. Lambda Cloud did not confirm that instance {SECOND_ID} is "
        "terminated after 20 s." in entry.reason
    )
    assert messages == [
        f"Lambda Cloud machine {both} ({LABEL}, A10) was left by an earlier run of Scriba and may be billing: "
        "terminating it now.",
        f"Could not confirm that Lambda Cloud machine {both} ({LABEL}) is terminated. {entry.reason}",
    ]
    assert result.message == messages[-1]
    warned = [record.getMessage() for record in caplog.records]
    assert warned[0].startswith(f"ledger: lambda {LAMBDA_ID} not terminated: Lambda Cloud did not confirm")
    assert warned[1].startswith(f"ledger: lambda {SECOND_ID} not terminated: Lambda Cloud did not confirm")


def test_the_sweep_ends_a_machine_within_five_minutes_by_default(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int
) -> None:
    with crashed_run(tmp_path, dead_pid) as crashed:
        ledger_id = crashed.record_intent("lambda", OFFER, LABEL)
        crashed.record_instance(ledger_id, LAMBDA_ID)
    server.route("POST", "/api/v1/instance-operations/terminate", {"data": {"terminated_instances": []}})
    server.route("GET", f"/api/v1/instances/{LAMBDA_ID}", {"data": lambda_instance("terminating")})
    server.route("GET", "/api/v1/instances", {"data": []})
    with Ledger(tmp_path) as ledger:
        [result] = ledger.sweep_orphans({"lambda": make_lambda(server, clock)}, lambda message: None)
        reason = ledger.get(ledger_id).reason or ""
    assert result.outcome == "failed" and "is terminated after 300 s." in reason
    assert set(clock.sleeps) == {5}  # every 5 s


def test_reconcile_checks_for_five_minutes_by_default(tmp_path: Path, server: ReplayServer, clock: FakeClock) -> None:
    with Ledger(tmp_path) as ledger:
        ledger_id = ledger.record_intent("lambda", OFFER, LABEL)
        ledger.record_instance(ledger_id, LAMBDA_ID)
        ledger.record_terminated(ledger_id)
        server.route("GET", "/api/v1/instances", {"data": [lambda_instance("active")]})
        server.route("POST", "/api/v1/instance-operations/terminate", {"data": {"terminated_instances": []}})
        server.route("GET", f"/api/v1/instances/{LAMBDA_ID}", {"data": lambda_instance("active")})
        [result] = ledger.reconcile({"lambda": make_lambda(server, clock)}, lambda message: None)
        reason = ledger.get(ledger_id).reason or ""
    assert result.outcome == "failed" and "is terminated after 300 s." in reason
    assert set(clock.sleeps) == {5}


def test_a_machine_the_ledger_says_is_terminated_is_ended_again(
    tmp_path: Path, server: ReplayServer, clock: FakeClock
) -> None:
    with Ledger(tmp_path) as ledger:
        ledger_id = ledger.record_intent("lambda", OFFER, LABEL)
        ledger.record_instance(ledger_id, LAMBDA_ID)
        ledger.record_terminated(ledger_id)  # a provider that said so, and was wrong
        assert not ledger.get(ledger_id).is_open
        server.route("GET", "/api/v1/instances", {"data": [lambda_instance("active")]})
        server.route("POST", "/api/v1/instance-operations/terminate", {"data": {"terminated_instances": []}})
        server.route("GET", f"/api/v1/instances/{LAMBDA_ID}", {"data": lambda_instance("active")})
        messages: list[str] = []
        [result] = ledger.sweep_orphans(
            {"lambda": make_lambda(server, clock)}, messages.append, verify_timeout_s=21, poll_s=7
        )
        entry = ledger.get(ledger_id)
    assert messages[0] == (
        f"Lambda Cloud machine {LAMBDA_ID} ({LABEL}, A10) the ledger said terminated, but Lambda Cloud still lists "
        "it (running) and may be billing: terminating it now."
    )
    assert result.outcome == "failed" and entry.is_open and entry.instance_id == LAMBDA_ID
    assert entry.reason and "is terminated after 21 s." in entry.reason
    assert set(clock.sleeps) == {7}


def test_reconcile_goes_through_every_provider_and_machine(
    tmp_path: Path, server: ReplayServer, clock: FakeClock
) -> None:
    """One provider's list that cannot be read, a machine of a live run, a terminated one, and two unknown ones."""
    server.route("GET", "/api/v1/instances", Reply(500, {"error": {"code": "global/unknown", "message": "down"}}))
    pods = [
        {"id": "pod-live", "name": "scriba-live-1", "status": "RUNNING", "ssh": {"proxy": None, "direct": None}},
        {"id": "pod-ended", "name": "scriba-ended-1", "status": "TERMINATED", "ssh": {"proxy": None, "direct": None}},
        {"id": "pod-a", "name": "scriba-other-1", "status": "RUNNING", "ssh": {"proxy": None, "direct": None}},
        {"id": "pod-b", "name": "scriba-other-2", "status": "STARTING", "ssh": {"proxy": None, "direct": None}},
    ]
    server.route("GET", "/v2/pods", {"pods": pods})
    runpod = RunPod(KEY, base_url=server.url + "/v2", sleep=clock.sleep, clock=clock.monotonic)
    lambda_cloud = make_lambda(server, clock)
    messages: list[str] = []
    with Ledger(tmp_path) as ledger:
        ledger.record_intent("runpod", "A40", "scriba-live-1")  # this process's run: open, left to it
        results = ledger.reconcile({"ssh": lambda_cloud, "lambda": lambda_cloud, "runpod": runpod}, messages.append)
    assert messages[0].startswith("Could not read Lambda Cloud's list of machines to check it against the ledger: ")
    assert messages[0].endswith(f" Look at {LAMBDA_CONSOLE}; Scriba checks again at its next start.")
    unknown = [
        "RunPod machine pod-a (scriba-other-1, running) was started by Scriba but is not in this computer's "
        "ledger. If no other computer runs Scriba with this account, it is left over and may be billing: end it at "
        "https://console.runpod.io/pods.",
        "RunPod machine pod-b (scriba-other-2, booting) was started by Scriba but is not in this computer's "
        "ledger. If no other computer runs Scriba with this account, it is left over and may be billing: end it at "
        "https://console.runpod.io/pods.",
    ]
    assert messages[1:] == unknown
    assert [(r.ledger_id, r.provider, r.label, r.instance_ids, r.outcome, r.message) for r in results] == [
        (0, "runpod", "scriba-other-1", ("pod-a",), "unknown_machine", unknown[0]),
        (0, "runpod", "scriba-other-2", ("pod-b",), "unknown_machine", unknown[1]),
    ]
    assert len(server.calls("GET", "/api/v1/instances")) >= 1 and not server.calls("DELETE", "/v2/pods/pod-a")


def test_what_the_sweep_says_of_entries_it_cannot_check(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int
) -> None:
    """No API key for the provider, the provider's list unreadable, and the user's own host (nothing to say)."""
    with crashed_run(tmp_path, dead_pid) as crashed:
        no_id = crashed.record_intent("vast", OFFER, "scriba-job-8-1")
        with_id = crashed.record_intent("vast", OFFER, "scriba-job-8-2")
        crashed.record_instance(with_id, "31337")
        unlisted = crashed.record_intent("lambda", OFFER, LABEL)
        own = crashed.record_intent("ssh", "me@gpu-box:22", "scriba-1700000000")
    server.route("GET", "/api/v1/instances", Reply(500, {"error": {"code": "global/unknown", "message": "down"}}))
    messages: list[str] = []

    with Ledger(tmp_path) as ledger:
        results = ledger.sweep_orphans({"lambda": make_lambda(server, clock)}, messages.append, reconcile=False)
        entries = {entry.id: entry for entry in ledger.entries()}

    no_key = [
        f"A vast machine from an earlier run of Scriba (scriba-job-8-{n}, {which}) may still be running, but Scriba "
        "has no vast API key to check it. Store the key with `scriba offload key set vast`, or end the machine in "
        "the provider's console."
        for n, which in ((1, "instance id never recorded"), (2, "instance 31337"))
    ]
    reason = entries[unlisted].reason or ""
    unreadable = (
        f"Could not check Lambda Cloud for a machine labelled {LABEL} left by an earlier run: {reason} Look at "
        f"{LAMBDA_CONSOLE}; Scriba tries again at its next start."
    )
    assert messages == [*no_key, unreadable]
    assert [(r.ledger_id, r.provider, r.label, r.instance_ids, r.outcome, r.message) for r in results] == [
        (no_id, "vast", "scriba-job-8-1", (), "skipped", no_key[0]),
        (with_id, "vast", "scriba-job-8-2", (), "skipped", no_key[1]),
        (unlisted, "lambda", LABEL, (), "failed", unreadable),
        (own, "ssh", "scriba-1700000000", (), "closed", ""),
    ]
    assert (entries[no_id].reason, entries[with_id].reason) == tuple(no_key)
    assert "HTTP 500" in reason and entries[unlisted].is_open and entries[unlisted].unclear_reads == 0
    assert entries[own].state is LaunchState.TERMINATED and entries[own].verified


def test_what_the_sweep_says_while_a_launch_outcome_is_unknown(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int, utc: None
) -> None:
    now = [50_000.0]  # 13:53 UTC
    with Ledger(tmp_path, owner=crashed_owner(dead_pid), now=lambda: now[0]) as crashed:
        ledger_id = crashed.record_intent("lambda", OFFER, LABEL)
    server.route("GET", "/api/v1/instances", {"data": []})

    def sweep(at_s: float) -> tuple[str, str, str | None]:
        now[0] = 50_000.0 + at_s
        messages: list[str] = []
        with Ledger(tmp_path, now=lambda: now[0], unclear_reads=2, unclear_span_s=90) as ledger:
            [result] = ledger.sweep_orphans({"lambda": make_lambda(server, clock)}, messages.append)
            reason = ledger.get(ledger_id).reason
        assert messages == [result.message]
        return result.outcome, result.message, reason

    outcome, message, reason = sweep(30.0)
    assert outcome == "asking_again" and message == (
        f"An earlier run of Scriba was about to rent A10 on Lambda Cloud ({LABEL}, at 13:53) and stopped before "
        "Lambda Cloud answered, so whether a machine was created is unknown. Lambda Cloud lists none yet (read 1; "
        "its list can lag behind a create), so Scriba keeps this launch open and asks Lambda Cloud again at its next "
        "start and with `scriba offload sweep`, ending the machine if it appears; it is closed as never launched "
        "only when 2 or more reads have found none, the last at least 2 min after the launch. To be sure now, look "
        f"at {LAMBDA_CONSOLE}."
    )
    assert reason == f"launch outcome unknown: {message}"
    # Exactly the span (1.5 min, said as 2) after the intent, with enough reads: closed.
    outcome, message, reason = sweep(90.0)
    assert outcome == "never_launched" and message == (
        f"An earlier run of Scriba was about to rent A10 on Lambda Cloud ({LABEL}); Lambda Cloud has listed no such "
        "machine in 2 reads, the last 2 min after the launch, so nothing is running or billing."
    )
    assert reason == "never launched: Lambda Cloud listed no machine with its label in 2 reads"


# ------------------------------------------------------------------------------------------------ records and reads


def test_an_unknown_entry_is_named_in_the_error(tmp_path: Path) -> None:
    with Ledger(tmp_path) as ledger:
        ledger.record_intent("lambda", OFFER, LABEL)
        for action in (
            ledger.get,
            ledger.record_ready,
            ledger.heartbeat,
            lambda ledger_id: ledger.record_not_launched(ledger_id, "no capacity"),
            lambda ledger_id: ledger.record_unclear_read(ledger_id, "listed none"),
        ):
            with pytest.raises(LedgerEntryNotFound, match=r"^no entry 42 in the cloud ledger$") as raised:
                action(42)
            assert raised.value.ledger_id == 42


def test_closing_an_entry_with_an_instance_names_it(tmp_path: Path) -> None:
    with Ledger(tmp_path) as ledger:
        ledger_id = ledger.record_intent("lambda", OFFER, LABEL)
        ledger.record_instance(ledger_id, LAMBDA_ID)
        with pytest.raises(LedgerStateError) as raised:
            ledger.record_not_launched(ledger_id, "no capacity")
    assert str(raised.value) == (
        f"ledger entry {ledger_id} has instance {LAMBDA_ID}: terminate it rather than close it"
    )


def test_terminated_means_verified_unless_said_otherwise(tmp_path: Path) -> None:
    with Ledger(tmp_path) as ledger:
        ledger_id = ledger.record_intent("lambda", OFFER, LABEL)
        ledger.record_instance(ledger_id, LAMBDA_ID)
        ledger.record_terminated(ledger_id)
        assert ledger.get(ledger_id).verified and not ledger.open_entries()


def test_a_heartbeat_keeps_an_entry_of_another_computer_alive(tmp_path: Path) -> None:
    """An entry written on another computer (a shared data folder) is in use while it is touched: up to and
    including ``stale_after_s`` seconds after the last touch."""
    now = [1000.0]
    elsewhere = Owner("render-box", os.getpid(), "token-of-render-box")
    with Ledger(tmp_path, owner=elsewhere, now=lambda: now[0]) as theirs:
        ledger_id = theirs.record_intent("lambda", OFFER, LABEL)
        now[0] = 1500.0
        theirs.heartbeat(ledger_id)
        entry = theirs.get(ledger_id)
        assert (entry.updated_at, entry.created_at, entry.state) == (1500.0, 1000.0, LaunchState.INTENDED)
    with Ledger(tmp_path, now=lambda: now[0], stale_after_s=60) as ours:
        now[0] = 1560.0
        assert ours.owner_alive(ours.get(ledger_id))
        now[0] = 1560.5
        assert not ours.owner_alive(ours.get(ledger_id))


@pytest.mark.parametrize("name", ["ledger.sqlite3", "ledger.sqlite", "ledger.db"])
def test_a_database_file_may_be_named_in_a_folder_yet_to_be_made(tmp_path: Path, name: str) -> None:
    database = tmp_path / "new" / "deeper" / name
    with Ledger(database) as ledger:
        ledger.record_intent("lambda", OFFER, LABEL)
    assert database.is_file()
    assert sorted(path.name for path in database.parent.iterdir() if "-" not in path.name) == [name]


def test_the_default_ledger_is_in_the_users_data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    with Ledger.open_default() as ledger:
        assert ledger.path == tmp_path / "scriba" / "cloud-ledger.sqlite3" and ledger.path.is_file()


def test_a_newer_ledger_is_refused_by_name(tmp_path: Path) -> None:
    Ledger(tmp_path).close()
    with sqlite3.connect(tmp_path / "cloud-ledger.sqlite3") as db:
        db.execute("PRAGMA user_version = 7")
    with pytest.raises(RuntimeError) as raised:
        Ledger(tmp_path)
    assert str(raised.value) == (
        f"{tmp_path / 'cloud-ledger.sqlite3'} was written by a newer Scriba (ledger schema 7); update Scriba to open it"
    )


def test_a_migrated_ledger_opens_again(tmp_path: Path) -> None:
    """The columns added to an old ledger are found again by name the next time it opens."""
    database = tmp_path / "cloud-ledger.sqlite3"
    with sqlite3.connect(database) as old:
        old.executescript(
            """
            CREATE TABLE launches (
                id INTEGER PRIMARY KEY AUTOINCREMENT, provider TEXT NOT NULL, offer_name TEXT NOT NULL, offer TEXT,
                label TEXT NOT NULL, job_ref TEXT, budget_usd REAL, state TEXT NOT NULL, instance_id TEXT,
                verified INTEGER NOT NULL DEFAULT 0, reason TEXT, created_at REAL NOT NULL, launched_at REAL,
                ready_at REAL, terminate_requested_at REAL, terminated_at REAL, updated_at REAL NOT NULL,
                owner_host TEXT NOT NULL, owner_pid INTEGER NOT NULL, owner_token TEXT NOT NULL
            );
            PRAGMA user_version = 1;
            """
        )
    for _ in range(2):
        with Ledger(tmp_path) as ledger:
            ledger_id = ledger.record_intent("lambda", OFFER, LABEL)
            assert ledger.record_unclear_read(ledger_id, "listed none") == 1
    columns = [row[1] for row in sqlite3.connect(database).execute("PRAGMA table_info(launches)")]
    assert columns[-3:] == ["owner_started_at", "unclear_reads", "unclear_read_at"]


def test_a_notifier_that_fails_is_logged_with_the_message(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int, caplog: pytest.LogCaptureFixture
) -> None:
    with crashed_run(tmp_path, dead_pid) as crashed:
        crashed.record_intent("ssh", "me@gpu-box:22", "scriba-1700000000")
        crashed.record_intent("vast", OFFER, "scriba-job-8-1")

    def broken(message: str) -> None:
        raise RuntimeError("window closed")

    with caplog.at_level("ERROR", logger="app.cloud.offload.ledger"), Ledger(tmp_path) as ledger:
        [_, skipped] = ledger.sweep_orphans({}, broken)
    assert [record.getMessage() for record in caplog.records] == [
        f"ledger: notify failed; message was: {skipped.message}"
    ]


def test_the_ledger_less_sweep_waits_as_long_as_it_is_told(server: ReplayServer, clock: FakeClock) -> None:
    server.route("GET", "/api/v1/instances", {"data": [lambda_instance("active")]})
    server.route("POST", "/api/v1/instance-operations/terminate", {"data": {"terminated_instances": []}})
    server.route("GET", f"/api/v1/instances/{LAMBDA_ID}", {"data": lambda_instance("terminating")})
    # By default five minutes, every five seconds.
    [result] = end_labelled_machines({"lambda": make_lambda(server, clock)}, lambda message: None)
    assert result.outcome == "failed" and "is terminated after 300 s." in result.message
    assert set(clock.sleeps) == {5}
    clock.sleeps.clear()
    [result] = end_labelled_machines(
        {"lambda": make_lambda(server, clock)}, lambda message: None, verify_timeout_s=21, poll_s=7
    )
    assert result.outcome == "failed" and "is terminated after 21 s." in result.message
    assert set(clock.sleeps) == {7}


def test_the_ledger_less_sweep_goes_on_past_a_provider_it_cannot_read(server: ReplayServer, clock: FakeClock) -> None:
    server.route("GET", "/api/v1/instances", Reply(500, {"error": {"code": "global/unknown", "message": "down"}}))
    pod = {"id": "pod-a", "name": "scriba-job-3-1", "status": "RUNNING", "ssh": {"proxy": None, "direct": None}}
    server.route("GET", "/v2/pods", {"pods": [pod]})
    server.route("DELETE", "/v2/pods/pod-a", Reply(204))
    server.route("GET", "/v2/pods/pod-a", Reply(404, {"title": "Not Found", "status": 404}))
    runpod = RunPod(KEY, base_url=server.url + "/v2", sleep=clock.sleep, clock=clock.monotonic)
    results = end_labelled_machines({"lambda": make_lambda(server, clock), "runpod": runpod}, lambda message: None)
    assert [(r.provider, r.outcome, r.instance_ids) for r in results] == [
        ("lambda", "failed", ()),
        ("runpod", "terminated", ("pod-a",)),
    ]


def test_a_failed_ledger_less_end_is_not_written_to_a_ledger_that_failed(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    server.route("GET", "/api/v1/instances", {"data": [lambda_instance("active")]})
    server.route("POST", "/api/v1/instance-operations/terminate", {"data": {"terminated_instances": []}})
    server.route("GET", f"/api/v1/instances/{LAMBDA_ID}", {"data": lambda_instance("active")})
    broken = Ledger(tmp_path)
    broken.close()
    with caplog.at_level("WARNING", logger="app.cloud.offload.ledger"):
        [result] = end_labelled_machines(
            {"lambda": make_lambda(server, clock)}, lambda message: None, broken, verify_timeout_s=10, poll_s=5
        )
    assert (result.ledger_id, result.outcome) == (0, "failed")
    # The intent could not be written; nothing more is tried on that ledger.
    assert [record.getMessage() for record in caplog.records] == [
        "ledger: a write during the ledger-less sweep failed: Cannot operate on a closed database."
    ]


def test_two_machines_under_one_label_are_both_ended(
    tmp_path: Path, server: ReplayServer, clock: FakeClock, dead_pid: int
) -> None:
    with crashed_run(tmp_path, dead_pid) as crashed:
        ledger_id = crashed.record_intent("lambda", OFFER, LABEL)
    twins = [lambda_instance("active"), {**lambda_instance("active"), "id": SECOND_ID}]
    server.route("GET", "/api/v1/instances", {"data": twins}, {"data": []})
    server.route("POST", "/api/v1/instance-operations/terminate", {"data": {"terminated_instances": []}})
    for instance_id in (LAMBDA_ID, SECOND_ID):
        server.route("GET", f"/api/v1/instances/{instance_id}", {"data": lambda_instance("terminated")})
    messages: list[str] = []
    with Ledger(tmp_path) as ledger:
        [result] = ledger.sweep_orphans({"lambda": make_lambda(server, clock)}, messages.append)
        assert not ledger.get(ledger_id).is_open
    assert (result.outcome, result.instance_ids) == ("terminated", (LAMBDA_ID, SECOND_ID))
    assert messages[-1] == result.message == f"Lambda Cloud machine {LAMBDA_ID}, {SECOND_ID} ({LABEL}) is terminated."
