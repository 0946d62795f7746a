"""The window's dictation panel driven from another program: a global hotkey pressed through XTest on a real X
server (Xvfb) while a real xterm has the focus starts and stops the panel; its finals, from real speech, are
typed into the xterm; the floating "Listening" badge shows meanwhile. Qt itself stays offscreen: the hotkey and
the typing talk to the X server directly, as they do under any Qt platform."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.core.dictation.sources import AudioSource, FileSource
from app.core.dictation.stream import DictationOptions
from app.gui.dictation.panel import DictationPanel, InputDevice, PanelState
from tests import metrics
from tests.real_speech import real_speech_dir
from tests.xserver import focus_of, focused_xterm, press_keys, release_keys, wait_for_text, xvfb

WAIT = 120_000  # ms: a flush of half a minute of speech on a loaded 2-core machine


@pytest.fixture(scope="module")
def x_display() -> Iterator[str]:
    with xvfb() as name:
        yield name


@pytest.fixture
def panel(qtbot, x_display: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[DictationPanel]:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DISPLAY", x_display)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.delenv("XDG_SESSION_TYPE", raising=False)
    widget = DictationPanel(DictationOptions())
    qtbot.addWidget(widget)
    widget.show()
    qtbot.waitExposed(widget)
    yield widget
    widget.shutdown()


def test_hotkey_in_another_program_runs_the_panel_and_its_finals_are_typed_there(
    panel: DictationPanel,
    qtbot,
    x_display: str,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    speech = real_speech_dir() / "mfa_en_spontaneous_a.wav"
    reference = speech.with_suffix(".ref.txt").read_text()

    def replayed(device: InputDevice) -> AudioSource:
        return FileSource(speech, realtime=False)

    panel.source_factory = replayed
    panel.set_output_mode("type")
    assert panel.set_hotkey("ctrl+alt+d", "toggle") is None
    assert not panel.indicator_visible()
    received = tmp_path / "received.txt"
    with focused_xterm(x_display, received) as window:
        press_keys(x_display, "Control_L", "Alt_L", "d")
        qtbot.waitUntil(lambda: panel.state is PanelState.RUNNING, timeout=WAIT)
        assert panel.indicator_visible()
        press_keys(x_display, "Control_L", "Alt_L", "d")
        qtbot.waitUntil(lambda: panel.state is PanelState.IDLE, timeout=WAIT)
        assert not panel.indicator_visible()
        shown = panel.final_text()
        typed = wait_for_text(received, lambda text: len(text) >= len(shown))
        assert focus_of(x_display) == window.id
    assert shown and typed == shown  # what the panel shows as final is what the other program received
    # The second press stops the replay wherever it has got to: the words typed are a stretch from the start, so
    # they are scored against as many words of the reference (a doubled or lost stretch still goes past 0.4).
    # The replay runs several times faster than real time: by the second press most of the file has been heard.
    assert len(typed.split()) >= len(reference.split()) // 3, typed
    heard = " ".join(reference.split()[: len(typed.split())])
    wer = metrics.wer(heard, typed)
    print(f"panel typed {len(typed.split())} words, WER {wer:.3f} against the reference's first as many")
    assert wer <= 0.4, typed


def test_a_hotkey_that_cannot_be_had_is_said_in_the_panel(panel: DictationPanel) -> None:
    assert panel.set_hotkey("ctrl+alt+d") is None
    second = DictationPanel(DictationOptions())
    try:
        problem = second.set_hotkey("ctrl+alt+d")
        assert problem is not None and "already taken" in problem
        assert second.hotkey is None and "Hotkey off" in second.message_label.text()
    finally:
        second.shutdown()
        second.deleteLater()


def test_the_window_keeps_where_text_goes_and_the_hotkey(open_window, qtbot, x_display: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DISPLAY", x_display)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.delenv("XDG_SESSION_TYPE", raising=False)
    window = open_window()
    panel = window.dictation_panel
    assert panel.output_mode is None and panel.hotkey is None  # nothing reaches other programs by default
    panel.output_combo.setCurrentIndex(panel.output_combo.findData("copy"))
    panel.hotkey_mode_combo.setCurrentIndex(panel.hotkey_mode_combo.findData("hold"))
    # The person clicks the field and presses the keys they want.
    with qtbot.waitSignal(panel.hotkey_edit.editingFinished, timeout=5000):
        qtbot.keyClick(
            panel.hotkey_edit, Qt.Key.Key_F9, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier
        )
    assert panel.hotkey is not None and panel.hotkey.hotkey.text == "ctrl+alt+F9" and panel.hotkey_mode == "hold"
    sounds_on = panel.sounds_check.isChecked()
    qtbot.mouseClick(panel.sounds_check, Qt.MouseButton.LeftButton)
    window.close()  # gives the hotkey back: the next window can grab it
    again = open_window().dictation_panel  # the same folders: a restart
    assert again.sounds_check.isChecked() is (not sounds_on)
    assert again.output_mode == "copy"
    assert again.hotkey is not None and again.hotkey.hotkey.text == "ctrl+alt+F9" and again.hotkey_mode == "hold"
    assert again.hotkey_edit.keySequence().toString() == "Ctrl+Alt+F9"
    assert [again.hotkey_mode_combo.itemData(i) for i in range(again.hotkey_mode_combo.count())] == [
        "hold",
        "toggle",
        "continuous",
    ]


def _replaying(panel: DictationPanel, speech: Path) -> None:
    def replayed(device: InputDevice) -> AudioSource:
        return FileSource(speech, realtime=True)

    panel.source_factory = replayed
    panel.set_output_mode("type")


def test_hold_mode_in_the_panel_listens_while_the_key_is_down_and_types_on_release(
    panel: DictationPanel,
    qtbot,
    x_display: str,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    speech = real_speech_dir() / "mfa_en_spontaneous_a.wav"
    _replaying(panel, speech)
    assert panel.set_hotkey("ctrl+alt+d", "hold") is None
    assert panel.indicator_text() == ""  # nothing listens before the key
    received = tmp_path / "received.txt"
    with focused_xterm(x_display, received) as window:
        press_keys(x_display, "Control_L", "Alt_L", "d", release=False)
        qtbot.waitUntil(lambda: panel.state is PanelState.RUNNING, timeout=WAIT)
        assert panel.indicator_text() == "● Listening · release ctrl+alt+d to type"
        qtbot.waitUntil(lambda: panel.elapsed() >= 4.0, timeout=WAIT)  # a few seconds of the reading, key held
        assert received.read_text() == ""  # the keyboard is the hotkey's while it is down: nothing typed yet
        release_keys(x_display, "Control_L", "Alt_L", "d")
        qtbot.waitUntil(lambda: panel.state is not PanelState.RUNNING, timeout=WAIT)
        qtbot.waitUntil(lambda: panel.state is PanelState.IDLE, timeout=WAIT)
        assert panel.indicator_text() == ""
        shown = panel.final_text()
        typed = wait_for_text(received, lambda text: len(text) >= len(shown))
        assert focus_of(x_display) == window.id
    assert shown and typed == shown
    reference = speech.with_suffix(".ref.txt").read_text().split()
    assert metrics.wer(" ".join(reference[: len(typed.split())]), typed) <= 0.35, typed


def test_continuous_mode_in_the_panel_listens_at_once_and_the_hotkey_pauses_and_resumes(
    panel: DictationPanel,
    qtbot,
    x_display: str,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    speech = real_speech_dir() / "mfa_en_spontaneous_a.wav"
    _replaying(panel, speech)
    states: list[PanelState] = []
    panel.state_changed.connect(states.append)
    assert panel.set_hotkey("ctrl+alt+d", "continuous") is None  # listening begins without a key
    qtbot.waitUntil(lambda: panel.state is PanelState.RUNNING, timeout=WAIT)
    assert panel.indicator_text() == "● Listening · ctrl+alt+d pauses"
    qtbot.waitUntil(lambda: bool(panel.final_text()), timeout=WAIT)  # a pause in the reading ended an utterance
    assert panel.state is PanelState.RUNNING
    press_keys(x_display, "Control_L", "Alt_L", "d")
    qtbot.waitUntil(lambda: panel.state is PanelState.IDLE, timeout=WAIT)
    assert panel.indicator_text() == "⏸ Paused · ctrl+alt+d resumes"
    press_keys(x_display, "Control_L", "Alt_L", "d")
    qtbot.waitUntil(lambda: panel.state is PanelState.RUNNING, timeout=WAIT)
    assert panel.indicator_text() == "● Listening · ctrl+alt+d pauses"
    assert states == [
        PanelState.LOADING,
        PanelState.RUNNING,
        PanelState.STOPPING,
        PanelState.IDLE,
        PanelState.LOADING,
        PanelState.RUNNING,
    ]
    # Another mode ends listening all the time.
    panel.hotkey_mode_combo.setCurrentIndex(panel.hotkey_mode_combo.findData("toggle"))
    qtbot.waitUntil(lambda: panel.state is PanelState.IDLE, timeout=WAIT)
    assert panel.hotkey_mode == "toggle" and panel.indicator_text() == ""


def test_the_sounds_switch_follows_the_settings_and_says_a_change(panel: DictationPanel, qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.core.config.settings import DictationPreferences

    panel.apply_preferences(DictationPreferences(sounds=False))
    assert not panel.sounds_check.isChecked() and panel.controller.sounds is None
    with qtbot.waitSignal(panel.sounds_changed) as changed:
        qtbot.mouseClick(panel.sounds_check, Qt.MouseButton.LeftButton)
    assert changed.args == [True] and panel.controller.sounds is not None
    panel.apply_preferences(DictationPreferences(sounds=False, hotkey_mode="push"))  # hold's earlier name
    assert panel.controller.sounds is None and panel.hotkey_mode_combo.currentData() == "hold"
