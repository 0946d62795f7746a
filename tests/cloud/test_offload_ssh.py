"""Offload end to end against a real OpenSSH server on 127.0.0.1 (tests/cloud/sshd.py): the remote side is
`scriba worker` from this checkout, run by sshd like on any SSH host; the engine is the real one (tiny.en).

Every failure case ends with the job failed or finished, nothing left running on the "remote", its work
directory gone, and the ledger without an open entry.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile

from app.cloud.offload.base import (
    BudgetExceeded,
    OffloadCancelled,
    OffloadConfig,
    OffloadEvent,
    OffloadTiming,
    RemoteSetup,
)
from app.cloud.offload.run import Offload
from app.cloud.providers.ssh_host import SshHostProvider
from app.cloud.remote.transport import CHUNK, HostKeyError, SshSession, parse_ssh_url
from app.core.queue.jobs import JobOptions
from tests.cloud.sshd import LoopbackSshd, host_environment, remote_command
from tests.test_cli import scriba

REPO = Path(__file__).resolve().parents[2]
# A name a shell would act on: `$(cd;touch pwned)` leaves a file in the home directory wherever it runs (the
# remote commands run in a work directory removed at the end), and the rest is quoting trouble, never harm.
HOSTILE = 'it\'s "$(cd;touch pwned)"; echo `id` > x;\nsecond take $HOME.wav'
OPTIONS = JobOptions(model="tiny.en", language="en", diarize=True, diarizer="embedded", formats=("txt", "json"))


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Any:
    server = LoopbackSshd(tmp_path_factory.mktemp("sshd"))
    server.start()
    yield server
    server.stop()


@pytest.fixture()
def remote_env(tmp_path: Path) -> tuple[tuple[str, str], ...]:
    """The remote worker runs this checkout, in an environment of its own (see host_environment)."""
    return tuple(host_environment(tmp_path, numeric=True).items())


@pytest.fixture(scope="module")
def two_files(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> list[Path]:
    """pyannote's sample call twice: once plainly named, once with a name built to break a careless shell."""
    folder = tmp_path_factory.mktemp("inputs")
    plain = folder / "call one.wav"
    hostile = folder / HOSTILE
    samples, rate = soundfile.read(sample_dir / "sample.wav", dtype="float32")
    soundfile.write(plain, samples, rate)
    # The second is 48 kHz stereo float: the same speech in a file big enough to cut mid-upload.
    wide = np.repeat(np.interp(np.arange(len(samples) * 3) / 3, np.arange(len(samples)), samples)[:, None], 2, 1)
    soundfile.write(hostile, wide.astype(np.float32), rate * 3, subtype="FLOAT")
    return [plain, hostile]


def _work_dirs() -> set[str]:
    """The offload work directories in the loopback host's /tmp (each holds a heartbeat file); other programs'
    scriba-* folders there, which come and go while tests run beside this one, are not theirs to count."""
    return {folder for folder in glob.glob("/tmp/scriba-*") if Path(folder, "heartbeat").exists()}


def _offload(sshd: LoopbackSshd, tmp_path: Path, remote_env: tuple[tuple[str, str], ...], **kwargs: Any) -> Offload:
    from app.cloud.offload.ledger import Ledger

    endpoint = parse_ssh_url(sshd.url, sshd.client_key)
    provider = SshHostProvider(endpoint)
    config = OffloadConfig(
        options=OPTIONS,
        key_file=sshd.client_key,
        known_hosts=sshd.write_known_hosts(tmp_path / "known_hosts"),
        pin_new_host=False,
        setup=RemoteSetup((sys.executable, "-m", "app"), remote_env),
        timing=OffloadTiming(heartbeat_s=1.0, poll_s=0.2, reconnect_wait_s=0.2),
        **kwargs,
    )
    return Offload(provider, provider.offer(), Ledger(tmp_path / "ledger.sqlite3"), config)


def _open_ledger_entries(tmp_path: Path) -> list[Any]:
    from app.cloud.offload.ledger import Ledger

    return list(Ledger(tmp_path / "ledger.sqlite3").open_entries())


