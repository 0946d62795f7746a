"""`offload run` stopped by real signals at the worst moments, against Vast.ai's documented API replayed on
loopback (issue 18): Ctrl-C while the provider creates the machine, a second Ctrl-C during the teardown, SIGTERM,
kill -9 followed by the next start's sweep, a data disk that takes no write, and a provider that never confirms.

The offload runs in a child process (tests/cloud/offload_child.py) through the CLI's own `run_offload`; the test
sends the signals when the replay server has seen the request that marks the moment, never after a sleep.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from app.cli.offload import cmd_offload_sweep
from app.cloud.offload.launch import sweep_left_behind
from app.cloud.offload.ledger import LaunchState, Ledger
from app.cloud.providers import VastAI
from tests.cloud.offload_child import KEY
from tests.cloud.replay_server import FakeClock, Recorded, ReplayServer, Reply

REPO = Path(__file__).resolve().parents[2]
CREATE = "/api/v0/asks/12345678/"
INSTANCE = "/api/v0/instances/4020/"


@dataclass
class VastAccount:
    """What the replayed Vast.ai account holds: at most one machine, created by the rental request."""

    label: str | None = None
    destroyed: bool = False
    confirms_destroy: bool = True  # False: "destroy" is accepted but the machine stays (terminate that does nothing)
    create_hold: threading.Event | None = None  # set: the create is answered; never set: it stalls
    destroy_hold: threading.Event | None = None
    booting: bool = True  # reported as loading (never ready) until destroyed

    def row(self) -> dict[str, Any]:
        return {
            "id": 4020,
            "actual_status": "loading" if self.booting else "running",
            "cur_state": "running",
            "intended_status": "running",
            "label": self.label,
            "status_msg": "",
            "ssh_host": None,
            "ssh_port": None,
            "gpu_name": "RTX 4090",
        }

    def gone(self) -> bool:
        return self.destroyed and self.confirms_destroy


@dataclass
class Child:
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def stderr(self) -> str:
        return "".join(self.lines)


def route_vast(
    api: ReplayServer, account: VastAccount, listing: Callable[[Recorded], dict[str, Any]] | None = None
) -> None:
    def create(request: Recorded) -> Reply:
        # The machine exists from the moment Vast takes the request, whether or not the answer gets back.
        account.label = request.json()["label"]
        return Reply(body={"success": True, "new_contract": 4020}, hold=account.create_hold)

    def full_listing(request: Recorded) -> dict[str, Any]:
        rows = [account.row()] if account.label and not account.gone() else []
        return {"instances": rows, "next_token": None}

    def destroy(request: Recorded) -> Reply:
        account.destroyed = True
        return Reply(body={"success": True}, hold=account.destroy_hold)

    def instance(request: Recorded) -> dict[str, Any]:
        return {"instances": None if account.gone() else account.row()}

    api.route("PUT", CREATE, create)
    api.route("POST", "/api/v0/instances/4020/ssh/", {"success": True})
    api.route("GET", "/api/v1/instances/", listing or full_listing)
    api.route("DELETE", INSTANCE, destroy)
    api.route("GET", INSTANCE, instance)


@pytest.fixture
def api() -> Iterator[ReplayServer]:
    with ReplayServer() as replay:
        yield replay
    assert not replay.unmatched, [f"{r.method} {r.path}" for r in replay.unmatched]


def start(api: ReplayServer, data: Path, *flags: str) -> Child:
    data.mkdir(parents=True, exist_ok=True)
    source = data.parent / "talk.wav"
    source.write_bytes(b"RIFF")  # never uploaded: every case here ends before the machine is ready
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.cloud.offload_child", api.url, str(data), str(source), *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    child = Child(process)

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            child.lines.append(line)

    child.reader = threading.Thread(target=read, daemon=True)
    child.reader.start()
    return child


def wait_until(condition: Callable[[], bool], what: str, child: Child, limit_s: float = 60.0) -> None:
    """Poll for a moment in the child's life; the limit only keeps a broken run from hanging the suite."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if child.process.poll() is not None and not condition():
            raise AssertionError(f"the child exited ({child.process.returncode}) before {what}:\n{child.stderr()}")
        if time.monotonic() > deadline:
            child.process.kill()
            raise AssertionError(f"never saw {what}:\n{child.stderr()}")
        time.sleep(0.02)


