"""The job options are declared once (app/core/queue/options.py): each one, with a value this test writes, goes
through the command line, the queue, the settings file and into the engine's options unchanged."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest

from app.core.config.settings import JobDefaults, Settings, SettingsStore
from app.core.engine.pipeline import PipelineOptions
from app.core.queue.jobs import JobOptions, JobStore
from app.core.queue.options import OPTION, OPTIONS

pytestmark = pytest.mark.unit

Engine = Callable[[PipelineOptions], Any] | None


def _cases(tmp_path: Path) -> dict[str, tuple[list[str], Any, Engine]]:
    """Each option: the words on the command line, the value they give, and where the engine's options hold it
    (None: not the engine's; formats and the export folder are the worker's, after the engine)."""
    out = tmp_path / "out"
    return {
        "model": (["--model", "small.en"], "small.en", lambda p: p.transcription.model),
        "language": (["--language", "DE"], "de", lambda p: p.transcription.language),
        "diarize": (["--no-diarize"], False, lambda p: p.diarize),
        "diarizer": (["--diarizer", "embedded"], "embedded", lambda p: p.diarizer.backend),
        "identify": (["--no-identify"], False, lambda p: p.identify),
        "num_speakers": (["--num-speakers", "3"], 3, lambda p: p.diarizer.hints.num_speakers),
        "min_speakers": (["--min-speakers", "2"], 2, lambda p: p.diarizer.hints.min_speakers),
        "max_speakers": (["--max-speakers", "25"], 25, lambda p: p.diarizer.hints.max_speakers),
        "prompt": (["--prompt", "Okafor, Scriba"], "Okafor, Scriba", lambda p: p.transcription.initial_prompt),
        "hotwords": (["--hotwords", "EBITDA"], "EBITDA", lambda p: p.transcription.hotwords),
        "task": (["--task", "translate"], "translate", lambda p: p.transcription.task),
        "start": (["--start", "1:30"], 90.0, lambda p: p.start),
        "end": (["--end", "2:00.5"], 120.5, lambda p: p.end),
        "device": (["--device", "cpu"], "cpu", lambda p: (p.transcription.device, p.diarizer.device)),
        "compute_type": (["--compute-type", "int8_float32"], "int8_float32", lambda p: p.transcription.compute_type),
        "batch_size": (["--batch-size", "4"], 4, lambda p: p.transcription.batch_size),
        "formats": (["-f", "srt,DOCX"], ("srt", "docx"), None),
        "output_dir": (["-o", str(out)], str(out.absolute()), None),
    }


def test_every_option_goes_from_the_command_line_through_the_queue_and_the_settings_into_the_engine(
    tmp_path: Path,
) -> None:
    from app.cli.common import job_options_from_args
    from app.cli.main import build_parser

    cases = _cases(tmp_path)
    assert set(cases) == set(OPTION), "an option without its round trip here"
    for name, (_words, value, _engine) in cases.items():
        assert value != OPTION[name].default, name  # each value must show that it travelled

    words = [word for case in cases.values() for word in case[0]]
    from_cli = job_options_from_args(build_parser().parse_args(["queue", "add", "talk.wav", *words]))
    assert {name: getattr(from_cli, name) for name in cases} == {name: case[1] for name, case in cases.items()}

    store = JobStore(tmp_path / "data")
    added = store.add(tmp_path / "talk.wav", from_cli)
    from_queue = JobStore(tmp_path / "data").get(added.id).options  # read back from the queue's JSON
    assert from_queue == from_cli
    with contextlib.closing(sqlite3.connect(tmp_path / "data" / "queue.sqlite3")) as queue:
        stored = json.loads(queue.execute("SELECT options FROM jobs WHERE id = ?", (added.id,)).fetchone()[0])
    assert stored["formats"] == ["srt", "docx"] and stored["start"] == 90.0

    # As the Settings dialog keeps them: what is not one file's own.
    per_file = {"start", "end"}
    kept = {name: getattr(from_queue, name) for name in cases if name not in per_file}
    SettingsStore(tmp_path / "config").save(Settings().with_job(**kept))
    in_file = json.loads((tmp_path / "config" / "settings.json").read_text())["job"]
    assert in_file["identify"] is False and in_file["formats"] == ["srt", "docx"] and in_file["batch_size"] == 4
    assert not per_file & set(in_file), "a stretch of one file is no default for the next"
    defaults = SettingsStore(tmp_path / "config").load().job_options()
    assert (defaults.start, defaults.end) == (None, None)
    from_settings = replace(defaults, start=from_queue.start, end=from_queue.end)
    assert from_settings == from_cli

    engine = from_settings.to_pipeline("hf_token", tmp_path / "library")
    for name, (_words, value, where) in cases.items():
        if where is not None:
            expected = (value, value) if name == "device" else value
            assert where(engine) == expected, name
    assert engine.speaker_library == str(tmp_path / "library")
    assert engine.diarizer.hf_token is None  # diarization is off: the token goes nowhere


def test_job_options_and_the_settings_defaults_have_the_declared_fields_and_defaults() -> None:
    assert {item.name: item.default for item in fields(JobOptions)} == {o.name: o.default for o in OPTIONS}
    defaults = {item.name: item.default for item in fields(JobDefaults)}
    assert defaults.pop("watch_folder") is None  # the window's own, not a job's
    assert defaults == {option.name: option.default for option in OPTIONS if option.persisted}
    assert {option.name for option in OPTIONS if not option.persisted} == {"start", "end"}


def test_a_settings_file_written_before_the_declaration_still_loads(tmp_path: Path) -> None:
    """Written by hand as Scriba wrote it before: identify_speakers, no batch_size."""
    store = SettingsStore(tmp_path)
    store.path.write_text(
        json.dumps(
            {
                "version": 2,
                "job": {
                    "model": "base.en",
                    "device": "cpu",
                    "compute_type": "int8",
                    "language": "en",
                    "diarize": True,
                    "diarizer": "embedded",
                    "identify_speakers": False,
                    "num_speakers": None,
                    "min_speakers": 2,
                    "max_speakers": 30,
                    "formats": ["txt", "docx"],
                    "output_dir": "/home/me/exports",
                    "prompt": "Okafor",
                    "hotwords": None,
                    "task": "translate",
                    "watch_folder": "/home/me/inbox",
                },
                "window": {"theme": "dark"},
                "dictation": {},
                "offload": {},
                "extra": {},
            }
        )
    )
    loaded = store.load()
    assert loaded.job == JobDefaults(
        model="base.en",
        device="cpu",
        compute_type="int8",
        language="en",
        diarizer="embedded",
        identify=False,
        min_speakers=2,
        max_speakers=30,
        formats=("txt", "docx"),
        output_dir="/home/me/exports",
        prompt="Okafor",
        task="translate",
        watch_folder="/home/me/inbox",
    )
    assert loaded.job_options().identify is False and loaded.window.theme == "dark" and loaded.extra == {}
    store.save(loaded)
    saved = json.loads(store.path.read_text())["job"]
    assert saved["identify"] is False and "identify_speakers" not in saved
    assert store.load() == loaded

    # A file with both keys (a newer Scriba's, then the old key put back by hand): the key written now wins.
    store.path.write_text(json.dumps({"version": 2, "job": {"identify": True, "identify_speakers": False}}))
    assert store.load().job.identify is True


def test_stored_values_are_checked_by_their_declared_kind(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    wrong = {
        "device": "gpu0",
        "diarizer": "magic",
        "num_speakers": 21,  # more than the diarizer tells apart
        "batch_size": -5,
        "formats": ["txt", "pdf"],
        "identify": "no",
        "task": "summarise",
    }
    store.path.write_text(json.dumps({"version": 2, "job": {**wrong, "hotwords": "EBITDA"}}))
    assert store.load().job == JobDefaults(hotwords="EBITDA")


def test_the_language_list_is_whispers_own() -> None:
    """The copy a form lists (without importing faster-whisper into the window) is the tokenizer's list."""
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    from app.core.queue.options import WHISPER_LANGUAGES

    assert sorted(WHISPER_LANGUAGES) == sorted(_LANGUAGE_CODES) and len(set(WHISPER_LANGUAGES)) == len(
        WHISPER_LANGUAGES
    )
