"""The sheet of options when recordings are dropped or added (issue 40, point 3): language, speakers, quality and
part of the recording for these files; Enter keeps the Settings defaults; "Don't ask again" is kept."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.core.config.settings import Settings, SettingsStore
from app.gui.settings.dialog import SettingsDialog
from tests.gui.test_window import drop

WAIT = 10_000


def sheet_of(window, qtbot):  # type: ignore[no-untyped-def]
    qtbot.waitUntil(lambda: getattr(window, "options_sheet", None) is not None, timeout=WAIT)
    sheet = window.options_sheet
    qtbot.waitUntil(sheet.isVisible, timeout=WAIT)
    return sheet


def test_a_dropped_file_is_queued_with_the_options_chosen_in_the_sheet(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path
) -> None:
    window = open_window(start_worker=False)
    drop(window.drop_zone, [sample_dir / "sample.wav"])
    sheet = sheet_of(window, qtbot)
    assert window.store.jobs() == []  # nothing queued before the sheet is answered
    sheet.language.setCurrentIndex(sheet.language.findData("de"))
    sheet.speaker_mode.setCurrentIndex(sheet.speaker_mode.findData("range"))
    assert sheet.least.isVisible() and sheet.most.isVisible() and not sheet.exact.isVisible()
    sheet.least.clear()
    QTest.keyClicks(sheet.least, "2")
    sheet.most.clear()
    QTest.keyClicks(sheet.most, "3")
    bundled = sheet.quality.findData("tiny.en")
    assert bundled > 0 and "on disk" in sheet.quality.itemText(bundled)
    sheet.quality.setCurrentIndex(bundled)
    QTest.keyClicks(sheet.start, "0:05")
    QTest.keyClicks(sheet.end, "20")
    QTest.mouseClick(sheet.add_button, Qt.MouseButton.LeftButton)

    (job,) = window.store.jobs()
    assert job.source == sample_dir / "sample.wav"
    options = job.options
    assert (options.language, options.model) == ("de", "tiny.en")
    assert (options.diarize, options.num_speakers, options.min_speakers, options.max_speakers) == (True, None, 2, 3)
    assert (options.start, options.end) == (5.0, 20.0)
    assert options.formats == Settings().job.formats  # what the sheet does not show comes from Settings


def test_enter_adds_with_the_settings_defaults(open_window, qtbot, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "config"
    defaults = Settings().with_job(language="fr", num_speakers=3, formats=("txt", "docx"))
    SettingsStore(config).save(defaults)
    window = open_window(config=config, start_worker=False)
    drop(window.drop_zone, [sample_dir / "sample.wav"])
    sheet = sheet_of(window, qtbot)
    assert sheet.language.currentData() == "fr"
    assert sheet.speaker_mode.currentData() == "exact" and sheet.exact.value() == 3
    QTest.keyClick(sheet, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(window.store.jobs()) == 1, timeout=WAIT)
    assert window.store.jobs()[0].options == defaults.job_options()


def test_a_wrong_part_is_said_and_cancel_adds_nothing(open_window, qtbot, sample_dir: Path) -> None:  # type: ignore[no-untyped-def]
    window = open_window(start_worker=False)
    drop(window.drop_zone, [sample_dir / "sample.wav"])
    sheet = sheet_of(window, qtbot)
    QTest.keyClicks(sheet.start, "0:20")
    QTest.keyClicks(sheet.end, "0:10")
    QTest.mouseClick(sheet.add_button, Qt.MouseButton.LeftButton)
    assert sheet.isVisible() and sheet.error.isVisible()
    assert "end (0:10) is not after the start (0:20)" in sheet.error.text()
    sheet.end.clear()
    QTest.keyClicks(sheet.end, "soon")
    QTest.mouseClick(sheet.add_button, Qt.MouseButton.LeftButton)
    assert "'soon' is not a time" in sheet.error.text()
    sheet.reject()
    assert window.store.jobs() == []


def test_dont_ask_again_is_kept_across_a_restart_and_settings_bring_the_sheet_back(  # type: ignore[no-untyped-def]
    open_window, qtbot, sample_dir: Path
) -> None:
    window = open_window(start_worker=False)
    drop(window.drop_zone, [sample_dir / "sample.wav"])
    sheet = sheet_of(window, qtbot)
    QTest.keyClick(sheet.dont_ask, Qt.Key.Key_Space)
    assert sheet.dont_ask.isChecked()
    QTest.mouseClick(sheet.add_button, Qt.MouseButton.LeftButton)
    assert len(window.store.jobs()) == 1
    window.close()

    again = open_window(start_worker=False)
    drop(again.drop_zone, [sample_dir / "sample.wav"])  # straight into the queue, with the defaults
    assert len(again.store.jobs()) == 2 and getattr(again, "options_sheet", None) is None
    assert again.store.jobs()[1].options == Settings().job_options()

    # Settings bring the sheet back.
    dialog = SettingsDialog(again.settings, False, again)
    assert not dialog.ask_on_add.isChecked()
    QTest.keyClick(dialog.ask_on_add, Qt.Key.Key_Space)
    # The dictation panel's output changed while Settings was open: OK does not set it back.
    again.apply_settings(again.settings.with_dictation(output="copy"))
    dialog.accept()
    again.settings_accepted(dialog)
    assert again.settings.dictation.output == "copy" and again.settings.window.ask_options_on_add
    drop(again.drop_zone, [sample_dir / "sample.wav"])
    assert sheet_of(again, qtbot).files == [sample_dir / "sample.wav"]
    assert len(again.store.jobs()) == 2  # waiting for the sheet's answer


def test_the_sheet_lists_the_languages_without_loading_the_speech_engine(tmp_path: Path) -> None:
    """Opening the sheet in a fresh window process brings in neither faster-whisper nor CTranslate2: their import
    holds the interpreter's lock, and the window never imports them (the engine runs in a child process)."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from PySide6.QtWidgets import QApplication\n"
        "app = QApplication([])\n"
        "from app.core.queue.jobs import JobOptions\n"
        "from app.gui.queue.options_sheet import AddOptionsSheet\n"
        "sheet = AddOptionsSheet([Path('talk.wav')], JobOptions())\n"
        "print(sheet.language.count())\n"
        "print(sheet.language.itemText(sheet.language.findData('de')))\n"
        "print(sorted(name for name in ('faster_whisper', 'ctranslate2', 'torch') if name in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2]
    )
    assert done.returncode == 0, done.stderr
    count, german, loaded = done.stdout.splitlines()
    assert count == "101" and german == "German (de)"  # "detect" and Whisper's 100 languages, named
    assert loaded == "[]"


