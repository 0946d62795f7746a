"""`scriba dictate`: the microphone (or a file replayed) transcribed as it is spoken."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.common import resolve_data_dir
from app.core.cancel import CancelToken
from app.core.dictation.modes import DEFAULT_MODE, MODES, parse_mode
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
        help=(
            "type each final sentence into the window that has the focus (on Wayland through the desktop's "
            "portal, wtype, ydotool or the clipboard, whichever works first)"
        ),
    )
    into.add_argument("--copy", action="store_true", help="put the dictated text on the clipboard instead of typing")
    dictate.add_argument(
        "--commands",
        action="store_true",
        help='spoken punctuation and commands: "comma", "period", "question mark", "new line", "new paragraph", '
        '"open quote"/"close quote", "scratch that", "undo" (English)',
    )
    dictate.add_argument(
        "--numbers", action="store_true", help='numbers said as words typed as digits ("twenty three" -> 23)'
    )
    dictate.add_argument(
        "--replacements",
        type=Path,
        default=None,
        metavar="FILE",
        help="one 'heard -> typed' rule a line, applied to the final text (default: dictation-replacements.txt "
        "in the config folder, when it exists)",
    )
    dictate.add_argument(
        "--vocabulary",
        default=None,
        metavar="WORDS",
        help='words and names to favour, separated by commas ("Scriba, Kubernetes"); added to '
        "dictation-vocabulary.txt in the config folder, when it exists",
    )
    dictate.add_argument(
        "--hotkey",
        default=None,
        metavar="KEYS",
        help="listen only when this global hotkey says so, e.g. ctrl+alt+d (X11; works whichever window has focus)",
    )
    modes = "; ".join(f"{name}: {words.lower()}" for name, words in MODES.items())
    dictate.add_argument(
        "--mode",
        choices=tuple(MODES),
        default=None,
        help=f"how --hotkey drives listening: {modes} (default: {DEFAULT_MODE})",
    )
    # The earlier name of --mode ("push" was hold's name).
    dictate.add_argument("--hotkey-mode", dest="mode", type=_mode, help=argparse.SUPPRESS)
    dictate.add_argument("--no-sound", action="store_true", help="no tone when the hotkey starts and stops listening")


def _mode(text: str) -> str:
    try:
        return parse_mode(text)
    except ValueError as error:  # argparse would say only "invalid value"
        raise argparse.ArgumentTypeError(str(error)) from error


if TYPE_CHECKING:
    from app.core.dictation.controller import ControllerEvent, DictationController
    from app.core.dictation.sounds import ListeningSounds
    from app.core.dictation.vocabulary import Replacement
    from app.core.queue.jobs import JobStore


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
    if args.mode in ("hold", "toggle") and args.hotkey is None:
        print(f"scriba: error: --mode {args.mode} is driven by a hotkey: give --hotkey KEYS too", file=sys.stderr)
        return ExitCode.USAGE

    from app.core.desktop.display import DesktopError
    from app.core.dictation.controller import DictationController, SaveError, input_device
    from app.core.dictation.sources import FileSource
    from app.core.dictation.stream import DictationOptions
    from app.core.engine.transcribe import select_device
    from app.core.errors import ScribaError

    printer = _Printer(args)
    try:
        replacements, vocabulary = _own_words(args)
        device, _ = select_device(args.compute_device)
        options = DictationOptions(
            model=args.model,
            final_model=args.final_model,
            language=args.language,
            device=device,
            commands=bool(args.commands),
            numbers=bool(args.numbers),
            replacements=replacements,
            vocabulary=vocabulary,
        )
    except (ScribaError, ValueError) as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return ExitCode.FAILED
    printer.edits = options.commands or options.numbers or bool(options.replacements)
    from_file = args.from_file
    controller = DictationController(
        options,
        printer,
        source_factory=(lambda _device: FileSource(from_file, realtime=args.realtime)) if from_file else None,
        device=input_device(args.device),
        output_mode="type" if args.type else ("copy" if args.copy else None),
        # One output for the whole command: the text of one hotkey press follows the last one's with a space.
        keep_output=True,
        stop_at_end=from_file is not None,
    )
    try:
        if not controller.prepare_output():  # a refusal (no X11, no clipboard tool) before the model loads
            return ExitCode.FAILED
        if args.hotkey is not None:
            try:
                controller.set_hotkey(args.hotkey, args.mode or DEFAULT_MODE)  # before the model loads
            except DesktopError as error:
                print(f"scriba: error: {error}", file=sys.stderr)
                return ExitCode.FAILED
            if not args.no_sound:
                controller.sounds = _sounds(controller, printer)
            return _on_hotkey(controller, printer)
        if from_file is not None:
            controller.start()
            while not controller.wait(0.1):  # Ctrl+C: KeyboardInterrupt here, and close() below flushes
                pass
        else:
            _until_interrupted(controller, lambda: not controller.wait(0.1), start=True)
        if printer.failed:
            return ExitCode.FAILED
        if args.save is not None:
            try:
                saved = controller.save(args.save, _store(args))
            except SaveError as error:
                print(f"scriba: error: {error}", file=sys.stderr)
                return ExitCode.FAILED
            where = f"; queued as job {saved.job.id}" if saved.job else ""
            print(f"saved {saved.audio}{where}", file=sys.stderr)
        return ExitCode.OK
    finally:
        controller.close()  # every final is typed (or copied) before the command ends


def _own_words(args: argparse.Namespace) -> tuple[tuple[Replacement, ...], tuple[str, ...]]:
    """The replacements (--replacements FILE, else the config folder's file when there is one) and the
    vocabulary (the config folder's file and --vocabulary). A bad line is said on stderr, naming the file and
    the line, and the other lines are used; a file given that cannot be read is a VocabularyError."""
    from app.core.dictation.vocabulary import (
        default_replacements_path,
        default_vocabulary_path,
        load_replacements,
        load_vocabulary,
        parse_vocabulary,
    )

    given = args.replacements
    replacements, problems = load_replacements(given or default_replacements_path(), missing_ok=given is None)
    for problem in problems:
        print(f"scriba: warning: {problem}", file=sys.stderr, flush=True)
    vocabulary = load_vocabulary(default_vocabulary_path(), missing_ok=True)
    if args.vocabulary:
        vocabulary = parse_vocabulary("\n".join((*vocabulary, args.vocabulary)))
    return replacements, vocabulary


def _store(args: argparse.Namespace) -> JobStore:
    from app.core.queue.jobs import JobStore

    return JobStore(resolve_data_dir(args.data_dir))


def _until_interrupted(controller: DictationController, going: Callable[[], bool], *, start: bool) -> None:
    """Run until Ctrl+C (or SIGTERM), or until ``going()`` says no; the run listening then is stopped and flushed
    (every word said before Ctrl+C is kept)."""
    import signal

    stop = CancelToken()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.cancel())
    signal.signal(signal.SIGTERM, lambda *_: stop.cancel())
    try:
        if start:
            controller.start()
        while going() and not stop.wait(0.1):
            pass
    finally:
        signal.signal(signal.SIGINT, previous)
        controller.stop()
        controller.wait()


def _on_hotkey(controller: DictationController, printer: _Printer) -> int:
    """The microphone opens only while the hotkey says "listen"; each listening period is one run (stopping one
    flushes it: every word said becomes final, and is typed). The model is loaded once, before the first
    press, so listening starts at once."""
    hotkey = controller.hotkey
    assert hotkey is not None
    if not controller.load():
        return ExitCode.FAILED
    printer.hotkey = hotkey.hotkey.text
    printer.mode = controller.hotkey_mode
    if controller.hotkey_mode == "continuous":
        line = f"Ready: listening; press {printer.hotkey} to pause and resume; Ctrl+C quits."
    else:
        how = "hold it while you speak" if controller.hotkey_mode == "hold" else "press it again to stop"
        line = f"Ready: press {printer.hotkey} to dictate ({how}); Ctrl+C quits."
    print(line, file=sys.stderr, flush=True)
    controller.begin()  # continuous mode listens from now on
    _until_interrupted(controller, lambda: True, start=False)
    return ExitCode.OK


def _sounds(controller: DictationController, printer: _Printer) -> ListeningSounds:
    from app.core.dictation.controller import Notice
    from app.core.dictation.sounds import ListeningSounds

    return ListeningSounds(on_error=lambda text: printer(Notice(controller.run_number, text)))


class _Printer:
    """The controller's events as the terminal shows them: text on stdout (the partial dimmed on the current
    line at a terminal, finals only otherwise, or one JSON object an event with --jsonl), the rest on stderr.
    Events come from several threads: one lock keeps their lines whole."""

    def __init__(self, args: argparse.Namespace) -> None:
        import threading

        self.jsonl = bool(args.jsonl)
        self.interactive = sys.stdout.isatty() and not self.jsonl
        self.hotkey: str | None = None  # set once the hotkey is had: the lines then say how to go on
        self.mode = DEFAULT_MODE
        self.failed = False  # a problem ended a run
        self.edits = False  # commands, numbers or replacements are on: finals are shown as they were edited
        self._lock = threading.Lock()

    def __call__(self, event: ControllerEvent) -> None:
        import json

        from app.core.dictation.controller import Edited, Heard, Listening, Notice, Problem, RunEnded

        with self._lock:
            if isinstance(event, Heard):
                self._show(event.event.type, event.event.text, json.dumps(event.event.to_json()))
            elif isinstance(event, Edited) and event.rules_active:
                # The final as the commands and replacements made it: "Dear team [comma] the meeting ...".
                if self.jsonl:
                    print(json.dumps(event.edit.to_json(), ensure_ascii=False), flush=True)
                elif event.edit.shown:
                    print(f"\r\033[K{event.edit.shown}" if self.interactive else event.edit.shown, flush=True)
            elif isinstance(event, Problem):
                self.failed = self.failed or event.ended
                prefix = "scriba: error: " if event.ended else "scriba: "
                print(f"{prefix}{event.message}", file=sys.stderr, flush=True)
            elif isinstance(event, Notice):
                print(f"scriba: {event.text}", file=sys.stderr, flush=True)
            elif isinstance(event, Listening):
                # Always on stderr (never mixed into --jsonl): scripts and tests wait for it before speaking.
                line = "Listening." if self.hotkey else "Listening; Ctrl+C stops (everything said before it is kept)."
                print(line, file=sys.stderr, flush=True)
            elif isinstance(event, RunEnded) and self.hotkey and event.listened:
                again = "resume" if self.mode == "continuous" else "dictate"
                print(f"Paused; press {self.hotkey} to {again}.", file=sys.stderr, flush=True)

    def _show(self, kind: str, text: str, as_json: str) -> None:
        if self.jsonl:
            if kind in ("partial", "final"):
                print(as_json, flush=True)
        elif kind == "status":
            print(f"\r\033[K[{text}]" if self.interactive else f"[{text}]", file=sys.stderr, flush=True)
        elif self.interactive:
            # The partial on the current line, dimmed; a final replaces it and moves on to a new line.
            if kind == "partial":
                print(f"\r\033[K\033[2m{text}\033[0m", end="", flush=True)
            elif not self.edits:  # else the edited final follows (Edited)
                print(f"\r\033[K{text}", flush=True)
        elif kind == "final" and not self.edits:
            print(text, flush=True)
