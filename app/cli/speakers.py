"""`scriba speakers …`: the known-speaker library (enroll, list, rename, merge, forget)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from app.core.errors import ExitCode


def add_speakers_parser(commands: Any) -> None:
    speakers = commands.add_parser("speakers", help="known speakers: voices Scriba names in every transcript")
    actions = speakers.add_subparsers(dest="speakers_command", metavar="ACTION", required=True)
    enroll = actions.add_parser("enroll", help="remember a voice from a stretch where that person speaks alone")
    enroll.add_argument("name")
    enroll.add_argument("audio", type=Path, metavar="AUDIO")
    enroll.add_argument("--start", type=float, default=0.0, metavar="S", help="stretch start in seconds")
    enroll.add_argument("--end", type=float, default=None, metavar="E", help="stretch end (default: the end)")
    listing = actions.add_parser("list", help="the enrolled speakers")
    listing.add_argument("--json", action="store_true", help="one JSON array (name, samples, seconds, sources)")
    rename = actions.add_parser("rename", help="rename an enrolled speaker")
    rename.add_argument("old")
    rename.add_argument("new")
    merge = actions.add_parser("merge", help="two or more names that are one person become one name")
    merge.add_argument("names", nargs="+", metavar="NAME")
    merge.add_argument("--into", required=True, metavar="NAME", help="the name they keep")
    forget = actions.add_parser("forget", help="delete a speaker's voiceprints")
    forget.add_argument("name")


def cmd_speakers(args: argparse.Namespace, data_dir: Path) -> int:
    from app.core.engine.speakers import SpeakerLibrary
    from app.core.errors import ScribaError

    try:
        library = SpeakerLibrary.load(data_dir)
        if args.speakers_command == "enroll":
            return _enroll(library, args)
        if args.speakers_command == "list":
            return _list(library, args.json)
        if args.speakers_command == "rename":
            library.rename(args.old, args.new)
            print(f"renamed {args.old} to {args.new}")
            return ExitCode.OK
        if args.speakers_command == "merge":
            merged = library.merge(args.names, args.into)
            print(f"{', '.join(args.names)} -> {merged.name} ({len(merged.samples)} samples)")
            return ExitCode.OK
        if args.speakers_command == "forget":
            library.forget(args.name)
            print(f"forgot {args.name}")
            return ExitCode.OK
    except (ScribaError, OSError) as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return ExitCode.FAILED
    return ExitCode.USAGE


def _enroll(library: Any, args: argparse.Namespace) -> int:
    from app.core.engine.audio import decode_audio
    from app.core.engine.diarize.encoder import SpeakerEncoder
    from app.core.engine.speakers import RECOMMENDED_SPEECH_S, check_name, enroll

    check_name(args.name)  # a bad name fails before seconds of decoding
    audio = decode_audio(args.audio)
    known = enroll(library, args.name, SpeakerEncoder(), audio, args.start, args.end)
    sample = known.samples[-1]
    print(
        f"enrolled {known.name} from {sample.seconds:.1f} s of speech "
        f"({len(known.samples)} sample(s), {known.seconds:.1f} s in all)"
    )
    if known.seconds < RECOMMENDED_SPEECH_S:
        print(
            f"note: {known.name} is recognised more reliably with at least {RECOMMENDED_SPEECH_S:.0f} s of speech; "
            "enroll another stretch to add to it",
            file=sys.stderr,
        )
    return ExitCode.OK


def _list(library: Any, as_json: bool) -> int:
    known = library.known()
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "name": speaker.name,
                        "samples": len(speaker.samples),
                        "seconds": round(speaker.seconds, 2),
                        "sources": [sample.source for sample in speaker.samples],
                    }
                    for speaker in known
                ],
                indent=1,
                ensure_ascii=False,
            )
        )
        return ExitCode.OK
    if not known:
        print("no speakers enrolled (`scriba speakers enroll NAME AUDIO --start S --end E`)")
        return ExitCode.OK
    width = max(len(speaker.name) for speaker in known)
    print(f"{'name':{width}}  samples  speech")
    for speaker in known:
        print(f"{speaker.name:{width}}  {len(speaker.samples):>7}  {speaker.seconds:>5.1f} s")
    return ExitCode.OK