def test_quality_offers_the_first_run_choices_on_disk_and_marks_the_recommended(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from app.core.engine.recommend import Machine, recommend
    from app.core.queue.jobs import JobOptions
    from app.gui.queue.options_sheet import AddOptionsSheet

    cache = tmp_path / "models"
    advice = recommend(Machine("cpu", 8, 16.0), cache)
    on_disk = advice.best.model
    for name in ("model.bin", "config.json"):  # what makes a folder a model to Scriba
        (cache / on_disk).mkdir(parents=True, exist_ok=True)
        (cache / on_disk / name).write_bytes(b"")
    sheet = AddOptionsSheet([tmp_path / "talk.wav"], JobOptions(language="en"), advice, cache=cache)
    qtbot.addWidget(sheet)
    sheet.show()
    qtbot.waitExposed(sheet)
    items = sheet.quality.model()
    texts = [sheet.quality.itemText(index) for index in range(sheet.quality.count())]
    assert texts[0] == "As in Settings (the best model on this computer)"
    tiers = {choice.tier: index + 1 for index, choice in enumerate(advice.choices)}
    recommended = tiers[advice.recommended]
    assert texts[recommended].startswith(f"{advice.recommended.capitalize()}: {on_disk}")
    assert "recommended" in texts[recommended] and items.item(recommended).isEnabled()
    for tier, index in tiers.items():
        if advice.choice(tier).model != on_disk:  # shown with its size, not offered: a job would wait for it
            assert "not downloaded" in texts[index] and not items.item(index).isEnabled()
    assert f"{on_disk} (on disk, recommended)" in texts
    sheet.quality.setCurrentIndex(recommended)
    QTest.keyClick(sheet, Qt.Key.Key_Return)
    assert sheet.chosen is not None and sheet.chosen.model == on_disk and sheet.chosen.language == "en"
