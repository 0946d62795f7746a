"""The Settings form's job options are made from their declaration (app/core/queue/options.py): each one marked
for the form has a widget there, and what is set in it comes back in the settings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.core.config.settings import JobDefaults, Settings
from app.core.queue.options import OPTIONS
from app.gui.settings.dialog import SettingsDialog


def _pick(box: Any, value: str) -> None:
    index = box.findData(value)
    assert index >= 0, value
    box.setCurrentIndex(index)


def _formats(dialog: SettingsDialog, chosen: tuple[str, ...]) -> None:
    for fmt, box in dialog.formats.items():
        box.setChecked(fmt in chosen)


def test_every_option_marked_for_the_form_has_a_widget_and_comes_back(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dialog = SettingsDialog(Settings(), token_stored=False, models_cache=tmp_path)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    setters: dict[str, Callable[[], None]] = {
        "model": lambda: dialog.model.setCurrentText("small.en"),
        "language": lambda: dialog.fields["language"].setText("de"),
        "diarize": lambda: dialog.fields["diarize"].setChecked(False),
        "diarizer": lambda: _pick(dialog.fields["diarizer"], "embedded"),
        "identify": lambda: dialog.fields["identify"].setChecked(False),
        "num_speakers": lambda: dialog.fields["num_speakers"].setValue(3),
        "min_speakers": lambda: dialog.fields["min_speakers"].setValue(2),
        "max_speakers": lambda: dialog.fields["max_speakers"].setValue(25),
        "prompt": lambda: dialog.fields["prompt"].setText(" Okafor, Scriba "),
        "hotwords": lambda: dialog.fields["hotwords"].setText("EBITDA"),
        "task": lambda: _pick(dialog.fields["task"], "translate"),
        "device": lambda: _pick(dialog.fields["device"], "cpu"),
        "compute_type": lambda: _pick(dialog.fields["compute_type"], "int8"),
        "formats": lambda: _formats(dialog, ("srt", "docx")),
        "output_dir": lambda: dialog.output_dir.setText(str(tmp_path / "exports")),
    }
    shown = {option.name for option in OPTIONS if option.label is not None}
    assert set(setters) == shown, "an option marked for the form without its check here"
    assert set(dialog.fields) == shown
    seen: set[str] = set()
    for page in range(dialog.page_list.count()):  # each page in turn, as its entry in the list shows it
        dialog.page_list.setCurrentRow(page)
        seen |= {name for name, widget in dialog.fields.items() if widget.isVisibleTo(dialog)}
    assert seen == shown
    for set_it in setters.values():
        set_it()
    dialog.watch_folder.setText(str(tmp_path / "inbox"))

    assert dialog.result_settings().job == JobDefaults(
        model="small.en",
        language="de",
        diarize=False,
        diarizer="embedded",
        identify=False,
        num_speakers=3,
        min_speakers=2,
        max_speakers=25,
        prompt="Okafor, Scriba",
        hotwords="EBITDA",
        task="translate",
        device="cpu",
        compute_type="int8",
        formats=("srt", "docx"),
        output_dir=str(tmp_path / "exports"),
        watch_folder=str(tmp_path / "inbox"),
    )
    # The form offers no count the diarizer cannot tell apart, and says what each field is for.
    assert dialog.fields["num_speakers"].maximum() == 20 and dialog.fields["min_speakers"].maximum() == 20
    assert "multilingual" in dialog.fields["task"].toolTip()


def test_what_the_form_does_not_show_is_kept(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A compute type typed on the command line or in the file, and a batch size, survive OK in Settings."""
    settings = Settings().with_job(compute_type="bfloat16", batch_size=8, formats=("txt",))
    dialog = SettingsDialog(settings, token_stored=False, models_cache=tmp_path)
    qtbot.addWidget(dialog)
    _formats(dialog, ())  # none ticked: the formats set before stay
    job = dialog.result_settings().job
    assert job.compute_type == "bfloat16" and job.batch_size == 8 and job.formats == ("txt",)


def test_the_dictation_page_turns_the_queue_hold_off_and_on(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dialog = SettingsDialog(Settings(), token_stored=False, models_cache=tmp_path)
    qtbot.addWidget(dialog)
    dialog.show_page("Dictation")
    assert dialog.pause_queue.isChecked() and dialog.pause_queue.toolTip()
    dialog.pause_queue.setChecked(False)
    assert dialog.result_settings().dictation.pause_queue is False
    again = SettingsDialog(dialog.result_settings(), token_stored=False, models_cache=tmp_path)
    qtbot.addWidget(again)
    assert not again.pause_queue.isChecked()


def test_ok_keeps_what_changed_elsewhere_while_the_dialog_was_open(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The dictation panel's output and sounds and the offload dialog's budget, changed after Settings opened,
    stay; what the dialog shows comes from the dialog."""
    dialog = SettingsDialog(Settings(), token_stored=False, models_cache=tmp_path)
    qtbot.addWidget(dialog)
    dialog.pause_queue.setChecked(False)
    _formats(dialog, ("srt", "txt"))
    meanwhile = Settings().with_dictation(output="type", sounds=False).with_offload(budget_usd=2.5)
    result = dialog.result_settings(meanwhile)
    assert (result.dictation.output, result.dictation.sounds, result.offload.budget_usd) == ("type", False, 2.5)
    assert result.dictation.pause_queue is False
    assert set(result.job.formats) == {"srt", "txt"}
