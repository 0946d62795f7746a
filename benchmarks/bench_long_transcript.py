"""A long meeting in the transcript editor: what opening, editing, searching and playing it cost the real window.
Prints a table per length, asserts nothing.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/bench_long_transcript.py [--minutes 10 60 180] [--runs 3]

For each length a synthetic meeting is written (6 speakers taking short turns, ~145 words a minute with word
times and confidences, Whisper-like segments of up to 12 words: 3 h is about 26,000 words in about 3,200
paragraphs), stored as a done job in a real queue folder, with a silent WAV of the same length as its recording.
The real MainWindow opens it offscreen (worker not started) and each step is driven as the user would:

- open: the job's row selected, until the editor has painted the transcript;
- rename: one speaker renamed (every paragraph of theirs changes label);
- give: all the words of a paragraph in the middle given to another speaker;
- split / merge: that paragraph split in its middle for another speaker (Ctrl+Return), then merged back up;
- edit: a word typed into a paragraph and the cursor moved on (read back, pushed on the undo stack, saved);
  "saved" is when the queue folder holds it (the store's pending writes flushed);
- undo: the last edit undone (and saved again);
- search: one letter typed into the find box, then cleared;
- play: 5 s of playback from the middle with "follow playback" on, on the real QMediaPlayer when it plays here
  (else its position updates driven at 15 per second); CPU is the process's CPU time over wall time, all threads.

"stall" is the longest gap of a 20 ms QTimer on the window's thread during the step and the half second after
it: what the person feels as a frozen window. Each figure is the median over --runs fresh windows (the machine
these were measured on is shared: medians, not means).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import wave
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from benchmarks.bench_engine import table  # noqa: E402 (needs ROOT on the path)

if TYPE_CHECKING:
    from app.core.transcript.document import Transcript
    from app.gui.window import MainWindow

SPEAKERS = tuple(f"SPEAKER_{n:02}" for n in range(6))
WORDS_PER_MINUTE = 145
SEGMENT_WORDS = 12
VOCABULARY = (  # noqa: SIM905 (a sentence of words reads better than a list of them)
    "the we that this budget team quarter plan should will need have next week numbers customer release think "
    "about maybe really okay right so and but if then data review meeting project timeline risk schedule update "
    "again because people sales product design question answer agree decide before after morning report "
    "launch migration server cost hire contract Berlin Chicago March April Monday Friday yes no well just"
).split()
SAMPLE_RATE = 8000


def meeting(minutes: float, seed: int = 40) -> Transcript:
    """A meeting of ``minutes``: turns of 1 to 14 words (a few up to 30), each a new speaker, words 0.3-0.5 s."""
    from app.core.transcript.document import DiarizationInfo, Segment, SpeakerTurn, Transcript, Word

    rng = random.Random(seed)
    duration = minutes * 60.0
    target = round(minutes * WORDS_PER_MINUTE)
    segments: list[Segment] = []
    turns: list[SpeakerTurn] = []
    now, count, speaker = 0.5, 0, SPEAKERS[0]
    while count < target:
        speaker = rng.choice([name for name in SPEAKERS if name != speaker])
        length = min(target - count, rng.randint(1, 14) if rng.random() < 0.95 else rng.randint(15, 30))
        turn_start = now
        for first in range(0, length, SEGMENT_WORDS):
            words: list[Word] = []
            for position in range(first, min(length, first + SEGMENT_WORDS)):
                text = rng.choice(VOCABULARY)
                if position == 0:
                    text = text.capitalize()
                if position == length - 1 or position % 7 == 6:
                    text += "." if rng.random() < 0.7 else ","
                span = rng.uniform(0.25, 0.45)
                probability = rng.uniform(0.2, 0.5) if rng.random() < 0.06 else rng.uniform(0.6, 1.0)
                words.append(Word(now, now + span, " " + text, round(probability, 4), speaker))
                now += span + rng.uniform(0.0, 0.08)
            segments.append(
                Segment(words[0].start, words[-1].end, "".join(w.word for w in words), tuple(words), speaker)
            )
        turns.append(SpeakerTurn(turn_start, now, speaker))
        count += length
        now += rng.uniform(0.1, 0.6)
    # Times spread over the whole recording, as a real meeting's pauses would.
    scale = (duration - 1.0) / now
    scaled = tuple(
        Segment(
            s.start * scale,
            s.end * scale,
            s.text,
            tuple(Word(w.start * scale, w.end * scale, w.word, w.probability, w.speaker) for w in s.words),
            s.speaker,
        )
        for s in segments
    )
    return Transcript.from_dict(
        Transcript(
            source="meeting.wav",
            duration=duration,
            language="en",
            model="large-v3",
            device="cpu",
            compute_type="int8",
            segments=scaled,
            diarization=DiarizationInfo(
                "builtin",
                "synthetic meeting",
                tuple(SpeakerTurn(t.start * scale, t.end * scale, t.speaker) for t in turns),
            ),
            speakers=SPEAKERS,
        ).to_dict()
    )  # as the queue stores it (rounded times)


def silent_wav(path: Path, seconds: float) -> None:
    """A silent recording of ``seconds`` (8 kHz mono: 3 h is 173 MB, written in chunks)."""
    frames = int(seconds * SAMPLE_RATE)
    chunk = bytes(2 * SAMPLE_RATE * 60)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        written = 0
        while written < frames:
            count = min(frames - written, SAMPLE_RATE * 60)
            out.writeframes(chunk[: 2 * count])
            written += count


class Meter:
    """A 20 ms timer on the window's thread: the longest gap between its ticks is the longest freeze."""

    def __init__(self) -> None:
        from PySide6.QtCore import QTimer

        self.last = time.perf_counter()
        self.longest = 0.0
        self.timer = QTimer()
        self.timer.setInterval(20)
        self.timer.timeout.connect(self._tick)
        self.timer.start()

    def _tick(self) -> None:
        now = time.perf_counter()
        self.longest = max(self.longest, now - self.last)
        self.last = now

    def reset(self) -> None:
        self.last = time.perf_counter()
        self.longest = 0.0

    def stop(self) -> None:
        self.timer.stop()


