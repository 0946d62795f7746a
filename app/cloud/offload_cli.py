"""`scriba offload …`: the argparse wiring and command functions for sending work to a rented GPU.

``offload`` is a sub-command group: :func:`add_offload_parser` creates it and registers ``estimate``;
another sub-command (``run``) registers itself into the group it returns with its own ``add_…_parser``
function and ``set_defaults(offload_handler=…)``. :func:`cmd_offload` dispatches to whichever was chosen.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from app.cloud.estimate import (
    Assumptions,
    Estimate,
    Job,
    Option,
    estimate,
    price_date_text,
    ssh_offer,
    within_budget,
)

Handler = Callable[[argparse.Namespace], int]

DEFAULT_MODEL = "large-v3"


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def add_offload_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """Create the ``offload`` group under ``commands`` and register ``estimate`` in it.

    Returns the group's sub-parser collection, so further sub-commands (``run``) can be added to it.
    """
    offload = commands.add_parser("offload", help="estimate (and run) transcription on a rented GPU")
    actions = offload.add_subparsers(dest="offload_command", metavar="ACTION", required=True)
    add_offload_estimate_parser(actions)
    return actions


def add_offload_estimate_parser(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    from app.core.models import CATALOG

    parser = actions.add_parser(
        "estimate",
        help="what a job would cost and take on each cloud GPU and on this computer",
        description="Estimate time and cost of transcribing FILEs on every GPU in Scriba's price table "
        "(and on this computer), cheapest first. Nothing is rented.",
    )
    parser.add_argument("inputs", nargs="+", metavar="FILE", type=Path, help="audio or video files")
    parser.add_argument(
        "--model", default=DEFAULT_MODEL, choices=list(CATALOG), help=f"Whisper model (default: {DEFAULT_MODEL})"
    )
    parser.add_argument(
        "--diarize", action=argparse.BooleanOptionalAction, default=True, help="label speakers (default: on)"
    )
    parser.add_argument(
        "--upload-mbps",
        type=_positive_float,
        default=Assumptions.upload_mbps,
        metavar="X",
        help=f"your upload speed in Mbit/s (default: {Assumptions.upload_mbps:g})",
    )
    parser.add_argument(
        "--setup-minutes",
        type=_non_negative_float,
        default=Assumptions.setup_seconds / 60,
        metavar="M",
        help=f"installing Scriba on a fresh machine (default: {Assumptions.setup_seconds / 60:g})",
    )
    parser.add_argument(
        "--provider-mbps",
        type=_positive_float,
        default=Assumptions.provider_download_mbps,
        metavar="X",
        help=f"a rented machine's download speed for the model (default: {Assumptions.provider_download_mbps:g})",
    )
    parser.add_argument("--spot", action="store_true", help="use spot prices where the table has them")
    parser.add_argument("--budget", type=_positive_float, default=None, metavar="USD", help="mark options over it")
    parser.add_argument("--local-gpu", default=None, metavar="NAME", help="this computer's GPU (default: its CPU)")
    parser.add_argument("--no-local", action="store_true", help="leave this computer out")
    parser.add_argument("--ssh-gpu", default=None, metavar="NAME", help="add your own SSH host with this GPU")
    parser.add_argument("--ssh-vram", type=_positive_float, default=None, metavar="GB", help="its GPU memory")
    parser.add_argument(
        "--ssh-usd-per-hour", type=_non_negative_float, default=0.0, metavar="USD", help="its cost (default: 0)"
    )
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")
    parser.set_defaults(offload_handler=cmd_offload_estimate)
    return parser


def cmd_offload(args: argparse.Namespace) -> int:
    """Run whichever ``offload`` sub-command was chosen."""
    handler: Handler | None = getattr(args, "offload_handler", None)
    if handler is None:
        print("scriba: error: choose an offload action, e.g. `scriba offload estimate FILE`", file=sys.stderr)
        return 2
    return handler(args)


# ------------------------------------------------------------------------------------------------------------
# Reading the inputs
# ------------------------------------------------------------------------------------------------------------


def media_seconds(path: Path) -> float:
    """The duration of a media file without decoding it; raises a MediaError naming the file otherwise."""
    import av

    from app.core.audio import probe_duration
    from app.core.errors import (
        EmptyMediaFileError,
        MediaFileMissingError,
        NoAudioStreamError,
        NotAMediaFileError,
        ZeroLengthAudioError,
    )

    if not path.exists():
        raise MediaFileMissingError(path)
    if path.is_dir():
        raise NotAMediaFileError(path, "it is a folder")
    if path.stat().st_size == 0:
        raise EmptyMediaFileError(path)
    seconds = probe_duration(path)
    if seconds is not None and seconds > 0:
        return seconds
    # The header gave no duration (or the file is not media at all): walk the packets, which costs a read of
    # the file but no decoding, and tells a real but header-less stream from something that is not audio.
    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            if not container.streams.audio:
                raise NoAudioStreamError(path)
            stream = container.streams.audio[0]
            total = 0.0
            for packet in container.demux(stream):
                if packet.duration is not None and packet.time_base is not None:
                    total += float(packet.duration * packet.time_base)
    except av.FFmpegError as error:
        raise NotAMediaFileError(path, str(getattr(error, "strerror", None) or error).strip()) from error
    if total <= 0:
        raise ZeroLengthAudioError(path)
    return total


# ------------------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------------------


def format_duration(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


def _size(size_bytes: float) -> str:
    return f"{size_bytes / 1_000_000:.1f} MB" if size_bytes < 1e9 else f"{size_bytes / 1e9:.2f} GB"


def _marks(option: Option, budget: float | None) -> str:
    marks = []
    if option.cheapest:
        marks.append("cheapest")
    if option.fastest:
        marks.append("fastest")
    if budget is not None and not within_budget(option, budget):
        marks.append("over budget")
    return ", ".join(marks)


def format_estimate(result: Estimate, budget: float | None = None) -> str:
    """A table sorted by cost, the fastest and cheapest marked, the price date per row, then the rest."""
    job = result.job
    lines = [
        f"{job.files} file(s), {format_duration(job.audio_seconds)} of audio ({_size(result.upload_bytes)} to upload), "
        f"model {job.model}, diarization {'on' if job.diarize else 'off'}",
        "",
    ]
    headers = ["", "provider", "offer", "GPU", "VRAM", "$/h", "time", "cost", "audio h/$", "price date", "launch"]
    rows: list[list[str]] = []
    for option in result.options:
        offer = option.offer
        per_usd = option.audio_hours_per_usd
        marks = _marks(option, budget)
        rows.append(
            [
                "*" if option.cheapest or option.fastest else "",
                offer.provider,
                offer.offer if len(offer.offer) <= 24 else offer.offer[:23] + "…",
                offer.gpu if offer.gpu_count == 1 else f"{offer.gpu_count}x {offer.gpu}",
                f"{offer.vram_gb:g} GB" if offer.vram_gb else "-",
                f"{option.usd_per_hour:.3f}" + (" spot" if option.spot else ""),
                format_duration(option.est_seconds),
                f"${option.est_cost_usd:.2f}",
                "-" if per_usd is None else f"{per_usd:.1f}",
                price_date_text(offer),
                ("yes" if offer.launchable else "no") + (f"  <- {marks}" if marks else ""),
            ]
        )
    widths = [max(len(row[index]) for row in [headers, *rows]) for index in range(len(headers))]
    for row in [headers, *rows]:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    lines.append("")
    lines.append(
        "time = boot + set-up + model download + upload + transcription"
        + (" + diarization" if job.diarize else "")
        + " + download; cost = that time at the provider's billing granularity. launch: Scriba can rent it."
    )
    fastest, cheapest = result.fastest, result.cheapest
    if cheapest is not None:
        lines.append(f"cheapest: {_describe(cheapest)}")
    if fastest is not None:
        lines.append(f"fastest:  {_describe(fastest)}")
    if result.excluded:
        lines.append("")
        lines.append("left out:")
        for excluded in result.excluded:
            lines.append(
                f"  {excluded.offer.provider} {excluded.offer.offer} ({excluded.offer.gpu}): {excluded.reason}"
            )
    if result.notes:
        lines.append("")
        lines.append("notes:")
        lines.extend(f"  {note}" for note in result.notes)
    return "\n".join(lines)


def _describe(option: Option) -> str:
    parts = option.breakdown
    speed = f"{option.transcribe_speed.x_realtime:.1f}x real time ({option.transcribe_speed.kind})"
    return (
        f"{option.offer.provider} {option.offer.offer}, {format_duration(option.est_seconds)}, "
        f"${option.est_cost_usd:.2f}; transcription {speed}; boot {format_duration(parts.boot_s)}, "
        f"set-up {format_duration(parts.setup_s)}, upload {format_duration(parts.upload_s)}"
    )


# ------------------------------------------------------------------------------------------------------------
# The command
# ------------------------------------------------------------------------------------------------------------


def cmd_offload_estimate(args: argparse.Namespace, stdout: TextIO | None = None) -> int:
    from app.core.errors import MediaError
    from app.core.models import BUNDLED_MODEL, cached_model_path, is_model_dir

    out = stdout or sys.stdout
    inputs: Sequence[Path] = args.inputs
    total_seconds = 0.0
    total_bytes = 0
    for path in inputs:
        try:
            total_seconds += media_seconds(path)
        except MediaError as error:
            print(f"scriba: error: {error}", file=sys.stderr)
            return 2
        total_bytes += path.stat().st_size

    extra = []
    if args.ssh_gpu:
        vram = args.ssh_vram
        if vram is None:
            from app.cloud.prices import Throughput

            gpu_class = Throughput().gpu_class(args.ssh_gpu)
            if gpu_class is None:
                print(
                    f"scriba: error: GPU '{args.ssh_gpu}' is not in the throughput table; "
                    "give its memory with --ssh-vram",
                    file=sys.stderr,
                )
                return 2
            vram = gpu_class.vram_gb
        extra.append(ssh_offer(args.ssh_gpu, vram, args.ssh_usd_per_hour))

    model_on_disk = args.model == BUNDLED_MODEL or is_model_dir(cached_model_path(args.model))
    assumptions = Assumptions(
        upload_mbps=args.upload_mbps,
        provider_download_mbps=args.provider_mbps,
        setup_seconds=args.setup_minutes * 60,
        use_spot=args.spot,
        include_local=not args.no_local,
        local_gpu=args.local_gpu,
        local_model_on_disk=model_on_disk,
    )
    job = Job(
        audio_seconds=total_seconds, model=args.model, diarize=args.diarize, upload_bytes=total_bytes, files=len(inputs)
    )
    result = estimate(job, assumptions=assumptions, extra_offers=extra)
    if args.json:
        payload = result.to_dict()
        if args.budget is not None:
            for option, row in zip(result.options, payload["options"], strict=True):
                row["within_budget"] = within_budget(option, args.budget)
        json.dump(payload, out, indent=2)
        out.write("\n")
    else:
        out.write(format_estimate(result, args.budget) + "\n")
    return 0
