"""The window's "Offload to cloud…": the estimate for the selected jobs, a run on a real OpenSSH server on
127.0.0.1 (tests/cloud/sshd.py) whose remote side is `scriba worker` from this checkout, a cancel that tears it
down, a rental refused for want of an API key, and the start-up sweep of machines an earlier run left behind.
Rented machines are Lambda Cloud's documented API replayed on loopback (tests/cloud/replay_server.py)."""

from __future__ import annotations

import glob
import re
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import soundfile
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QWidget

from app.cloud.offload.base import OffloadConfig, OffloadEvent, OffloadTiming
from app.cloud.offload.controller import RentFactory, why_not_rentable
from app.cloud.offload.launch import ledger_for
from app.cloud.offload.ledger import LaunchState, Ledger, Owner
from app.cloud.offload.run import Offload
from app.cloud.pricing.estimate import LOCAL_PROVIDER
from app.cloud.providers import LambdaCloud
from app.cloud.types import Offer
from app.core.config.settings import SettingsStore
from app.core.queue.jobs import JobOptions, JobState
from app.gui.offload.dialog import (
    COST_COLUMN,
    LAUNCH_COLUMN,
    MARK_COLUMN,
    OFFER_COLUMN,
    PRICE_COLUMN,
    PROVIDER_COLUMN,
    OffloadDialog,
)
from app.gui.window import MainWindow
from tests.cloud.replay_server import FakeClock, Recorded, ReplayServer, Reply
from tests.cloud.sshd import LoopbackSshd, remote_command
from tests.real_speech import real_speech_dir

