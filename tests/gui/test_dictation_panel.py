"""The dictation panel, offscreen, on real parts: espeak-ng speech replayed as a microphone would deliver it,
the bundled tiny.en, Silero VAD. Replays run at the speed of speech (the module takes about half a minute);
waits are generous because the CI machine has two cores that other work may share.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pytest
import soundfile
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette, QTextCursor, QTextDocument
from PySide6.QtTest import QTest

from app.core.dictation.sources import ArraySource, AudioSource, MicrophoneSource
from app.core.dictation.stream import DictationOptions
from app.core.engine.audio import SAMPLE_RATE
from app.core.queue.jobs import JobState
from app.gui.dictation import panel as dictation_panel
from app.gui.dictation.panel import DictationPanel, InputDevice, PanelState
from tests import synth

WAIT = 60_000  # ms; a decode on a loaded 2-core machine can take seconds
FIRST = "Thanks for joining the call today, we have a lot to cover."
SECOND = "The main question is whether we can ship the release before the holidays."
PAUSE_S = 1.2  # silence after each sentence: longer than the engine's end-of-utterance silence (0.5 s)


@dataclass(frozen=True)
class Speech:
    samples: np.ndarray
    ends: list[float]  # where each sentence ends, in seconds

    @property
    def duration(self) -> float:
        return len(self.samples) / SAMPLE_RATE


def build_speech(*sentences: str) -> Speech:
    pieces = [np.zeros(SAMPLE_RATE // 2, dtype=np.float32)]
    ends = []
    clock = 0.5
    for index, text in enumerate(sentences):
        voice, pitch = synth.VOICES[index % 2]
        spoken = synth.speak(text, voice, pitch) * 0.8
        clock += len(spoken) / SAMPLE_RATE
        ends.append(clock)
        pieces += [spoken, np.zeros(int(PAUSE_S * SAMPLE_RATE), dtype=np.float32)]
        clock += PAUSE_S
    return Speech(np.concatenate(pieces), ends)


@pytest.fixture(scope="module")
def two_sentences(espeak: str) -> Speech:
    return build_speech(FIRST, SECOND)


@pytest.fixture(scope="module")
def first_only(espeak: str) -> Speech:
    return build_speech(FIRST)


@pytest.fixture(scope="module")
def second_only(espeak: str) -> Speech:
    return build_speech(SECOND)


def replay(speech: Speech, *, realtime: bool = True) -> Callable[[InputDevice], AudioSource]:
    """A source factory for the panel: the speech instead of the microphone (the device is ignored)."""
    return lambda device: ArraySource(speech.samples, realtime=realtime)


def words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


def coloured_runs(document: QTextDocument) -> list[tuple[str, str | None]]:
    """The document as (text, foreground colour name or None for the default) runs, as it is painted."""
    cursor = QTextCursor(document)
    runs: list[tuple[str, str | None]] = []
    text = document.toPlainText()
    for position, character in enumerate(text, start=1):
        cursor.setPosition(position)  # charFormat() is the format of the character before the cursor
        fmt = cursor.charFormat()
        colour = fmt.foreground().color().name() if fmt.hasProperty(fmt.Property.ForegroundBrush) else None
        if runs and runs[-1][1] == colour:
            runs[-1] = (runs[-1][0] + character, colour)
        else:
            runs.append((character, colour))
    return runs


@dataclass
class ViewLog:
    """Every state of the text view, as runs, recorded each time the panel updates it."""

    panel: DictationPanel
    states: list[list[tuple[str, str | None]]] = field(default_factory=list)

    def record(self) -> None:
        self.states.append(coloured_runs(self.panel.view.document()))

    def partials(self) -> list[tuple[str, str]]:
        """(text, colour) of every coloured run ever shown."""
        return [(text, colour) for state in self.states for text, colour in state if colour is not None]

    def previewed_then_final(self) -> set[str]:
        """Words shown in a partial while not in the final text yet, which are in the final text at the end."""
        at_end = {word for text, colour in self.states[-1] if colour is None for word in words(text)}
        found: set[str] = set()
        for state in self.states:
            final = {word for text, colour in state if colour is None for word in words(text)}
            partial = {word for text, colour in state if colour is not None for word in words(text)}
            found |= (partial - final) & at_end
        return found


@pytest.fixture
def panel(qtbot) -> Iterator[DictationPanel]:  # type: ignore[no-untyped-def]
    widget = DictationPanel(DictationOptions())
    qtbot.addWidget(widget)
    widget.show()
    qtbot.waitExposed(widget)
    yield widget
    widget.shutdown()  # no session thread outlives its test


def wait_idle(qtbot, panel: DictationPanel) -> None:  # type: ignore[no-untyped-def]
    qtbot.waitUntil(lambda: panel.state is PanelState.IDLE, timeout=WAIT)


def test_partials_show_lighter_then_finals_and_copy_all(panel: DictationPanel, qtbot, two_sentences: Speech) -> None:  # type: ignore[no-untyped-def]
    panel.source_factory = replay(two_sentences)
    log = ViewLog(panel)
    panel.view_updated.connect(log.record)

    qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    # Loading happens on the session thread: the panel says so and the button already offers Stop.
    assert panel.state is PanelState.LOADING
    assert panel.status_label.text() == "Loading model…"
    assert panel.start_button.text() == "Stop" and panel.start_button.isEnabled()
    assert not panel.device_combo.isEnabled() and not panel.clear_button.isEnabled()
    qtbot.waitUntil(lambda: panel.state is PanelState.RUNNING, timeout=WAIT)

    qtbot.waitUntil(lambda: {"joining", "cover", "holidays"} <= set(words(panel.final_text())), timeout=WAIT)
    assert panel.state is PanelState.RUNNING  # a source that ran out leaves the session listening until Stop
    qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    assert panel.state is PanelState.STOPPING and not panel.start_button.isEnabled()
    wait_idle(qtbot, panel)

    final = panel.final_text()
    assert {"thanks", "joining", "call", "question", "release", "holidays"} <= set(words(final)), final
    assert panel.start_button.text() == "Start" and panel.start_button.isEnabled()
    assert panel.save_button.isEnabled() and panel.clear_button.isEnabled()
    assert panel.level_meter.value() == panel.level_meter.minimum()
    # Nothing partial is left: the view is exactly the final text, in the default colour.
    assert panel.view.toPlainText() == final
    assert coloured_runs(panel.view.document()) == [(final, None)]

    # Partials were shown in the lighter colour: between the text's and the background's.
    partials = log.partials()
    assert partials, "no partial was ever shown"
    palette = panel.view.palette()
    text, base = palette.color(QPalette.ColorRole.Text), palette.color(QPalette.ColorRole.Base)
    for _, colour in partials:
        assert colour == panel.partial_color().name()
        assert abs(QColor(colour).lightness() - base.lightness()) < abs(text.lightness() - base.lightness())
    # Words were shown as partial before they were final: a partial is a preview of the text, not noise.
    # (A partial may also be revised: tiny.en heard "thank" before the final "Thanks", so not every one is.)
    previewed = log.previewed_then_final()  # words of partials that the final text also has
    assert len(previewed) >= 3, (previewed, final)

    qtbot.mouseClick(panel.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == final

    qtbot.mouseClick(panel.clear_button, Qt.MouseButton.LeftButton)
    assert panel.final_text() == "" and panel.view.toPlainText() == ""
    assert not panel.save_button.isEnabled() and not panel.copy_button.isEnabled()


def test_stop_mid_sentence_makes_the_words_heard_final(panel: DictationPanel, qtbot, two_sentences: Speech) -> None:  # type: ignore[no-untyped-def]
    panel.source_factory = replay(two_sentences)
    panel.start()

    def in_second_sentence() -> bool:
        # The second sentence is being heard (a partial is up, "question" is in it or already final), and
        # its last words have not been spoken yet.
        heard = words(panel.final_text() + " " + panel.partial_text())
        return "question" in heard and bool(panel.partial_text()) and panel.elapsed() < two_sentences.ends[1] - 0.8

    qtbot.waitUntil(in_second_sentence, timeout=WAIT)
    final_at_stop, partial_at_stop = panel.final_text(), panel.partial_text()
    panel.stop()
    wait_idle(qtbot, panel)

    # Stop flushed: the partial on screen when it was pressed became final, and nothing is partial any more.
    final = panel.final_text()
    assert final.startswith(final_at_stop)
    added = words(final[len(final_at_stop) :])
    assert words(partial_at_stop)[0] in added, (partial_at_stop, final_at_stop, final)
    assert {"joining", "main", "question"} <= set(words(final)), final
    assert "holidays" not in words(final)  # not spoken before Stop: the replay really was stopped
    assert panel.partial_text() == "" and panel.view.toPlainText() == panel.final_text()
    assert panel.start_button.text() == "Start" and panel.start_button.isEnabled()
    assert not panel.message_label.isVisible()
    # The recording ends where Stop was pressed, not where the replay would have ended.
    assert panel.recording().size / SAMPLE_RATE < two_sentences.ends[1] - 0.5


def test_the_level_meter_follows_the_speech(panel: DictationPanel, qtbot, first_only: Speech) -> None:  # type: ignore[no-untyped-def]
    panel.source_factory = replay(first_only)
    levels: list[int] = []
    panel.level_meter.valueChanged.connect(levels.append)
    minimum = panel.level_meter.minimum()
    panel.start()
    qtbot.waitUntil(lambda: panel.state is PanelState.RUNNING, timeout=WAIT)
    # Speech at 0.8 of full scale is far above -40 dBFS (20 on the 0–60 meter); the lead-in silence is not.
    qtbot.waitUntil(lambda: max(levels, default=minimum) > minimum + 20, timeout=WAIT)
    assert panel.level_meter.maximum() == 60
    panel.stop()
    wait_idle(qtbot, panel)
    assert panel.level_meter.value() == minimum


def test_two_runs_saved_from_the_window_become_one_done_job(open_window, qtbot, first_only, second_only) -> None:  # type: ignore[no-untyped-def]
    window = open_window(start_worker=False)
    panel = window.dictation_panel
    assert window.dictation_dock.objectName() == "dictationDock" and window.dictation_dock.isHidden()
    assert window.dictation_dock.toggleViewAction() in window.menuBar().actions()[-2].menu().actions()

    window.windowHandle().requestActivate()
    qtbot.waitUntil(window.isActiveWindow, timeout=3000)  # window shortcuts fire in the active window
    window.table.setFocus()

    # Ctrl+D shows the dock and starts; again, it stops. Stop then Start continues the same session.
    panel.source_factory = replay(first_only, realtime=False)
    qtbot.keyClick(window.table, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier)
    assert window.dictation_dock.isVisible() and panel.state is PanelState.LOADING
    qtbot.waitUntil(lambda: "cover" in words(panel.final_text()), timeout=WAIT)
    qtbot.keyClick(window.table, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier)
    wait_idle(qtbot, panel)
    first_text = panel.final_text()

    panel.source_factory = replay(second_only, realtime=False)
    qtbot.keyClick(window.table, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: "holidays" in words(panel.final_text()), timeout=WAIT)
    qtbot.keyClick(window.table, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier)
    wait_idle(qtbot, panel)
    assert panel.final_text().startswith(first_text + "\n")  # the second run is a new paragraph
    assert panel.save_button.isEnabled()

    qtbot.mouseClick(panel.save_button, Qt.MouseButton.LeftButton)
    (job,) = window.store.jobs()
    assert job.state is JobState.DONE
    assert window.model.rowCount() == 1 and window.selected_job_id() == job.id
    assert job.source.parent == window.store.directory / "dictations"
    assert str(job.source) in window.statusBar().currentMessage()
    assert not panel.save_button.isEnabled()  # saved once; a new Start begins a new session

    # The WAV holds both runs, one after the other; the transcript's text is what the panel showed.
    info = soundfile.info(job.source)
    assert info.samplerate == SAMPLE_RATE
    assert info.frames == len(first_only.samples) + len(second_only.samples)
    transcript = window.store.load_transcript(job.id)
    assert " ".join(segment.text for segment in transcript.segments) == " ".join(panel.final_text().split("\n"))
    # The second run's words are on the recording's clock: after the first run's audio.
    offset = first_only.duration
    second_segments = [segment for segment in transcript.segments if "holidays" in words(segment.text)]
    assert second_segments and all(segment.start >= offset for segment in second_segments)
    assert transcript.duration == pytest.approx(first_only.duration + second_only.duration, abs=0.001)
    qtbot.waitUntil(lambda: window.transcript_view.job_id == job.id, timeout=5000)

    # With an output folder set, dictations are kept there instead.
    window.settings = window.settings.with_job(output_dir=str(window.store.directory.parent / "out"))
    assert window.dictation_directory() == window.store.directory.parent / "out"


def test_a_microphone_that_cannot_open_is_reported_and_start_works_again(open_window, qtbot) -> None:  # type: ignore[no-untyped-def]
    window = open_window(start_worker=False)
    panel = window.dictation_panel

    # The real microphone source on real PortAudio, asked for a device this machine does not have: it fails
    # when it starts, after the model has loaded, as an unplugged headset does.
    panel.source_factory = lambda device: MicrophoneSource("no such input")
    window.menu_actions.dictate_action.trigger()
    wait_idle(qtbot, panel)
    assert panel.message_label.isVisible()
    message = panel.message_label.text()
    assert message.startswith("Microphone: input device 'no such input' cannot be used:"), message
    assert "no such input" in window.statusBar().currentMessage()
    assert window.isVisible()
    assert panel.start_button.text() == "Start" and panel.start_button.isEnabled()
    assert not panel.save_button.isEnabled()  # nothing was recorded


def test_stop_while_the_model_loads_never_opens_the_input(panel: DictationPanel, qtbot) -> None:  # type: ignore[no-untyped-def]
    opened: list[bool] = []

    class Watched(ArraySource):
        def start(self, sink) -> None:  # type: ignore[no-untyped-def]
            opened.append(True)
            super().start(sink)

    panel.source_factory = lambda device: Watched(np.zeros(SAMPLE_RATE, dtype=np.float32))
    panel.start()
    panel.toggle()  # pressed again while "Loading model…"
    assert panel.state is PanelState.STOPPING and panel.status_label.text() == "Finishing…"
    wait_idle(qtbot, panel)
    assert opened == []
    assert not panel.message_label.isVisible() and not panel.save_button.isEnabled()
    assert panel.start_button.text() == "Start" and panel.start_button.isEnabled()


def test_without_sounddevice_the_reason_is_shown_and_start_is_off(qtbot, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    # An installation without the audio package: `import sounddevice` fails, as it does there, and the panel
    # shows what the app itself says about it.
    monkeypatch.setitem(sys.modules, "sounddevice", None)
    widget = DictationPanel()
    qtbot.addWidget(widget)
    widget.show()  # devices are listed when the panel is first shown
    qtbot.waitExposed(widget)
    message = widget.message_label.text()
    assert message == "No microphone: This installation of Scriba cannot record from a microphone: reinstall Scriba."
    assert not widget.start_button.isEnabled()
    assert [widget.device_combo.itemText(i) for i in range(widget.device_combo.count())] == ["System default"]
    widget.toggle()  # the shortcut does nothing either
    assert widget.state is PanelState.IDLE
    # Another source (a file replayed) needs no PortAudio.
    widget.source_factory = replay(Speech(np.zeros(SAMPLE_RATE, dtype=np.float32), []))
    assert widget.start_button.isEnabled()


def test_devices_fill_the_picker(qtbot, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    devices = [
        {"index": 3, "name": "USB mic", "channels": 1, "default_samplerate": 48000.0, "is_default": False,
         "hostapi": "ALSA"},
        {"index": 7, "name": "pulse", "channels": 32, "default_samplerate": 44100.0, "is_default": True,
         "hostapi": "ALSA"},
    ]  # fmt: skip
    monkeypatch.setattr(dictation_panel, "list_input_devices", lambda: devices)
    widget = DictationPanel()
    qtbot.addWidget(widget)
    widget.show()
    qtbot.waitExposed(widget)
    combo = widget.device_combo
    assert [combo.itemText(i) for i in range(combo.count())] == [
        "System default",
        "USB mic · ALSA",
        "pulse (default) · ALSA",
    ]
    assert widget.selected_device() is None
    combo.setCurrentIndex(1)
    assert widget.selected_device() == 3
    widget.list_devices()  # listing again keeps the choice
    assert widget.selected_device() == 3
    assert widget.start_button.isEnabled() and not widget.message_label.isVisible()


NO_SOUND_SERVER = "SCRIBA_TEST_NO_SOUND_SERVER"


def test_without_a_microphone_the_panel_says_so_in_words_and_start_is_off(qtbot) -> None:  # type: ignore[no-untyped-def]
    """Issue 40: with no input device the panel said nothing useful and left Start on; pressed, it failed with
    "input device None cannot be used: Error querying device -1". PortAudio as it is on this computer."""
    from app.core.dictation.sources import list_input_devices

    if list_input_devices():
        if os.environ.get(NO_SOUND_SERVER):  # pragma: no cover - a capture device of the computer's own
            pytest.skip("this computer has a microphone of its own")
        # A sound server (one an earlier test started, or the desktop's) lists its inputs, and PortAudio reads the
        # devices once per process: the same test in an interpreter that reaches no server.
        test = f"{__file__}::test_without_a_microphone_the_panel_says_so_in_words_and_start_is_off"
        child = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
            env={**os.environ, "PULSE_SERVER": "unix:/nonexistent/scriba-no-server", NO_SOUND_SERVER: "1"},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if re.search(r"\b1 skipped\b", child.stdout):  # pragma: no cover
            pytest.skip("this computer has a microphone of its own")
        assert child.returncode == 0 and re.search(r"\b1 passed\b", child.stdout), child.stdout[-3000:]
        return
    widget = DictationPanel()
    qtbot.addWidget(widget)
    widget.show()  # devices are listed when the panel is first shown
    qtbot.waitExposed(widget)
    qtbot.waitUntil(lambda: widget.message_label.text() != "", timeout=5000)
    assert widget.message_label.text().startswith("No microphone found. Connect one")
    assert not widget.start_button.isEnabled()
    QTest.mouseClick(widget.refresh_button, Qt.MouseButton.LeftButton)  # looked for again: still none
    assert widget.message_label.text().startswith("No microphone found.") and not widget.start_button.isEnabled()
    widget.toggle()  # Ctrl+D does nothing either
    assert widget.state is PanelState.IDLE
    said = " ".join([widget.message_label.text(), widget.status_label.text()])
    assert "None" not in said and "Error querying" not in said and "-1" not in said
