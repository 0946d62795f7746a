"""Edited transcripts saved off the window's thread: newest state wins, files only move forward, nothing half
written, everything on disk after a flush, a close or the end of the process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from app.core.queue.jobs import JobOptions, JobStore
from app.core.queue.transcript_writer import TranscriptWriter
from app.core.transcript.document import DiarizationInfo, Segment, SpeakerTurn, Transcript, Word

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def state(number: int, words: int = 3) -> Transcript:
    """Edit number ``number`` of a transcript: its first word says which."""
    spoken = [f" state{number}"] + [f" word{n}" for n in range(1, words)]
    timed = tuple(Word(n * 0.5, n * 0.5 + 0.4, text, 0.9, "SPEAKER_00") for n, text in enumerate(spoken))
    segment = Segment(0.0, words * 0.5, "".join(spoken), timed, "SPEAKER_00")
    return Transcript("talk.wav", words * 0.5, "en", "tiny.en", "cpu", "int8", (segment,), speakers=("SPEAKER_00",))


def number_in(path: Path) -> int:
    first = json.loads(path.read_text(encoding="utf-8"))["segments"][0]["words"][0]["word"]
    return int(first.strip().removeprefix("state"))


def test_saves_queued_behind_a_slow_write_end_as_the_newest_state_written_once(tmp_path: Path) -> None:
    target = tmp_path / "1.json"
    started, release = threading.Event(), threading.Event()
    writes: list[int] = []  # job ids, one per write started

    def path_of(job_id: int) -> Path:
        # Called on the writer's thread as each write starts: the first one waits, as on a slow disk.
        writes.append(job_id)
        started.set()
        release.wait(10)
        return target

    writer = TranscriptWriter(path_of)
    outcomes: list[tuple[int, BaseException | None]] = []

    def save(number: int) -> None:
        writer.save(1, state(number), lambda error: outcomes.append((number, error)))

    save(1)
    assert started.wait(10)  # state 1 is being written
    for number in range(2, 6):
        save(number)
    # Saved, not yet on disk: this process already reads the newest state.
    assert writer.latest(1) == state(5)
    assert not writer.flush(timeout=0.05)
    release.set()
    assert writer.flush(timeout=10)
    assert number_in(target) == 5
    # State 1 was being written when 2..5 arrived; of those only the newest was written, once.
    assert writes == [1, 1]
    assert sorted(outcomes, key=lambda item: item[0]) == [(n, None) for n in range(1, 6)]
    assert writer.latest(1) is None
    assert [path.name for path in tmp_path.iterdir()] == ["1.json"]  # no temporary file left


def test_the_file_never_goes_back_to_an_older_state(tmp_path: Path) -> None:
    target = tmp_path / "1.json"
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if target.exists():
                seen.append(number_in(target))  # a complete file each time (atomic writes)

    writer = TranscriptWriter(lambda _job: target)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for number in range(1, 200):
            writer.save(1, state(number, words=200))
            if number % 20 == 0:
                time.sleep(0.01)
        assert writer.flush(timeout=30)
    finally:
        stop.set()
        watcher.join()
    assert number_in(target) == 199
    assert seen == sorted(seen), "a later read found an older state"


def test_each_write_is_the_transcripts_json_whichever_segments_changed_since_the_last(tmp_path: Path) -> None:
    target = tmp_path / "1.json"
    writer = TranscriptWriter(lambda _job: target)
    two = Segment(2.0, 3.0, " second part", (), "SPEAKER_01")
    turns = (SpeakerTurn(0.0, 2.0, "SPEAKER_00"), SpeakerTurn(2.0, 3.0, "SPEAKER_01"))
    first = replace(
        state(1, words=40),
        segments=(*state(1, words=40).segments, two),
        speakers=("SPEAKER_00", "SPEAKER_01"),
        diarization=DiarizationInfo("builtin", "two voices", turns),
    )
    typed = first.with_segment_text(1, ' a line\nwith "quotes", é and 𝄞')
    states = [
        first,
        typed,  # one segment changed
        typed.rename_speaker("SPEAKER_00", "Ána"),  # that speaker's segments and turns changed
        replace(typed, diarization=None),
        first,  # undone back to the start
        replace(first, segments=()),
        replace(first, warnings=("partial: decoding stopped at 1.0 s of 3.0 s",)),
    ]
    for transcript in states:
        writer.save(1, transcript)
        assert writer.flush(timeout=10)
        text = target.read_text(encoding="utf-8")
        assert Transcript.from_dict(json.loads(text)) == Transcript.from_dict(transcript.to_dict())
        assert text == json.dumps(transcript.to_dict(), ensure_ascii=False, indent=1)  # as a finished job's


def test_a_failed_write_is_reported_and_the_next_save_goes_through(tmp_path: Path) -> None:
    blocker = tmp_path / "transcripts"
    blocker.write_text("a file where the folder should be")
    outcomes: list[BaseException | None] = []
    writer = TranscriptWriter(lambda job_id: tmp_path / "transcripts" / f"{job_id}.json")
    writer.save(7, state(1), outcomes.append)
    assert writer.flush(timeout=10)
    assert len(outcomes) == 1 and isinstance(outcomes[0], OSError)
    assert writer.latest(7) is None  # not pretending to hold what is not on disk
    blocker.unlink()
    writer.save(7, state(2), outcomes.append)
    assert writer.flush(timeout=10)
    assert outcomes[1] is None and number_in(tmp_path / "transcripts" / "7.json") == 2


def test_the_store_reads_its_own_saves_at_once_and_writes_them_before_closing(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.add_transcribed(tmp_path / "talk.wav", JobOptions(), state(1))
    for number in range(2, 30):
        store.save_transcript_later(job.id, state(number, words=300))
    assert store.load_transcript(job.id) == state(29, words=300)
    store.close()
    assert number_in(tmp_path / "transcripts" / f"{job.id}.json") == 29
    reopened = JobStore(tmp_path)
    assert reopened.load_transcript(job.id) == state(29, words=300)
    # A later save that waits (the CLI's, a test's) lands after the ones queued before it, never under them.
    for number in range(30, 40):
        reopened.save_transcript_later(job.id, state(number, words=300))
    reopened.save_transcript(job.id, state(99))
    assert number_in(reopened.transcript_file(job.id)) == 99
    reopened.close()


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from app.core.queue.jobs import JobStore
    from tests.core.queue.test_transcript_writer import state
    store = JobStore(Path(sys.argv[2]))
    mode = sys.argv[3]
    if mode == "exit":  # saved, then the program ends without closing the queue
        store.save_transcript_later(1, state(int(sys.argv[4]), words=3000))
        sys.exit(0)
    number = 0
    while True:  # saving as fast as edits could come, until killed
        number += 1
        store.save_transcript_later(1, state(number, words=3000))
        if number == 3:
            print("saving", flush=True)
    """
)


def child(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(ROOT), str(tmp_path), *args], stdout=subprocess.PIPE, text=True
    )


def test_a_program_that_ends_right_after_a_save_still_writes_it(tmp_path: Path) -> None:
    JobStore(tmp_path).close()
    process = child(tmp_path, "exit", "42")
    assert process.wait(60) == 0
    assert number_in(tmp_path / "transcripts" / "1.json") == 42


def test_a_process_killed_while_saving_leaves_a_whole_transcript(tmp_path: Path) -> None:
    JobStore(tmp_path).close()
    process = child(tmp_path, "loop")
    assert process.stdout is not None and process.stdout.readline() == "saving\n"
    target = tmp_path / "transcripts" / "1.json"
    # Killed while a write is under way (its temporary file is there) after at least one has ended.
    deadline = time.monotonic() + 60
    while not (target.exists() and list(target.parent.glob(".1.json.*.tmp"))):
        assert time.monotonic() < deadline, "the child never wrote"
        time.sleep(0.001)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)
    transcript = Transcript.from_dict(json.loads(target.read_text(encoding="utf-8")))
    assert len(transcript.segments[0].words) == 3000  # a whole one, whichever it was
