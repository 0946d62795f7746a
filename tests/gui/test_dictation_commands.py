"""The dictation panel's spoken commands, numbers switch and "Your words…", in the window, on real parts: espeak-ng
prompts with spoken commands replayed as a microphone would deliver them through the real controller and the
bundled tiny.en. espeak-ng's "comma" is heard as "Karma" by tiny.en unless "comma" is in the vocabulary: the
vocabulary file the test writes is what makes the command act."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from app.core.dictation.commands import DictationEditor, Edit, TextRules
from app.core.dictation.controller import Edited, Heard, RunEnded, RunStarting
from app.core.dictation.sources import ArraySource
from app.core.dictation.stream import DictationEvent, DictationOptions
from app.core.dictation.vocabulary import Replacement
from app.gui.dictation.panel import DictationPanel, PanelState
from tests.core.dictation.test_spoken_commands import BREATH_S, prompt

WAIT = 90_000  # ms: a model load and a real-time replay on a shared 2-core machine


@pytest.fixture(scope="module")
def greeting(espeak: str) -> np.ndarray:
    return prompt("Hello team", BREATH_S, "comma", BREATH_S, "how are you", BREATH_S, "question mark")


@pytest.fixture(scope="module")
def scratched(espeak: str) -> np.ndarray:
    return prompt(
        "Send the report to Anna",
        1.0,
        "scratch that",
        1.0,
        "send the report to Maria",
        BREATH_S,
        "period",
        voice=1,
        speed=130,
    )


def dictate(qtbot, panel: DictationPanel, samples: np.ndarray) -> list[str]:  # type: ignore[no-untyped-def]
    """One run over ``samples`` from a clear panel, to its end; the status line each time the text changed."""
    panel.clear()
    panel.source_factory = lambda _device: ArraySource(samples, realtime=True)
    panel.controller.stop_at_end = True
    statuses: list[str] = []
    record = lambda: statuses.append(panel.status_label.text())  # noqa: E731
    panel.view_updated.connect(record)
    panel.start()
    qtbot.waitUntil(lambda: panel.state is PanelState.RUNNING, timeout=WAIT)
    qtbot.waitUntil(lambda: panel.state is PanelState.IDLE, timeout=WAIT)
    panel.view_updated.disconnect(record)
    return statuses


def open_panel(open_window, config: Path) -> DictationPanel:  # type: ignore[no-untyped-def]
    """The window on ``config`` with its dictation dock shown (the switches are clicked as a person would)."""
    window = open_window(config=config, start_worker=False)
    window.dictation_dock.show()
    return window.dictation_panel


def write_words(config: Path, replacements: str, vocabulary: str) -> None:
    config.mkdir(parents=True, exist_ok=True)
    (config / "dictation-replacements.txt").write_text(replacements, "utf-8")
    (config / "dictation-vocabulary.txt").write_text(vocabulary, "utf-8")


def test_the_commands_switch_shows_punctuation_and_off_the_words(open_window, qtbot, tmp_path: Path, greeting) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "config"
    write_words(config, "hello team -> Hello crew\n", "comma\n")
    panel = open_panel(open_window, config)
    assert not panel.words.commands_check.isChecked() and not panel.words.numbers_check.isChecked()
    assert panel.options.replacements == (Replacement("hello team", "Hello crew"),)
    assert panel.options.vocabulary == ("comma",)

    qtbot.mouseClick(panel.words.commands_check, Qt.MouseButton.LeftButton)
    assert panel.options.commands
    statuses = dictate(qtbot, panel, greeting)
    text = panel.final_text()
    assert re.search(r"crew, how are you\?$", text), text
    assert "comma" not in text.lower() and "question" not in text.lower(), text
    assert any("[comma]" in status for status in statuses), statuses
    assert any("[question mark]" in status for status in statuses), statuses

    qtbot.mouseClick(panel.words.commands_check, Qt.MouseButton.LeftButton)
    assert not panel.options.commands
    assert dictate(qtbot, panel, greeting) is not None
    text = panel.final_text().lower()
    assert "comma" in text and "question mark" in text and "crew" in text, text


def test_scratch_that_is_shown_as_what_it_did(open_window, qtbot, tmp_path: Path, scratched) -> None:  # type: ignore[no-untyped-def]
    panel = open_panel(open_window, tmp_path / "config")
    panel.words.commands_check.setChecked(True)
    statuses = dictate(qtbot, panel, scratched)
    text = panel.final_text()
    assert "anna" not in text.lower() and "maria." in text.lower() and "scratch" not in text.lower(), text
    assert any(status.startswith("⌫ scratch that") for status in statuses), statuses


def test_the_words_dialog_saves_both_files_and_shows_a_bad_line_by_number(open_window, qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "config"
    panel = open_panel(open_window, config)
    assert panel.options.replacements == () and panel.options.vocabulary == ()
    dialog = panel.words.open_words()
    dialog.replacements_edit.setPlainText("at sign -> @\n\nno arrow here\ncooper netties -> Kubernetes\n")
    assert "line 3" in dialog.problems_label.text() and "no arrow here" in dialog.problems_label.text()
    assert "line 1" not in dialog.problems_label.text() and "line 4" not in dialog.problems_label.text()
    dialog.vocabulary_edit.setPlainText("Scriba, Kubernetes\n")
    qtbot.mouseClick(dialog.buttons.button(QDialogButtonBox.StandardButton.Save), Qt.MouseButton.LeftButton)

    replacements = (config / "dictation-replacements.txt").read_text("utf-8")
    assert replacements == "at sign -> @\n\nno arrow here\ncooper netties -> Kubernetes\n"
    assert (config / "dictation-vocabulary.txt").read_text("utf-8") == "Scriba, Kubernetes\n"
    assert set(panel.options.replacements) == {Replacement("at sign", "@"), Replacement("cooper netties", "Kubernetes")}
    assert panel.options.vocabulary == ("Scriba", "Kubernetes")
    shown = panel.words.problems_label.text()
    assert panel.words.problems_label.isVisibleTo(panel) and "line 3" in shown and "dictation-replacements.txt" in shown


def test_a_words_file_that_is_not_text_is_never_overwritten(open_window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "config"
    config.mkdir()
    (config / "dictation-vocabulary.txt").write_bytes(b"Scriba\n\xff\xfe\n")
    panel = open_panel(open_window, config)
    assert "not UTF-8" in panel.words.problems_label.text() and panel.options.vocabulary == ()
    dialog = panel.words.open_words()
    assert "dictation-vocabulary.txt" in dialog.problems_label.text()
    assert not dialog.buttons.button(QDialogButtonBox.StandardButton.Save).isEnabled()
    assert not dialog.save()
    assert (config / "dictation-vocabulary.txt").read_bytes() == b"Scriba\n\xff\xfe\n"


def test_the_switches_survive_a_restart(open_window, qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "config"
    first = open_panel(open_window, config)
    qtbot.mouseClick(first.words.numbers_check, Qt.MouseButton.LeftButton)
    first.window().close()
    again = open_panel(open_window, config)
    assert again.words.numbers_check.isChecked() and not again.words.commands_check.isChecked()
    assert again.options.numbers and not again.options.commands
    qtbot.mouseClick(again.words.commands_check, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(again.words.numbers_check, Qt.MouseButton.LeftButton)
    third = open_panel(open_window, config)
    assert third.words.commands_check.isChecked() and not third.words.numbers_check.isChecked()
    assert third.options.commands and not third.options.numbers


def test_each_edit_replaces_the_words_heard_across_runs_and_after_the_last_final(qtbot) -> None:  # type: ignore[no-untyped-def]
    """The controller's events as it sends them (a Heard final, then the Edited that the real editor made of it;
    the word it held back comes after the last Heard): the view shows exactly what was typed, the run after it
    as a paragraph of its own, and a run without rules as heard."""
    panel = DictationPanel(DictationOptions())
    qtbot.addWidget(panel)
    editor = DictationEditor(TextRules(commands=True))
    statuses: list[str] = []
    panel.view_updated.connect(lambda: statuses.append(panel.status_label.text()))

    def final(run: int, text: str, edit: Edit, rules_active: bool = True) -> None:
        panel._on_controller_event(Heard(run, DictationEvent("final", text, 0.0, 1.0, 1.0)))
        panel._on_controller_event(Edited(run, edit, rules_active))

    panel._on_controller_event(RunStarting(1))
    final(1, "Send the report to Anna.", editor.apply("Send the report to Anna."))
    assert panel.final_text() == "Send the report to Anna."
    final(1, "Scratch that.", editor.apply("Scratch that."))
    assert panel.final_text() == "" and statuses[-1] == "⌫ scratch that: Send the report to Anna."
    final(1, "Send the report to Maria. Period.", editor.apply("Send the report to Maria. Period."))
    final(1, "See you new", editor.apply("See you new", at_pause=False))
    assert panel.final_text() == "Send the report to Maria. See you"  # "new" may begin "new line"
    panel._on_controller_event(Edited(1, editor.finish(), True))
    panel._on_controller_event(RunEnded(1, listened=True))
    assert panel.final_text() == "Send the report to Maria. See you new"

    panel._on_controller_event(RunStarting(2))
    final(2, "Plain words, comma.", Edit(0, "Plain words, comma."), rules_active=False)
    panel._on_controller_event(RunEnded(2, listened=True))
    assert panel.final_text() == "Send the report to Maria. See you new\nPlain words, comma."

    second = DictationEditor(TextRules(commands=True))
    panel._on_controller_event(RunStarting(3))
    final(3, "Hello there", second.apply("Hello there"))
    final(3, "Scratch that.", second.apply("Scratch that."))
    assert panel.final_text() == "Send the report to Maria. See you new\nPlain words, comma."
    final(3, "Bye", second.apply("Bye"))
    expected = "Send the report to Maria. See you new\nPlain words, comma.\nBye"
    assert panel.final_text() == expected and panel.view.toPlainText() == expected
