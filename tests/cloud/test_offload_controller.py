"""The window's offload without the window: the estimate of queued jobs, the checks of a choice, runs that end
in every way (a missing API key, a cancel before anything was taken, a real run on a loopback OpenSSH server
whose remote side is `scriba worker` from this checkout), what their events add up to, and the start-up sweep.
Nothing here imports Qt; tests/gui/test_offload_dialog.py checks that the widgets show what this decides."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
import soundfile

from app.cloud.offload.base import OffloadEvent, RemoteSetup, Teardown
from app.cloud.offload.controller import (
    BuildOffload,
    ChoiceError,
    Conclusion,
    OffloadController,
    Prepared,
    RunOutcome,
    SshHostChoice,
    check_ssh_host,
    parse_remote_command,
    prepare,
    refuse_rental,
    sweep_at_start,
    sweep_is_due,
    why_not_rentable,
)
from app.cloud.offload.selection import summarize_jobs
from app.cloud.offload.wording import teardown_text
from app.cloud.pricing.estimate import LOCAL_PROVIDER, Estimate, Option, estimate
from app.cloud.pricing.estimate import Job as EstimateJob
from app.core.queue.jobs import JobOptions, JobState, JobStore
from tests.cloud.sshd import LoopbackSshd, remote_command

if TYPE_CHECKING:
    from app.cloud.offload.run import Offload

OPTIONS = JobOptions(model="tiny.en", language="en", diarize=False, formats=("txt",))
ENDED_WAIT_S = 600  # a bound for a thread that must end, not a latency: a hung run fails instead of hanging CI


def tone(path: Path, seconds: float, rate: int = 16_000) -> Path:
    """A WAV whose header gives its length (what the estimate probes); the samples do not matter here."""
    soundfile.write(path, np.zeros(int(seconds * rate), dtype="float32"), rate)
    return path


@pytest.fixture
def store(tmp_path: Path) -> Iterator[JobStore]:
    jobs = JobStore(tmp_path / "data")
    yield jobs
    jobs.close()


def table_estimate(job: EstimateJob) -> Estimate:
    """The shipped price table only: no live prices, so no network and no keyring."""
    return estimate(job)


def rentable_lambda_row(result: Estimate) -> Option:
    return next(o for o in result.options if o.offer.provider == "lambda" and why_not_rentable(o) is None)


def states(store: JobStore) -> list[JobState]:
    return [job.state for job in store.jobs()]


# ------------------------------------------------------------------------------------------------ the estimate


@pytest.mark.unit
def test_the_estimate_sums_the_jobs_and_reads_unknown_lengths_from_the_headers(store: JobStore, tmp_path: Path) -> None:
    files = [tone(tmp_path / "a.wav", 2.0), tone(tmp_path / "b.wav", 3.0)]
    ids = [job.id for job in store.add_many(files, OPTIONS, durations=[None, 3.0])]
    asked: list[EstimateJob] = []

    def recorded(job: EstimateJob) -> Estimate:
        asked.append(job)
        return table_estimate(job)

    prepared = prepare(store, [*ids, 999], recorded)  # a job deleted meanwhile is left out, not an error
    assert prepared.selected.job_ids == tuple(ids)
    assert prepared.selected.audio_seconds == pytest.approx(5.0)
    assert prepared.selected.total_bytes == sum(path.stat().st_size for path in files)
    assert prepared.selected.unknown_lengths == 0 and not prepared.selected.mixed_options
    assert prepared.why_no_estimate is None and prepared.estimate is not None
    (job,) = asked
    assert (job.audio_seconds, job.model, job.files, job.diarize) == (pytest.approx(5.0), "tiny.en", 2, False)


@pytest.mark.unit
def test_no_estimate_without_a_length_or_for_a_model_outside_the_catalog(store: JobStore, tmp_path: Path) -> None:
    unreadable = tmp_path / "not audio.wav"
    unreadable.write_bytes(b"neither RIFF nor anything else")
    (job,) = store.add_many([unreadable], OPTIONS)
    prepared = prepare(store, [job.id], table_estimate)
    assert prepared.estimate is None and prepared.selected.unknown_lengths == 1
    assert prepared.why_no_estimate == (
        "no estimate: the length of the audio is unknown (the files' headers do not say)"
    )

    def refuses(job: EstimateJob) -> Estimate:
        raise ValueError("unknown model /models/mine")

    (known,) = store.add_many([tone(tmp_path / "c.wav", 1.0)], OPTIONS)
    prepared = prepare(store, [known.id], refuses)
    assert prepared.estimate is None and prepared.why_no_estimate == "no estimate: unknown model /models/mine"


@pytest.mark.unit
def test_mixed_options_are_said_and_the_first_jobs_are_used(store: JobStore, tmp_path: Path) -> None:
    store.add_many([tone(tmp_path / "a.wav", 1.0)], OPTIONS)
    store.add_many([tone(tmp_path / "b.wav", 1.0)], JobOptions(model="small", language="en"))
    selected = summarize_jobs(store.jobs(), probe=lambda path: None)
    assert selected.mixed_options and selected.model == "tiny.en"


@pytest.mark.unit
def test_the_controller_estimates_on_a_thread_and_records_what_it_is_given(store: JobStore, tmp_path: Path) -> None:
    ids = [job.id for job in store.add_many([tone(tmp_path / "a.wav", 2.0)], OPTIONS)]
    controller = OffloadController(store, ids, estimate_function=table_estimate)
    delivered: queue.Queue[Prepared | Exception] = queue.Queue()
    controller.start_estimate(delivered.put)
    prepared = delivered.get(timeout=ENDED_WAIT_S)
    assert isinstance(prepared, Prepared)
    assert controller.selected is None, "the state changes only where the caller accepts it (the window's thread)"
    controller.accept(prepared)
    assert controller.selected == prepared.selected and controller.estimate is prepared.estimate


# ------------------------------------------------------------------------------------------------ the choice


@pytest.mark.unit
def test_a_rental_is_refused_with_a_reason_before_anything_is_asked() -> None:
    result = table_estimate(EstimateJob(audio_seconds=3600, model="tiny.en", diarize=False))
    row = rentable_lambda_row(result)
    assert refuse_rental(None, 50.0) == "Pick a row of the estimate, or choose “My SSH host”."
    assert refuse_rental(row, 1000.0) is None
    over = refuse_rental(row, 0.01)
    assert over is not None and "over your budget ($0.01): nothing was rented" in over
    local = next(o for o in result.options if o.offer.provider == LOCAL_PROVIDER)
    assert refuse_rental(local, 1000.0) == why_not_rentable(local) and "nothing to rent" in str(why_not_rentable(local))


@pytest.mark.unit
def test_the_ssh_host_check_says_what_is_wrong(tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    key = tmp_path / "id_ed25519"
    with pytest.raises(ChoiceError, match=r"known-hosts file .* does not exist"):
        check_ssh_host(SshHostChoice("ssh://me@127.0.0.1:2222", known_hosts=str(known_hosts)))
    known_hosts.write_text("")
    with pytest.raises(ChoiceError, match=r"identity file .* does not exist"):
        check_ssh_host(SshHostChoice("ssh://me@127.0.0.1:2222", str(key), str(known_hosts)))
    with pytest.raises(ChoiceError, match="give the command that runs Scriba"):
        check_ssh_host(SshHostChoice("ssh://me@127.0.0.1:2222", "", str(known_hosts), "A=1"))
    with pytest.raises(ChoiceError):
        check_ssh_host(SshHostChoice("http://not-ssh", "", str(known_hosts)))
    key.write_text("a key")
    typed = SshHostChoice(" ssh://me@127.0.0.1:2222 ", f" {key} ", str(known_hosts), "PYTHONPATH=/opt/s python3 -m app")
    host = check_ssh_host(typed)
    assert (host.url, host.identity, host.known_hosts) == ("ssh://me@127.0.0.1:2222", key, known_hosts)
    assert host.setup == RemoteSetup(command=("python3", "-m", "app"), env=(("PYTHONPATH", "/opt/s"),))
    # What is remembered is what was typed, trimmed, and it comes back as the same choice.
    assert typed.to_remember() == {
        "url": "ssh://me@127.0.0.1:2222",
        "identity": str(key),
        "known_hosts": str(known_hosts),
        "command": "PYTHONPATH=/opt/s python3 -m app",
        "install": False,
    }
    assert SshHostChoice.remembered(typed.to_remember()).to_remember() == typed.to_remember()
    assert SshHostChoice.remembered(None) == SshHostChoice("", "", "~/.ssh/known_hosts", "scriba")
    # Consent to install Scriba on the host is asked for each host and remembered with it; never assumed.
    assert not host.setup.install_missing
    consenting = replace(typed, install=True)
    assert check_ssh_host(consenting).setup.install_missing
    assert SshHostChoice.remembered(consenting.to_remember()).install


@pytest.mark.unit
def test_the_remote_command_takes_leading_assignments_as_its_environment() -> None:
    assert parse_remote_command("scriba") == RemoteSetup(command=("scriba",))
    assert parse_remote_command("A=1 B='x y' python3 -m app") == RemoteSetup(
        command=("python3", "-m", "app"), env=(("A", "1"), ("B", "x y"))
    )


# ------------------------------------------------------------------------------------------------ runs


def run_to_the_end(
    controller: OffloadController, job_ids: list[int], build: BuildOffload, events: list[OffloadEvent]
) -> Conclusion:
    ended: queue.Queue[RunOutcome] = queue.Queue()
    controller.begin(job_ids, build, "the test", events.append, ended.put)
    assert controller.running and str(controller.status_text()).startswith("starting on the test · ")
    outcome = ended.get(timeout=ENDED_WAIT_S)
    assert controller.running, "the run counts as running until its outcome is concluded on the caller's thread"
    conclusion = controller.conclude(outcome)
    assert not controller.running and controller.status_text() is None
    assert controller.wait_until_ended(ENDED_WAIT_S)
    return conclusion


@pytest.mark.unit
def test_renting_without_an_api_key_takes_no_job_and_may_be_tried_again(
    store: JobStore, tmp_path: Path, memory_keyring: dict[tuple[str, str], str]
) -> None:
    ids = [job.id for job in store.add_many([tone(tmp_path / "a.wav", 60.0), tone(tmp_path / "b.wav", 60.0)], OPTIONS)]
    controller = OffloadController(store, ids, estimate_function=table_estimate)
    controller.accept(prepare(store, ids, table_estimate))
    assert controller.estimate is not None
    build = controller.rent_build(rentable_lambda_row(controller.estimate), OPTIONS, 50.0, send_token=False)
    events: list[OffloadEvent] = []
    ended: queue.Queue[RunOutcome] = queue.Queue()
    controller.begin(controller.still_queued(), build, "A10 (Lambda Cloud)", events.append, ended.put)
    outcome = ended.get(timeout=ENDED_WAIT_S)
    conclusion = controller.conclude(outcome)
    assert outcome.error is not None and not outcome.cancelled and events == []
    assert conclusion.error is not None
    assert conclusion.error.startswith("No usable API key: none is stored for Lambda Cloud. Add it with “API keys…”")
    assert "`" not in conclusion.error  # the window's words: its API keys… button, not a command to type
    assert conclusion.error.endswith("The jobs are still queued.")
    assert conclusion.status.startswith("Offload failed after ") and conclusion.progress_label == "Failed"
    assert conclusion.notification == f"{conclusion.status} {conclusion.error}"
    assert not conclusion.spent and not controller.spent and not controller.running
    assert states(store) == [JobState.QUEUED, JobState.QUEUED]
    assert not (store.directory / "cloud-ledger.sqlite3").exists(), "nothing was launched"


@pytest.mark.unit
def test_a_cancel_while_the_offload_is_built_takes_no_job(store: JobStore, tmp_path: Path) -> None:
    from app.cloud.offload.launch import build_ssh_offload

    ids = [job.id for job in store.add_many([tone(tmp_path / "a.wav", 1.0)], OPTIONS)]
    (tmp_path / "known_hosts").write_text("")
    controller = OffloadController(store, ids)

    def build_then_cancel() -> Offload:
        # The user presses Cancel while the run thread is still building (reading a key, fetching offers).
        offload = build_ssh_offload(
            "ssh://nobody@127.0.0.1:9", store.directory, identity=None, known_hosts=tmp_path / "known_hosts",
            options=OPTIONS,
        )  # fmt: skip
        assert controller.cancel()
        assert controller.status_text() is not None and str(controller.status_text()).startswith("Tearing down… ")
        return offload

    events: list[OffloadEvent] = []
    ended: queue.Queue[RunOutcome] = queue.Queue()
    controller.begin(ids, build_then_cancel, "your SSH host", events.append, ended.put)
    outcome = ended.get(timeout=ENDED_WAIT_S)
    conclusion = controller.conclude(outcome)
    assert outcome == RunOutcome(cancelled=True) and events == []
    assert conclusion.status.startswith("Cancelled after ")
    assert conclusion.status.endswith("; nothing was started remotely · $0.000")
    assert conclusion.error is None, "a cancel leaves the error shown as it was"
    assert conclusion.progress_label == "Cancelled" and not conclusion.spent
    assert states(store) == [JobState.QUEUED]
    assert not controller.cancel(), "nothing runs any more"


@pytest.mark.unit
def test_events_add_up_to_the_progress_the_cost_and_the_last_message(store: JobStore) -> None:
    controller = OffloadController(store, [1, 2])
    controller.running_ids = [1, 2]
    upload = controller.apply_event(OffloadEvent("upload", "uploading", fraction=0.5, cost_usd=0.01))
    assert upload is not None and (upload.label, upload.fraction) == ("Uploading %p%", 0.5)
    first = controller.apply_event(OffloadEvent("progress", index=0, fraction=0.5, cost_usd=0.02))
    assert first is not None and (first.label, first.fraction) == ("Transcribing %p%", 0.25)
    # An older report never moves a file back; a finished or failed file counts whole.
    assert controller.apply_event(OffloadEvent("progress", index=0, fraction=0.1)) == first
    done = controller.apply_event(OffloadEvent("failed", "b.wav failed", index=1, cost_usd=0.015))
    assert done is not None and done.fraction == pytest.approx(0.75)
    assert controller.apply_event(OffloadEvent("gpu", data={"gpus": []})) is None
    assert controller.last_message == "b.wav failed" and controller.cost_usd == 0.02


@pytest.mark.unit
def test_a_teardown_is_called_torn_down_only_when_the_provider_confirmed_it() -> None:
    assert teardown_text(None) == "nothing was started remotely"
    assert teardown_text(Teardown(state="terminated")) == "everything remote was torn down"
    assert teardown_text(Teardown(state="nothing_to_end")) == "no machine was rented, so none bills"
    unconfirmed = teardown_text(Teardown(state="unconfirmed"))
    assert "may still be billing" in unconfirmed and "scriba offload sweep" in unconfirmed


def test_a_run_on_a_loopback_ssh_host_finishes_the_jobs(
    store: JobStore, tmp_path: Path, sample_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    sshd = LoopbackSshd(tmp_path_factory.mktemp("sshd"))
    sshd.start()
    try:
        ids = [job.id for job in store.add_many([sample_dir / "sample.wav"], OPTIONS)]
        host = check_ssh_host(
            SshHostChoice(
                sshd.url, str(sshd.client_key), str(sshd.write_known_hosts(tmp_path / "kh")), remote_command(tmp_path)
            )
        )
        controller = OffloadController(store, ids)
        events: list[OffloadEvent] = []
        conclusion = run_to_the_end(controller, ids, controller.ssh_build(host, OPTIONS, send_token=False), events)
    finally:
        sshd.stop()
    assert controller.outcome is not None and controller.outcome.error is None and controller.outcome.result is not None
    assert {event.kind for event in events} >= {"status", "upload", "started", "done"}
    (job,) = store.jobs()
    assert job.state is JobState.DONE
    assert "hello" in controller.outcome.result.transcripts[0].text.lower()
    assert conclusion.status.startswith("Finished on ") and ": 1 transcribed in " in conclusion.status
    assert conclusion.error == "" and conclusion.complete and conclusion.spent
    assert controller.offload_run is not None and controller.offload_run.offload is not None
    assert controller.offload_run.offload.teardown.state == "nothing_to_end"


# ------------------------------------------------------------------------------------------------ the sweep


@pytest.mark.unit
def test_the_sweep_is_due_only_where_a_ledger_exists_and_a_failing_one_says_so(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    assert not sweep_is_due(data)
    (data / "cloud-ledger.sqlite3").write_bytes(b"this is not an SQLite database, it is damaged" * 100)
    assert sweep_is_due(data)
    told: list[str] = []
    assert sweep_at_start(data, told.append) == -1
    (message,) = told
    assert message.startswith("Could not check for cloud machines left by an earlier run: the cloud ledger")
