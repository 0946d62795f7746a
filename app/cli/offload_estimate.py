"""`scriba offload estimate`: what a job would cost and take on each cloud GPU and on this computer; nothing is
rented. The offload group itself is assembled in offload.py."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from app.cloud.pricing.estimate import (
    Assumptions,
    Job,
    estimate,
    ssh_offer,
    within_budget,
)
from app.cloud.pricing.prices import MeasuredSpeeds, Throughput
from app.cloud.pricing.report import format_estimate, format_spread
from app.core.engine.audio import media_seconds
from app.core.errors import ExitCode


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


def add_offload_estimate_parser(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    from app.core.engine.models import CATALOG

    parser = actions.add_parser(
        "estimate",
        help="what a job would cost and take on each cloud GPU and on this computer",
        description="Estimate time and cost of transcribing FILEs on every GPU in Scriba's price table "
        "(and on this computer), cheapest first. Nothing is rented.",
    )
    parser.add_argument("inputs", nargs="+", metavar="FILE", type=Path, help="audio or video files")
    parser.add_argument(
        "--model",
        default=None,
        choices=list(CATALOG),
        help="Whisper model (default: the one a job would use: the model chosen in Settings, else the best on disk)",
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
    parser.add_argument(
        "--gpus",
        default=None,
        metavar="N[,N…]",
        help="also spread the cheapest rows over N machines at once (e.g. 2,4,8): a fleet's time and cost",
    )
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")
    return parser


def job_model(option: str | None) -> tuple[str, str]:
    """The catalog model a job started now would run, as the window and `queue add` choose it (--model, else the
    model in Settings, else the best model on disk), and why, in words."""
    from app.core.config.settings import SettingsStore
    from app.core.engine.models import CATALOG, default_model
    from app.core.paths import config_dir

    if option is not None:
        return option, "the model given with --model"
    chosen = SettingsStore(config_dir()).load().job.model
    best = default_model().name
    if chosen in CATALOG:
        return chosen, "the model chosen in Settings (--model estimates another)"
    if chosen:
        # A model folder of the user's own: the price table has speeds for catalog models only.
        return best, f"Settings names a model folder ({chosen}) with no speed figures; the best model on disk instead"
    return best, "the best model on disk, which jobs use while Settings names none (--model estimates another)"


def cmd_offload_estimate(args: argparse.Namespace, stdout: TextIO | None = None) -> int:
    from app.core.engine.models import BUNDLED_MODEL, cached_model_path, is_model_dir
    from app.core.errors import MediaError

    out = stdout or sys.stdout
    counts: list[int] = []
    if args.gpus:
        try:
            counts = [int(part) for part in str(args.gpus).split(",")]
        except ValueError:
            counts = [0]
        if any(count < 1 for count in counts):
            print(f"scriba: error: --gpus {args.gpus}: give machine counts of 1 or more, e.g. 2,4,8", file=sys.stderr)
            return ExitCode.USAGE
    inputs: Sequence[Path] = args.inputs
    total_seconds = 0.0
    total_bytes = 0
    for path in inputs:
        try:
            total_seconds += media_seconds(path)
        except MediaError as error:
            print(f"scriba: error: {error}", file=sys.stderr)
            return ExitCode.USAGE
        total_bytes += path.stat().st_size

    extra = []
    if args.ssh_gpu:
        vram = args.ssh_vram
        if vram is None:
            gpu_class = Throughput().gpu_class(args.ssh_gpu)
            if gpu_class is None:
                print(
                    f"scriba: error: GPU '{args.ssh_gpu}' is not in the throughput table; "
                    "give its memory with --ssh-vram",
                    file=sys.stderr,
                )
                return ExitCode.USAGE
            vram = gpu_class.vram_gb
        extra.append(ssh_offer(args.ssh_gpu, vram, args.ssh_usd_per_hour))

    model, chosen_by = job_model(args.model)
    model_on_disk = model == BUNDLED_MODEL or is_model_dir(cached_model_path(model))
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
        audio_seconds=total_seconds, model=model, diarize=args.diarize, upload_bytes=total_bytes, files=len(inputs)
    )
    measured = MeasuredSpeeds()
    measured.records()  # a damaged file or an implausible record is set aside now, and said once
    for warning in measured.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    result = estimate(job, assumptions=assumptions, extra_offers=extra, throughput=Throughput(measured=measured))
    assumed = f"estimated for {model}: {chosen_by}"
    if args.json:
        payload = result.to_dict()
        payload["notes"].insert(0, assumed)
        if args.budget is not None:
            for option, row in zip(result.options, payload["options"], strict=True):
                row["within_budget"] = within_budget(option, args.budget)
        json.dump(payload, out, indent=2)
        out.write("\n")
    else:
        out.write(f"{assumed}\n" + format_estimate(result, args.budget) + "\n")
        if counts:
            out.write("\nspread over several machines:\n" + format_spread(result, counts) + "\n")
    return ExitCode.OK
