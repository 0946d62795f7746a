"""`scriba dictate`: the microphone (or a file replayed) transcribed as it is spoken."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.common import resolve_data_dir
from app.core.cancel import CancelToken
from app.core.errors import ExitCode


def add_dictate_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dictate = commands.add_parser("dictate", help="transcribe the microphone (or a file replayed) as you speak")
    dictate.add_argument("--list-devices", action="store_true", help="list the input devices and exit")
    dictate.add_argument("--device", default=None, help="input device: index or name (default: the system's)")
    dictate.add_argument("--model", default="tiny.en", help="catalog name or CTranslate2 directory (default: tiny.en)")
    dictate.add_argument(
        "--final-model",
        default=None,
        metavar="MODEL",
        help="a bigger model for the final text only (partials stay with --model); back to --model if too slow",
    )
    dictate.add_argument("--language", default=None, help="language code; default: detect once (en for *.en)")
    dictate.add_argument("--compute-device", choices=("auto", "cpu", "cuda"), default="auto")
    dictate.add_argument("--jsonl", action="store_true", help="one JSON object per partial/final event")
    dictate.add_argument("--from-file", type=Path, default=None, metavar="F", help="replay a file instead")
    dictate.add_argument("--realtime", action="store_true", help="with --from-file: replay at the speed of speech")
    dictate.add_argument(
        "--save", type=Path, default=None, metavar="DIR", help="keep the audio (WAV) in DIR and the text as a job"
    )
    into = dictate.add_mutually_exclusive_group()
    into.add_argument(
        "--type",
        action="store_true",
        help="type each final sentence into the window that has the focus (X11; on Wayland: the clipboard)",
    )
    into.add_argument("--copy", action="store_true", help="put the dictated text on the clipboard instead of typing")
    dictate.add_argument(
        "--hotkey",
        default=None,
        metavar="KEYS",
        help="listen only when this global hotkey says so, e.g. ctrl+alt+d (X11; works whichever window has focus)",
    )
    dictate.add_argument(
        "--hotkey-mode",
        choices=("toggle", "push"),
        default="toggle",
        help="toggle: a press starts and the next stops; push: listen while the key is held, type on release "
        "(default: toggle)",
    )


if TYPE_CHECKING:
    from app.core.desktop.output import DesktopTextOutput
    from app.core.dictation.stream import DictationOptions, EventCallback


def _input_device(text: str | None) -> int | str | None:
    return int(text) if text is not None and text.isdigit() else text


def cmd_dictate(args: argparse.Namespace) -> int:
    import json

    from app.core.dictation.sources import AudioInputError, list_input_devices

    if args.list_devices:
        try:
            devices = list_input_devices()
        except AudioInputError as error:
            print(f"scriba: error: {error}", file=sys.stderr)
            return ExitCode.FAILED
        for listed in devices:
            if args.jsonl:
                print(json.dumps(listed))
            else:
                mark = "*" if listed["is_default"] else " "
                print(
                    f"{mark} {listed['index']:>3}  {listed['name']}  ({listed['channels']} ch, "
                    f"{listed['default_samplerate']:.0f} Hz, {listed['hostapi']})"
                )
        if not devices and not args.jsonl:
            print("no input devices found (is a microphone connected, and PortAudio/PulseAudio running?)")
        return ExitCode.OK
    if args.realtime and args.from_file is None:
        print("scriba: error: --realtime replays a file: give --from-file F too", file=sys.stderr)
        return ExitCode.USAGE
    if args.hotkey is not None and (args.from_file is not None or args.save is not None):
        print(
            "scriba: error: --hotkey listens to the microphone; it goes without --from-file and --save", file=sys.stderr
        )
        return ExitCode.USAGE

    from app.core.desktop.output import DesktopTextOutput
    from app.core.desktop.session import DesktopError

    desktop: DesktopTextOutput | None = None
    if args.type or args.copy:
        try:
            desktop = DesktopTextOutput(
                "type" if args.type else "copy",
                on_error=lambda message: print(f"scriba: {message}", file=sys.stderr, flush=True),
            )
        except DesktopError as error:
            print(f"scriba: error: {error}", file=sys.stderr)
            return ExitCode.FAILED
        if desktop.notice:
            print(f"scriba: {desktop.notice}", file=sys.stderr, flush=True)
    try:
        return _dictate(args, desktop)
    finally:
        if desktop is not None:
            desktop.close()  # every final is typed (or copied) before the command ends


def _dictate(args: argparse.Namespace, desktop: DesktopTextOutput | None) -> int:
    import json
    import signal
    import threading

    from app.core.dictation.session import Dictation
    from app.core.dictation.sources import FileSource, MicrophoneSource
    from app.core.dictation.stream import DictationEvent, DictationOptions
    from app.core.engine.transcribe import select_device
    from app.core.errors import ScribaError

    interactive = sys.stdout.isatty() and not args.jsonl
    finals: list[DictationEvent] = []
    output_lock = threading.Lock()

    def show(event: DictationEvent) -> None:
        with output_lock:
            if event.type == "final":
                finals.append(event)
            if args.jsonl:
                if event.type in ("partial", "final"):
                    print(json.dumps(event.to_json()), flush=True)
            elif event.type == "status":
                print(f"\r\033[K[{event.text}]" if interactive else f"[{event.text}]", file=sys.stderr, flush=True)
            elif interactive:
                # The partial on the current line, dimmed; a final replaces it and moves on to a new line.
                if event.type == "partial":
                    print(f"\r\033[K\033[2m{event.text}\033[0m", end="", flush=True)
                else:
                    print(f"\r\033[K{event.text}", flush=True)
            elif event.type == "final":
                print(event.text, flush=True)
            # Finals only: a partial is replaced a moment later, and typed keys cannot be taken back.
            if desktop is not None and event.type == "final":
                desktop.send(event.text)

    try:
        device, _ = select_device(args.compute_device)
        options = DictationOptions(
            model=args.model, final_model=args.final_model, language=args.language, device=device
        )
        if args.hotkey is not None:
            return _dictate_on_hotkey(args, options, show, desktop)
        source = (
            FileSource(args.from_file, realtime=args.realtime)
            if args.from_file is not None
            else MicrophoneSource(_input_device(args.device))
        )
        dictation = Dictation(options, source, show)
        if args.from_file is not None:
            dictation.run()
        else:
            stop = CancelToken()
            previous = signal.signal(signal.SIGINT, lambda *_: stop.cancel())
            signal.signal(signal.SIGTERM, lambda *_: stop.cancel())
            try:
                dictation.start()
                # Always on stderr (never mixed into --jsonl): scripts and tests wait for it before speaking.
                print("Listening; Ctrl+C stops (everything said before it is kept).", file=sys.stderr, flush=True)
                stop.wait()
            finally:
                signal.signal(signal.SIGINT, previous)
                dictation.stop()  # flushes: the words said before Ctrl+C become final
    except (ScribaError, ValueError, OSError) as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return ExitCode.FAILED
    if args.save is not None:
        from app.core.dictation.save import save_dictation
        from app.core.queue.jobs import JobStore

        decoder = dictation.decoder
        saved = save_dictation(
            dictation.recording(),
            finals,
            args.save,
            store=JobStore(resolve_data_dir(args.data_dir)),
            model=args.model,
            language=getattr(decoder, "language", None) or args.language,
            device=device,
        )
        where = f"; queued as job {saved.job.id}" if saved.job else ""
        print(f"saved {saved.audio}{where}", file=sys.stderr)
    return ExitCode.OK


def _dictate_on_hotkey(
    args: argparse.Namespace, options: DictationOptions, show: EventCallback, desktop: DesktopTextOutput | None
) -> int:
    """The microphone opens only while the hotkey says "listen"; each listening period is one dictation session
    (stopping one flushes it: every word said becomes final, and is typed). The model is loaded once, before the
    first press, so listening starts at once."""
    import queue
    import signal

    from app.core.desktop.session import DesktopError
    from app.core.desktop.x11_hotkey import HotkeySwitch, X11GlobalHotkey, check_hotkey_support, parse_hotkey
    from app.core.dictation.session import Dictation
    from app.core.dictation.sources import AudioInputError, MicrophoneSource

    try:
        check_hotkey_support()
        hotkey = parse_hotkey(args.hotkey)
    except DesktopError as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return ExitCode.FAILED
    # The hotkey's thread only posts what to do; this thread opens and closes the microphone, so a slow flush
    # never blocks the listener (a release during the flush is still seen).
    commands: queue.SimpleQueue[str] = queue.SimpleQueue()
    switch = HotkeySwitch(args.hotkey_mode, lambda: commands.put("start"), lambda: commands.put("stop"))

    def pressed() -> None:
        if desktop is not None:
            desktop.hold()  # the X server gives the keyboard to the hotkey's grab until the key is released
        switch.pressed()

    def released() -> None:
        switch.released()
        if desktop is not None:
            desktop.release()

    listener = X11GlobalHotkey(hotkey, pressed, released)
    stop = CancelToken()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.cancel())
    signal.signal(signal.SIGTERM, lambda *_: stop.cancel())
    how = "hold it while you speak" if args.hotkey_mode == "push" else "press it again to stop"
    active: Dictation | None = None
    sessions = 0
    first = Dictation(options, MicrophoneSource(_input_device(args.device)), show)
    try:
        listener.start()  # before the model loads: a key another program holds is said at once
        first.load()
        print(f"Ready: press {hotkey.text} to dictate ({how}); Ctrl+C quits.", file=sys.stderr, flush=True)
        while not stop.cancelled:
            try:
                command = commands.get(timeout=0.1)
            except queue.Empty:
                continue
            if command == "start" and active is None:
                # A Dictation runs once: the first period uses the one that loaded the model, later ones share it.
                active = (
                    first
                    if sessions == 0
                    else Dictation(options, MicrophoneSource(_input_device(args.device)), show, decoder=first.decoder)
                )
                sessions += 1
                try:
                    active.start()
                except AudioInputError as error:
                    # The microphone is busy or gone: say so and wait for the next press (it may be back then).
                    active = None
                    switch.reset()
                    print(f"scriba: error: {error}", file=sys.stderr, flush=True)
                    continue
                print("Listening.", file=sys.stderr, flush=True)
            elif command == "stop" and active is not None:
                active.stop()
                active = None
                print(f"Paused; press {hotkey.text} to dictate.", file=sys.stderr, flush=True)
    except DesktopError as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return ExitCode.FAILED
    finally:
        signal.signal(signal.SIGINT, previous)
        listener.stop()
        if active is not None:
            active.stop()
    return ExitCode.OK
