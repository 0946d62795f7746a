"""The trash: a removed or re-transcribed job's transcript is kept, listed, restored, or put back."""

from __future__ import annotations

from pathlib import Path

from app.core.queue.jobs import JobOptions, JobState, JobStore
from app.core.queue.trash import Trash
from app.core.transcript.document import Segment, Transcript, Word


def interview(source: Path) -> Transcript:
    words = (Word(0.0, 0.4, " Good", 0.9, "Host"), Word(0.5, 1.0, " morning", 0.8, "Host"))
    return Transcript(
        str(source),
        2.0,
        "en",
        "tiny.en",
        "cpu",
        "int8",
        (Segment(0.0, 1.0, "Good morning", words, "Host"),),
        speakers=("Host",),
    )


def test_put_restore_and_empty(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "data")
    source = tmp_path / "interview.wav"
    options = JobOptions(model="base.en", num_speakers=2)
    job = store.add_transcribed(source, options, interview(source))
    trash = Trash(store.directory)

    entry = trash.put(store, job, "removed")
    assert entry is not None and not store.transcript_file(job.id).exists()  # moved, not copied
    store.remove(job.id)
    (listed,) = trash.entries()
    assert (listed.source, listed.options, listed.reason, listed.job_id) == (source, options, "removed", job.id)
    assert listed.load() == interview(source)

    restored = trash.restore(store, listed)
    assert restored.state is JobState.DONE and restored.options == options and restored.id != job.id
    assert store.load_transcript(restored.id) == interview(source) and trash.entries() == []

    assert trash.put(store, store.add(source, options), "removed") is None  # a queued job has no transcript
    trash.put(store, restored, "removed")
    trash.put(store, store.add_transcribed(source, options, interview(source)), "re-transcribed")
    assert [entry.reason for entry in trash.entries()] == ["re-transcribed", "removed"]  # newest first
    assert trash.empty() == 2 and trash.entries() == []
    store.close()


def test_put_back_returns_the_transcript_to_its_job(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "data")
    source = tmp_path / "interview.wav"
    job = store.add_transcribed(source, JobOptions(), interview(source))
    trash = Trash(store.directory)
    entry = trash.put(store, job, "re-transcribed")
    assert entry is not None
    trash.put_back(store, entry)
    assert store.load_transcript(job.id) == interview(source) and trash.entries() == []
    store.close()


def test_an_unreadable_entry_is_left_alone_and_not_listed(tmp_path: Path) -> None:
    trash = Trash(tmp_path)
    broken = trash.directory / "20260101-000000-job1-000001"
    broken.mkdir(parents=True)
    (broken / "entry.json").write_text("{ not json")
    (broken / "transcript.json").write_text("{}")
    assert trash.entries() == [] and broken.exists()