OPTIONS = JobOptions(model="tiny.en", language="en", diarizer="embedded", formats=("txt", "json"))
ESTIMATE_WAIT = 30_000  # ms: probing two headers and reading the price table
RUN_WAIT = 240_000  # ms: two files through tiny.en and the embedded diarizer on a loaded 2-core machine
SWEEP_WAIT = 30  # s: the start-up sweep against the replayed provider (no real waits: its clock is fake)
LAMBDA_KEY = "lambda-key-gui-DO-NOT-LEAK"
LAMBDA_ID = "0920582c7ff041399e34823a0be62549"
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILXGDN/SclOozk1xsDztpmhGiKkkrfQB9SKoO8dSIQQZ scriba-job"
A10 = Offer(
    provider="lambda",
    offer="gpu_1x_a10",
    gpu="A10",
    gpu_count=1,
    vram_gb=24,
    usd_per_hour=0.75,
    spot_usd_per_hour=None,
    billing="per-minute",
    boot_minutes=5.0,
    price_source="api:lambda",
    price_date="2026-01-01",
    launchable=True,
    region="us-east-1",
)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackSshd]:
    server = LoopbackSshd(tmp_path_factory.mktemp("sshd"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def two_calls(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> list[Path]:
    """pyannote's sample call, twice (a batch of two files)."""
    folder = tmp_path_factory.mktemp("calls")
    samples, rate = soundfile.read(sample_dir / "sample.wav", dtype="float32")
    paths = [folder / "call one.wav", folder / "call two.wav"]
    for path in paths:
        soundfile.write(path, samples, rate)
    return paths


def queue_and_open(window: MainWindow, qtbot: Any, files: list[Path]) -> OffloadDialog:
    """Queue ``files`` (lengths unknown: the dialog probes them), select all of them, open the dialog."""
    window.store.add_many(files, OPTIONS)
    window.refresh()
    window.table.selectAll()
    assert window.menu_actions.offload_action.isEnabled()
    window.menu_actions.offload_action.trigger()
    (dialog,) = window.offload_dialogs
    qtbot.waitUntil(lambda: dialog.selected is not None, timeout=ESTIMATE_WAIT)
    return dialog


def use_ssh_host(dialog: OffloadDialog, sshd: LoopbackSshd, tmp_path: Path) -> None:
    dialog.ssh_url.setText(sshd.url)
    dialog.ssh_identity.setText(str(sshd.client_key))
    dialog.ssh_known_hosts.setText(str(sshd.write_known_hosts(tmp_path / "known_hosts")))
    dialog.ssh_command.setText(remote_command(tmp_path))
    # Consent to install where Scriba is missing: this host has it (the checkout), so nothing is installed.
    dialog.ssh_install.setChecked(True)
    dialog.ssh_choice.setChecked(True)


@dataclass
class LambdaAccount:
    """One Lambda Cloud machine as the replayed API shows it: its label, whether it is up, what was asked."""

    label: str | None = None
    status: str = "active"
    terminate_ends_it: bool = True  # False: the terminate is accepted but the machine stays up

    def instance(self) -> dict[str, Any]:
        return {"id": LAMBDA_ID, "name": self.label, "ip": "198.51.100.7", "status": self.status}


@pytest.fixture
def lambda_api() -> Iterator[ReplayServer]:
    with ReplayServer() as replay:
        yield replay
    assert not replay.unmatched, [f"{r.method} {r.path}" for r in replay.unmatched]


def route_lambda_machine(api: ReplayServer, account: LambdaAccount) -> None:
    """The list, the machine and its terminate, answered from ``account`` (Lambda's documented shapes)."""

    def terminate(request: Recorded) -> dict[str, Any]:
        if account.terminate_ends_it:
            account.status = "terminated"
        return {"data": {"terminated_instances": [account.instance()]}}

    api.route("GET", "/api/v1/instances", lambda request: {"data": [account.instance()]})
    api.route("GET", f"/api/v1/instances/{LAMBDA_ID}", lambda request: {"data": account.instance()})
    api.route("POST", "/api/v1/instance-operations/terminate", terminate)


def replayed_lambda(api: ReplayServer) -> LambdaCloud:
    clock = FakeClock()  # the provider's polls and retries take no time
    return LambdaCloud(LAMBDA_KEY, base_url=api.url + "/api/v1", sleep=clock.sleep, clock=clock.monotonic)


def rent_on_replayed_lambda(api: ReplayServer, tmp_path: Path) -> RentFactory:
    """launch.build_rented_offload, but with Lambda replayed by ``api`` (its launch routed by the test), and one
    terminate checked once: what Lambda shows right after the terminate decides whether it is confirmed gone."""
    api.route("GET", "/api/v1/ssh-keys", {"data": [{"id": "k1", "name": "scriba-k", "public_key": PUBLIC_KEY}]})
    provider = replayed_lambda(api)

    def rent(
        provider_name: str,
        chosen: Offer,
        data_dir: Path,
        *,
        options: JobOptions,
        budget_usd: float | None,
        estimate_usd: float | None,
        hf_token: str | None = None,
    ) -> Offload:
        assert provider_name == "lambda"
        config = OffloadConfig(
            options=options,
            key_file=None,
            public_key=PUBLIC_KEY,
            known_hosts=tmp_path / "known_hosts",
            pin_new_host=True,
            budget_usd=budget_usd,
            estimate_usd=estimate_usd,
            # An unclear launch reads the list six times: a few hundredths of a second apart here.
            timing=OffloadTiming(terminate_attempts=1, verify_timeout_s=0.0, unclear_launch_spacing_s=0.01),
        )
        return Offload(provider, A10, ledger_for(data_dir), config)

    return rent


def lambda_row_ready_to_run(window: MainWindow, qtbot: Any, files: list[Path], rent: RentFactory) -> OffloadDialog:
    """Queue ``files``, open the dialog on them with ``rent`` (every rental confirmed), select a Lambda row."""
    window.store.add_many(files, OPTIONS)
    ids = [job.id for job in window.store.jobs()]
    dialog = OffloadDialog(window.store, ids, rent_factory=rent, confirm=lambda *asked: True, parent=window)
    dialog.show()
    qtbot.waitUntil(lambda: dialog.estimate is not None, timeout=ESTIMATE_WAIT)
    assert dialog.estimate is not None
    row = next(
        index
        for index, option in enumerate(dialog.estimate.options)
        if option.offer.provider == "lambda" and why_not_rentable(option) is None
    )
    dialog.table.selectRow(row)
    dialog.budget.setValue(50.0)
    assert dialog.run_button.isEnabled()
    return dialog


def states(window: MainWindow) -> list[JobState]:
    return [job.state for job in window.store.jobs()]


def open_ledger_entries(data_dir: Path) -> list[Any]:
    with Ledger(data_dir / "cloud-ledger.sqlite3") as ledger:
        return ledger.open_entries()


def cell(dialog: OffloadDialog, row: int, column: int) -> str:
    item = dialog.table.item(row, column)
    assert item is not None
    return item.text()


def test_estimate_for_two_queued_jobs(
    open_window: Callable[..., MainWindow], qtbot: Any, two_calls: list[Path]
) -> None:
    window = open_window(start_worker=False)
    assert window.orphan_sweep.worker is None, "no ledger in a fresh data folder: nothing to sweep"
    window.store.add_many(two_calls, OPTIONS)
    window.refresh()
    window.table.selectAll()
    # A right click inside the selection keeps both rows, and offers them for offloading.
    window._context_menu(window.table.visualRect(window.model.index(1, 0)).center())
    menus = [widget for widget in QApplication.topLevelWidgets() if widget.isVisible() and widget.inherits("QMenu")]
    (offload,) = [action for action in menus[-1].actions() if action.text() == "Offload to cloud…"]
    assert offload.isEnabled() and len(window.table.selectionModel().selectedRows()) == 2
    menus[-1].close()
    offload.trigger()
    (dialog,) = window.offload_dialogs
    qtbot.waitUntil(lambda: dialog.selected is not None, timeout=ESTIMATE_WAIT)
    assert dialog.estimate is not None and dialog.selected is not None
    seconds = sum(soundfile.info(str(path)).duration for path in two_calls)
    assert dialog.selected.audio_seconds == pytest.approx(seconds, rel=0.01)
    assert dialog.selected.total_bytes == sum(path.stat().st_size for path in two_calls)
    summary = dialog.summary_label.text()
    assert summary.startswith("2 jobs: 1 min 00 s of audio") and "model tiny.en · diarization on" in summary

    rows = dialog.table.rowCount()
    assert rows == len(dialog.estimate.options) > 10
    costs = [float(cell(dialog, row, COST_COLUMN).lstrip("$")) for row in range(rows)]
    assert costs == sorted(costs)
    g4dn = next(row for row in range(rows) if cell(dialog, row, OFFER_COLUMN) == "g4dn.xlarge")
    assert cell(dialog, g4dn, PROVIDER_COLUMN) == "aws" and cell(dialog, g4dn, PRICE_COLUMN) == "0.526"
    assert cell(dialog, g4dn, LAUNCH_COLUMN) == "no"

    # The cheapest rented row is marked, in bold, its tooltip giving the time breakdown.
    (cheapest,) = [row for row in range(rows) if "cheapest" in cell(dialog, row, MARK_COLUMN)]
    rented = [row for row in range(rows) if dialog.estimate.options[row].is_rented]
    assert costs[cheapest] == min(costs[row] for row in rented)
    item = dialog.table.item(cheapest, PROVIDER_COLUMN)
    assert item is not None and item.font().bold() and "boot" in item.toolTip() and "upload" in item.toolTip()
    assert sum("fastest" in cell(dialog, row, MARK_COLUMN) for row in range(rows)) == 1

    # Rows Scriba cannot rent (AWS, Salad, this computer) cannot be run, and the button says why.
    local = next(row for row in range(rows) if cell(dialog, row, PROVIDER_COLUMN) == LOCAL_PROVIDER)
    for row, why in ((g4dn, "Estimate only"), (local, "This computer")):
        dialog.table.selectRow(row)
        assert not dialog.run_button.isEnabled() and why in dialog.run_button.toolTip()
    runnable = [row for row in range(rows) if why_not_rentable(dialog.estimate.options[row]) is None]
    assert {cell(dialog, row, PROVIDER_COLUMN) for row in runnable} <= {"lambda", "vast", "runpod"}
    assert all(cell(dialog, row, LAUNCH_COLUMN) == "no" for row in set(range(rows)) - set(runnable))
    dialog.table.selectRow(runnable[0])
    option = dialog.estimate.options[runnable[0]]
    assert (
        dialog.run_button.text() == f"Run on {option.offer.gpu} ({option.offer.provider}) ≈ ${costs[runnable[0]]:.2f}"
    )
    # No API key stored in this test's keyring: the row can be rented once one is.
    assert cell(dialog, runnable[0], LAUNCH_COLUMN) == "needs an API key" and not dialog.run_button.isEnabled()
    dialog.close()


def test_run_on_my_ssh_host_end_to_end(
    open_window: Callable[..., MainWindow],
    qtbot: Any,
    sshd: LoopbackSshd,
    two_calls: list[Path],
    tmp_path: Path,
) -> None:
    window = open_window(start_worker=False)
    dialog = queue_and_open(window, qtbot, two_calls)
    events: list[OffloadEvent] = []
    shown: list[int] = []
    dialog.offload_event.connect(events.append)
    dialog.progress.valueChanged.connect(shown.append)
    use_ssh_host(dialog, sshd, tmp_path)
    assert dialog.run_button.text() == "Run on my SSH host"
    qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    assert dialog.running and not dialog.run_button.isEnabled()
    dialog.close()  # refused while running: the Cancel button must stay reachable
    assert dialog.isVisible()

    qtbot.waitUntil(lambda: dialog.outcome is not None, timeout=RUN_WAIT)
    assert dialog.outcome is not None and dialog.outcome.error is None, dialog.error_label.text()
    assert states(window) == [JobState.DONE, JobState.DONE]
    for job in window.store.jobs():
        transcript = window.store.load_transcript(job.id)
        assert "hello" in transcript.text.lower() and transcript.source == str(job.source.absolute())
        assert job.note == "transcribed on your GPU (ssh)"
    kinds = {event.kind for event in events}
    assert {"upload", "started", "progress", "done", "finished"} <= kinds
    assert any(0 < value < 1000 for value in shown) and dialog.progress.value() == 1000
    assert dialog.status_label.text().startswith("Finished on your GPU (ssh): 2 transcribed in ")
    assert ("Scriba: offload", dialog.status_label.text()) in window.notifications
    assert not dialog.run_button.isEnabled() and dialog.run_button.toolTip() == "These jobs are no longer queued"
    assert open_ledger_entries(window.store.directory) == []
    # The host's fields (never a secret) are remembered for the next time.
    remembered = SettingsStore(tmp_path / "config").load().offload.ssh_host
    assert remembered is not None
    assert remembered["url"] == sshd.url and remembered["command"] == remote_command(tmp_path)
    assert remembered["install"] is True
    assert not any("installed in" in event.message for event in events)
    # The window's poll shows the finished rows without being told.
    qtbot.waitUntil(lambda: [job.state for job in window.model.jobs] == [JobState.DONE, JobState.DONE], timeout=10_000)
    dialog.close()
    assert not dialog.isVisible()


def test_cancel_during_the_remote_run_tears_down(
    open_window: Callable[..., MainWindow],
    qtbot: Any,
    sshd: LoopbackSshd,
    long_wav: Path,
    two_calls: list[Path],
    tmp_path: Path,
) -> None:
    window = open_window(start_worker=False)
    dialog = queue_and_open(window, qtbot, [long_wav, two_calls[0]])
    use_ssh_host(dialog, sshd, tmp_path)
    before = set(glob.glob("/tmp/scriba-*"))
    status_after_cancel: list[str] = []

    def cancel_once_transcribing(event: OffloadEvent) -> None:
        if event.kind == "progress" and not status_after_cancel:
            dialog.cancel_button.click()
            status_after_cancel.append(dialog.status_label.text())

    dialog.offload_event.connect(cancel_once_transcribing)
    qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.outcome is not None, timeout=RUN_WAIT)

    assert status_after_cancel and status_after_cancel[0].startswith("Tearing down… ")
    assert dialog.outcome is not None and dialog.outcome.cancelled, dialog.error_label.text()
    assert states(window) == [JobState.CANCELLED, JobState.CANCELLED]
    assert dialog.status_label.text().startswith("Cancelled after ")
    offload = dialog.offload_run.offload if dialog.offload_run is not None else None
    assert offload is not None and offload.work is not None and offload.work.startswith("/tmp/scriba-")
    assert not Path(offload.work).exists(), "the remote work directory was removed"
    assert set(glob.glob("/tmp/scriba-*")) - before == set(), "no other remote work directory was left"
    assert open_ledger_entries(window.store.directory) == []
    assert dialog.cancel_button.isHidden() and dialog.close_button.isEnabled()


def shown_texts(widget: QWidget) -> list[str]:
    """Every text the dialog shows a person: labels, buttons, tooltips and the estimate's cells."""
    from PySide6.QtWidgets import QAbstractButton, QLabel, QTableWidget

    texts: list[str] = []
    for child in [widget, *widget.findChildren(QWidget)]:
        if not child.isVisibleTo(widget) and child is not widget:
            continue
        texts.append(child.toolTip())
        if isinstance(child, QLabel | QAbstractButton):
            texts.append(child.text())
        if isinstance(child, QTableWidget):
            for row in range(child.rowCount()):
                for column in range(child.columnCount()):
                    item = child.item(row, column)
                    if item is not None:
                        texts += [item.text(), item.toolTip()]
    return [text for text in texts if text]


COMMAND_OR_FILE = re.compile(
    r"`|\bscriba (models|offload|doctor|queue|speakers|transcribe|dictate)\b|\.so\b|pip install"
)


def no_command_or_file(texts: list[str]) -> list[str]:
    """The texts that name a command to type or a library file (the SSH host's own command field aside)."""
    return [text for text in texts if COMMAND_OR_FILE.search(text)]


def test_without_an_api_key_nothing_is_offered_for_rent_and_run_says_how_to_add_one(
    open_window: Callable[..., MainWindow], qtbot: Any, tmp_path: Path
) -> None:
    """Issue 40: with no key stored the dialog preselected a rental, said "Launch: yes" for providers it could not
    reach, and failed only after "Rent a GPU? Yes". Now: this computer first when it is cheap and fast enough, no
    row says yes, Run stays off with the way to add a key, and a key stored with API keys… makes the rows rentable."""
    asked: list[str] = []
    clip = tmp_path / "clip.wav"
    samples, rate = soundfile.read(str(real_speech_dir() / "ami_EN2001e_0-30.wav"), dtype="float32")
    soundfile.write(clip, samples, rate)  # 30 s of a real meeting
    window = open_window(start_worker=False)
    (job,) = window.store.add_many([clip], JobOptions())  # the model a job runs when none is chosen
    window.refresh()
    window.select_job(job.id)
    dialog = OffloadDialog(window.store, [job.id], confirm=lambda *question: bool(asked.append(question[1])))
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: dialog.estimate is not None, timeout=ESTIMATE_WAIT)
    assert dialog.estimate is not None
    assert "model tiny.en" in dialog.summary_label.text()  # the job's own model, what this computer runs
    rows = range(dialog.table.rowCount())
    (chosen,) = {index.row() for index in dialog.table.selectionModel().selectedRows()}
    assert cell(dialog, chosen, PROVIDER_COLUMN) == LOCAL_PROVIDER  # 30 s: not worth renting for
    assert all(cell(dialog, row, LAUNCH_COLUMN) != "yes" for row in rows)
    vast = [row for row in rows if cell(dialog, row, PROVIDER_COLUMN) == "vast"]
    assert vast and all(cell(dialog, row, LAUNCH_COLUMN) == "needs an API key" for row in vast)
    dialog.table.selectRow(vast[0])
    dialog.budget.setValue(50.0)
    assert not dialog.run_button.isEnabled()
    assert "needs an API key" in dialog.run_button.toolTip() and "API keys…" in dialog.run_button.toolTip()
    dialog.start()  # as if Run were pressed anyway: refused before anything is asked
    assert asked == [] and "API keys…" in dialog.error_label.text()
    assert no_command_or_file(shown_texts(dialog)) == []

    keys = dialog.open_keys()
    assert no_command_or_file(shown_texts(keys)) == []
    keys.fields["vast"].setText("vast-key-gui-DO-NOT-LEAK")
    keys.accept()
    qtbot.waitUntil(lambda: cell(dialog, vast[0], LAUNCH_COLUMN) == "yes", timeout=5000)
    assert dialog.run_button.isEnabled()  # the row chosen stays chosen, and can be rented now
    assert all(
        cell(dialog, row, LAUNCH_COLUMN) != "yes" for row in rows if cell(dialog, row, PROVIDER_COLUMN) == "lambda"
    )
    assert states(window) == [JobState.QUEUED]
    dialog.close()


def test_a_refused_key_is_said_with_the_dialog_s_own_button() -> None:
    from app.cloud.offload.wording import describe_error
    from app.cloud.providers.base import missing_key_error, rejected_key_error

    missing = describe_error(missing_key_error("Lambda Cloud", "lambda_api_key", "lambda"))
    refused = describe_error(rejected_key_error("Lambda Cloud", "lambda_api_key", "lambda", 401, "bad key"))
    assert "none is stored for Lambda Cloud" in missing and "“API keys…”" in missing
    assert "Lambda Cloud refused the stored key (HTTP 401)" in refused and "“API keys…”" in refused
    assert no_command_or_file([missing, refused]) == []


def test_a_machine_left_by_an_earlier_run_is_reported_at_start(
    open_window: Callable[..., MainWindow], qtbot: Any, tmp_path: Path
) -> None:
    earlier = subprocess.Popen(["true"])
    earlier.wait()  # a process that has ended: its entries are orphans
    data = tmp_path / "data"
    offer = Offer(
        provider="lambda",
        offer="gpu_1x_a10",
        gpu="A10",
        gpu_count=1,
        vram_gb=24,
        usd_per_hour=0.75,
        spot_usd_per_hour=None,
        billing="per-minute",
        boot_minutes=5.0,
        price_source="api:lambda",
        price_date="2026-01-01",
        launchable=True,
    )
    with Ledger(data / "cloud-ledger.sqlite3", owner=Owner(socket.gethostname(), earlier.pid, "earlier")) as ledger:
        entry = ledger.record_intent("lambda", offer, "scriba-1700000000", "jobs 1", 5.0)
        ledger.record_instance(entry, "i-0123")

    window = open_window(data=data, start_worker=False)
    assert window.orphan_sweep.worker is not None
    qtbot.waitUntil(lambda: any(title == "Scriba: cloud machines" for title, _ in window.notifications), timeout=10_000)
    ((_, body),) = [item for item in window.notifications if item[0] == "Scriba: cloud machines"]
    assert "scriba-1700000000" in body and "no lambda API key" in body and "scriba offload key set lambda" in body
    # No key to check it: the entry stays open for the next start.
    assert [entry.label for entry in open_ledger_entries(data)] == ["scriba-1700000000"]


@pytest.mark.parametrize("terminate_ends_it", [True, False], ids=["confirmed", "unconfirmed"])
def test_a_cancel_says_torn_down_only_when_the_provider_confirmed_it(
    open_window: Callable[..., MainWindow],
    qtbot: Any,
    two_calls: list[Path],
    tmp_path: Path,
    lambda_api: ReplayServer,
    terminate_ends_it: bool,
) -> None:
    """Issue 18: a rented machine whose terminate Lambda accepts, but which its API then still shows up (a
    "terminate that does nothing"), may still bill: the dialog must say so, not "everything was torn down"."""
    account = LambdaAccount(status="booting", terminate_ends_it=terminate_ends_it)
    route_lambda_machine(lambda_api, account)
    launch_answered = threading.Event()

    def launch(request: Recorded) -> Reply:
        account.label = request.json()["name"]
        # The machine exists but the answer is held back until the user has clicked Cancel: the cancel lands
        # while Lambda creates it, and the teardown then has a machine to end.
        return Reply(body={"data": {"instance_ids": [LAMBDA_ID]}}, hold=launch_answered)

    lambda_api.route("POST", "/api/v1/instance-operations/launch", launch)
    window = open_window(start_worker=False)
    dialog = lambda_row_ready_to_run(window, qtbot, two_calls, rent_on_replayed_lambda(lambda_api, tmp_path))
    ended: list[str] = []
    dialog.offload_ended.connect(ended.append)

    def cancel_while_launching(event: OffloadEvent) -> None:
        if event.message.startswith("launching") and not launch_answered.is_set():
            dialog.cancel_button.click()
            launch_answered.set()

    dialog.offload_event.connect(cancel_while_launching)
    qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.outcome is not None, timeout=ESTIMATE_WAIT)

    assert launch_answered.is_set(), "the cancel landed during the launch"
    assert dialog.outcome is not None and dialog.outcome.cancelled, dialog.error_label.text()
    assert states(window) == [JobState.CANCELLED, JobState.CANCELLED]
    assert lambda_api.calls("POST", "/api/v1/instance-operations/terminate")
    status = dialog.status_label.text()
    assert status.startswith("Cancelled after ") and ended == [status]
    if terminate_ends_it:
        assert "everything remote was torn down" in status
        assert open_ledger_entries(window.store.directory) == []
    else:
        assert "torn down" not in status
        # Which machine, that it may still bill, and what to do about it.
        assert f"COULD NOT VERIFY that lambda instance {LAMBDA_ID} ({account.label})" in status
        assert "may still be billing" in status and "`scriba offload sweep`" in status
        [still_open] = open_ledger_entries(window.store.directory)  # the next start's sweep ends it
        assert still_open.instance_id == LAMBDA_ID and still_open.label == account.label
    dialog.close()


