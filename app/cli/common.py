"""What the command groups share: the data folder, the job options and argument types."""

from __future__ import annotations

import argparse
import logging
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from app.core.transcript.formats import DEFAULT_FORMATS, FORMATS
from app.core.transcript.times import parse_time

if TYPE_CHECKING:
    from app.core.queue.jobs import JobOptions

log = logging.getLogger("scriba")


def formats(value: str) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(part.strip().lower() for part in value.split(",") if part.strip()))
    unknown = [fmt for fmt in chosen if fmt not in FORMATS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"unknown format {', '.join(unknown) or value!r}: choose from {','.join(FORMATS)}"
        )
    return chosen


def batch_size(text: str) -> int:
    """``auto`` (-1: sized from free GPU memory, sequential on CPU), 0 (sequential) or a batch size."""
    if text == "auto":
        return -1
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a batch size: give auto, 0 or a positive number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a batch size: give auto, 0 or a positive number")
    return value


# The most speakers a count can ask for: the built-in diarizer tells at most 20 voices apart
# (app/core/engine/diarize/embedded.py), and asked for more it made up speakers who say nothing (a two-person
# call asked for 1000 came back with 21).
MOST_SPEAKERS = 20


def positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number


def speaker_count(value: str) -> int:
    """A number of speakers the diarizer is asked to find (exactly or at least): 1 to MOST_SPEAKERS."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{value}' is not a number of speakers") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    if number > MOST_SPEAKERS:
        raise argparse.ArgumentTypeError(
            f"{number} speakers is more than Scriba can tell apart in one recording (at most {MOST_SPEAKERS}); "
            "leave the option out to let Scriba count them"
        )
    return number


def moment(text: str) -> float:
    """A time in the recording: ``90``, ``1:30``, ``1:02:03.5``."""
    try:
        seconds = parse_time(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if not math.isfinite(seconds):  # float() reads "nan" and "inf"
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a time: give seconds (90), M:SS (1:30) or H:MM:SS, a finite number of 0 or more"
        )
    return seconds


def language(text: str) -> str:
    """A language code Whisper knows (``en``, ``de`` …), refused at once otherwise: an unknown code used to reach
    the job and fail there as a mismatch with what the recording sounds like."""
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    code = text.strip().lower()
    if code not in _LANGUAGE_CODES:
        raise argparse.ArgumentTypeError(
            f"unknown language code '{text}': give a code such as en, de, fr or es, or leave the option out to "
            f"detect the language (known codes: {', '.join(sorted(_LANGUAGE_CODES))})"
        )
    return code


QUEUE_OUTPUT_HELP = "export here when done (default: keep in the queue)"


def add_job_options(
    parser: argparse.ArgumentParser, output_dir: Path | None = None, output_help: str = QUEUE_OUTPUT_HELP
) -> None:
    """The options of one job, declared once for `transcribe`, `queue add` and `offload run`; they differ only in
    where the transcript goes by default (``output_dir``: the current folder for `transcribe`, none - kept in the
    queue - for the others)."""
    parser.add_argument("--model", default=None, help="catalog name or CTranslate2 directory (default: best on disk)")
    parser.add_argument("--language", type=language, default=None, help="language code, e.g. en; default: detect")
    parser.add_argument(
        "--diarize", action=argparse.BooleanOptionalAction, default=True, help="label speakers (default: on)"
    )
    parser.add_argument(
        "--diarizer",
        choices=("auto", "pyannote", "embedded"),
        default="auto",
        help="diarization backend (default: pyannote once downloaded, else the built-in one)",
    )
    parser.add_argument(
        "--no-identify", dest="identify", action="store_false", help="do not name known speakers (`scriba speakers`)"
    )
    parser.add_argument("--num-speakers", type=speaker_count, default=None)
    parser.add_argument("--min-speakers", type=speaker_count, default=None)
    parser.add_argument("--max-speakers", type=positive, default=None)
    parser.add_argument("--prompt", default=None, help="names, jargon and spellings to expect, e.g. 'Scriba, Okafor'")
    parser.add_argument("--hotwords", default=None, help="words the model should favour")
    parser.add_argument(
        "--task",
        choices=("transcribe", "translate"),
        default="transcribe",
        help="translate: into English (multilingual models only)",
    )
    parser.add_argument("--start", type=moment, default=None, help="transcribe from here: seconds, M:SS or H:MM:SS")
    parser.add_argument("--end", type=moment, default=None, help="… to here (default: the end)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--compute-type", default="auto", help="auto, int8, int8_float16, float16, float32 …")
    parser.add_argument(
        "--batch-size",
        type=batch_size,
        default=-1,
        help="batched decoding with this batch size; 0: sequential; auto (default): from free GPU memory, "
        "sequential on CPU",
    )
    parser.add_argument(
        "-f",
        "--formats",
        type=formats,
        default=DEFAULT_FORMATS,
        help=f"comma-separated, from {','.join(FORMATS)} (qda: a .qda.txt for MAXQDA, ATLAS.ti, NVivo; "
        f"default: {','.join(DEFAULT_FORMATS)})",
    )
    parser.add_argument("-o", "--output-dir", type=Path, default=output_dir, help=output_help)


def job_options_from_args(args: argparse.Namespace) -> JobOptions:
    """The JobOptions of the options added by ``add_job_options``."""
    from app.core.queue.jobs import JobOptions

    return JobOptions(
        model=args.model,
        language=args.language,
        diarize=args.diarize,
        diarizer=args.diarizer,
        identify=args.identify,
        num_speakers=args.num_speakers,
        min_speakers=args.min_speakers,
        max_speakers=args.max_speakers,
        device=args.device,
        compute_type=args.compute_type,
        batch_size=args.batch_size,
        formats=args.formats,
        output_dir=str(args.output_dir.absolute()) if args.output_dir else None,
        prompt=args.prompt,
        hotwords=args.hotwords,
        task=args.task,
        start=args.start,
        end=args.end,
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
