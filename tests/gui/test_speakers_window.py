"""Known speakers in the window: "Remember this speaker…" on a finished transcript, and the library dialog."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QInputDialog, QMessageBox

from app.core.engine.audio import decode_audio
from app.core.engine.diarize.encoder import SpeakerEncoder
from app.core.engine.speakers import SpeakerLibrary, enroll
from app.core.queue.jobs import JobOptions
from tests.gui.test_window import finished_transcript
from tests.real_speech import real_speech_dir


def visible_message_box() -> QMessageBox | None:
    boxes = [w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()]
    return boxes[-1] if boxes else None


def test_remember_a_named_speaker_then_manage_the_library(open_window, qtbot) -> None:  # type: ignore[no-untyped-def]
    real = real_speech_dir()
    window, _job, view = finished_transcript(open_window, qtbot, real / "ami_ES2003a_0-30.wav")
    transcript = view.transcript
    assert transcript is not None and transcript.diarization is not None
    assert view.remember_button.isEnabled()
    # The speaker with the most speech (MEE009 chairs this meeting), named by the user first.
    talk: dict[str, float] = {}
    for turn in transcript.diarization.turns:
        talk[turn.speaker] = talk.get(turn.speaker, 0.0) + turn.end - turn.start
    speaker = max(talk, key=lambda name: talk[name])
    view.rename_speaker(speaker, "Chair")

    thread = window.remember_speaker("Chair", "Chair")
    assert thread is not None and "Remembering Chair" in window.statusBar().currentMessage()
    qtbot.waitUntil(lambda: not window.remember_threads, timeout=300000)  # the first CAM++ load exports it
    assert "Scriba will name Chair" in window.statusBar().currentMessage()
    library = SpeakerLibrary.load(window.store.directory)
    assert [known.name for known in library.known()] == ["Chair"]
    assert str(real / "ami_ES2003a_0-30.wav") in library.get("Chair").samples[0].source

    # A diarizer's generic label is refused with one dialog, and nothing is stored.
    assert window.remember_speaker("Chair", "SPEAKER_04") is None
    qtbot.waitUntil(lambda: visible_message_box() is not None, timeout=3000)
    box = visible_message_box()
    assert box is not None and "choose a real name" in box.text()
    box.close()

    enroll(library, "Other", SpeakerEncoder(threads=1), decode_audio(real / "ami_ES2003a_0-30.wav"), 13.24, 16.81)
    assert "Known speakers…" in [action.text() for action in window.menuBar().actions()[2].menu().actions()]
    dialog = window.open_speakers()
    qtbot.addWidget(dialog)
    assert dialog.names() == ["Chair", "Other"]
    assert not dialog.rename("Other", "Chair")  # taken: said in the dialog, nothing changes
    assert "already in the library" in dialog.status.text() and dialog.names() == ["Chair", "Other"]
    assert dialog.rename("Other", "Bea") and dialog.names() == ["Bea", "Chair"]
    dialog.list.selectAll()
    assert dialog.merge_button.isEnabled() and not dialog.rename_button.isEnabled()
    assert dialog.merge(dialog.selected_names(), "Chair")
    assert dialog.names() == ["Chair"]
    assert len(SpeakerLibrary.load(window.store.directory).get("Chair").samples) == 2
    assert dialog.forget(["Chair"]) and dialog.names() == []
    assert SpeakerLibrary.load(window.store.directory).known() == []


def test_known_speakers_makes_ge2e_voiceprints_again_and_names_who_needs_a_new_sample(  # type: ignore[no-untyped-def]
    open_window, qtbot, tmp_path
) -> None:
    """A library of the earlier encoder (GE2E, format 1): opening Known speakers… makes MEE009 again from the
    stretch of ES2003a it was enrolled from, off the main thread, and says in the dialog that Chair (enrolled from
    a transcript's speaker, whose turns were not kept) needs one new sample."""
    import json

    real = real_speech_dir()
    window = open_window(start_worker=False)

    def ge2e(source: str) -> dict[str, object]:
        return {"vector": [0.0625] * 256, "seconds": 6.5, "source": source, "added": "2026-01-01T00:00:00+00:00"}

    library = {
        "MEE009": {"samples": [ge2e(f"{real / 'ami_ES2003a_0-30.wav'} [2.1-13.2 s]")]},
        "Chair": {"samples": [ge2e(f"{real / 'ami_ES2003a_0-30.wav'} (SPEAKER_01)")]},
    }
    path = window.store.directory / "speakers.json"
    path.write_text(json.dumps({"version": 1, "speakers": library}))
    dialog = window.open_speakers()
    qtbot.addWidget(dialog)
    assert dialog.remaking is not None and "again from their recordings" in dialog.status.text()
    assert not dialog.forget_button.isEnabled()
    qtbot.waitUntil(lambda: dialog.remaking is None, timeout=300000)  # the first CAM++ load exports it to ONNX
    assert dialog.names() == ["Chair", "MEE009"]
    status = dialog.status.text()
    assert "MEE009: voiceprints made again" in status
    assert "Chair cannot be named" in status and "Enroll one new sample of Chair" in status
    assert "needs one new sample" in dialog.list.item(0).text()
    assert [known.name for known in SpeakerLibrary.load(window.store.directory).known()] == ["MEE009"]
    assert len(json.loads(path.read_text())["speakers"]["Chair"]["earlier"][0]["vector"]) == 256  # kept


def test_a_remembered_voice_is_named_in_the_transcript_it_came_from(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, call_transcript
) -> None:
    """Issue 40: "Remember this speaker" named the voice in new transcripts but left SPEAKER_00 in the one the
    person was reading; now that one says the name too (an edit, saved like any other)."""
    window = open_window(start_worker=False)
    job = window.store.add_transcribed(sample_dir / "sample.wav", JobOptions(), call_transcript)
    window.refresh()
    window.select_job(job.id)
    view = window.transcript_view
    qtbot.waitUntil(lambda: view.job_id == job.id, timeout=5000)
    speaker = call_transcript.speakers[0]
    assert speaker.startswith("SPEAKER_")
    view.speaker_box.setCurrentText(speaker)

    def answer() -> None:
        asked = QApplication.activeModalWidget()
        if not isinstance(asked, QInputDialog):
            QTimer.singleShot(20, answer)
            return
        asked.setTextValue("Maria")
        asked.accept()

    QTimer.singleShot(0, answer)
    QTest.mouseClick(view.remember_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.remember_threads, timeout=300000)  # the first CAM++ load exports it
    assert "Scriba will name Maria" in window.statusBar().currentMessage()
    assert view.transcript is not None and "Maria" in view.transcript.speakers
    assert speaker not in view.transcript.speakers
    qtbot.waitUntil(lambda: "Maria" in window.store.load_transcript(job.id).speakers, timeout=10000)
    assert [known.name for known in SpeakerLibrary.load(window.store.directory).known()] == ["Maria"]
