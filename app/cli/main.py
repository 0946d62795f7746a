"""The `scriba` command: no argument opens the window; sub-commands work headless. Each command group lives in
its own module here, which adds its parser and runs it; this one assembles and dispatches."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from app import __version__
from app.cli.common import log, resolve_data_dir
from app.cli.dictate import add_dictate_parser, cmd_dictate
from app.cli.doctor import add_doctor_parser, cmd_doctor
from app.cli.models import add_models_parser, add_token_parser, cmd_models, cmd_token
from app.cli.offload import add_offload_parser, cmd_offload_key, cmd_offload_run, cmd_offload_sweep
from app.cli.offload_estimate import cmd_offload_estimate
from app.cli.queue import add_queue_parser, cmd_queue
from app.cli.remote_worker import add_worker_parser, cmd_worker
from app.cli.speakers import add_speakers_parser, cmd_speakers
from app.cli.transcribe import add_transcribe_parser, cmd_transcribe
from app.cli.watch import add_watch_parser, cmd_watch
from app.cli.window import open_window
from app.core.errors import ExitCode


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scriba",
        usage="%(prog)s [-h] [--version] [-v] [--data-dir DATA_DIR] [--install-desktop-entry] [COMMAND … | FILE …]",
        description="Transcribe and diarize audio and video, locally. "
        "Plain `scriba` (no command) opens the window; `scriba FILE…` opens it with those files queued. "
        "The commands below work without a window.",
    )
    parser.add_argument("--version", action="version", version=f"scriba {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the engine decides")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="queue and transcripts folder (default: $SCRIBA_DATA_DIR, else the user data folder)",
    )
    menu = parser.add_mutually_exclusive_group()
    menu.add_argument(
        "--install-desktop-entry",
        action="store_true",
        help="add Scriba to the desktop's applications menu, with its icon (in $XDG_DATA_HOME, for this user)",
    )
    menu.add_argument("--uninstall-desktop-entry", action="store_true", help="remove that menu entry and icon again")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    # In the order `scriba --help` lists them.
    add_transcribe_parser(commands)
    add_models_parser(commands)
    add_token_parser(commands)
    add_queue_parser(commands)
    add_watch_parser(commands)
    add_speakers_parser(commands)
    add_dictate_parser(commands)
    add_offload_parser(commands)
    add_worker_parser(commands)
    add_doctor_parser(commands)
    return parser


def command_names(parser: argparse.ArgumentParser) -> frozenset[str]:
    """The sub-commands the parser knows, read from the parser itself so that a new one is never missed."""
    return frozenset(
        name for action in parser._actions if isinstance(action, argparse._SubParsersAction) for name in action.choices
    )


def split_open_files(argv: list[str], commands: Collection[str] | None = None) -> tuple[list[str], list[Path]]:
    """`scriba FILE…` (how a file manager's "Open with Scriba" starts us) opens the window with the files
    queued. Only when the first such argument exists: a mistyped command still gets argparse's message, and a
    command is a command even where a file of that name exists (`scriba doctor` in a folder holding `doctor`)."""
    known = command_names(build_parser()) if commands is None else commands
    for index, argument in enumerate(argv):
        if argument in known:
            break
        if argument.startswith("-") or (index and argv[index - 1] == "--data-dir"):
            continue
        if Path(argument).exists():
            return argv[:index], [Path(item) for item in argv[index:]]
        break
    return argv, []


def main(argv: Sequence[str] | None = None) -> int:
    import multiprocessing

    # The inference process is started with "spawn"; in a frozen (PyInstaller) build the child re-enters
    # here and must be diverted to its work.
    multiprocessing.freeze_support()
    parser = build_parser()
    arguments, open_files = split_open_files(list(sys.argv[1:] if argv is None else argv), command_names(parser))
    args = parser.parse_args(arguments)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    # paramiko logs a failed handshake as an ERROR with a traceback from its own thread; the offload says what
    # went wrong in one line of its own, so paramiko speaks only with --verbose.
    logging.getLogger("paramiko").setLevel(logging.INFO if args.verbose else logging.CRITICAL)
    try:
        return _dispatch(parser, args, open_files)
    except KeyboardInterrupt:
        print("scriba: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:  # `scriba … | head`: the reader left; no error of ours, and nothing more to print
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the interpreter's own flush at exit stays quiet
        return ExitCode.BROKEN_PIPE
    except Exception as error:
        from app.core.errors import ScribaError

        if isinstance(error, ScribaError):  # written for the user: the message says what to do
            print(f"scriba: error: {error}", file=sys.stderr)
            return error.exit_code
        where = _write_crash_log(args.data_dir)
        print(
            f"scriba: error: an unexpected error inside Scriba ({type(error).__name__}: {error}); "
            + (f"the details are in {where}; please include them in a bug report" if where else "run with -v"),
            file=sys.stderr,
        )
        return ExitCode.FAILED


def _write_crash_log(data_dir_option: Path | None) -> Path | None:
    """Append the exception being handled, with its traceback, to crash.log in the data folder (the window
    writes the same file); the path, or None when no folder takes it."""
    import traceback

    text = f"--- Scriba {__version__} ({' '.join(sys.argv)})\n{traceback.format_exc()}\n"
    log.info("unexpected error:\n%s", text)  # -v shows it on the terminal too
    try:
        folder = resolve_data_dir(data_dir_option)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "crash.log"
        with path.open("a", encoding="utf-8") as stream:
            stream.write(text)
    except OSError:
        return None
    return path


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace, open_files: list[Path]) -> int:
    if args.install_desktop_entry or args.uninstall_desktop_entry:
        from app.cli.desktop_entry import cmd_desktop_entry

        if args.command is not None or open_files:
            parser.error("--install-desktop-entry and --uninstall-desktop-entry take no command and no files")

        return cmd_desktop_entry(remove=args.uninstall_desktop_entry)
    data_dir = resolve_data_dir(args.data_dir)
    if args.command is None:
        return open_window(data_dir, open_files)
    if args.command == "offload":
        return {
            "run": lambda: cmd_offload_run(args, data_dir),
            "estimate": lambda: cmd_offload_estimate(args),
            "sweep": lambda: cmd_offload_sweep(data_dir),
            "key": lambda: cmd_offload_key(args),
        }[args.offload_command]()
    handlers: dict[str, Callable[[], int]] = {
        "transcribe": lambda: cmd_transcribe(args),
        "queue": lambda: cmd_queue(args),
        "watch": lambda: cmd_watch(args),
        "models": lambda: cmd_models(args),
        "token": lambda: cmd_token(args),
        "speakers": lambda: cmd_speakers(args, data_dir),
        "dictate": lambda: cmd_dictate(args),
        "worker": lambda: cmd_worker(args),
        "doctor": lambda: cmd_doctor(args),
    }
    handler = handlers.get(args.command)
    if handler is None:
        parser.print_help()
        return ExitCode.USAGE
    return handler()
