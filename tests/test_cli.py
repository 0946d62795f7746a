"""The `scriba` command as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import __version__
from tests import synth


def scriba(*args: str, cwd: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        input=stdin,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )


def test_version() -> None:
    result = scriba("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"scriba {__version__}"


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "scriba"
    result = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and __version__ in result.stdout


def test_a_bad_file_fails_alone_and_the_others_are_written(tmp_path: Path, espeak: str) -> None:
    samples, _ = synth.conversation([(0, "The first interview starts now."), (1, "Thank you for having me.")])
    good = synth.write_wav(tmp_path / "good one.wav", samples)
    bad = tmp_path / "broken.mp3"
    bad.write_text("not audio")
    out = tmp_path / "out"
    result = scriba("transcribe", str(bad), str(good), str(tmp_path / "missing.m4a"), "-o", str(out), "-f", "txt,json")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 2
    assert "broken.mp3: not an audio or video file" in errors[0]
    assert "missing.m4a: file not found" in errors[1]
    assert "2 of 3 file(s) failed" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["good one.json", "good one.txt"]
    data = json.loads((out / "good one.json").read_text())
    assert "thank you for having me" in " ".join(s["text"] for s in data["segments"]).lower()


def test_no_diarize_and_default_output_dir(tmp_path: Path, espeak: str) -> None:
    good = synth.write_wav(tmp_path / "memo.wav", synth.conversation([(2, "Remember to buy milk.")])[0])
    result = scriba("transcribe", str(good), "--no-diarize", "-f", "srt", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    srt = (tmp_path / "memo.srt").read_text()
    assert srt.startswith("1\n00:00:0") and "SPEAKER" not in srt and "milk" in srt.lower()


def test_same_stem_twice_does_not_overwrite(tmp_path: Path, espeak: str) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = synth.write_wav(
        tmp_path / "a" / "talk.wav", synth.conversation([(0, "The apple harvest was early this year.")])[0]
    )
    second = synth.write_wav(
        tmp_path / "b" / "talk.wav", synth.conversation([(0, "We sold the red bicycle yesterday.")])[0]
    )
    result = scriba("transcribe", str(first), str(second), "--no-diarize", "-f", "txt", "-o", str(tmp_path / "o"))
    assert result.returncode == 0, result.stderr
    assert "apple" in (tmp_path / "o" / "talk.txt").read_text().lower()
    assert "bicycle" in (tmp_path / "o" / "talk-2.txt").read_text().lower()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-f", "docx"], "unknown format 'docx'"),
        (["--num-speakers", "0"], "must be at least 1"),
        (["--min-speakers", "3", "--max-speakers", "2"], "min speakers (3) is more than max speakers (2)"),
        (["--device", "cuda"], "CTranslate2 sees no CUDA GPU"),
        (["--model", "huge"], "Unknown model 'huge'"),
    ],
)
def test_bad_options_are_explained(tmp_path: Path, args: list[str], message: str, espeak: str) -> None:
    audio = synth.write_wav(tmp_path / "x.wav", synth.conversation([(0, "Hi.")])[0])
    result = scriba("transcribe", str(audio), *args, "-o", str(tmp_path))
    assert result.returncode != 0
    assert message in result.stderr


def test_models_list_and_offline_download() -> None:
    listing = scriba("models", "list")
    assert listing.returncode == 0
    line = next(line for line in listing.stdout.splitlines() if line.startswith("tiny.en"))
    assert "bundled" in line and "(default)" in line
    assert "large-v3" in listing.stdout
    download = scriba("models", "download", "small")
    assert download.returncode == 1 and "Could not download 'small'" in download.stderr
    assert scriba("models", "remove", "tiny.en").returncode == 1


def test_token_status_without_a_token() -> None:
    result = scriba("token", "status")
    assert result.returncode == 0 and "no Hugging Face token" in result.stdout


def test_file_arguments_open_the_window_with_those_files(tmp_path: Path) -> None:
    from app.cli import split_open_files

    media = tmp_path / "talk.wav"
    media.write_bytes(b"RIFF")
    assert split_open_files(["--data-dir", str(tmp_path), str(media)]) == (["--data-dir", str(tmp_path)], [media])
    assert split_open_files(["queue", "add", str(media)]) == (["queue", "add", str(media)], [])
    # A mistyped command is left to argparse, which names the valid ones.
    assert split_open_files(["transcrbe", str(media)]) == (["transcrbe", str(media)], [])