def test_a_failed_run_that_may_have_left_a_machine_says_it_may_bill(
    open_window: Callable[..., MainWindow],
    qtbot: Any,
    two_calls: list[Path],
    tmp_path: Path,
    lambda_api: ReplayServer,
) -> None:
    """Issue 18: Lambda accepts the launch but answers in a shape Scriba does not know, and its list of machines
    cannot be read: a machine may exist. "Offload failed" alone would hide that it may be billing."""

    def launch(request: Recorded) -> dict[str, Any]:
        return {"instances": [{"id": LAMBDA_ID}]}  # accepted (HTTP 200), not the documented shape

    lambda_api.route("POST", "/api/v1/instance-operations/launch", launch)
    lambda_api.route("GET", "/api/v1/instances", Reply(500, {"error": {"code": "global/unknown", "message": "Oops"}}))
    window = open_window(start_worker=False)
    dialog = lambda_row_ready_to_run(window, qtbot, two_calls, rent_on_replayed_lambda(lambda_api, tmp_path))
    ended: list[str] = []
    dialog.offload_ended.connect(ended.append)
    qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.outcome is not None, timeout=ESTIMATE_WAIT)

    assert dialog.outcome is not None and dialog.outcome.error is not None
    assert dialog.status_label.text().startswith("Offload failed after ")
    error = dialog.error_label.text()
    assert dialog.error_label.isVisible() and "shape Scriba does not know" in error
    assert "a machine may be billing" in error and "`scriba offload sweep`" in error
    assert len(ended) == 1 and "a machine may be billing" in ended[0]  # the window's notification says it too
    [still_open] = open_ledger_entries(window.store.directory)  # never "not launched" on a guess
    assert still_open.is_open
    dialog.close()


