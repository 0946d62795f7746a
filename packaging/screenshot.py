"""Open the window on a prepared queue for a screenshot (run by packaging/screenshot.sh under Xvfb).

    python packaging/screenshot.py recordings FOLDER       (writes the espeak-ng recordings it shows)
    python packaging/screenshot.py window --data-dir D --config-dir C --select interview.wav \
        --rename Interviewer --ready FILE [--size 1300x800] [--hold 120]

``recordings``: a two-voice interview and a three-voice meeting, spoken by espeak-ng (tests/synth.py).

Builds the real MainWindow (its worker not started, so the queue stays as prepared), selects the job of
the given file, renames that transcript's first speaker (the rename feature, saved like a user's edit),
and once the window has been shown and painted writes its X window id to the --ready file. It then waits
(--hold seconds at most) until the screenshot is taken and the caller ends it or the ready file is gone.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


INTERVIEW = (
    "Thanks for taking the time to talk with us today.",
    "My pleasure, I have been looking forward to it.",
    "Let us start at the beginning. How did the project get started?",
    "It began as a small experiment in our lab about five years ago.",
    "What was the biggest challenge in the first year?",
    "Honestly, finding enough recordings to test our ideas.",
    "And how did you solve that?",
    "We asked volunteers to record short conversations at home.",
    "How many people took part in the end?",
    "A little over two hundred, from twelve different countries.",
    "That is impressive. What surprised you the most?",
    "How differently people speak when they know they are being recorded.",
    "Did that change the way you worked?",
    "Yes, we started recording longer sessions, so that people could relax.",
    "What are you working on now?",
    "Tools that keep every recording on the user's own computer.",
    "Why does that matter so much to you?",
    "Because interviews are private, and people deserve to keep control of them.",
    "Last question. What advice would you give to someone starting out?",
    "Start small, listen carefully, and write everything down.",
    "Thank you, that is a great place to end.",
)


def recordings(folder: Path) -> None:
    from tests import synth

    folder.mkdir(parents=True, exist_ok=True)
    samples, _ = synth.conversation([(index % 2, text) for index, text in enumerate(INTERVIEW)])
    synth.write_wav(folder / "interview.wav", samples)
    samples, _ = synth.meeting(n_speakers=3, n_turns=9)
    synth.write_wav(folder / "team-meeting.wav", samples)


def main() -> int:
    if sys.argv[1:2] == ["recordings"] and len(sys.argv) == 3:
        recordings(Path(sys.argv[2]))
        return 0
    if sys.argv[1:2] == ["window"]:
        del sys.argv[1]
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--config-dir", type=Path, required=True)
    parser.add_argument("--select", required=True, help="file name of the job to show")
    parser.add_argument("--rename", default="Interviewer", help="new name of the transcript's first speaker")
    parser.add_argument("--ready", type=Path, required=True, help="written (window id) once the window is painted")
    parser.add_argument("--size", default="1300x800")
    parser.add_argument("--hold", type=float, default=120.0, help="seconds to stay open at most")
    parser.add_argument("--theme", choices=("system", "light", "dark"), default="system")
    args = parser.parse_args()

    from PySide6.QtCore import QTimer

    from app.core.config.settings import SettingsStore
    from app.core.queue.jobs import JobState, JobStore
    from app.gui.main import create_application
    from app.gui.window import MainWindow

    app = create_application(["scriba"])
    from app.gui.theme import apply_theme

    apply_theme(args.theme)
    store = JobStore(args.data_dir)
    jobs = [job for job in store.jobs() if job.source.name == args.select and job.state is JobState.DONE]
    if not jobs:
        print(f"no finished job for {args.select} in {args.data_dir}", file=sys.stderr)
        return 1
    job = jobs[-1]

    window = MainWindow(store, SettingsStore(args.config_dir), start_worker=False)
    width, height = (int(value) for value in args.size.split("x"))
    window.resize(width, height)
    window.move(50, 50)
    window.splitter.setSizes([width * 2 // 5, width * 3 // 5])
    window.show()
    window.select_job(job.id)
    view = window.transcript_view
    if view.job_id != job.id or view.transcript is None:
        print(f"job {job.id} was selected but its transcript is not shown", file=sys.stderr)
        return 1
    if view.transcript.speakers and args.rename:
        view.rename_speaker(view.transcript.speakers[0], args.rename)
    cursor = view.editor.textCursor()
    cursor.clearSelection()  # the document shows as it reads, not a search match's selection
    view.editor.setTextCursor(cursor)
    window.table.setFocus()
    window.statusBar().clearMessage()

    def ready() -> None:
        window.repaint()
        app.processEvents()
        speakers = ", ".join(view.transcript.speakers) if view.transcript else ""
        args.ready.write_text(f"{int(window.winId())}\n")
        print(f"window {int(window.winId())} ready: job {job.id} ({job.source.name}), speakers: {speakers}")

    def check() -> None:
        if not args.ready.exists():
            app.quit()

    QTimer.singleShot(2000, ready)  # mapped, laid out (paragraphs wrapped) and painted
    watcher = QTimer()
    watcher.timeout.connect(check)
    QTimer.singleShot(3000, lambda: watcher.start(200))
    QTimer.singleShot(int(args.hold * 1000), app.quit)
    code = app.exec()
    store.close()
    return int(code)


if __name__ == "__main__":
    os.environ.setdefault("QT_QPA_PLATFORM", "xcb")
    sys.exit(main())
