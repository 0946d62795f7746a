"""A host without Scriba, and a host without SFTP, against a real OpenSSH server on 127.0.0.1.

The host's Python is this machine's base interpreter (the one the project's venv was made from), which has no
Scriba and none of its dependencies. Tests run offline, so the host cannot reach the package index: the
dependencies a GPU box would download or already have come from ``host_packages``, a folder on the host's
PYTHONPATH holding the project venv's installed packages, minus Scriba itself and the backports that would
shadow the standard library. Scriba's own code reaches the host only as the wheel the offload builds, uploads
and installs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from app.cloud.offload.remote_install import install_folder_name
from app.cloud.remote.transport import SshSession, TransportError, parse_ssh_url
from tests.cloud.sshd import LoopbackSshd, host_environment
from tests.cloud.test_offload_ssh import _open_ledger_entries, _work_dirs
from tests.test_cli import scriba

COMMON = ("--model", "tiny.en", "--language", "en", "--diarizer", "embedded", "-f", "txt,json")


@pytest.fixture(scope="module")
def no_sftp_sshd(tmp_path_factory: pytest.TempPathFactory) -> Any:
    server = LoopbackSshd(tmp_path_factory.mktemp("sshd-no-sftp"), sftp=False)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def host_packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The host's third-party packages (see the module's docstring), as links into the project's venv."""
    import sysconfig

    site = Path(sysconfig.get_paths()["purelib"])
    folder = tmp_path_factory.mktemp("host-packages")
    for entry in site.iterdir():
        stem = entry.name.split(".")[0]
        if entry.name.startswith(("scriba", "__editable__")) or entry.suffix == ".pth":
            continue  # this checkout: the host must get Scriba from the wheel
        if stem in sys.stdlib_module_names and not entry.name.endswith(".dist-info"):
            continue  # e.g. an old `typing` backport: harmless after the standard library, fatal before it
        (folder / entry.name).symlink_to(entry)
    return folder


def _host_env(tmp_path: Path, host_packages: Path) -> list[str]:
    env = host_environment(tmp_path, str(host_packages), numeric=True)  # compared word for word with a local run
    return [argument for name, value in env.items() for argument in ("--remote-env", f"{name}={value}")]


def _offload(server: LoopbackSshd, tmp_path: Path, audio: Path, *extra: str) -> Any:
    return scriba(
        "--data-dir",
        str(tmp_path / "data"),
        "offload",
        "run",
        str(audio),
        "--provider",
        "ssh",
        "--host",
        server.url,
        "--identity",
        str(server.client_key),
        "--known-hosts",
        str(server.write_known_hosts(tmp_path / "known_hosts")),
        *extra,
        *COMMON,
    )


def test_a_host_without_scriba_or_sftp_gets_it_installed_once_and_matches_a_local_run(
    no_sftp_sshd: LoopbackSshd, tmp_path: Path, host_packages: Path, sample_dir: Path
) -> None:
    audio = sample_dir / "sample.wav"
    before = _work_dirs()
    install = ["--install-remote", "--remote-python", sys._base_executable, *_host_env(tmp_path, host_packages)]
    first = _offload(no_sftp_sshd, tmp_path, audio, *install, "-o", str(tmp_path / "first"))
    assert first.returncode == 0, first.stderr
    folder = tmp_path / "remote-home" / "cache" / "scriba" / "remote" / install_folder_name()
    assert f"installed in {folder}" in first.stderr
    assert (folder / "installed").is_file() and (folder / "venv" / "bin" / "scriba").is_file()
    assert not list(folder.glob("*.whl")), "the uploaded wheel is removed once installed"
    installed = list((folder / "venv" / "lib").glob("python3.*/site-packages/app/__init__.py"))
    assert installed, "Scriba's code on the host is the installed wheel's, not this checkout's"

    local = scriba("transcribe", str(audio), *COMMON, "-o", str(tmp_path / "local"), "-q")
    assert local.returncode == 0, local.stderr
    assert (tmp_path / "first" / "sample.txt").read_text() == (tmp_path / "local" / "sample.txt").read_text()

    # The second run finds the private install and uses it: nothing is uploaded or installed again.
    second = _offload(no_sftp_sshd, tmp_path, audio, *install, "-o", str(tmp_path / "second"))
    assert second.returncode == 0, second.stderr
    assert "installed by Scriba earlier" in second.stderr and "installing" not in second.stderr
    assert (tmp_path / "second" / "sample.txt").read_text() == (tmp_path / "local" / "sample.txt").read_text()
    assert _work_dirs() == before
    assert _open_ledger_entries(tmp_path / "data") == []


def test_without_consent_nothing_is_installed_and_the_line_says_how(
    no_sftp_sshd: LoopbackSshd, tmp_path: Path, host_packages: Path, sample_dir: Path
) -> None:
    before = _work_dirs()
    result = _offload(no_sftp_sshd, tmp_path, sample_dir / "sample.wav", *_host_env(tmp_path, host_packages))
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("scriba: error:")]
    assert len(errors) == 1 and "is not installed on" in errors[0] and "--install-remote" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "remote-home" / "cache" / "scriba").exists()
    assert _work_dirs() == before
    assert _open_ledger_entries(tmp_path / "data") == []