def test_the_start_up_sweep_ends_a_machine_the_ledger_wrongly_closed(
    open_window: Callable[..., MainWindow], qtbot: Any, tmp_path: Path, lambda_api: ReplayServer, monkeypatch: Any
) -> None:
    """Issue 18: a launch written off as "never launched" although the machine exists. The ledger has no open
    entry, so only the provider's own list shows it: the window's sweep must ask, like `scriba offload run`'s."""
    data = tmp_path / "data"
    with Ledger(data / "cloud-ledger.sqlite3") as ledger:
        entry = ledger.record_intent("lambda", A10, "scriba-1700000000-abc123", "jobs 1", 5.0)
        ledger.record_not_launched(entry, "the launch was refused")
        assert ledger.open_entries() == []
    account = LambdaAccount(label="scriba-1700000000-abc123", status="active")
    route_lambda_machine(lambda_api, account)
    provider = replayed_lambda(lambda_api)
    # The provider whose key is set: Lambda, at the replay server instead of its real address.
    monkeypatch.setattr("app.cloud.providers.configured_providers", lambda: {"lambda": provider})

    window = open_window(data=data, start_worker=False)
    worker = window.orphan_sweep.worker
    assert worker is not None
    worker.join(SWEEP_WAIT)
    assert not worker.is_alive()

    assert account.status == "terminated" and lambda_api.calls("POST", "/api/v1/instance-operations/terminate")
    with Ledger(data / "cloud-ledger.sqlite3") as ledger:
        [after] = ledger.entries()
    assert after.state is LaunchState.TERMINATED and after.verified and after.instance_id == LAMBDA_ID

    # The user is told, in the window's notifications, what was found and that it is now ended.
    def sweep_bodies() -> list[str]:
        return [body for title, body in window.notifications if title == "Scriba: cloud machines"]

    qtbot.waitUntil(lambda: any("is terminated" in body for body in sweep_bodies()), timeout=10_000)
    bodies = sweep_bodies()
    assert any(LAMBDA_ID in body and "never launched" in body and "may be billing" in body for body in bodies)


