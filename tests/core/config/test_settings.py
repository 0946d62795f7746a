"""Settings in four parts (job defaults, window state, dictation, offload), read from every earlier file shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.config.settings import (
    DictationPreferences,
    JobDefaults,
    OffloadPreferences,
    Settings,
    SettingsStore,
    WindowState,
)

pytestmark = pytest.mark.unit


def test_a_flat_version_1_file_is_read_into_its_parts(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    host = {"url": "ssh://me@gpu-box", "identity": "", "known_hosts": "~/.ssh/known_hosts", "command": "scriba"}
    version_1 = {
        "version": 1,
        "model": "base.en",
        "language": "en",
        "num_speakers": 3,
        "formats": ["txt", "json"],
        "window_geometry": "AAAA",
        "splitter_state": "BBBB",
        "last_folder": "/home/me/interviews",
        "dictation_output": "type",
        "dictation_hotkey": "ctrl+alt+d",
        "dictation_hotkey_mode": "push",
        "extra": {"offload_ssh_host": host, "offload_budget_usd": 12.5, "from_the_future": [1]},
    }
    store.path.write_text(json.dumps(version_1))
    loaded = store.load()
    assert loaded.job == JobDefaults(model="base.en", language="en", num_speakers=3, formats=("txt", "json"))
    assert loaded.window == WindowState(geometry="AAAA", splitter="BBBB", last_folder="/home/me/interviews")
    assert loaded.dictation == DictationPreferences(output="type", hotkey="ctrl+alt+d", hotkey_mode="push")
    assert loaded.offload == OffloadPreferences(ssh_host=host, budget_usd=12.5)
    assert loaded.extra == {"from_the_future": [1]}  # what this version does not know is kept, not dropped
    store.save(loaded)
    saved = json.loads(store.path.read_text())
    assert saved["version"] == 2 and saved["job"]["model"] == "base.en" and saved["offload"]["budget_usd"] == 12.5
    assert store.load() == loaded


def test_each_part_changes_alone_and_round_trips(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    settings = (
        Settings()
        .with_job(model="small", diarize=False, max_speakers=4)
        .with_window(last_folder="/data")
        .with_dictation(hotkey="ctrl+alt+space")
        .with_offload(budget_usd=3.0)
    )
    assert settings.job_options().model == "small" and settings.job_options().max_speakers == 4
    assert settings.window.geometry is None and settings.dictation.hotkey_mode == "toggle"
    store.save(settings)
    assert store.load() == settings


def test_a_newer_scribas_keys_and_bad_values(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    newer = {
        "version": 2,
        "job": {"model": "tiny.en", "diarize": "yes", "min_speakers": 0, "summary": "short"},
        "window": {"last_folder": 7},
        "offload": {"budget_usd": -1, "ssh_host": {"url": 5}},
        "sync": {"enabled": True},
    }
    store.path.write_text(json.dumps(newer))
    loaded = store.load()
    # A wrong type falls back to the default rather than stopping the start.
    assert loaded.job == JobDefaults(model="tiny.en")
    assert loaded.window == WindowState() and loaded.offload == OffloadPreferences()
    assert loaded.extra == {"job": {"summary": "short"}, "sync": {"enabled": True}}
    store.save(loaded)
    saved = json.loads(store.path.read_text())
    assert saved["job"]["summary"] == "short"  # put back where the newer version looks for it
    assert saved["extra"] == {"sync": {"enabled": True}}


def test_times_are_read_as_people_write_them() -> None:
    import argparse

    from app.cli.common import moment

    assert [moment(text) for text in ("90", "1:30", "01:02:03.5", "0.25")] == [90.0, 90.0, 3723.5, 0.25]
    for wrong in ("0:75", "1::2", "-3", "x", "1:2:3:4"):
        with pytest.raises(argparse.ArgumentTypeError, match="is not a time"):
            moment(wrong)


def test_the_task_is_one_of_two(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    store.path.write_text(json.dumps({"version": 2, "job": {"task": "summarise", "prompt": "Okafor"}}))
    loaded = store.load()
    assert loaded.job.task == "transcribe" and loaded.job.prompt == "Okafor"
    assert loaded.with_job(task="translate").job_options().task == "translate"


def test_the_export_sheets_choices_round_trip_and_bad_ones_fall_back(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    chosen = Settings().with_window(
        export_folder="/srv/out", export_formats=("md", "qda"), export_speakers=False, ask_options_on_add=False
    )
    store.save(chosen)
    assert json.loads(store.path.read_text())["window"]["export_formats"] == ["md", "qda"]
    assert store.load() == chosen  # formats read back as the tuple they were
    store.path.write_text(json.dumps({"version": 2, "window": {"export_formats": ["md", "pdf"], "export_speakers": 0}}))
    assert store.load().window == WindowState()  # an unknown format or a non-bool: the default, not a crash


def test_dictation_pauses_the_queue_unless_turned_off(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    assert store.load().dictation.pause_queue is True
    store.save(Settings().with_dictation(pause_queue=False))
    assert store.load().dictation.pause_queue is False
    store.path.write_text(json.dumps({"version": 2, "dictation": {"pause_queue": "no"}}))
    assert store.load().dictation.pause_queue is True  # not a yes/no: the default
