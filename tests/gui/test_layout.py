"""A layout that never clips: the main window and every dialog on 1280x720 and 1920x1080 screens, at scale 1 and 2.

Each size and scale runs in an interpreter of its own (tests/gui/layout_probe.py), since the screen and
QT_SCALE_FACTOR are fixed when Qt starts. The check itself is tried first on a dialog with clipping planted in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtWidgets import QCheckBox, QDialog, QLabel, QPushButton, QVBoxLayout

from app.gui import window as window_module
from tests.gui.layout_probe import SHEETS, layout_problems

ROOT = Path(__file__).resolve().parents[2]
# What the probe must have opened (a dialog that failed to open is not a dialog that fits).
EXPECTED = {
    "main window",
    "main window, full screen, GPU panel",
    "main window, full screen, dictation panel",
    "Settings",
    "Speech models",
    "Known speakers",
    "Offload to cloud",
    "API keys",
    "Restore removed",
    "Transcribe a part",
    "first-run page (CPU)",
    "first-run page (GPU)",
    "error dialog",
    "missing model offer",
    "download failed notice",
    "About",
    *(label for label, opened_by, _attribute in SHEETS if hasattr(window_module, opened_by)),
}


def test_the_check_names_a_cut_label_a_cut_button_an_overlap_and_a_control_outside(qtbot) -> None:  # type: ignore[no-untyped-def]
    dialog = QDialog()
    dialog.setWindowTitle("Planted")
    qtbot.addWidget(dialog)
    layout = QVBoxLayout(dialog)
    wrapped = QLabel("A sentence long enough to need three lines at this width, so a fixed height cuts it off.")
    wrapped.setWordWrap(True)
    wrapped.setFixedSize(120, 16)
    button = QPushButton("Download the accurate model")
    button.setFixedWidth(40)
    squeezed = QCheckBox("txt")
    squeezed.setFixedHeight(5)
    fine = QLabel("Fits")
    for widget in (wrapped, button, squeezed, fine):
        layout.addWidget(widget)
    dialog.resize(400, 300)
    dialog.show()
    qtbot.waitExposed(dialog)
    # Placed by hand after the layout ran: on top of "Fits", and half outside the dialog's right edge.
    over = QLabel("On top", dialog)
    over.move(fine.pos())
    over.show()
    outside = QPushButton("Half out", dialog)
    outside.move(dialog.width() - 20, 250)
    outside.show()
    qtbot.waitUntil(outside.isVisible)

    problems = layout_problems(dialog, "Planted")
    text = "\n".join(problems)
    assert "Planted: QLabel 'A sentence long enough" in text and "16 px high" in text
    assert "Planted: QPushButton 'Download the accurate model' is 40x" in text
    assert "Planted: QCheckBox 'txt' is" in text
    assert any("'On top'" in line and "overlaps QLabel 'Fits'" in line for line in problems)
    assert any("'Half out' is cut by its QDialog" in line for line in problems)
    assert not any(line.startswith("Planted: QLabel 'Fits'") and "overlaps" not in line for line in problems)


@pytest.mark.parametrize("scale", [1, 2])
@pytest.mark.parametrize("size", ["1280x720", "1920x1080"])
def test_every_window_and_dialog_fits_the_screen(size: str, scale: int) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("QT_")}
    done = subprocess.run(
        [sys.executable, "-m", "tests.gui.layout_probe", "--size", size, "--scale", str(scale)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(found["opened"]) >= EXPECTED, f"not opened: {EXPECTED - set(found['opened'])}"
    assert found["problems"] == [], f"at {size}, scale {scale}:\n" + "\n".join(found["problems"])


def test_a_long_file_name_keeps_its_start_and_end_and_eta_stays_in_view(open_window, qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QStyleOptionViewItem

    from app.core.queue.worker import JobEvent

    folder = tmp_path / "Recordings of the planning committee"
    folder.mkdir()
    long_name = folder / "2026-03-14 quarterly planning meeting with the whole regional team (full recording).wav"
    long_name.write_bytes(b"RIFF")  # the queue takes it; nothing reads it with the worker stopped
    window = open_window(start_worker=False)
    (job,) = window.add_paths([long_name])
    window.resize(1150, 640)  # a 1280x720 screen's window
    qtbot.waitUntil(lambda: window.width() == 1150, timeout=3000)
    # What the worker reports while the built-in diarizer runs: the longest state the queue shows.
    window.model.apply_progress(JobEvent("progress", job.id, job.source, 0.42, "diarize", 3725.0, 6.5, 1834.0))
    table = window.table
    header = table.horizontalHeader()
    window.splitter.setSizes([380, 770])  # the queue narrowed by its splitter handle, as a person may
    qtbot.waitUntil(lambda: 370 <= window.splitter.sizes()[0] <= 390, timeout=3000)
    qtbot.waitUntil(lambda: header.sectionSize(5) > 0, timeout=3000)

    eta_right = header.sectionViewportPosition(5) + header.sectionSize(5)
    assert eta_right <= table.viewport().width()
    assert table.model().data(table.model().index(0, 5)) == "30:34"
    index = table.model().index(0, 0)
    option = QStyleOptionViewItem()
    table.initViewItemOption(option)  # as the table paints a cell: its options, then the delegate's
    table.itemDelegate().initStyleOption(option, index)
    shown = option.fontMetrics.elidedText(option.text, option.textElideMode, header.sectionSize(0) - 8)
    sizes = [header.sectionSize(column) for column in range(6)]
    assert shown != option.text and shown.startswith("2026") and shown.endswith(".wav"), (shown, sizes)
    assert header.sectionSize(0) >= 60  # the name is not squeezed to a bare "…" by the other columns
    assert table.model().data(index, Qt.ItemDataRole.ToolTipRole).splitlines()[0] == str(long_name)