def test_offload_two_files_one_hostile_equals_local_run(
    sshd: LoopbackSshd, tmp_path: Path, remote_env: tuple[tuple[str, str], ...], two_files: list[Path]
) -> None:
    before = _work_dirs()
    env_args = [argument for name, value in remote_env for argument in ("--remote-env", f"{name}={value}")]
    common = ["--model", "tiny.en", "--language", "en", "--diarizer", "embedded", "-f", "txt,json"]
    result = scriba(
        "--data-dir",
        str(tmp_path / "data"),
        "offload",
        "run",
        *map(str, two_files),
        "--provider",
        "ssh",
        "--host",
        sshd.url,
        "--identity",
        str(sshd.client_key),
        "--known-hosts",
        str(sshd.write_known_hosts(tmp_path / "known_hosts")),
        "--remote-command",
        f"{sys.executable} -m app",
        *env_args,
        *common,
        "-o",
        str(tmp_path / "remote"),
    )
    assert result.returncode == 0, result.stderr
    local = scriba("transcribe", *map(str, two_files), *common, "-o", str(tmp_path / "local"), "-q")
    assert local.returncode == 0, local.stderr
    for path in two_files:
        remote_txt = (tmp_path / "remote" / f"{path.stem}.txt").read_text()
        assert remote_txt == (tmp_path / "local" / f"{path.stem}.txt").read_text()
        remote_json = json.loads((tmp_path / "remote" / f"{path.stem}.json").read_text())
        assert remote_json["source"] == str(path.absolute())
        assert "SPEAKER_00" in remote_txt and "hello" in remote_txt.lower()
    # The hostile name never reached a shell: nothing was created by it, here or in the remote home.
    assert not list(Path.home().glob("pwned")) and not list(Path.cwd().glob("pwned"))
    assert _work_dirs() == before, "the remote work directory was removed"
    assert _open_ledger_entries(tmp_path / "data") == []
    assert "remote work directory removed" in result.stderr