def test_two_rented_machines_share_the_jobs_and_both_are_destroyed(
    open_window: Callable[..., MainWindow],
    qtbot: Any,
    sshd: LoopbackSshd,
    two_calls: list[Path],
    tmp_path: Path,
) -> None:
    """The dialog's machine count: 2 × a RunPod row (RunPod's documented API replayed; both pods are the loopback
    sshd), the estimate and the question for two machines, both jobs done in the queue, both pods destroyed and
    verified, the ledger closed."""
    from app.cloud.fleet.rented import RentedFleet
    from app.cloud.fleet.run import FleetTiming
    from app.cloud.offload.controller import parse_remote_command
    from app.cloud.providers import RunPod
    from tests.cloud.runpod_pods import ReplayedPods

    window = open_window(start_worker=False)
    pods = ReplayedPods([sshd.port, sshd.port])  # two pods, one sshd: two workers on it
    asked: list[tuple[str, int, float | None]] = []
    questions: list[str] = []
    with ReplayServer() as api:
        pods.route(api)

        def fleet(
            provider_name: str,
            chosen: Offer,
            count: int,
            data_dir: Path,
            *,
            options: JobOptions,
            budget_usd: float | None,
            estimate_usd: float | None,
            status: Callable[[str], None],
        ) -> RentedFleet:
            asked.append((provider_name, count, estimate_usd))
            config = OffloadConfig(
                options=options,
                key_file=sshd.client_key,
                public_key=sshd.client_key.with_suffix(".pub").read_text().strip(),
                known_hosts=tmp_path / "pinned_hosts",
                pin_new_host=True,
                setup=parse_remote_command(remote_command(tmp_path)),
                budget_usd=budget_usd,
                estimate_usd=estimate_usd,
            )
            provider = RunPod("runpod-key-gui-DO-NOT-LEAK", base_url=api.url + "/v2")
            return RentedFleet(
                provider, [chosen] * count, ledger_for(data_dir), config, status, FleetTiming(connect_wait_s=30.0)
            )

        window.store.add_many(two_calls, OPTIONS)
        ids = [job.id for job in window.store.jobs()]

        def confirm(parent: QWidget, title: str, text: str) -> bool:
            questions.append(text)
            return True

        dialog = OffloadDialog(window.store, ids, fleet_factory=fleet, confirm=confirm, parent=window)
        dialog.show()
        qtbot.waitUntil(lambda: dialog.estimate is not None, timeout=ESTIMATE_WAIT)
        assert dialog.estimate is not None
        row, option = next(
            (index, option)
            for index, option in enumerate(dialog.estimate.options)
            if option.offer.provider == "runpod" and why_not_rentable(option) is None
        )
        dialog.table.selectRow(row)
        dialog.budget.setValue(50.0)
        one_machine = dialog.run_button.text()
        dialog.machines.setValue(2)
        assert dialog.run_button.text().startswith(f"Run on 2 × {option.offer.gpu} (runpod) ≈ $")
        assert dialog.run_button.text() != one_machine  # two start-ups are paid
        qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: dialog.outcome is not None, timeout=RUN_WAIT)
        assert not api.unmatched

    assert dialog.outcome is not None and dialog.outcome.error is None, dialog.error_label.text()
    assert questions and questions[0].startswith(f"Rent 2 machines with {option.offer.gpu}")
    assert asked and asked[0][:2] == ("runpod", 2) and (asked[0][2] or 0) > option.est_cost_usd
    assert states(window) == [JobState.DONE, JobState.DONE]
    for job in window.store.jobs():
        assert "hello" in window.store.load_transcript(job.id).text.lower()
    assert pods.created == ["pod0", "pod1"] and sorted(pods.ended_at) == ["pod0", "pod1"]
    assert open_ledger_entries(window.store.directory) == []
    assert dialog.status_label.text().startswith(f"Finished on {option.offer.gpu} (runpod): 2 transcribed in ")