def finish(child: Child) -> int:
    status = child.process.wait(timeout=120)
    assert child.reader is not None
    child.reader.join(timeout=30)  # it ends at the end of the child's stderr: every line is in
    return status


def only_entry(data: Path) -> Any:
    with Ledger(data / "cloud-ledger.sqlite3") as ledger:
        [entry] = ledger.entries()
    return entry


def test_ctrl_c_while_vast_creates_the_machine_finds_and_ends_it(api: ReplayServer, tmp_path: Path) -> None:
    account = VastAccount(create_hold=threading.Event())  # created, then the answer stalls
    route_vast(api, account)
    child = start(api, tmp_path / "data")
    wait_until(lambda: bool(api.calls("PUT", CREATE)), "the rental request", child)
    child.process.send_signal(signal.SIGINT)
    assert finish(child) == 130, child.stderr()

    entry = only_entry(tmp_path / "data")
    # Not "never launched": the machine was found by its label in Vast's own list, destroyed, and confirmed gone.
    assert entry.state is LaunchState.TERMINATED and entry.verified and entry.instance_id == "4020"
    assert len(api.calls("DELETE", INSTANCE)) == 1
    assert "vast machine 4020 was terminated (the provider confirmed it)" in child.stderr()
    # The API key went only into the Authorization header: not into the ledger, a log line or a request body.
    for path in (tmp_path / "data").iterdir():
        assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in child.stderr() and all(KEY.encode() not in request.body for request in api.requests)


LIST = "/api/v1/instances/"


def lagging_list(account: VastAccount, first_showing_read: int | None) -> Callable[[Recorded], dict[str, Any]]:
    """Vast's list, eventually consistent: a machine just created appears only from read ``first_showing_read``
    (None: it never appears while this list answers)."""
    reads: list[Recorded] = []

    def listing(request: Recorded) -> dict[str, Any]:
        reads.append(request)
        shows = first_showing_read is not None and len(reads) >= first_showing_read
        rows = [account.row()] if shows and account.label and not account.gone() else []
        return {"instances": rows, "next_token": None}

    return listing


def test_ctrl_c_in_a_stalled_create_asks_a_lagging_list_again_and_ends_the_machine(
    api: ReplayServer, tmp_path: Path
) -> None:
    """Issue 38, D1: one empty read of the list decided "nothing was launched" and the machine billed on."""
    account = VastAccount(create_hold=threading.Event())
    route_vast(api, account, listing=lagging_list(account, first_showing_read=3))
    child = start(api, tmp_path / "data")
    wait_until(lambda: bool(api.calls("PUT", CREATE)), "the rental request", child)
    child.process.send_signal(signal.SIGINT)
    assert finish(child) == 130, child.stderr()

    assert len(api.calls("GET", LIST)) >= 3
    assert len(api.calls("DELETE", INSTANCE)) == 1 and account.gone()
    entry = only_entry(tmp_path / "data")
    assert entry.state is LaunchState.TERMINATED and entry.verified and entry.instance_id == "4020"
    assert "vast machine 4020 was terminated (the provider confirmed it)" in child.stderr()
    assert "nothing was launched" not in child.stderr()