def test_a_host_without_a_usable_python_is_one_line(
    no_sftp_sshd: LoopbackSshd, tmp_path: Path, host_packages: Path, sample_dir: Path
) -> None:
    missing = "python3.99"
    result = _offload(
        no_sftp_sshd,
        tmp_path,
        sample_dir / "sample.wav",
        "--install-remote",
        "--remote-python",
        missing,
        *_host_env(tmp_path, host_packages),
    )
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("scriba: error:")]
    assert len(errors) == 1 and f"has no {missing}" in errors[0] and "3.11 or 3.12" in errors[0], result.stderr
    assert _open_ledger_entries(tmp_path / "data") == []


@pytest.mark.parametrize("sftp", [True, False], ids=["sftp", "command-channel"])
def test_file_operations_agree_with_and_without_sftp(tmp_path: Path, sftp: bool) -> None:
    """Every file operation the offload uses, on a server with SFTP and on one without (``cat`` over exec)."""
    server = LoopbackSshd(tmp_path / "sshd", sftp=sftp)
    server.start()
    try:
        session = SshSession(parse_ssh_url(server.url, server.client_key), server.write_known_hosts(tmp_path / "kh"))
        session.connect()
        remote = tmp_path / "remote"
        remote.mkdir()
        payload = os.urandom(700_000)  # several transfer chunks, and binary
        local = tmp_path / "local.bin"
        local.write_bytes(payload)
        # A partial upload (an earlier connection cut at 300 kB) is continued, not restarted.
        (remote / "audio.bin").write_bytes(payload[:300_000])
        sent = session.upload(local, str(remote / "audio.bin"))
        assert sent == 400_000 and (remote / "audio.bin").read_bytes() == payload
        assert session.has_sftp is sftp

        session.download(str(remote / "audio.bin"), tmp_path / "back" / "audio.bin")
        assert (tmp_path / "back" / "audio.bin").read_bytes() == payload
        with pytest.raises((TransportError, FileNotFoundError)):
            session.download(str(remote / "missing.bin"), tmp_path / "back" / "missing.bin")
        assert not (tmp_path / "back" / "missing.bin").exists() and not list((tmp_path / "back").glob(".*part"))

        assert session.read_from(str(remote / "audio.bin"), 699_990) == payload[699_990:]
        assert session.read_from(str(remote / "none.log"), 0) == b""

        session.write_text(str(remote / "token"), "hf_secret", private=True)
        assert (remote / "token").read_text() == "hf_secret" and (remote / "token").stat().st_mode & 0o077 == 0
        session.write_text(str(remote / "spec.json"), '{"a": "é"}')
        assert (remote / "spec.json").read_text(encoding="utf-8") == '{"a": "é"}'

        assert session.modified_at(str(remote / "nothing")) is None
        session.touch(str(remote / "heartbeat"))
        first = session.modified_at(str(remote / "heartbeat"))
        os.utime(remote / "heartbeat", (1_000_000, 1_000_000))
        session.touch(str(remote / "heartbeat"))
        assert first is not None and (session.modified_at(str(remote / "heartbeat")) or 0) > 1_000_000

        (remote / "folder").mkdir()
        with pytest.raises(TransportError, match="not a file"):
            session.upload(local, str(remote / "folder"))
        session.remove(str(remote / "audio.bin"))
        session.remove(str(remote / "audio.bin"))  # already gone: no error
        assert not (remote / "audio.bin").exists()
        session.close()
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("host", "said"),
    [
        ("ssh://me@127.0.0.1:{port}", "refused the connection"),
        ("ssh://me@no-such-host.invalid:22", "cannot find the host 'no-such-host.invalid'"),
    ],
    ids=["refused", "unknown-name"],
)
def test_a_host_that_cannot_be_reached_is_one_line_at_once(
    tmp_path: Path, sample_dir: Path, host: str, said: str
) -> None:
    """The user's own host is up or it is not: no minutes of retrying (that is for a rented machine still
    booting), no paramiko traceback, the ledger clean."""
    from tests.cloud.sshd import free_port

    result = scriba(
        "--data-dir",
        str(tmp_path / "data"),
        "offload",
        "run",
        str(sample_dir / "sample.wav"),
        "--provider",
        "ssh",
        "--host",
        host.format(port=free_port()),
        "--known-hosts",
        str(tmp_path / "known_hosts"),
    )
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("scriba: error:")]
    assert len(errors) == 1 and said in errors[0], result.stderr
    # The first answer, not the one the retry loop for a booting rented machine ends with minutes later.
    assert "after the machine was reported running" not in result.stderr
    assert "Traceback" not in result.stderr and "paramiko" not in result.stderr
    assert _open_ledger_entries(tmp_path / "data") == []
