"""The Export… button's sheet (issue 40, point 7): formats ticked, what the files show, the folder; the files read
back; a file changed by hand kept; the choices remembered across a restart."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.core.queue.jobs import JobOptions
from app.core.transcript.document import Segment, Transcript
from app.core.transcript.formats import FORMATS

WAIT = 10_000


def meeting(source: Path) -> Transcript:
    """Two speakers, the first saying two segments: one paragraph with paragraphs on, two without."""
    return Transcript(
        source=str(source),
        duration=80.0,
        language="en",
        model="tiny.en",
        device="cpu",
        compute_type="int8",
        segments=(
            Segment(1.0, 2.0, "Shall we start?", (), "Ada"),
            Segment(2.5, 4.0, "The budget first.", (), "Ada"),
            Segment(65.0, 67.0, "Agreed.", (), "Ben"),
        ),
        speakers=("Ada", "Ben"),
    )


def open_sheet(window, qtbot):  # type: ignore[no-untyped-def]
    """The sheet as a user opens it: the finished job selected, a click on Export…."""
    (job,) = window.store.jobs()
    window.refresh()
    window.select_job(job.id)
    QTest.mouseClick(window.export_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: getattr(window, "export_sheet", None) is not None, timeout=WAIT)
    sheet = window.export_sheet
    qtbot.waitUntil(sheet.isVisible, timeout=WAIT)
    return sheet


def set_checked(box, checked: bool) -> None:  # type: ignore[no-untyped-def]
    if box.isChecked() != checked:
        QTest.keyClick(box, Qt.Key.Key_Space)  # what a click (or Space) on a check box does
    assert box.isChecked() == checked


def test_export_through_the_sheet_keeps_a_hand_edited_file_and_remembers_its_choices(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, tmp_path: Path
) -> None:
    window = open_window(start_worker=False)
    source = sample_dir / "sample.wav"
    window.store.add_transcribed(source, JobOptions(), meeting(source))
    sheet = open_sheet(window, qtbot)
    assert set(sheet.format_boxes) == set(FORMATS)  # every format the core writes
    for fmt, box in sheet.format_boxes.items():
        set_checked(box, fmt in ("txt", "md", "srt"))
    set_checked(sheet.style_boxes["timestamps"], False)
    set_checked(sheet.style_boxes["paragraphs"], True)
    out = tmp_path / "exports"
    sheet.folder.clear()
    QTest.keyClicks(sheet.folder, str(out))
    QTest.mouseClick(sheet.export_button, Qt.MouseButton.LeftButton)

    assert (out / "sample.txt").read_text(encoding="utf-8") == (
        "Ada:\nShall we start? The budget first.\n\nBen:\nAgreed.\n"
    )
    assert (
        (out / "sample.md")
        .read_text(encoding="utf-8")
        .endswith("**Ada:** Shall we start? The budget first.\n\n**Ben:** Agreed.\n")
    )
    srt = (out / "sample.srt").read_text(encoding="utf-8")
    assert "00:01:05,000 --> 00:01:07,000\n[Ben] Agreed." in srt  # subtitles keep their times
    assert sorted(path.name for path in out.iterdir()) == ["sample.md", "sample.srt", "sample.txt"]
    assert "sample.txt" in sheet.report.text() and str(out) in sheet.report.text()

    # A file changed by hand is kept; the export goes beside it, and the sheet says so.
    (out / "sample.txt").write_text("Ada said it first, corrected by hand.\n", encoding="utf-8")
    set_checked(sheet.style_boxes["speakers"], False)
    set_checked(sheet.style_boxes["paragraphs"], False)
    QTest.mouseClick(sheet.export_button, Qt.MouseButton.LeftButton)
    assert (out / "sample.txt").read_text(encoding="utf-8") == "Ada said it first, corrected by hand.\n"
    assert (out / "sample-2.txt").read_text(encoding="utf-8") == "Shall we start?\n\nThe budget first.\n\nAgreed.\n"
    assert "kept them" in sheet.report.text() and "sample-2.txt" in sheet.report.text()
    sheet.close()
    window.close()

    # A restart (a new window on the same folders) opens the sheet as it was left.
    again = open_window(start_worker=False)
    sheet = open_sheet(again, qtbot)
    assert sheet.folder.text() == str(out)
    assert {fmt for fmt, box in sheet.format_boxes.items() if box.isChecked()} == {"txt", "md", "srt"}
    assert {name: box.isChecked() for name, box in sheet.style_boxes.items()} == {
        "timestamps": False,
        "speakers": False,
        "paragraphs": False,
    }


def test_export_is_refused_without_a_format_and_a_folder_that_cannot_be_made_is_said(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path, tmp_path: Path
) -> None:
    window = open_window(start_worker=False)
    source = sample_dir / "sample.wav"
    window.store.add_transcribed(source, JobOptions(), meeting(source))
    sheet = open_sheet(window, qtbot)
    for box in sheet.format_boxes.values():
        set_checked(box, False)
    assert not sheet.export_button.isEnabled()
    set_checked(sheet.format_boxes["txt"], True)
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder\n", encoding="utf-8")
    sheet.folder.clear()
    QTest.keyClicks(sheet.folder, str(blocker / "inside"))
    QTest.mouseClick(sheet.export_button, Qt.MouseButton.LeftButton)
    assert "txt was not written" in sheet.report.text() and "a file" in sheet.report.text()
    assert blocker.read_text(encoding="utf-8") == "not a folder\n"


def test_file_export_as_opens_the_sheet_with_that_format_ticked(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path
) -> None:
    from PySide6.QtGui import QAction

    window = open_window(start_worker=False)
    source = sample_dir / "sample.wav"
    job = window.store.add_transcribed(source, JobOptions(), meeting(source))
    window.refresh()
    window.select_job(job.id)
    next(action for action in window.findChildren(QAction) if action.text() == "DOCX…").trigger()
    sheet = window.export_sheet
    qtbot.waitUntil(sheet.isVisible, timeout=WAIT)
    assert [fmt for fmt, box in sheet.format_boxes.items() if box.isChecked()] == ["docx"]
    assert sheet.folder.text() == str(source.parent)  # nothing remembered yet: beside the recording


def test_a_relative_folder_is_refused_in_words(open_window, qtbot, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    window = open_window(start_worker=False)
    source = sample_dir / "sample.wav"
    window.store.add_transcribed(source, JobOptions(), meeting(source))
    sheet = open_sheet(window, qtbot)
    sheet.folder.clear()
    QTest.keyClicks(sheet.folder, "exports")
    QTest.mouseClick(sheet.export_button, Qt.MouseButton.LeftButton)
    assert "full path" in sheet.report.text()
    assert not (Path.cwd() / "exports").exists()
