"""`scriba offload run` for rented providers up to the launch (budget, confirmation, API key), `offload key` and
`offload sweep`: nothing is launched without a yes, a key and a budget that covers the estimate."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.offload import cmd_offload_key
from app.cloud.offload.ledger import Ledger
from tests.test_cli import scriba


def _ledger_entries(data: Path) -> list[object]:
    path = data / "cloud-ledger.sqlite3"
    return list(Ledger(path).entries()) if path.exists() else []


def test_over_budget_launches_nothing(tmp_path: Path, sample_dir: Path) -> None:
    data = tmp_path / "data"
    result = scriba(
        "--data-dir", str(data), "offload", "run", str(sample_dir / "sample.wav"), "--provider", "vast",
        "--model", "large-v3", "--budget", "0.001", "--yes",
    )  # fmt: skip
    assert result.returncode == 1
    assert "estimate: vast" in result.stderr and "is over the budget ($0.00)" in result.stderr
    assert "nothing was launched" in result.stderr
    assert _ledger_entries(data) == []


def test_several_machines_are_estimated_together_against_the_budget(tmp_path: Path, sample_dir: Path) -> None:
    """--gpus N: the estimate shown and checked against the budget is for N machines (each one's start-up paid),
    more than for one; nothing is launched when it is over."""
    data = tmp_path / "data"
    files = [str(sample_dir / "sample.wav")] * 3

    def estimate(gpus: str, budget: str) -> tuple[float, str]:
        result = scriba(
            "--data-dir", str(data), "offload", "run", *files, "--provider", "runpod", "--gpu", "RTX 3090",
            "--model", "large-v3", "--gpus", gpus, "--budget", budget, "--yes",
        )  # fmt: skip
        assert result.returncode == 1 and "nothing was launched" in result.stderr, result.stderr
        line = next(line for line in result.stderr.splitlines() if line.startswith("estimate: "))
        return float(line.split("about $")[1].split()[0]), line

    one, _ = estimate("1", "0.0001")
    three, line = estimate("3", "0.0001")
    assert "runpod 3 x RTX 3090" in line and three > one
    assert _ledger_entries(data) == []


def test_machine_counts_are_checked(tmp_path: Path, sample_dir: Path) -> None:
    wav = str(sample_dir / "sample.wav")
    zero = scriba("--data-dir", str(tmp_path), "offload", "run", wav, "--provider", "runpod", "--gpus", "0")
    assert zero.returncode == 2 and "give 1 to 64" in zero.stderr
    own = scriba(
        "--data-dir", str(tmp_path), "offload", "run", wav, "--provider", "ssh", "--host", "ssh://me@box",
        "--gpus", "2",
    )  # fmt: skip
    assert own.returncode == 2 and "give --host once per host" in own.stderr


def test_renting_needs_a_yes(tmp_path: Path, sample_dir: Path) -> None:
    result = scriba(
        "--data-dir", str(tmp_path), "offload", "run", str(sample_dir / "sample.wav"), "--provider", "lambda"
    )
    assert result.returncode == 2 and "pass --yes" in result.stderr
    assert _ledger_entries(tmp_path) == []


def test_missing_api_key_says_how_to_set_it(tmp_path: Path, sample_dir: Path) -> None:
    env_data = tmp_path / "data"
    result = scriba(
        "--data-dir", str(env_data), "offload", "run", str(sample_dir / "sample.wav"), "--provider", "runpod",
        "--yes", "--model", "tiny.en",
    )  # fmt: skip
    assert result.returncode == 1
    assert "scriba offload key set runpod" in result.stderr
    assert _ledger_entries(env_data) == []


def test_unknown_gpu_is_refused_before_anything(tmp_path: Path, sample_dir: Path) -> None:
    result = scriba(
        "--data-dir", str(tmp_path), "offload", "run", str(sample_dir / "sample.wav"), "--provider", "lambda",
        "--gpu", "Voodoo 2", "--yes",
    )  # fmt: skip
    assert result.returncode == 2 and "no Voodoo 2 offer of lambda fits this job" in result.stderr


def test_key_set_status_clear(
    memory_keyring: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from app.core.secrets import get_secret

    monkeypatch.setattr("sys.stdin", io.StringIO("vast-secret-123\n"))
    assert cmd_offload_key(argparse.Namespace(key_action="set", provider="vast")) == 0
    assert get_secret("vast_api_key") == "vast-secret-123"
    assert cmd_offload_key(argparse.Namespace(key_action="status", provider="vast")) == 0
    assert cmd_offload_key(argparse.Namespace(key_action="clear", provider="vast")) == 0
    assert get_secret("vast_api_key") is None
    out = capsys.readouterr().out
    assert "a key is set" in out and "vast-secret-123" not in out


def test_sweep_reports_a_machine_it_cannot_reach(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    # A run that recorded a rented machine and then died (its process is gone) before tearing it down.
    crashed_run = (
        "import sys; from app.cloud.offload.ledger import Ledger; from app.cloud.types import Offer;"
        "ledger = Ledger(sys.argv[1]);"
        "offer = Offer('vast', '4020', 'RTX 4090', 1, 24, 0.4, None, 'per-second', 2, 'api:vast', '2026-11-21', True);"
        "entry = ledger.record_intent('vast', offer, 'scriba-crashed', 'job 7', 1.0);"
        "ledger.record_instance(entry, '4020')"
    )
    subprocess.run(
        [sys.executable, "-c", crashed_run, str(data / "cloud-ledger.sqlite3")],
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    clean = scriba("--data-dir", str(tmp_path / "empty"), "offload", "sweep")
    assert clean.returncode == 0 and "the ledger is clean" in clean.stdout
    result = scriba("--data-dir", str(data), "offload", "sweep")
    # No Vast key here: the sweep says so and the entry stays open for the next start.
    assert result.returncode == 1, result.stdout + result.stderr
    assert "4020" in result.stderr and "1 still open" in result.stdout
    assert "scriba offload key set vast" in result.stderr


def test_key_set_without_a_keyring_says_what_to_do_in_one_line(tmp_path: Path) -> None:
    """No keyring backend at all (a server, a container): keyring's own "fail" backend, as keyring picks it there."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
    command = [sys.executable, "-m", "app", "--data-dir", str(tmp_path), "offload", "key"]
    stored = subprocess.run(
        [*command, "set", "vast"], input="vast-secret-456\n", capture_output=True, text=True, env=env
    )
    assert stored.returncode == 1
    assert "Traceback" not in stored.stderr and len(stored.stderr.strip().splitlines()) == 1
    assert "keyring is not available" in stored.stderr and "SCRIBA_VAST_API_KEY" in stored.stderr
    assert "vast-secret-456" not in stored.stderr + stored.stdout
    cleared = subprocess.run([*command, "clear", "vast"], capture_output=True, text=True, env=env)
    assert cleared.returncode == 1 and "Traceback" not in cleared.stderr
    # What the message offers works: the key from the environment is found (and never printed).
    env["SCRIBA_VAST_API_KEY"] = "vast-secret-456"
    status = subprocess.run([*command, "status", "vast"], capture_output=True, text=True, env=env)
    assert status.returncode == 0 and "a key is set" in status.stdout
    assert "vast-secret-456" not in status.stdout + status.stderr


def _no_file_writes() -> None:
    """In the child: the kernel refuses every write to a file (size limit 0), as a full data disk does."""
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def test_a_data_disk_that_takes_no_write_is_one_line_and_rents_nothing(tmp_path: Path, sample_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    base = [sys.executable, "-m", "app", "--data-dir", str(tmp_path / "data")]
    commands = {
        "sweep": [*base, "offload", "sweep"],
        "run": [*base, "offload", "run", str(sample_dir / "sample.wav"), "--provider", "ssh", "--host",
                "ssh://me@127.0.0.1:9"],
    }  # fmt: skip
    for name, command in commands.items():
        result = subprocess.run(command, capture_output=True, text=True, env=env, preexec_fn=_no_file_writes)
        assert result.returncode == 1, (name, result.stderr)
        assert "Traceback" not in result.stderr, name
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("scriba: error: the cloud ledger") and "cannot be opened or written" in line


def test_sweep_with_a_damaged_ledger_and_no_key_sets_it_aside_and_says_what_to_do(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    damaged = b"SQLite format 3\x00 but only the header survived" * 50
    (data / "cloud-ledger.sqlite3").write_bytes(damaged)
    result = scriba("--data-dir", str(data), "offload", "sweep")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "is damaged" in line and "scriba offload key set" in line
    [aside] = data.glob("cloud-ledger.sqlite3.damaged-*")
    assert aside.read_bytes() == damaged and str(aside) in line


def test_key_set_with_a_keyring_that_keeps_nothing_says_it_was_not_stored(tmp_path: Path) -> None:
    """keyring's null backend takes every key without a word and keeps none: "stored" was not true."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
    command = [sys.executable, "-m", "app", "--data-dir", str(tmp_path), "offload", "key", "set", "vast"]
    result = subprocess.run(command, input="vast-secret-789\n", capture_output=True, text=True, env=env)
    assert result.returncode == 1, result.stdout
    assert "stored in the system keyring" not in result.stdout
    [line] = result.stderr.strip().splitlines()
    assert "not stored" in line and "null" in line and "SCRIBA_VAST_API_KEY" in line
    assert "vast-secret-789" not in result.stderr + result.stdout
