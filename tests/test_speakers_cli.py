"""`scriba speakers …` and `scriba transcribe` naming known speakers, as a user runs them, on real meetings."""

from __future__ import annotations

import json
from pathlib import Path

from tests.real_speech import real_speech_dir
from tests.test_cli import scriba


def test_enroll_list_rename_forget_and_transcribe_with_and_without_names(tmp_path: Path) -> None:
    real = real_speech_dir()
    data = ["--data-dir", str(tmp_path / "data")]
    enrolled_from = real / "ami_ES2003a_0-30.wav"
    # Stretches where each speaks alone (from ES2003a's RTTM); MEE012's second stretch adds a sample.
    for name, start, end in (("MEE009", 2.13, 13.18), ("MEE012", 13.24, 16.81), ("MEE012", 26.3, 28.26)):
        result = scriba(*data, "speakers", "enroll", name, str(enrolled_from), "--start", str(start), "--end", str(end))
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"enrolled {name} from ")
    listing = json.loads(scriba(*data, "speakers", "list", "--json").stdout)
    assert [(item["name"], item["samples"]) for item in listing] == [("MEE009", 1), ("MEE012", 2)]

    meeting = real / "ami_ES2003b_0-30.wav"
    named = scriba(*data, "transcribe", str(meeting), "--diarizer", "embedded", "-q", "-o", str(tmp_path / "a"))
    assert named.returncode == 0, named.stderr
    transcript = json.loads((tmp_path / "a" / "ami_ES2003b_0-30.json").read_text())
    assert {"MEE009", "MEE012"} <= set(transcript["speakers"])
    assert {"MEE009", "MEE012"} <= {segment["speaker"] for segment in transcript["segments"]}
    assert transcript["identification"]["threshold"] > 0
    for export in ("txt", "srt", "vtt"):
        text = (tmp_path / "a" / f"ami_ES2003b_0-30.{export}").read_text()
        assert "MEE009" in text and "MEE012" in text, export

    plain = scriba(
        *data,
        "transcribe",
        str(meeting),
        "--diarizer",
        "embedded",
        "--no-identify",
        "-q",
        "-f",
        "json",
        "-o",
        str(tmp_path / "b"),
    )
    assert plain.returncode == 0, plain.stderr
    unnamed = json.loads((tmp_path / "b" / "ami_ES2003b_0-30.json").read_text())
    assert unnamed["identification"] is None
    assert len(unnamed["speakers"]) >= 2 and all(name.startswith("SPEAKER_") for name in unnamed["speakers"])

    assert scriba(*data, "speakers", "rename", "MEE009", "Alex").returncode == 0
    assert scriba(*data, "speakers", "forget", "MEE012").returncode == 0
    listing = json.loads(scriba(*data, "speakers", "list", "--json").stdout)
    assert [(item["name"], item["samples"]) for item in listing] == [("Alex", 1)]
    assert "Alex" in scriba(*data, "speakers", "list").stdout


def test_errors_a_user_meets_are_one_line(tmp_path: Path) -> None:
    real = real_speech_dir()
    data = ["--data-dir", str(tmp_path)]
    cases = {
        ("speakers", "forget", "Nobody"): "No speaker named 'Nobody'",
        ("speakers", "rename", "Nobody", "Else"): "No speaker named 'Nobody'",
        ("speakers", "enroll", "Ann", str(tmp_path / "missing.wav")): "file not found",
        ("speakers", "enroll", "Ann", str(real / "ami_ES2003a_0-30.rttm")): "not an audio or video file",
        # ES2003a: MEE012's 0.25 s back-channel at 18.09 s.
        ("speakers", "enroll", "Ann", str(real / "ami_ES2003a_0-30.wav"), "--start", "18.09", "--end", "18.34"): (
            "Too little speech"
        ),
    }
    for args, message in cases.items():
        result = scriba(*data, *args)
        assert result.returncode == 1, args
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("scriba: error: ") and message in lines[0], result.stderr


def test_no_identify_reaches_queued_jobs_and_settings(tmp_path: Path) -> None:
    from app.cli.common import job_options_from_args
    from app.cli.main import build_parser
    from app.core.config.settings import JobDefaults, Settings, SettingsStore

    args = build_parser().parse_args(["queue", "add", "talk.wav", "--no-identify"])
    assert job_options_from_args(args).identify is False
    assert job_options_from_args(build_parser().parse_args(["queue", "add", "talk.wav"])).identify is True
    # The queue's worker looks for the library in the queue's own data folder.
    options = job_options_from_args(args).to_pipeline(None, tmp_path)
    assert options.identify is False and options.speaker_library == str(tmp_path)
    store = SettingsStore(tmp_path)
    store.save(Settings(job=JobDefaults(identify=False)))
    assert store.load().job_options().identify is False


def test_a_ge2e_library_is_made_again_when_opened_and_the_rest_are_named(tmp_path: Path) -> None:
    """A library of the earlier encoder (GE2E, format 1): the first `scriba speakers` command makes MEE009 again
    from the stretch of ES2003a it was enrolled from, and says that Gone (recording deleted) needs one new sample;
    enrolling Gone again ends that note."""
    real = real_speech_dir()
    data = tmp_path / "data"
    data.mkdir()

    def ge2e(source: str) -> dict[str, object]:
        return {"vector": [0.0625] * 256, "seconds": 6.5, "source": source, "added": "2026-01-01T00:00:00+00:00"}

    library = {
        "MEE009": {"samples": [ge2e(f"{real / 'ami_ES2003a_0-30.wav'} [2.1-13.2 s]")]},
        "Gone": {"samples": [ge2e(f"{tmp_path / 'deleted.wav'} [0.0-9.0 s]")]},
    }
    (data / "speakers.json").write_text(json.dumps({"version": 1, "speakers": library}))
    first = scriba("--data-dir", str(data), "speakers", "list")
    assert first.returncode == 0, first.stderr
    notes = first.stderr.strip().splitlines()
    assert len(notes) == 2 and all(line.startswith("note: ") for line in notes), first.stderr
    assert "MEE009: voiceprints made again" in notes[0]
    assert "'Gone' cannot be named" in notes[1] and "deleted.wav is no longer there" in notes[1]
    assert "Enroll one new sample of Gone" in notes[1]
    rows = {line.split()[0]: line for line in first.stdout.splitlines()[1:]}
    assert "needs one new sample" in rows["Gone"] and rows["MEE009"].split()[1] == "1"

    listing = json.loads(scriba("--data-dir", str(data), "speakers", "list", "--json").stdout)
    assert [(item["name"], item["samples"], bool(item["cannot_be_named"])) for item in listing] == [
        ("Gone", 0, True),
        ("MEE009", 1, False),
    ]
    again = scriba("--data-dir", str(data), "speakers", "enroll", "Gone", str(real / "ami_ES2003a_0-30.wav"),
                   "--start", "13.24", "--end", "16.81")  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "made again" not in again.stderr and "cannot be named" not in again.stderr
    stored = json.loads((data / "speakers.json").read_text())["speakers"]
    assert len(stored["Gone"]["earlier"][0]["vector"]) == 256  # the earlier voiceprint is kept
