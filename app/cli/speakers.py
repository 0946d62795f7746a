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
        encoder = _remake_earlier(library)
        if args.speakers_command == "enroll":
            code = _enroll(library, args, encoder)
        elif args.speakers_command == "list":
            code = _list(library, args.json)
        elif args.speakers_command == "rename":
            library.rename(args.old, args.new)
            print(f"renamed {args.old} to {args.new}")
            code = ExitCode.OK
        elif args.speakers_command == "merge":
            merged = library.merge(args.names, args.into)
            print(f"{', '.join(args.names)} -> {merged.name} ({len(merged.samples)} samples)")
            code = ExitCode.OK
        elif args.speakers_command == "forget":
            library.forget(args.name)
            print(f"forgot {args.name}")
            code = ExitCode.OK
        else:
            return ExitCode.USAGE
    except (ScribaError, OSError) as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return ExitCode.FAILED
    for name, why in library.waiting().items():
        print(f"note: '{name}' cannot be named: {why}", file=sys.stderr)
    return code


def _remake_earlier(library: Any) -> Any:
    """Voiceprints of an earlier encoder made again from their recordings, before anything else (the encoder,
    loaded for that, is kept for an enrollment); None when there were none to make."""
    if not library.remakeable():
        return None
    from app.core.engine.diarize.encoder import SpeakerEncoder
    from app.core.engine.speakers import reenroll_earlier
    from app.core.errors import ScribaError

    try:
        encoder = SpeakerEncoder()
        remade = reenroll_earlier(library, encoder)
    except ScribaError as error:  # the library's other voices stay usable: the action goes on
        print(f"note: voiceprints of an earlier voice encoder not made again: {error}", file=sys.stderr)
        return None
    if remade.names:
        print(
            f"note: {', '.join(remade.names)}: voiceprints made again with the current voice encoder from the "
            "recordings they were enrolled from",
            file=sys.stderr,
        )
    return encoder


def _enroll(library: Any, args: argparse.Namespace, encoder: Any) -> int:
    from app.core.engine.audio import decode_audio
    from app.core.engine.diarize.encoder import SpeakerEncoder
    from app.core.engine.speakers import RECOMMENDED_SPEECH_S, check_name, enroll

    check_name(args.name)  # a bad name fails before seconds of decoding
    audio = decode_audio(args.audio)
    known = enroll(library, args.name, encoder or SpeakerEncoder(), audio, args.start, args.end)
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
    waiting = library.waiting()  # names whose voiceprints an earlier encoder made: one new sample each
    if as_json:
        entries = [
            {
                "name": speaker.name,
                "samples": len(speaker.samples),
                "seconds": round(speaker.seconds, 2),
                "sources": [sample.source for sample in speaker.samples],
                "cannot_be_named": None,
            }
            for speaker in known
        ]
        entries += [
            {"name": name, "samples": 0, "seconds": 0.0, "sources": [], "cannot_be_named": why}
            for name, why in waiting.items()
        ]
        print(
            json.dumps(sorted(entries, key=lambda entry: str(entry["name"]).casefold()), indent=1, ensure_ascii=False)
        )
        return ExitCode.OK
    if not known and not waiting:
        print("no speakers enrolled (`scriba speakers enroll NAME AUDIO --start S --end E`)")
        return ExitCode.OK
    width = max(len(name) for name in [*(speaker.name for speaker in known), *waiting])
    rows = [(speaker.name, f"{len(speaker.samples):>7}  {speaker.seconds:>5.1f} s") for speaker in known]
    rows += [(name, f"{0:>7}  {'-':>5}    needs one new sample (below)") for name in waiting]
    print(f"{'name':{width}}  samples  speech")
    for name, columns in sorted(rows, key=lambda row: row[0].casefold()):
        print(f"{name:{width}}  {columns}")
    return ExitCode.OK
