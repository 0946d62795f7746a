"""What the command groups share: the data folder, the job options and argument types."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from app.core.queue.options import OPTION, OPTIONS, Choice, Flag, Formats, JobOptions, Moment

log = logging.getLogger("scriba")


T = TypeVar("T")


def argparse_type(parse: Callable[[str], T], name: str) -> Callable[[str], T]:
    """A kind's ``parse`` as an argparse type: the words of its ValueError become the error line."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    convert.__name__ = name
    return convert


formats = argparse_type(Formats().parse, "formats")
moment = argparse_type(Moment().parse, "moment")


def positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number


QUEUE_OUTPUT_HELP = OPTION["output_dir"].help


def add_job_options(
    parser: argparse.ArgumentParser, output_dir: Path | None = None, output_help: str = QUEUE_OUTPUT_HELP
) -> None:
    """The flags of the job options (app/core/queue/options.py) for `transcribe`, `queue add`, `watch` and
    `offload run`; they differ only in where the transcript goes by default (``output_dir``: the current folder
    for `transcribe`, none - kept in the queue - for the others)."""
    for option in OPTIONS:
        if not option.flags:
            continue
        settings: dict[str, Any] = {"dest": option.name, "default": option.default, "help": option.help}
        if option.name == "output_dir":
            settings.update(default=output_dir, help=output_help)
        if isinstance(option.kind, Flag):
            settings["action"] = argparse.BooleanOptionalAction  # --name and --no-name
        elif isinstance(option.kind, Choice):
            settings["choices"] = option.kind.values
        else:
            settings["type"] = argparse_type(option.kind.parse, option.name.replace("_", " "))
        parser.add_argument(*option.flags, **settings)


def job_options_from_args(args: argparse.Namespace) -> JobOptions:
    """The JobOptions of the flags added by ``add_job_options``."""
    return JobOptions(
        **{option.name: option.kind.from_cli(getattr(args, option.name)) for option in OPTIONS if option.flags}
    )


def resolve_data_dir(option: Path | None) -> Path:
    """--data-dir, else SCRIBA_DATA_DIR (portable installs, tests), else the platform's user data folder."""
    if option is not None:
        return option
    from_environment = os.environ.get("SCRIBA_DATA_DIR")
    if from_environment:
        return Path(from_environment)
    from app.core.paths import data_dir

    return data_dir()


def set_aside_text(path: Path) -> str:
    return (
        f"the queue database could not be read (damaged); it was moved to {path} (kept, not deleted) and a new, "
        "empty queue was started. Transcripts already made are still in the transcripts folder beside it."
    )
