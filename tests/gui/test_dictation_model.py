"""Dictation's own model and language (issue 15 part 3), apart from the file jobs' Settings: chosen in the panel
from the models on disk, used from the next Start, remembered with the window."""

from __future__ import annotations

import shutil
from typing import Any

from app.core.engine.models import bundled_model_path, cached_model_path, installed_models


def test_the_dictation_model_and_language_are_its_own_and_remembered(open_window: Any, tmp_path: Any) -> None:
    # A second model in the cache, so that a choice of model can be made and remembered (the bundled files
    # under another catalog name: the picker lists what is on disk, it does not load it).
    shutil.copytree(bundled_model_path(), cached_model_path("base.en"))
    window = open_window(start_worker=False)
    picker = window.dictation_panel.model_picker
    on_disk = [model.name for model in installed_models()]
    assert "base.en" in on_disk and "tiny.en" in on_disk
    assert [picker.model_combo.itemData(i) for i in range(picker.model_combo.count())] == on_disk
    assert picker.model() == "tiny.en" and picker.language() is None
    picker.model_combo.setCurrentIndex(picker.model_combo.findData("base.en"))
    assert window.dictation_panel.options.model == "base.en" and window.settings.dictation.model == "base.en"
    assert window.settings.job.model != "base.en"  # the jobs' model is not the dictation's
    picker.language_edit.setText("EN")
    picker.language_edit.editingFinished.emit()
    assert window.dictation_panel.options.language == "en"  # what the next Start decodes with
    assert window.settings.dictation.language == "en" and window.settings.job.language is None  # not the jobs'
    window.close()
    again = open_window(start_worker=False)
    assert again.dictation_panel.options.language == "en" and again.dictation_panel.model_picker.language() == "en"
    assert again.dictation_panel.options.model == "base.en" and again.dictation_panel.model_picker.model() == "base.en"
    assert again.dictation_panel.options.final_model is None  # "same": the dictation model makes the finals


def test_a_finals_model_is_chosen_apart_and_remembered(open_window: Any) -> None:
    window = open_window(start_worker=False)
    picker = window.dictation_panel.model_picker
    assert picker.final_combo.currentText() == "same" and picker.final_model() is None
    picker.final_combo.setCurrentIndex(picker.final_combo.findData("tiny.en"))
    assert window.dictation_panel.options.final_model == "tiny.en" and window.dictation_panel.options.model == "tiny.en"
    assert window.settings.dictation.final_model == "tiny.en"
    window.close()
    again = open_window(start_worker=False)
    assert again.dictation_panel.options.final_model == "tiny.en"
    assert again.dictation_panel.model_picker.final_model() == "tiny.en"
    again.dictation_panel.model_picker.final_combo.setCurrentIndex(0)
    assert again.dictation_panel.options.final_model is None and again.settings.dictation.final_model is None