def test_a_machine_the_list_never_shows_keeps_its_launch_open_for_the_next_sweep(
    api: ReplayServer, tmp_path: Path
) -> None:
    account = VastAccount(create_hold=threading.Event())
    listing = lagging_list(account, first_showing_read=None)
    route_vast(api, account, listing=lambda request: listing(request))
    child = start(api, tmp_path / "data")
    wait_until(lambda: bool(api.calls("PUT", CREATE)), "the rental request", child)
    child.process.send_signal(signal.SIGINT)
    assert finish(child) == 130, child.stderr()

    # Asked more than once, and never closed as "not launched" on the strength of an empty list.
    assert len(api.calls("GET", LIST)) > 1 and not api.calls("DELETE", INSTANCE)
    entry = only_entry(tmp_path / "data")
    assert entry.is_open and entry.state is LaunchState.INTENDED and entry.instance_id is None
    assert "outcome unknown" in (entry.reason or "")
    stderr = child.stderr()
    assert "nothing was launched" not in stderr and "no machine was running" not in stderr
    assert "scriba offload sweep" in stderr and "Traceback" not in stderr

    # The list catches up; the next sweep (what `offload sweep` and every start run) finds the machine and ends it.
    listing = lagging_list(account, first_showing_read=1)
    clock = FakeClock()
    provider = VastAI("vast-key", base_url=api.url + "/api", sleep=clock.sleep, clock=clock.monotonic)
    assert sweep_left_behind(tmp_path / "data", lambda message: None, providers={"vast": provider}) == 0
    entry = only_entry(tmp_path / "data")
    assert entry.state is LaunchState.TERMINATED and entry.verified and entry.instance_id == "4020"
    assert len(api.calls("DELETE", INSTANCE)) == 1 and account.gone()


@pytest.mark.parametrize("moment", ["during the create", "while the machine boots"])
def test_a_second_ctrl_c_during_the_teardown_is_held_back(api: ReplayServer, tmp_path: Path, moment: str) -> None:
    stalled_create = moment == "during the create"
    account = VastAccount(create_hold=threading.Event() if stalled_create else None, destroy_hold=threading.Event())
    route_vast(api, account)
    child = start(api, tmp_path / "data")
    if stalled_create:
        wait_until(lambda: bool(api.calls("PUT", CREATE)), "the rental request", child)
    else:
        wait_until(lambda: bool(api.calls("GET", INSTANCE)), "the wait for the machine", child)
    child.process.send_signal(signal.SIGINT)
    wait_until(lambda: bool(api.calls("DELETE", INSTANCE)), "the destroy request", child)
    child.process.send_signal(signal.SIGINT)  # impatient: the teardown has not finished
    wait_until(lambda: "still tearing down" in child.stderr(), "the still-tearing-down notice", child)
    assert account.destroy_hold is not None
    account.destroy_hold.set()
    assert finish(child) == 130, child.stderr()

    entry = only_entry(tmp_path / "data")
    assert entry.state is LaunchState.TERMINATED and entry.verified and entry.instance_id == "4020"
    assert "vast machine 4020 was terminated (the provider confirmed it)" in child.stderr()
    assert "Traceback" not in child.stderr()


def test_the_cli_says_torn_down_only_when_the_provider_confirmed_it(api: ReplayServer, tmp_path: Path) -> None:
    account = VastAccount(confirms_destroy=False)  # destroy accepted, the machine stays listed
    route_vast(api, account)
    child = start(api, tmp_path / "data", "--quick-teardown")
    wait_until(lambda: bool(api.calls("GET", INSTANCE)), "the wait for the machine", child)
    child.process.send_signal(signal.SIGINT)
    assert finish(child) == 130, child.stderr()

    assert "was terminated" not in child.stderr()
    assert "NOT confirmed terminated" in child.stderr() and "4020" in child.stderr()
    entry = only_entry(tmp_path / "data")
    assert entry.is_open and entry.instance_id == "4020" and "COULD NOT VERIFY" in (entry.reason or "")


