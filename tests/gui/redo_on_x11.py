"""Run by test_transcript_newcomer on a private X server: the window with an X desktop's key bindings (Redo is
Ctrl+Shift+Z there; the offscreen platform's is Ctrl+Y), an undo and the Redo key pressed in the queue."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from PySide6.QtCore import Qt, qInstallMessageHandler
from PySide6.QtGui import QKeySequence
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

messages: list[str] = []
qInstallMessageHandler(lambda _kind, _context, text: messages.append(text))
app = QApplication(sys.argv[:1])

from app.core.config.settings import SettingsStore  # noqa: E402
from app.core.queue.jobs import JobOptions, JobStore  # noqa: E402
from app.core.transcript.document import Transcript  # noqa: E402
from app.gui.window import MainWindow  # noqa: E402


def wait_for(condition, seconds: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.01)
    return bool(condition())


folder, audio, saved = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
window = MainWindow(JobStore(folder / "data"), SettingsStore(folder / "config"), start_worker=False)
window.show()
transcript = Transcript.from_dict(json.loads(saved.read_text()))
job = window.store.add_transcribed(audio, JobOptions(), transcript)
window.refresh()
window.select_job(job.id)
view = window.transcript_view
window.activateWindow()
active = wait_for(lambda: view.job_id == job.id and window.isActiveWindow())
old = transcript.speakers[0]
view.rename_speaker(old, "Ana")
window.table.setFocus()
wait_for(window.table.hasFocus)
QTest.keyClick(window.table, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
undone = wait_for(lambda: view.transcript is not None and old in view.transcript.speakers, 2)
QTest.keyClick(window.table, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
redone = wait_for(lambda: view.transcript is not None and "Ana" in view.transcript.speakers, 2)
report = {
    "platform": app.platformName(),
    "redo keys": QKeySequence(QKeySequence.StandardKey.Redo).toString(),
    "active": active,
    "undone": undone,
    "redone": redone,
    "ambiguous": [text for text in messages if "Ambiguous" in text],
}
window.store.flush_transcripts()
window.close()
print(json.dumps(report))
