"""Watch folder: a recording is queued once it has settled, once only (also after a restart), with its exports
going beside it; what is not a recording, hidden, or still being written is left alone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.core.queue.jobs import JobOptions, JobStore
from app.core.queue.watch import WatchFolder

pytestmark = pytest.mark.unit


def test_a_recording_is_queued_once_it_has_settled_and_only_once(tmp_path: Path, sample_dir: Path) -> None:
    folder = tmp_path / "inbox"
    folder.mkdir()
    store = JobStore(tmp_path / "data")
    watch = WatchFolder(folder, JobOptions(formats=("txt", "docx")), store)
    assert watch.scan() == []  # empty folder
    # A recorder still writing: the file grows between looks, so it is not queued yet.
    growing = folder / "meeting.wav"
    audio = (sample_dir / "sample.wav").read_bytes()
    growing.write_bytes(audio[: len(audio) // 3])
    (folder / "notes.txt").write_text("not a recording")
    (folder / ".partial.wav").write_bytes(audio)  # hidden: a download or sync in progress
    assert watch.scan() == []
    growing.write_bytes(audio)
    assert watch.scan() == []  # changed since the last look
    (job,) = watch.scan()  # unchanged: settled
    assert job.source == growing and job.options.output_dir == str(folder) and job.options.formats == ("txt", "docx")
    assert watch.scan() == []  # never twice
    # Started again (a new process, the same queue): the folder is not queued a second time.
    again = WatchFolder(folder, JobOptions(), store)
    assert again.scan() == [] and again.scan() == []
    # A second recording dropped in later is.
    shutil.copy(sample_dir / "sample.wav", folder / "call.wav")
    assert again.scan() == []
    assert [job.source.name for job in again.scan()] == ["call.wav"]
    assert [job.source.name for job in store.jobs()] == ["meeting.wav", "call.wav"]


def test_sub_folders_only_when_asked_and_a_missing_folder_is_no_error(tmp_path: Path, sample_dir: Path) -> None:
    folder = tmp_path / "inbox"
    (folder / "2026" / "november").mkdir(parents=True)
    shutil.copy(sample_dir / "sample.wav", folder / "2026" / "november" / "interview.wav")
    store = JobStore(tmp_path / "data")
    flat = WatchFolder(folder, JobOptions(), store)
    assert flat.scan() == [] and flat.scan() == []
    deep = WatchFolder(folder, JobOptions(), store, recursive=True)
    deep.scan()
    (job,) = deep.scan()
    assert job.options.output_dir == str(folder / "2026" / "november")  # beside the recording
    shutil.rmtree(folder)  # an unplugged drive
    assert deep.scan() == []