def test_sigterm_tears_the_machine_down_like_ctrl_c(api: ReplayServer, tmp_path: Path) -> None:
    account = VastAccount()
    route_vast(api, account)
    child = start(api, tmp_path / "data")
    wait_until(lambda: bool(api.calls("GET", INSTANCE)), "the wait for the machine", child)
    child.process.send_signal(signal.SIGTERM)
    assert finish(child) == 143, child.stderr()

    assert "stopped by SIGTERM; vast machine 4020 was terminated (the provider confirmed it)" in child.stderr()
    entry = only_entry(tmp_path / "data")
    assert entry.state is LaunchState.TERMINATED and entry.verified


def test_after_kill_9_the_next_start_sweep_ends_the_machine(api: ReplayServer, tmp_path: Path) -> None:
    """No handler runs on SIGKILL, and on Vast the watchdog cannot end the machine without an account-wide key:
    the sweep at the next start (window, `offload run`, `offload sweep`) is what ends it."""
    account = VastAccount()
    route_vast(api, account)
    child = start(api, tmp_path / "data")
    wait_until(lambda: bool(api.calls("GET", INSTANCE)), "the wait for the machine", child)
    child.process.kill()
    assert finish(child) == -signal.SIGKILL
    assert not api.calls("DELETE", INSTANCE) and only_entry(tmp_path / "data").is_open

    clock = FakeClock()
    messages: list[str] = []
    provider = VastAI("vast-key", base_url=api.url + "/api", sleep=clock.sleep, clock=clock.monotonic)
    # What the window and `offload run` call when they start.
    assert sweep_left_behind(tmp_path / "data", messages.append, providers={"vast": provider}) == 0
    entry = only_entry(tmp_path / "data")
    assert entry.state is LaunchState.TERMINATED and entry.verified and entry.instance_id == "4020"
    assert len(api.calls("DELETE", INSTANCE)) == 1 and "terminating it now" in messages[0]


def test_after_kill_9_during_a_create_sweeps_ask_a_lagging_list_again_and_the_third_ends_the_machine(
    api: ReplayServer, tmp_path: Path
) -> None:
    """Issue 38, D1 (the sweep): after a kill -9 in a stalled create, one empty read of the list closed the launch
    as "never launched" while the list lagged the create, and the machine billed on with no open entry."""
    account = VastAccount(create_hold=threading.Event())  # Vast has the request; its answer never comes back
    # Each sweep reads the list twice (the entry's label, then the reconciliation of the whole list): read 5 is
    # the third sweep's first, so the machine shows only from the third sweep on.
    route_vast(api, account, listing=lagging_list(account, first_showing_read=5))
    data = tmp_path / "data"
    child = start(api, data)
    wait_until(lambda: bool(api.calls("PUT", CREATE)), "the rental request", child)
    child.process.kill()
    assert finish(child) == -signal.SIGKILL
    intent = only_entry(data)
    assert intent.state is LaunchState.INTENDED and intent.instance_id is None

    # The next starts, 20 s, 40 s and 60 s after the intent was written (Scriba's clock, never a sleep).
    now = [intent.created_at]
    clock = FakeClock()
    provider = VastAI("vast-key", base_url=api.url + "/api", sleep=clock.sleep, clock=clock.monotonic)
    for sweep in (1, 2):
        now[0] += 20.0
        messages: list[str] = []
        with Ledger(data / "cloud-ledger.sqlite3", now=lambda: now[0]) as ledger:
            [result] = ledger.sweep_orphans({"vast": provider}, messages.append)
            [entry] = ledger.open_entries()
        assert result.outcome == "asking_again", messages
        assert entry.state is LaunchState.INTENDED and entry.instance_id is None
        assert (entry.unclear_reads, entry.unclear_read_at) == (sweep, now[0])
        told = "\n".join(messages)
        assert "asks Vast.ai again" in told and "scriba offload sweep" in told
        assert "nothing is running" not in told and not api.calls("DELETE", INSTANCE)

    now[0] += 20.0
    messages = []
    with Ledger(data / "cloud-ledger.sqlite3", now=lambda: now[0]) as ledger:
        results = ledger.sweep_orphans({"vast": provider}, messages.append)
        assert not ledger.open_entries()
    assert [(r.outcome, r.instance_ids) for r in results] == [("terminated", ("4020",))], messages
    assert len(api.calls("DELETE", INSTANCE)) == 1 and account.gone()
    entry = only_entry(data)
    assert entry.state is LaunchState.TERMINATED and entry.verified and entry.instance_id == "4020"
    assert "machine 4020 (" in messages[0] and "is terminated" in messages[-1]