def test_leading_assignments_in_the_remote_command_are_its_environment_as_in_the_window(
    sshd: LoopbackSshd, tmp_path: Path, two_files: list[Path]
) -> None:
    """Issue 38, D11: `--remote-command "NAME=VALUE … python -m app"` passed the version check and then failed to
    start the worker ("setsid: failed to execute NAME=VALUE"): the CLI now reads the leading assignments as the
    remote environment, with the window's own parsing."""
    command = remote_command(tmp_path)  # what a user types: this checkout, its cache and data folders there
    assert command.startswith("PYTHONPATH=")
    result = scriba(
        "--data-dir", str(tmp_path / "data"), "offload", "run", str(two_files[0]), "--provider", "ssh",
        "--host", sshd.url, "--identity", str(sshd.client_key),
        "--known-hosts", str(sshd.write_known_hosts(tmp_path / "known_hosts")),
        "--remote-command", command,
        "--model", "tiny.en", "--language", "en", "--diarizer", "embedded", "-f", "txt", "-o", str(tmp_path / "out"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "hello" in (tmp_path / "out" / f"{two_files[0].stem}.txt").read_text().lower()
    assert "setsid" not in result.stderr


def test_dropped_connection_during_upload_resumes(
    sshd: LoopbackSshd, tmp_path: Path, remote_env: tuple[tuple[str, str], ...], two_files: list[Path]
) -> None:
    dropped: list[int] = []
    after_drop: list[int] = []  # positions the big file reports once the connection is back

    def cut_once(session: SshSession, position: int, size: int) -> None:
        if size <= 4_000_000:
            return
        if dropped:
            after_drop.append(position)
        elif position > size * 0.4:
            dropped.append(position)
            session.drop()  # the network goes away in the middle of the big file

    offload = _offload(sshd, tmp_path, remote_env, upload_hook=cut_once)
    result = offload.run(two_files)
    assert dropped and offload.reconnects >= 1
    total = sum(path.stat().st_size for path in two_files)
    # Resumed from what had arrived, not restarted: the first chunk after the drop ends one chunk past the
    # resume point, which lies in the cut file's second half, and only the rest of it was sent again.
    resumed_from = after_drop[0] - CHUNK
    big = max(path.stat().st_size for path in two_files)
    assert 0.2 * big < resumed_from <= dropped[0], (resumed_from, dropped)
    assert offload.uploaded_bytes == total - resumed_from, (offload.uploaded_bytes, total, resumed_from)
    assert sorted(result.transcripts) == [0, 1] and result.failures == {}
    assert "hello" in result.transcripts[1].text.lower()
    assert _open_ledger_entries(tmp_path) == []


def test_killed_remote_worker_fails_the_job_and_cleans_up(
    sshd: LoopbackSshd, tmp_path: Path, remote_env: tuple[tuple[str, str], ...], two_files: list[Path]
) -> None:
    killed: list[int] = []
    offload: Offload

    def kill_worker_on_start(event: OffloadEvent) -> None:
        if event.kind == "started" and not killed and offload.work:
            pid = int(Path(offload.work, "worker.pid").read_text())
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    offload = _offload(sshd, tmp_path, remote_env)
    work_before = _work_dirs()
    result = offload.run(two_files, on_event=kill_worker_on_start)
    assert killed
    assert result.transcripts == {}
    assert set(result.failures) == {0, 1}
    assert all("the remote worker stopped unexpectedly" in reason for reason in result.failures.values())
    assert offload.work is not None and not Path(offload.work).exists()
    assert _work_dirs() == work_before
    assert _open_ledger_entries(tmp_path) == []


def test_changed_host_key_is_refused_before_anything_is_sent(
    tmp_path: Path, remote_env: tuple[tuple[str, str], ...], two_files: list[Path]
) -> None:
    server = LoopbackSshd(tmp_path / "sshd")
    server.start()
    try:
        known_hosts = server.write_known_hosts(tmp_path / "known_hosts")
        server.restart(new_host_key=True)  # same address, another machine (or someone in between)
        before = _work_dirs()
        result = scriba(
            "--data-dir",
            str(tmp_path / "data"),
            "offload",
            "run",
            str(two_files[0]),
            "--provider",
            "ssh",
            "--host",
            server.url,
            "--identity",
            str(server.client_key),
            "--known-hosts",
            str(known_hosts),
            "--remote-command",
            f"{sys.executable} -m app",
        )
        assert result.returncode == 1
        assert "HOST KEY CHANGED" in result.stderr and "Nothing was uploaded" in result.stderr
        assert _work_dirs() == before
        assert _open_ledger_entries(tmp_path / "data") == []
    finally:
        server.stop()


def test_unknown_host_key_is_never_accepted_silently(sshd: LoopbackSshd, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    session = SshSession(parse_ssh_url(sshd.url, sshd.client_key), empty)
    with pytest.raises(HostKeyError, match=rf"ssh-keyscan -p {sshd.port} 127.0.0.1 >> "):
        session.connect()
    assert empty.read_text() == ""


def test_a_rented_machine_key_is_pinned_and_a_change_aborts(tmp_path: Path) -> None:
    server = LoopbackSshd(tmp_path / "sshd")
    server.start()
    try:
        pinned = tmp_path / "scriba_known_hosts"
        session = SshSession(parse_ssh_url(server.url, server.client_key), pinned, pin_new_host=True)
        session.connect()
        assert session.run(["echo", "ok"])[1].strip() == "ok"
        session.close()
        assert pinned.read_text().split()[:2] == server.known_hosts_line().split()[:2]
        server.restart(new_host_key=True)
        with pytest.raises(HostKeyError, match="HOST KEY CHANGED"):
            session.connect()
    finally:
        server.stop()


def test_cancel_stops_the_remote_worker_and_cleans_up(
    sshd: LoopbackSshd, tmp_path: Path, remote_env: tuple[tuple[str, str], ...], two_files: list[Path]
) -> None:
    offload: Offload

    def cancel_on_progress(event: OffloadEvent) -> None:
        if event.kind == "progress":
            offload.cancel()

    offload = _offload(sshd, tmp_path, remote_env)
    before = _work_dirs()
    with pytest.raises(OffloadCancelled):
        offload.run(two_files, on_event=cancel_on_progress)
    assert _work_dirs() == before
    pids = subprocess.run(["pgrep", "-f", "app worker run"], capture_output=True, text=True).stdout.split()
    assert pids == [], "no remote worker left running"
    assert _open_ledger_entries(tmp_path) == []


def test_a_launch_over_budget_is_refused(
    sshd: LoopbackSshd, tmp_path: Path, remote_env: tuple[tuple[str, str], ...], two_files: list[Path]
) -> None:
    offload = _offload(sshd, tmp_path, remote_env, budget_usd=0.50, estimate_usd=0.80)
    with pytest.raises(BudgetExceeded, match=r"\$0.80\) is over the budget \(\$0.50"):
        offload.run(two_files)
    assert _open_ledger_entries(tmp_path) == []


def test_watchdog_ends_the_work_when_the_heartbeat_stops(tmp_path: Path) -> None:
    work = tmp_path / "scriba-work"
    work.mkdir()
    (work / "heartbeat").touch()
    worker = subprocess.Popen(["setsid", "sleep", "300"])
    (work / "worker.pid").write_text(str(worker.pid))
    ended = tmp_path / "machine-ended"
    started = time.monotonic()
    # --on-expire is how a rented machine ends itself (RunPod: `runpodctl remove pod ID`); here it leaves a mark.
    watchdog = subprocess.run(
        [
            sys.executable, "-m", "app", "worker", "watchdog", "--dir", str(work), "--heartbeat-timeout", "2",
            "--remove-work", "--on-expire", "touch", str(ended),
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert watchdog.returncode == 1, watchdog.stderr
    assert worker.wait(timeout=10) == -signal.SIGKILL
    assert not work.exists()
    assert ended.exists()
    assert time.monotonic() - started >= 2


def test_runpod_pods_end_themselves_without_our_key() -> None:
    from app.cloud.providers import LambdaCloud, RunPod

    assert RunPod("key").self_terminate_command("7h9k2m4n6p") == ["runpodctl", "remove", "pod", "7h9k2m4n6p"]
    assert LambdaCloud("key").self_terminate_command("i-1") is None  # it would need the user's key on the machine


def test_known_hosts_markers_never_give_a_traceback(sshd: LoopbackSshd, tmp_path: Path) -> None:
    """OpenSSH's @cert-authority and @revoked lines (issue 18): a CA line is skipped, a revoked key is refused."""
    other_ca = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILXGDN/SclOozk1xsDztpmhGiKkkrfQB9SKoO8dSIQQZ"
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"# ours\n@cert-authority *.example.com {other_ca}\n" + sshd.known_hosts_line())
    session = SshSession(parse_ssh_url(sshd.url, sshd.client_key), known_hosts)
    session.connect()
    assert session.run(["echo", "ok"])[1].strip() == "ok"
    session.close()

    kind, key = sshd.known_hosts_line().split()[1:3]
    known_hosts.write_text(f"@revoked * {kind} {key}\n" + sshd.known_hosts_line())
    with pytest.raises(HostKeyError, match="is marked @revoked"):
        session.connect()

    result = scriba(
        "--data-dir", str(tmp_path / "data"), "offload", "run", str(known_hosts), "--provider", "ssh",
        "--host", sshd.url, "--identity", str(sshd.client_key), "--known-hosts", str(known_hosts),
    )  # fmt: skip
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("scriba: error:")]
    assert "is marked @revoked" in line and "refusing to connect" in line


def test_a_pinned_key_is_forgotten_without_touching_the_other_lines(tmp_path: Path) -> None:
    from app.cloud.remote.transport import SshEndpoint, forget_host

    known_hosts = tmp_path / "known_hosts"
    marker = "@revoked * ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILXGDN/SclOozk1xsDztpmhGiKkkrfQB9SKoO8dSIQQZ\n"
    pinned = "[127.0.0.1]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHq0k1yqgOTjO6qk8kJxVqP3tWcVqB2c8cXbG3yT4xQy\n"
    known_hosts.write_text(marker + pinned)
    forget_host(known_hosts, SshEndpoint("127.0.0.1", 2222))
    assert known_hosts.read_text() == marker


def _offload_cli(
    sshd: LoopbackSshd, tmp_path: Path, remote_env: tuple[tuple[str, str], ...], data: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """`scriba offload run ARGS` to the loopback host, its data folder ``data``."""
    env_args = [argument for name, value in remote_env for argument in ("--remote-env", f"{name}={value}")]
    return scriba(
        "--data-dir",
        str(data),
        "offload",
        "run",
        "--provider",
        "ssh",
        "--host",
        sshd.url,
        "--identity",
        str(sshd.client_key),
        "--known-hosts",
        str(sshd.write_known_hosts(tmp_path / "known_hosts")),
        "--remote-command",
        f"{sys.executable} -m app",
        *env_args,
        "--model",
        "tiny.en",
        "--language",
        "en",
        "--no-diarize",
        *args,
    )


def test_offload_run_keeps_hand_edited_exports_and_the_recordings_as_transcribe_does(
    sshd: LoopbackSshd, tmp_path: Path, remote_env: tuple[tuple[str, str], ...], espeak: str
) -> None:
    """Issue 38, D3: `offload run` wrote its exports over anything: a talk.txt corrected by hand, and a recording
    that happened to be named talk.txt (its own transcript replaced it)."""
    from tests import synth

    folder = tmp_path / "recordings"
    folder.mkdir()
    memo = synth.write_wav(folder / "memo.wav", synth.conversation([(2, "Remember to buy milk.")])[0])
    # A recording whose name ends in .txt (a phone app's export): its transcript would be talk.txt itself.
    talk = synth.write_wav(folder / "talk.txt", synth.conversation([(0, "The meeting starts at noon.")])[0])
    recording = talk.read_bytes()
    data = tmp_path / "data"

    first = _offload_cli(sshd, tmp_path, remote_env, data, str(memo), str(talk), "-f", "txt,json", "-o", str(folder))
    assert first.returncode == 0, first.stderr
    assert talk.read_bytes() == recording, "the recording was overwritten by its own transcript"
    assert "noon" in (folder / "talk-2.txt").read_text().lower()
    assert f"{talk} is a recording being transcribed: kept it, wrote talk-2.* instead" in first.stderr
    assert "milk" in (folder / "memo.txt").read_text().lower()

    corrected = "Remember to buy oat milk. (corrected by hand)\n"
    (folder / "memo.txt").write_text(corrected)
    second = _offload_cli(sshd, tmp_path, remote_env, data, str(memo), "-f", "txt,json", "-o", str(folder))
    assert second.returncode == 0, second.stderr
    assert (folder / "memo.txt").read_text() == corrected
    assert "milk" in (folder / "memo-2.txt").read_text().lower()
    kept_line = (
        "memo.* in {} were not written by Scriba as they are now (edited by hand?): kept them, wrote {}.* instead"
    )
    assert kept_line.format(folder, "memo-2") in second.stderr

    # `scriba transcribe` decides the same way, from the same record of what Scriba wrote: the hand-edited file is
    # kept, and memo-2.*, which the offload wrote and nobody changed, are Scriba's to replace.
    local = scriba(
        "--data-dir", str(data), "transcribe", str(memo), "--model", "tiny.en", "--language", "en", "--no-diarize",
        "-f", "txt,json", "-o", str(folder), "-q",
    )  # fmt: skip
    assert local.returncode == 0, local.stderr
    assert (folder / "memo.txt").read_text() == corrected
    assert kept_line.format(folder, "memo-2") in local.stderr
    assert not (folder / "memo-3.txt").exists()
    assert talk.read_bytes() == recording
    assert "Traceback" not in first.stderr + second.stderr + local.stderr


def test_queue_jobs_offloaded_are_exported_as_the_local_worker_exports_them(
    sshd: LoopbackSshd, tmp_path: Path, remote_env: tuple[tuple[str, str], ...], espeak: str
) -> None:
    """Queue jobs offloaded (the window's Offload…, one host or a fleet of rented machines) were marked done with
    no exports at all, though their output folder was set; they now export as a job done here does, keeping a
    file edited by hand."""
    from dataclasses import replace

    from app.cloud.offload.queue_offload import QueueOffload
    from app.core.queue.jobs import JobState, JobStore
    from tests import synth

    folder = tmp_path / "recordings"
    folder.mkdir()
    memo = synth.write_wav(folder / "memo.wav", synth.conversation([(2, "Remember to buy milk.")])[0])
    out = tmp_path / "exports"
    out.mkdir()
    corrected = "Remember to buy oat milk. (corrected by hand)\n"
    (out / "memo.txt").write_text(corrected)
    store = JobStore(tmp_path / "data")
    job = store.add(memo, replace(OPTIONS, diarize=False, output_dir=str(out)))

    result = QueueOffload(store, [job.id], lambda: _offload(sshd, tmp_path, remote_env)).run()
    assert result is not None and not result.failures
    done = store.get(job.id)
    assert done.state is JobState.DONE and not done.exports_pending
    assert (out / "memo.txt").read_text() == corrected
    assert "milk" in (out / "memo-2.txt").read_text().lower() and (out / "memo-2.json").exists()
    assert [Path(path).name for path in done.exported] == ["memo-2.txt", "memo-2.json"]
    assert done.note is not None and done.note.startswith("transcribed on your GPU (ssh); exported memo-2.txt")
    assert f"memo.* in {out} were not written by Scriba as they are now (edited by hand?): kept them" in done.note


@pytest.fixture()
def memo(tmp_path: Path, espeak: str) -> Path:
    from tests import synth

    return synth.write_wav(tmp_path / "memo.wav", synth.conversation([(2, "Remember to buy milk.")])[0])


def test_offload_run_to_a_read_only_folder_keeps_the_paid_transcript(
    sshd: LoopbackSshd, tmp_path: Path, remote_env: tuple[tuple[str, str], ...], memo: Path
) -> None:
    """Issue 38, D4: -o on a read-only file system: the remote finished, its work folder was removed, then "an
    unexpected error inside Scriba (OSError: Read-only file system)" and the transcript was gone."""
    from tests.damaged_media import can_mount, small_disk

    if not can_mount():
        pytest.skip("mounting a read-only tmpfs needs root (the CI machines are root)")
    data = tmp_path / "data"
    with small_disk(tmp_path / "readonly", read_only=True) as target:
        run = _offload_cli(sshd, tmp_path, remote_env, data, str(memo), "-f", "txt,json", "-o", str(target))
        assert list(target.iterdir()) == []
    assert run.returncode == 1, run.stderr
    assert "unexpected error" not in run.stderr and "Traceback" not in run.stderr
    (line,) = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert f"could not write to {target}" in line and "Read-only file system" in line
    kept = sorted((data / "unsaved-exports").iterdir())
    assert [path.name for path in kept] == ["memo.json", "memo.txt"]
    assert all(str(path) in line for path in kept)
    assert "milk" in (data / "unsaved-exports" / "memo.txt").read_text().lower()
    # The copy stored before the remote one was removed goes once the exports hold the transcript.
    assert list((data / "offload-results").rglob("*.json")) == []
    assert "remote work directory removed" in run.stderr


def test_the_transcript_is_stored_here_before_the_remote_copy_is_removed(
    sshd: LoopbackSshd, tmp_path: Path, remote_env: tuple[tuple[str, str], ...], memo: Path
) -> None:
    keep = tmp_path / "data" / "offload-results"
    stored_at_removal: list[list[Path]] = []

    def on_event(event: OffloadEvent) -> None:
        if event.message == "remote work directory removed":
            stored_at_removal.append(sorted(keep.rglob("*.json")))

    offload = _offload(sshd, tmp_path, remote_env, keep_dir=keep)
    result = offload.run([memo], on_event=on_event)
    assert len(stored_at_removal) == 1, "the remote work folder was removed once"
    (stored,) = stored_at_removal[0]
    assert result.stored == {0: stored}
    saved = json.loads(stored.read_text())
    assert saved["source"] == str(memo.absolute()) and "milk" in json.dumps(saved["segments"]).lower()


def test_transcripts_that_cannot_be_stored_here_stay_on_the_host(
    sshd: LoopbackSshd, tmp_path: Path, remote_env: tuple[tuple[str, str], ...], memo: Path
) -> None:
    """The data folder refuses the copy (read-only): the user's own host keeps its work folder, renamed so that
    its watchdog leaves it alone, and the run says where."""
    import shutil

    from tests.damaged_media import can_mount, small_disk

    if not can_mount():
        pytest.skip("mounting a read-only tmpfs needs root (the CI machines are root)")
    messages: list[str] = []
    with small_disk(tmp_path / "readonly", read_only=True) as keep:
        offload = _offload(sshd, tmp_path, remote_env, keep_dir=keep)
        result = offload.run([memo], on_event=lambda event: messages.append(event.message))
    assert "milk" in result.transcripts[0].text.lower() and result.stored == {}
    assert offload.work is not None and not Path(offload.work).exists()
    kept = Path(f"{offload.work}-kept")
    try:
        (remote,) = (kept / "out").glob("*.json")
        assert "milk" in json.dumps(json.loads(remote.read_text())["segments"]).lower()
        (said,) = [message for message in messages if "was kept as" in message]
        assert "Read-only file system" in said and f"{kept}" in said
    finally:
        shutil.rmtree(kept, ignore_errors=True)
