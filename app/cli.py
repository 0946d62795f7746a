"""The `scriba` command: no argument opens the window; sub-commands work headless."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from app import __version__

log = logging.getLogger("scriba")


def _formats(value: str) -> tuple[str, ...]:
    from app.core.export import FORMATS

    chosen = tuple(dict.fromkeys(part.strip().lower() for part in value.split(",") if part.strip()))
    unknown = [fmt for fmt in chosen if fmt not in FORMATS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"unknown format {', '.join(unknown) or value!r}: choose from {','.join(FORMATS)}"
        )
    return chosen


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scriba", description="Transcribe and diarize audio and video, locally.")
    parser.add_argument("--version", action="version", version=f"scriba {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the engine decides")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    transcribe = commands.add_parser("transcribe", help="transcribe (and diarize) files")
    transcribe.add_argument("inputs", nargs="+", metavar="INPUT", type=Path, help="audio or video files")
    transcribe.add_argument("-o", "--output-dir", type=Path, default=Path("."), help="where to write (default: .)")
    transcribe.add_argument(
        "-f",
        "--formats",
        type=_formats,
        default=("txt", "srt", "vtt", "json"),
        help="comma-separated: txt,srt,vtt,json (default: all)",
    )
    transcribe.add_argument(
        "--model", default=None, help="catalog name or CTranslate2 directory (default: best on disk)"
    )
    transcribe.add_argument("--language", default=None, help="language code, e.g. en; default: detect")
    transcribe.add_argument(
        "--diarize", action=argparse.BooleanOptionalAction, default=True, help="label speakers (default: on)"
    )
    transcribe.add_argument(
        "--diarizer",
        choices=("auto", "pyannote", "embedded"),
        default="auto",
        help="diarization backend (default: pyannote with a token, else the built-in one)",
    )
    transcribe.add_argument(
        "--pyannote-pipeline", default=None, help="hub id or local directory of a pyannote pipeline"
    )
    transcribe.add_argument("--num-speakers", type=_positive, default=None)
    transcribe.add_argument("--min-speakers", type=_positive, default=None)
    transcribe.add_argument("--max-speakers", type=_positive, default=None)
    transcribe.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    transcribe.add_argument("--compute-type", default="auto", help="auto, int8, int8_float16, float16, float32 …")
    transcribe.add_argument("--batch-size", type=int, default=0, help="batched decoding with this batch size (0: off)")
    transcribe.add_argument("--beam-size", type=_positive, default=5)
    transcribe.add_argument("--threads", type=int, default=0, help="CPU threads (default: all cores)")
    transcribe.add_argument("--no-vad", dest="vad", action="store_false", help="decode silence too")
    transcribe.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    models = commands.add_parser("models", help="list, download or remove Whisper models")
    model_commands = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    model_commands.add_parser("list", help="the catalog and what is on disk")
    download = model_commands.add_parser("download", help="download a catalog model")
    download.add_argument("name")
    remove = model_commands.add_parser("remove", help="delete a downloaded model")
    remove.add_argument("name")

    token = commands.add_parser("token", help="the Hugging Face token for pyannote (kept in the system keyring)")
    token_commands = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    token_commands.add_parser("set", help="store a token (read from standard input, never echoed)")
    token_commands.add_parser("clear", help="delete the stored token")
    token_commands.add_parser("status", help="say whether a token is available and from where")
    return parser


class ProgressBar:
    """One line per file on a terminal; nothing but the final line when output is piped."""

    def __init__(self, name: str, stream: TextIO, enabled: bool) -> None:
        self.name = name
        self.stream = stream
        self.enabled = enabled and stream.isatty()
        self.started = time.perf_counter()
        self._last = 0.0

    def update(self, progress: object) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        fraction = float(getattr(progress, "fraction", 0.0))
        if now - self._last < 0.1 and fraction < 1.0:
            return
        self._last = now
        width = 30
        filled = int(width * fraction)
        stage = getattr(progress, "stage", "")
        self.stream.write(f"\r{self.name[:40]:40} [{'#' * filled}{'.' * (width - filled)}] {fraction:4.0%} {stage:10}")
        self.stream.flush()

    def finish(self, message: str) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * 100 + "\r")
        self.stream.write(message + "\n")
        self.stream.flush()


def cmd_transcribe(args: argparse.Namespace) -> int:
    from app.core.cancel import CancelToken
    from app.core.diarize import DiarizerOptions, SpeakerHints
    from app.core.diarize.pyannote_backend import PYANNOTE_PIPELINE
    from app.core.errors import ScribaError
    from app.core.export import export
    from app.core.pipeline import Engine, PipelineOptions
    from app.core.secrets import huggingface_token
    from app.core.transcribe import TranscriptionOptions, resolve_device

    try:
        hints = SpeakerHints(args.num_speakers, args.min_speakers, args.max_speakers)
        device = resolve_device(args.device)
    except (ValueError, ScribaError) as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return 2
    token, _ = huggingface_token() if args.diarize and args.diarizer != "embedded" else (None, "")
    options = PipelineOptions(
        transcription=TranscriptionOptions(
            model=args.model,
            device=device,  # type: ignore[arg-type]
            compute_type=args.compute_type,
            language=args.language,
            beam_size=args.beam_size,
            vad_filter=args.vad,
            batch_size=max(0, args.batch_size),
            cpu_threads=max(0, args.threads),
        ),
        diarize=args.diarize,
        diarizer=DiarizerOptions(
            backend=args.diarizer,
            hints=hints,
            pyannote_source=args.pyannote_pipeline or PYANNOTE_PIPELINE,
            hf_token=token,
            device=device,
        ),
    )
    engine = Engine()
    cancel = CancelToken()
    failures = 0
    used_stems: dict[str, Path] = {}
    for source in args.inputs:
        stem = source.stem
        if stem in used_stems:
            # Two inputs with one name (a/talk.mp3, b/talk.wav) must not overwrite each other's transcript.
            number = 2
            while f"{stem}-{number}" in used_stems:
                number += 1
            print(f"note: {source} has the same name as {used_stems[stem]}; writing {stem}-{number}.*", file=sys.stderr)
            stem = f"{stem}-{number}"
        used_stems[stem] = source
        bar = ProgressBar(source.name, sys.stderr, not args.quiet)
        try:
            transcript = engine.run(source, options, progress=bar.update, cancel=cancel)
            written = export(transcript, args.output_dir, stem, args.formats)
        except KeyboardInterrupt:
            cancel.cancel()
            bar.finish(f"cancelled: {source}")
            return 130
        except ScribaError as error:
            failures += 1
            bar.finish(f"error: {error}")
            continue
        except Exception as error:  # an unexpected failure on one file must not stop the others
            failures += 1
            log.debug("unexpected failure", exc_info=True)
            bar.finish(f"error: {source}: {type(error).__name__}: {error}")
            continue
        speed = transcript.duration / max(transcript.timings.get("total", 0.0), 1e-9)
        who = ""
        if transcript.diarization is not None:
            who = f", {len(transcript.speakers)} speaker(s) ({transcript.diarization.reason})"
        bar.finish(
            f"done: {source} -> {', '.join(str(path) for path in written)} "
            f"[{transcript.duration:.1f} s audio, {speed:.1f}x real time, {transcript.model} on "
            f"{transcript.device}/{transcript.compute_type}{who}]"
        )
    if failures:
        print(f"{failures} of {len(args.inputs)} file(s) failed", file=sys.stderr)
    return 1 if failures else 0


def cmd_models(args: argparse.Namespace) -> int:
    from app.core.errors import ModelError
    from app.core.models import CATALOG, default_model, download_model, installed_models, remove_model

    try:
        if args.models_command == "list":
            on_disk = {model.name: model for model in installed_models()}
            chosen = default_model().name
            print(f"{'model':18} {'size':>8} {'VRAM':>6}  status")
            for name, entry in CATALOG.items():
                model = on_disk.get(name)
                status = f"{model.origin}: {model.path}" if model else "not downloaded"
                if name == chosen:
                    status += "  (default)"
                print(f"{name:18} {entry.size_mb:>5} MB {entry.vram_gb:>4.0f} GB  {status}")
            return 0
        if args.models_command == "download":
            entry = CATALOG.get(args.name)
            if entry is not None:
                print(f"downloading {args.name} ({entry.size_mb} MB) …", file=sys.stderr)
            model = download_model(args.name)
            print(f"{model.name}: {model.path}")
            return 0
        if args.models_command == "remove":
            print(f"removed {remove_model(args.name)}")
            return 0
    except ModelError as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return 1
    return 2


def cmd_token(args: argparse.Namespace) -> int:
    from app.core.secrets import HF_TOKEN_KEY, huggingface_token, set_secret

    if args.token_command == "status":
        token, origin = huggingface_token()
        if token:
            print(f"a Hugging Face token is available (from {origin}); pyannote diarization will be used")
        else:
            print("no Hugging Face token: the built-in diarizer is used. `scriba token set` stores one.")
        return 0
    try:
        if args.token_command == "set":
            if sys.stdin.isatty():
                import getpass

                value = getpass.getpass("Hugging Face token (input hidden): ").strip()
            else:
                value = sys.stdin.readline().strip()
            if not value:
                print("scriba: error: empty token; nothing stored", file=sys.stderr)
                return 1
            set_secret(HF_TOKEN_KEY, value)
            print("token stored in the system keyring")
        else:
            set_secret(HF_TOKEN_KEY, None)
            print("token removed from the system keyring")
    except Exception as error:
        print(
            f"scriba: error: the system keyring is not usable ({type(error).__name__}: {error}). "
            "Set SCRIBA_HF_TOKEN in the environment instead.",
            file=sys.stderr,
        )
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if args.command == "transcribe":
        return cmd_transcribe(args)
    if args.command == "models":
        return cmd_models(args)
    if args.command == "token":
        return cmd_token(args)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