def pump(seconds: float) -> None:
    """Run the event loop for ``seconds`` (timers, deferred layout, paints)."""
    from PySide6.QtWidgets import QApplication

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        QApplication.processEvents()
        time.sleep(0.002)


def step(
    meter: Meter, action: Callable[[], object], window: MainWindow, until: Callable[[], bool] | None = None
) -> tuple[float, float, float, float | None]:
    """(seconds until the editor has painted the result, the window thread's CPU seconds for it, longest stall,
    seconds until ``until`` first held): ``action`` runs from the event loop."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    pump(0.3)  # what came before has settled
    meter.reset()
    times: list[float] = []
    cpu: list[float] = []
    began: list[float] = []
    held: list[float] = []

    def run() -> None:
        started, thread = time.perf_counter(), time.thread_time()
        began.append(started)
        action()
        QApplication.processEvents()
        window.transcript_view.editor.viewport().repaint()
        times.append(time.perf_counter() - started)
        cpu.append(time.thread_time() - thread)

    QTimer.singleShot(0, run)
    while not times:
        QApplication.processEvents()
        time.sleep(0.001)
    end = time.perf_counter() + 0.5
    while time.perf_counter() < end or (until is not None and not held and time.perf_counter() < end + 30):
        if until is not None and not held and until():
            held.append(time.perf_counter() - began[0])
        QApplication.processEvents()
        time.sleep(0.001)
    meter._tick()
    return times[0], cpu[0], meter.longest, held[0] if held else None


def middle_paragraph(window: MainWindow) -> int:
    view = window.transcript_view
    middle = len(view.paragraphs) // 2
    return next(n for n in range(middle, len(view.paragraphs)) if len(view.editor.spans[n]) >= 6)


def put_cursor(window: MainWindow, paragraph: int, word: int, select_to: int | None = None) -> None:
    from PySide6.QtGui import QTextCursor

    editor = window.transcript_view.editor
    block = editor.document().findBlockByNumber(paragraph)
    cursor = QTextCursor(block)
    cursor.setPosition(block.position() + editor.spans[paragraph][word].start)
    if select_to is not None:
        cursor.setPosition(block.position() + editor.spans[paragraph][select_to].end, QTextCursor.MoveMode.KeepAnchor)
    editor.setTextCursor(cursor)


def flush_saves(window: MainWindow) -> None:
    flush = getattr(window.store, "flush_transcripts", None)
    if flush is not None:
        flush()


def playback(window: MainWindow, meter: Meter, seconds: float) -> tuple[str, float, float, float]:
    """(how, CPU share of one core, longest stall, position updates a second) over ``seconds`` of playback."""
    from PySide6.QtCore import QTimer

    view = window.transcript_view
    start = view.transcript.duration / 2 if view.transcript is not None else 0.0
    updates = [0]
    view.play_from_seconds(start)
    player = view._player
    how = "QMediaPlayer"
    driver: QTimer | None = None
    if player is not None:
        player.positionChanged.connect(lambda _ms: updates.__setitem__(0, updates[0] + 1))
        waited = time.perf_counter()
        while player.position() < start * 1000 + 300 and time.perf_counter() - waited < 5:
            pump(0.05)
    if player is None or player.position() < start * 1000 + 300:
        how = "driven 15/s"
        if player is not None:
            view.stop_playback()
        clock = [start]
        driver = QTimer()
        driver.setInterval(1000 // 15)

        def advance() -> None:
            clock[0] += 1 / 15
            updates[0] += 1
            view._position_changed(int(clock[0] * 1000))

        driver.timeout.connect(advance)
        driver.start()
        pump(0.3)
    updates[0] = 0
    meter.reset()
    cpu, wall = time.process_time(), time.perf_counter()
    pump(seconds)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    meter._tick()
    if driver is not None:
        driver.stop()
    view.stop_playback()
    return how, cpu / wall, meter.longest, updates[0] / wall


def one_run(data: Path, config: Path, job_id: int, play_seconds: float) -> dict[str, float | str]:
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    from app.core.config.settings import SettingsStore
    from app.core.queue.jobs import JobStore
    from app.gui.window import MainWindow

    window = MainWindow(JobStore(data), SettingsStore(config), start_worker=False)
    window.resize(1280, 800)
    window.show()
    pump(0.5)
    meter = Meter()
    figures: dict[str, float | str] = {}
    view = window.transcript_view
    figures["open"], figures["open cpu"], figures["open stall"], _ = step(
        meter, lambda: window.select_job(job_id), window
    )
    assert view.job_id == job_id and view.transcript is not None
    words = sum(len(spans) for spans in view.editor.spans)
    figures["words"], figures["paragraphs"] = float(words), float(len(view.paragraphs))

    figures["rename"], figures["rename cpu"], figures["rename stall"], _ = step(
        meter, lambda: view.rename_speaker("SPEAKER_03", "Ana"), window
    )
    number = middle_paragraph(window)
    other = next(name for name in view.transcript.speakers if name != view.paragraphs[number].speaker)

    def give() -> None:
        put_cursor(window, number, 0, len(view.editor.spans[number]) - 1)
        view.give_to_speaker(other)

    figures["give"], figures["give cpu"], figures["give stall"], _ = step(meter, give, window)
    view.undo()
    number = middle_paragraph(window)

    def split() -> None:
        put_cursor(window, number, len(view.editor.spans[number]) // 2)
        view.give_to_speaker(other)

    figures["split"], figures["split cpu"], figures["split stall"], _ = step(meter, split, window)

    def merge() -> None:
        put_cursor(window, number + 1, 0)
        view.merge_with_previous()

    figures["merge"], figures["merge cpu"], figures["merge stall"], _ = step(meter, merge, window)
    flush_saves(window)

    editor = view.editor
    editor.set_editing(True)  # as the Edit text button does
    put_cursor(window, number, 1)
    QTest.keyClicks(editor, "Okafor ")

    def leave() -> None:
        put_cursor(window, number + 1, 0)  # the paragraph is read back when the cursor leaves it

    window.statusBar().clearMessage()
    figures["edit"], figures["edit cpu"], figures["edit stall"], saved = step(
        meter, leave, window, until=lambda: window.statusBar().currentMessage() == "Saved."
    )
    flush_saves(window)
    stored = window.store.transcript_file(job_id).read_text(encoding="utf-8")
    assert "Okafor" in stored, "the edit was not saved"
    figures["edit saved"] = saved if saved is not None else float("nan")

    figures["undo"], figures["undo cpu"], figures["undo stall"], _ = step(meter, view.undo, window)
    flush_saves(window)

    view.search.setFocus()
    figures["search"], figures["search cpu"], figures["search stall"], _ = step(
        meter, lambda: QTest.keyClick(view.search, Qt.Key.Key_E), window
    )
    figures["matches"] = view.match_label.text()
    figures["clear"], figures["clear cpu"], figures["clear stall"], _ = step(meter, view.search.clear, window)

    how, share, stall, rate = playback(window, meter, play_seconds)
    figures["play"], figures["play cpu"], figures["play stall"], figures["play rate"] = how, share, stall, rate
    meter.stop()
    window.close()
    flush_saves(window)
    window.deleteLater()
    pump(0.2)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, nargs="+", default=[10.0, 60.0, 180.0])
    parser.add_argument("--runs", type=int, default=3, help="fresh windows per length (medians are printed)")
    parser.add_argument("--play", type=float, default=5.0, help="seconds of playback measured")
    args = parser.parse_args()

    from PySide6.QtWidgets import QApplication

    from app.core.queue.jobs import JobOptions, JobStore

    app = QApplication.instance() or QApplication([])
    assert app is not None
    for minutes in args.minutes:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            transcript = meeting(minutes)
            recording = folder / "meeting.wav"
            silent_wav(recording, transcript.duration)
            store = JobStore(folder / "data")
            job = store.add_transcribed(recording, JobOptions(), transcript)
            size = store.transcript_file(job.id).stat().st_size
            store.close()
            runs = []
            for _run in range(args.runs):
                # Each run starts from the transcript as the engine left it.
                store = JobStore(folder / "data")
                store.save_transcript(job.id, transcript)
                flush = getattr(store, "flush_transcripts", None)
                if flush is not None:
                    flush()
                store.close()
                runs.append(one_run(folder / "data", folder / "config", job.id, args.play))

        def median(name: str, runs: list[dict[str, float | str]] = runs) -> float:
            return statistics.median(float(run[name]) for run in runs)

        first = runs[0]
        print(
            f"\n{minutes:g} min: {int(first['words'])} words, {int(first['paragraphs'])} paragraphs, "
            f"{len(SPEAKERS)} speakers, transcript file {size / 1e6:.1f} MB; median of {len(runs)} runs; "
            f"search 'e': {first['matches']}; playback: {first['play']}, {median('play rate'):.0f} updates/s\n"
        )
        rows = []
        for label, name in (
            ("open (click to shown)", "open"),
            ("rename a speaker", "rename"),
            ("give a paragraph", "give"),
            ("split a paragraph", "split"),
            ("merge it back", "merge"),
            ("edit a word", "edit"),
            ("undo", "undo"),
            ("search one letter", "search"),
            ("clear the search", "clear"),
        ):
            rows.append(
                [label, f"{median(name):.3f}", f"{median(name + ' cpu'):.3f}", f"{median(name + ' stall'):.3f}"]
            )
        rows.append(["edit on disk", f"{median('edit saved'):.3f}", "", ""])
        rows.append(
            [
                f"play ({args.play:g} s)",
                f"{median('play cpu') * 100:.1f} % of a core",
                "",
                f"{median('play stall'):.3f}",
            ]
        )
        print(table(["step", "seconds", "window thread CPU s", "longest stall (s)"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
