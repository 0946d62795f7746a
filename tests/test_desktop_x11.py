"""Dictation into another program, checked from that program's side: a real X server (Xvfb), a real xterm
running ``cat > FILE`` with the keyboard focus, keys sent through XTest, a global hotkey grabbed on the root
window and pressed while the xterm has the focus, and real speech (``../shared/real-speech``) replayed in real
time or played into PulseAudio's null sink for the microphone path."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.desktop.display import DesktopError, display_system
from tests import metrics, synth
from tests.pulse import missing_tools, play, pulse_loopback
from tests.real_speech import real_speech_dir
from tests.xserver import focus_of, focused_xterm, press_keys, release_keys, wait_for_text, xvfb

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def x_display() -> Iterator[str]:
    with xvfb() as name:
        yield name


def _environment(display_name: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
    return {**env, "DISPLAY": display_name, "PYTHONPATH": str(ROOT), **extra}


def test_typer_types_what_the_layout_lacks_and_gives_the_keys_back(x_display: str, tmp_path: Path) -> None:
    """ASCII through the layout (Shift where needed); é, –, 你 through a spare key code bound for the moment;
    afterwards the keyboard mapping is what it was."""
    from Xlib import display

    from app.core.desktop.x11_typing import XTestTyper

    said = 'Grüße, café – naïve 你好? ~{}|"<>' + " The END."
    received = tmp_path / "received.txt"
    connection = display.Display(x_display)
    info = connection.display.info
    count = info.max_keycode - info.min_keycode + 1
    before = connection.get_keyboard_mapping(info.min_keycode, count)
    with focused_xterm(x_display, received):
        typer = XTestTyper(x_display)
        try:
            typer.type_text(said)
        finally:
            typer.close()
        typed = wait_for_text(received, lambda text: text == said)
    assert typed == said
    assert connection.get_keyboard_mapping(info.min_keycode, count) == before
    connection.close()


def test_held_modifiers_and_caps_lock_do_not_change_what_is_typed(x_display: str, tmp_path: Path) -> None:
    """Ctrl held (a push-to-talk hotkey) would make commands of the letters, Caps Lock would invert their case:
    both are set aside while typing and are as they were afterwards."""
    from Xlib import X, display

    from app.core.desktop.x11_typing import XTestTyper

    said = "Hello World, café."
    received = tmp_path / "received.txt"
    connection = display.Display(x_display)
    root = connection.screen().root
    with focused_xterm(x_display, received):
        press_keys(x_display, "Caps_Lock")
        press_keys(x_display, "Control_L", release=False)
        try:
            assert root.query_pointer().mask & X.LockMask and root.query_pointer().mask & X.ControlMask
            typer = XTestTyper(x_display)
            try:
                typer.type_text(said)
            finally:
                typer.close()
            typed = wait_for_text(received, lambda text: len(text) >= len(said))
            mask = root.query_pointer().mask
            assert mask & X.LockMask and mask & X.ControlMask  # as the person left them
        finally:
            release_keys(x_display, "Control_L")
            press_keys(x_display, "Caps_Lock")
    assert typed == said
    assert not root.query_pointer().mask & X.LockMask
    connection.close()


def test_nothing_is_typed_into_a_window_of_scriba_itself(x_display: str, tmp_path: Path) -> None:
    """When Scriba's own window has the focus (Start was just clicked in the panel), a final is not typed there,
    where it would land in Scriba's own widgets; it is said instead. Another program's window gets it."""
    from Xlib import X, Xatom, display

    from app.core.desktop.output import DesktopTextOutput

    connection = display.Display(x_display)
    screen = connection.screen()
    own = screen.root.create_window(
        0, 0, 200, 100, 0, screen.root_depth, event_mask=X.KeyPressMask | X.StructureNotifyMask
    )
    own.change_property(connection.intern_atom("_NET_WM_PID"), Xatom.CARDINAL, 32, [os.getpid()])
    own.map()
    while connection.next_event().type != X.MapNotify:
        pass
    own.set_input_focus(X.RevertToParent, X.CurrentTime)
    connection.sync()
    said: list[str] = []
    with DesktopTextOutput("type", _environment(x_display), on_error=said.append) as output:
        output.send("Not for Scriba.")
    connection.sync()
    keys = []
    while connection.pending_events():
        event = connection.next_event()
        if event.type == X.KeyPress:
            keys.append(event)
    assert said == ["not typed: Scriba's own window has the focus"] and keys == []
    received = tmp_path / "received.txt"
    with focused_xterm(x_display, received):
        with DesktopTextOutput("type", _environment(x_display), on_error=said.append) as output:
            output.send("For the terminal.")
        typed = wait_for_text(received, lambda text: text == "For the terminal.")
    assert typed == "For the terminal." and len(said) == 1
    connection.close()


def test_dictate_types_each_final_once_into_the_focused_xterm(x_display: str, tmp_path: Path) -> None:
    """The issue's check: `scriba dictate --from-file F --realtime --type` on real speech types the finals into
    the xterm that has the focus, and the typed text scores within 0.25 WER of the human reference."""
    speech = real_speech_dir() / "mfa_en_spontaneous_a.wav"
    reference = speech.with_suffix(".ref.txt").read_text()
    received = tmp_path / "received.txt"
    with focused_xterm(x_display, received) as window:
        result = subprocess.run(
            [sys.executable, "-m", "app", "dictate", "--from-file", str(speech), "--realtime", "--type", "--jsonl"],
            capture_output=True,
            text=True,
            env=_environment(x_display),
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        events = _json_lines(result.stdout)
        finals = [str(event["text"]).strip() for event in events if event["type"] == "final"]
        partials = [event for event in events if event["type"] == "partial"]
        expected = " ".join(final for final in finals if final)
        typed = wait_for_text(received, lambda text: len(text) >= len(expected))
        assert focus_of(x_display) == window.id  # typing went where the focus was, and did not move it
    assert partials, "a real-time replay makes partials: none of them may be typed"
    # Each final typed once, in order, one space apart; nothing else (no partial) typed.
    assert typed == expected
    wer = metrics.wer(reference, typed)
    print(f"typed {len(typed.split())} words, WER {wer:.3f} against the reference")
    assert wer <= 0.25, typed


def _json_lines(stdout: str) -> list[dict[str, object]]:
    import json

    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_copy_mode_puts_the_whole_dictation_on_the_clipboard(x_display: str) -> None:
    from app.core.desktop.output import DesktopTextOutput

    assert shutil.which("xclip"), "xclip is missing: run `make test` (it installs the Debian packages)"
    env = _environment(x_display)
    with DesktopTextOutput("copy", env) as output:
        assert output.mode == "copy" and output.notice is None
        output.send("First sentence.")
        output.send(" Second one, with café. ")
        output.send("")  # an empty final adds nothing (no double space)
    assert _clipboard_once_settled(env, "First sentence. Second one, with café.") == (
        "First sentence. Second one, with café."
    )


def test_dictate_copy_leaves_the_whole_text_on_the_clipboard_after_it_ends(x_display: str) -> None:
    """`scriba dictate --copy`: the clipboard holds every final of the session, joined by spaces, and still does
    after the command has ended (the clipboard tool's owner outlives it)."""
    speech = real_speech_dir() / "mfa_en_spontaneous_b.wav"
    env = _environment(x_display)
    result = subprocess.run(
        [sys.executable, "-m", "app", "dictate", "--from-file", str(speech), "--copy"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    printed = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    assert len(printed) >= 2
    assert _clipboard_once_settled(env, " ".join(printed)) == " ".join(printed)


def _clipboard_once_settled(env: dict[str, str], expected: str) -> str:
    """The clipboard's text, read until it is ``expected`` or 10 s have passed: xclip's forked owner may not hold
    the selection yet when xclip returns (seen once under load), and a read then gets the previous owner's text."""
    deadline = time.monotonic() + 10
    while True:
        pasted = subprocess.run(
            ["xclip", "-selection", "clipboard", "-out"], env=env, capture_output=True, timeout=10, check=False
        ).stdout.decode("utf-8")
        if pasted == expected or time.monotonic() > deadline:
            return pasted
        time.sleep(0.05)


@pytest.fixture()
def pulse(tmp_path: Path) -> Iterator[dict[str, str]]:
    missing = missing_tools()
    assert not missing, f"{', '.join(missing)} missing: run `make test` (it installs the Debian packages)"
    with pulse_loopback(tmp_path / "pulse") as env:
        yield env


SAID = [
    (0, "Please send the quarterly report to the finance team."),
    (0, "The meeting moves to Thursday afternoon."),
]
TRUTH = " ".join(text for _, text in SAID)


@pytest.fixture(scope="module")
def spoken_wav(tmp_path_factory: pytest.TempPathFactory, espeak: str) -> Path:
    samples, _ = synth.conversation(SAID, pause=1.0)
    return synth.write_wav(tmp_path_factory.mktemp("hotkey") / "said.wav", samples)


def _wait_for_line(process: subprocess.Popen[str], words: str, seen: list[str], timeout_s: float = 120) -> None:
    """Read the command's stderr until a line with ``words`` (everything read is kept in ``seen``)."""
    assert process.stderr is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        line = process.stderr.readline()
        seen.append(line)
        if words in line:
            return
    raise AssertionError(f"no {words!r} from scriba: {''.join(seen)}")


@pytest.mark.parametrize("mode", ["toggle", "hold"])
def test_global_hotkey_while_xterm_has_focus_dictates_into_it(
    mode: str, x_display: str, pulse: dict[str, str], spoken_wav: Path, tmp_path: Path
) -> None:
    """`scriba dictate --type --hotkey ctrl+alt+d`: the microphone (PulseAudio's null-sink monitor, through the
    real PortAudio path) opens only on the hotkey, pressed through XTest while the xterm has the focus; what is
    said then is typed into the xterm, and the hotkey's own keys never reach it."""
    hotkey = ("Control_L", "Alt_L", "d")
    received = tmp_path / "received.txt"
    with focused_xterm(x_display, received) as window:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app",
                "dictate",
                "--device",
                "pulse",
                "--type",
                "--jsonl",
                "--hotkey",
                "ctrl+alt+d",
                "--mode",
                mode,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_environment(x_display, **pulse),
        )
        seen: list[str] = []
        try:
            _wait_for_line(process, "Ready: press ctrl+alt+d", seen)
            # Speech before the hotkey is not listened to: the microphone is not open yet.
            assert play(spoken_wav, pulse).wait(timeout=60) == 0
            press_keys(x_display, *hotkey, release=mode == "toggle")
            _wait_for_line(process, "Listening.", seen)
            assert play(spoken_wav, pulse).wait(timeout=60) == 0
            time.sleep(1.0)  # the last words reach the capture stream (PulseAudio's buffering)
            if mode == "toggle":
                press_keys(x_display, *hotkey)
            else:
                release_keys(x_display, *hotkey)
            _wait_for_line(process, "Paused;", seen)
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.returncode == 0, "".join(seen) + stderr
        finals = [str(event["text"]).strip() for event in _json_lines(stdout) if event["type"] == "final"]
        expected = " ".join(final for final in finals if final)
        typed = wait_for_text(received, lambda text: len(text) >= len(expected))
        assert focus_of(x_display) == window.id
    assert typed == expected  # the hotkey's "d" was taken by the grab, not typed
    # One playback heard (the one after the hotkey), not two.
    assert metrics.wer(TRUTH, typed) <= 0.25, typed


def test_a_microphone_that_fails_on_the_hotkey_is_said_and_the_next_press_tries_again(x_display: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "dictate", "--device", "no such microphone", "--hotkey", "ctrl+alt+d"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_environment(x_display),
    )
    seen: list[str] = []
    try:
        _wait_for_line(process, "Ready: press ctrl+alt+d", seen)
        for _ in range(2):
            press_keys(x_display, "Control_L", "Alt_L", "d")
            _wait_for_line(process, "scriba: error: input device 'no such microphone'", seen)
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, "".join(seen)


def test_a_hotkey_another_program_holds_is_refused_in_words(x_display: str) -> None:
    from app.core.desktop.x11_hotkey import X11GlobalHotkey, parse_hotkey

    hotkey = parse_hotkey("ctrl+alt+d")
    with X11GlobalHotkey(hotkey, lambda: None, display_name=x_display):
        second = X11GlobalHotkey(hotkey, lambda: None, display_name=x_display)
        with pytest.raises(DesktopError, match="already taken by another program"):
            second.start()


@pytest.mark.unit
def test_wayland_is_told_apart_from_its_xwayland_display() -> None:
    assert display_system({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, "linux") == "wayland"
    assert display_system({"DISPLAY": ":0", "XDG_SESSION_TYPE": "wayland"}, "linux") == "wayland"
    assert display_system({"DISPLAY": ":0"}, "linux") == "x11"
    assert display_system({}, "linux") == "none"
    assert display_system({"DISPLAY": ":0"}, "win32") == "windows"


@pytest.mark.unit
def test_typing_on_wayland_with_nothing_that_types_falls_back_to_the_clipboard_with_a_notice(tmp_path: Path) -> None:
    """No compositor answers wtype and no portal is on a bus: the clipboard route, said once. (Typing on a real
    compositor: tests/test_desktop_wayland.py.)"""
    from app.core.desktop.output import DesktopTextOutput

    assert shutil.which("wl-copy"), "wl-clipboard is one of the packages `make system-deps` installs"
    env = {"WAYLAND_DISPLAY": "wayland-0", "XDG_RUNTIME_DIR": str(tmp_path), "PATH": os.environ["PATH"]}
    with DesktopTextOutput("type", env, portal_token_path=tmp_path / "token") as output:
        assert output.system == "wayland"
        assert output.notice is not None and "clipboard" in output.notice and "Ctrl+V" in output.notice


@pytest.mark.unit
def test_without_wl_copy_on_its_path_wayland_says_what_to_install(tmp_path: Path) -> None:
    from app.core.desktop.output import DesktopTextOutput

    env = {"WAYLAND_DISPLAY": "wayland-0", "PATH": str(tmp_path)}  # the session's PATH has no wl-copy
    with pytest.raises(DesktopError, match="wl-clipboard"):
        DesktopTextOutput("type", env)


@pytest.mark.unit
def test_hotkey_text_is_parsed_or_refused_in_words() -> None:
    from app.core.desktop.x11_hotkey import parse_hotkey

    hotkey = parse_hotkey("Ctrl+Alt+D")
    assert hotkey.modifiers == 4 | 8 and hotkey.keysym == ord("d")
    assert parse_hotkey("super+space").keysym == 0x20
    assert parse_hotkey("F9").modifiers == 0
    assert parse_hotkey("Pause").modifiers == 0
    for wrong, words in (
        ("ctrl+", "modifiers and a key"),
        ("hyper+d", "unknown modifier"),
        ("ctrl+nosuchkey", "key"),
        ("d", "would take that key from every program"),
        ("shift+space", "would take that key from every program"),
    ):
        with pytest.raises(DesktopError, match=words):
            parse_hotkey(wrong)


@pytest.mark.unit
def test_a_hotkey_is_refused_in_words_where_it_cannot_be_grabbed() -> None:
    from app.core.desktop.x11_hotkey import check_hotkey_support

    check_hotkey_support({"DISPLAY": ":0"})
    for env, words in (({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, "Wayland"), ({}, "DISPLAY is not set")):
        with pytest.raises(DesktopError, match=words):
            check_hotkey_support(env)


def test_dictate_says_why_it_cannot_type_or_grab_a_hotkey_before_loading_anything() -> None:
    no_display = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
    for arguments, env, words in (
        (["--type"], no_display, "needs an X11 display"),
        (["--hotkey", "ctrl+alt+d"], {**no_display, "WAYLAND_DISPLAY": "wayland-0"}, "Wayland does not let"),
        (["--hotkey", "ctrl+alt+d", "--from-file", "x.wav"], no_display, "goes without --from-file"),
        (["--mode", "hold"], no_display, "--mode hold is driven by a hotkey: give --hotkey KEYS too"),
        (["--hotkey", "ctrl+alt+d", "--hotkey-mode", "sometimes"], no_display, "dictation mode 'sometimes'"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "app", "dictate", *arguments],
            capture_output=True,
            text=True,
            env={**env, "PYTHONPATH": str(ROOT)},
            timeout=120,
        )
        assert result.returncode in (1, 2) and words in result.stderr, (arguments, result.stderr)
        assert "Traceback" not in result.stderr


def test_a_hotkey_listener_whose_x_server_ends_stops_cleanly(monkeypatch: pytest.MonkeyPatch) -> None:
    """The X session ends under a running listener (logout): its thread ends without an uncaught error, and
    stop() neither hangs nor raises."""
    import threading

    from app.core.desktop.x11_hotkey import X11GlobalHotkey, parse_hotkey

    uncaught: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: uncaught.append(args.exc_value))
    with xvfb() as private_display:
        listener = X11GlobalHotkey(parse_hotkey("ctrl+alt+d"), lambda: None, display_name=private_display)
        listener.start()
        thread = listener._thread
        assert thread is not None and thread.is_alive()
    thread.join(timeout=30)
    assert not thread.is_alive()
    listener.stop()
    assert uncaught == []


def test_take_back_erases_typed_text_in_the_target_program(x_display: str, tmp_path: Path) -> None:
    """ "Scratch that": the characters of the last final are erased in the other program by BackSpace presses
    (the terminal's own line editing drops them), and never more than the output typed: text the person typed
    there before stays."""
    from app.core.desktop.output import DesktopTextOutput

    received = tmp_path / "received.txt"
    with focused_xterm(x_display, received, line_mode=True):
        press_keys(x_display, "m", "i", "n", "e")  # the person's own text, before dictation
        with DesktopTextOutput("type", _environment(x_display)) as output:
            output.send("Keep this.")
            output.send("Scratch this one.")
            output.take_back(len(" Scratch this one."))
            output.edit(0, " And this, Zoë.")
            output.take_back(1000)  # more than was typed: stops at what Scriba typed
            output.edit(0, "Again")
            output.edit(3, "ain!\n")
        typed = wait_for_text(received, lambda text: text.endswith("\n"))
    assert typed == "mineAgain!\n"


def test_take_back_in_copy_mode_shortens_the_clipboard(x_display: str) -> None:
    from app.core.desktop.output import DesktopTextOutput

    env = _environment(x_display)
    with DesktopTextOutput("copy", env) as output:
        output.send("First sentence.")
        output.send("A mistake.")
        output.take_back(len(" A mistake."))
        output.edit(1, ", then more")  # the full stop goes: the sentence goes on
        output.edit(len("more"), "less.")
        assert output.mode == "copy"
    assert _clipboard_once_settled(env, "First sentence, then less.") == "First sentence, then less."


def test_dictate_commands_scratch_that_in_the_focused_xterm(x_display: str, tmp_path: Path, espeak: str) -> None:
    """`scriba dictate --realtime --type --commands` on a recording that says a sentence, "scratch that", another
    sentence, "period" and "new line": the xterm (its own line editing on, so BackSpace erases and Return hands
    the line to the file) ends with the second sentence alone, as the edits the command printed say."""
    from tests.core.dictation.test_spoken_commands import BREATH_S, prompt

    audio = synth.write_wav(
        tmp_path / "scratch.wav",
        prompt(
            "Send the report to Anna",
            1.0,
            "scratch that",
            1.0,
            "send the report to Maria",
            BREATH_S,
            "period",
            BREATH_S,
            "new line",
            voice=1,
            speed=130,
        ),
    )
    received = tmp_path / "received.txt"
    with focused_xterm(x_display, received, line_mode=True):
        # The vocabulary, as a person would set it: tiny.en hears espeak-ng's "scratch" as "stretch" without it.
        command = ["dictate", "--from-file", str(audio), "--realtime", "--type", "--commands", "--jsonl"]
        command += ["--vocabulary", "scratch that, Maria"]
        result = subprocess.run(
            [sys.executable, "-m", "app", *command],
            capture_output=True,
            text=True,
            env=_environment(x_display, XDG_CONFIG_HOME=str(tmp_path)),
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        edits = [event for event in _json_lines(result.stdout) if event["type"] == "edit"]
        document = ""
        for edit in edits:
            document = document[: len(document) - int(str(edit["erase"]))] + str(edit["text"])
        typed = wait_for_text(received, lambda text: text.endswith("\n"))
    print(repr(typed), [edit["actions"] for edit in edits])
    assert any(int(str(edit["erase"])) > 0 for edit in edits), edits  # something was taken back by BackSpace
    assert typed == document
    assert "anna" not in typed.lower() and typed.lower().endswith("maria.\n"), typed