def test_a_damaged_ledger_after_kill_9_does_not_stop_the_sweep_from_ending_the_machine(
    api: ReplayServer, tmp_path: Path
) -> None:
    """Issue 38, D2: with a ledger that is not a database, `offload sweep` gave up before asking any provider, and
    the machine a kill -9 left running could not be ended by any command."""
    account = VastAccount()
    route_vast(api, account)
    data = tmp_path / "data"
    child = start(api, data)
    wait_until(lambda: bool(api.calls("GET", INSTANCE)), "the wait for the machine", child)
    child.process.kill()
    assert finish(child) == -signal.SIGKILL
    damaged = b"not a ledger: the disk mangled this file " * 200
    (data / "cloud-ledger.sqlite3").write_bytes(damaged)
    for companion in data.glob("cloud-ledger.sqlite3-*"):
        companion.unlink()

    clock = FakeClock()
    messages: list[str] = []
    provider = VastAI("vast-key", base_url=api.url + "/api", sleep=clock.sleep, clock=clock.monotonic)
    # What `scriba offload sweep` runs, with this provider's key set.
    assert cmd_offload_sweep(data, providers={"vast": provider}, notify=messages.append) == 0, messages

    assert len(api.calls("DELETE", INSTANCE)) == 1 and account.gone()
    told = "\n".join(messages)
    assert "damaged" in told and "provider's own list" in told and "4020" in told
    # Set aside, never deleted: the damaged bytes are kept under a new name that the message gives.
    [aside] = [path for path in data.iterdir() if path.name.startswith("cloud-ledger.sqlite3.damaged-")]
    assert aside.read_bytes() == damaged and str(aside) in told
    # The fresh ledger records what the sweep ended.
    entry = only_entry(data)
    assert entry.instance_id == "4020" and entry.state is LaunchState.TERMINATED and entry.verified


def test_a_data_disk_that_takes_no_write_does_not_stop_the_teardown(api: ReplayServer, tmp_path: Path) -> None:
    account = VastAccount()
    route_vast(api, account)
    child = start(api, tmp_path / "data", "--disk-full-after-launch")
    assert finish(child) == 1, child.stderr()

    # The ledger could not take the instance id, so Scriba stopped at once and destroyed the machine first.
    assert len(api.calls("DELETE", INSTANCE)) == 1 and account.gone()
    stderr = child.stderr()
    assert "vast instance 4020 terminated (verified)" in stderr
    assert "the cloud ledger could not be written" in stderr
    assert "Traceback" not in stderr
    # What the ledger holds is the intent written before the launch; the sweeps ask Vast by label and, the
    # machine being gone, close it once Vast's list has shown none over several reads and minutes.
    entry = only_entry(tmp_path / "data")
    assert entry.state is LaunchState.INTENDED and entry.instance_id is None
    clock = FakeClock()
    provider = VastAI("vast-key", base_url=api.url + "/api", sleep=clock.sleep, clock=clock.monotonic)
    outcomes = []
    now = [entry.created_at]
    for minutes in (1, 2, 30):
        now[0] = entry.created_at + minutes * 60
        with Ledger(tmp_path / "data" / "cloud-ledger.sqlite3", now=lambda: now[0]) as ledger:
            [result] = ledger.sweep_orphans({"vast": provider}, lambda message: None)
            outcomes.append(result.outcome)
            still_open = ledger.open_entries()
    assert outcomes == ["asking_again", "asking_again", "never_launched"] and not still_open
