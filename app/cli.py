"""The `scriba` command: no argument opens the window; sub-commands work headless."""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

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


def _batch_size(text: str) -> int:
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


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scriba", description="Transcribe and diarize audio and video, locally.")
    parser.add_argument("--version", action="version", version=f"scriba {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the engine decides")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="queue and transcripts folder (default: $SCRIBA_DATA_DIR, else the user data folder)",
    )
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
        help="diarization backend (default: pyannote once downloaded, else the built-in one)",
    )
    transcribe.add_argument(
        "--pyannote-pipeline",
        type=Path,
        default=None,
        help="a local pyannote pipeline folder (default: the downloaded one)",
    )
    transcribe.add_argument(
        "--no-identify", dest="identify", action="store_false", help="do not name known speakers (`scriba speakers`)"
    )
    transcribe.add_argument("--num-speakers", type=_positive, default=None)
    transcribe.add_argument("--min-speakers", type=_positive, default=None)
    transcribe.add_argument("--max-speakers", type=_positive, default=None)
    transcribe.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    transcribe.add_argument("--compute-type", default="auto", help="auto, int8, int8_float16, float16, float32 …")
    transcribe.add_argument(
        "--batch-size",
        type=_batch_size,
        default=-1,
        help="batched decoding with this batch size; 0: sequential; auto (default): from free GPU memory, "
        "sequential on CPU",
    )
    transcribe.add_argument("--beam-size", type=_positive, default=5)
    transcribe.add_argument("--threads", type=int, default=0, help="CPU threads (default: all cores)")
    transcribe.add_argument("--no-vad", dest="vad", action="store_false", help="decode silence too")
    transcribe.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    models = commands.add_parser("models", help="list, download or remove Whisper models and pyannote")
    model_commands = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    model_commands.add_parser("list", help="the catalog and what is on disk")
    download = model_commands.add_parser("download", help="download a catalog model, or pyannote")
    download.add_argument("name")
    remove = model_commands.add_parser("remove", help="delete a downloaded model")
    remove.add_argument("name")

    token = commands.add_parser("token", help="the Hugging Face token for pyannote (kept in the system keyring)")
    token_commands = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    token_commands.add_parser("set", help="store a token (read from standard input, never echoed)")
    token_commands.add_parser("clear", help="delete the stored token")
    token_commands.add_parser("status", help="say whether a token is available and from where")
    _add_queue_parser(commands)
    from app.speakers_cli import add_speakers_parser

    add_speakers_parser(commands)
    dictate = commands.add_parser("dictate", help="transcribe the microphone (or a file replayed) as you speak")
    dictate.add_argument("--list-devices", action="store_true", help="list the input devices and exit")
    dictate.add_argument("--device", default=None, help="input device: index or name (default: the system's)")
    dictate.add_argument("--model", default="tiny.en", help="catalog name or CTranslate2 directory (default: tiny.en)")
    dictate.add_argument("--language", default=None, help="language code; default: detect once (en for *.en)")
    dictate.add_argument("--compute-device", choices=("auto", "cpu", "cuda"), default="auto")
    dictate.add_argument("--jsonl", action="store_true", help="one JSON object per partial/final event")
    dictate.add_argument("--from-file", type=Path, default=None, metavar="F", help="replay a file instead")
    dictate.add_argument("--realtime", action="store_true", help="with --from-file: replay at the speed of speech")
    dictate.add_argument(
        "--save", type=Path, default=None, metavar="DIR", help="keep the audio (WAV) in DIR and the text as a job"
    )
    _add_offload_parser(commands)
    from app.cloud.run_cli import add_worker_parser

    add_worker_parser(commands)
    doctor = commands.add_parser("doctor", help="check the GPU, drivers and libraries; say what Scriba would use")
    doctor.add_argument("--json", action="store_true", help="the report as JSON (stable top-level keys)")
    doctor.add_argument("--no-smoke-test", action="store_true", help="do not run tiny.en on the selected device")
    return parser


def _add_offload_parser(commands: Any) -> None:
    from app.cloud.run_cli import add_run_parser

    offload = commands.add_parser("offload", help="estimate, then run jobs on a rented GPU or your own SSH host")
    actions = offload.add_subparsers(dest="offload_command", metavar="ACTION", required=True)
    add_run_parser(actions, _add_job_options)
    from app.cloud.offload_cli import add_offload_estimate_parser

    add_offload_estimate_parser(actions)
    from app.cloud.run_cli import add_sweep_and_key_parsers

    add_sweep_and_key_parsers(actions)


def _add_job_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, help="catalog name or CTranslate2 directory (default: best on disk)")
    parser.add_argument("--language", default=None, help="language code, e.g. en; default: detect")
    parser.add_argument("--diarize", action=argparse.BooleanOptionalAction, default=True, help="label speakers")
    parser.add_argument("--diarizer", choices=("auto", "pyannote", "embedded"), default="auto")
    parser.add_argument("--no-identify", dest="identify", action="store_false", help="do not name known speakers")
    parser.add_argument("--num-speakers", type=_positive, default=None)
    parser.add_argument("--min-speakers", type=_positive, default=None)
    parser.add_argument("--max-speakers", type=_positive, default=None)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--compute-type", default="auto")
    parser.add_argument("--batch-size", type=_batch_size, default=-1, help="N, 0 (sequential) or auto")
    parser.add_argument(
        "-f", "--formats", type=_formats, default=("txt", "srt", "vtt", "json"), help="formats to export when done"
    )
    parser.add_argument(
        "-o", "--output-dir", type=Path, default=None, help="export here when done (default: keep in the queue)"
    )


def _add_queue_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    queue = commands.add_parser("queue", help="the persistent job queue shared with the window")
    actions = queue.add_subparsers(dest="queue_command", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="queue files (folders: every media file inside)")
    add.add_argument("inputs", nargs="+", metavar="FILE", type=Path)
    _add_job_options(add)
    listing = actions.add_parser("list", help="show the queue")
    listing.add_argument("--json", action="store_true", help="one JSON array (id, source, state, progress, …)")
    run = actions.add_parser("run", help="run queued jobs, one at a time")
    run.add_argument("--until-empty", action="store_true", help="stop when nothing is queued (default: keep waiting)")
    for name, text in (
        ("cancel", "cancel a queued or running job"),
        ("retry", "queue a failed, cancelled or finished job again"),
        ("remove", "forget a job that is not running"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("job_id", type=int, metavar="ID")
    move = actions.add_parser("move", help="move a job up (negative) or down (positive) in the queue")
    move.add_argument("job_id", type=int, metavar="ID")
    move.add_argument("offset", type=int)
    export = actions.add_parser("export", help="write a finished job's transcript")
    export.add_argument("job_id", type=int, metavar="ID")
    export.add_argument("-f", "--formats", type=_formats, default=("txt", "srt", "vtt", "json"))
    export.add_argument("-o", "--output-dir", type=Path, default=Path("."))


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
    from app.core.errors import ScribaError
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
            batch_size=args.batch_size,
            cpu_threads=max(0, args.threads),
        ),
        diarize=args.diarize,
        diarizer=DiarizerOptions(
            backend=args.diarizer,
            hints=hints,
            # What the user typed, made absolute here: the engine loads pipelines only from absolute paths.
            pyannote_source=str(args.pyannote_pipeline.expanduser().absolute()) if args.pyannote_pipeline else None,
            hf_token=token,
            device=device,
        ),
        identify=args.identify,
        speaker_library=str(resolve_data_dir(args.data_dir)),
    )
    engine = Engine()
    cancel = CancelToken()
    failures = 0
    used_stems: dict[str, Path] = {}
    record = _export_record(args.data_dir)
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
        written, problems = _save_transcript(transcript, args, stem, record)
        speed = transcript.duration / max(transcript.timings.get("total", 0.0), 1e-9)
        who = ""
        if transcript.diarization is not None:
            who = f", {len(transcript.speakers)} speaker(s) ({transcript.diarization.reason})"
        bar.finish(
            f"done: {source} -> {', '.join(str(path) for path in written)} "
            f"[{transcript.duration:.1f} s audio, {speed:.1f}x real time, {transcript.model} on "
            f"{transcript.device}/{transcript.compute_type}{who}]"
        )
        for warning in transcript.warnings:
            print(f"warning: {source}: {warning}", file=sys.stderr)
        for problem in problems:
            print(problem, file=sys.stderr)
        if any(problem.startswith("error:") for problem in problems):
            failures += 1
    if failures:
        print(f"{failures} of {len(args.inputs)} file(s) failed", file=sys.stderr)
    return 1 if failures else 0


def _export_record(data_dir: Path | None) -> Any:
    """The queue database, which remembers the files Scriba wrote (so that an edited one is never replaced);
    None when it cannot be opened: then no existing file is replaced."""
    from app.core.jobs import JobStore

    try:
        store = JobStore(resolve_data_dir(data_dir), recover=False)
    except Exception as error:
        log.info("export record not available: %s", error)
        return None
    if store.set_aside is not None:
        print(f"note: {_set_aside_text(store.set_aside)}", file=sys.stderr)
    return store


def _save_transcript(transcript: Any, args: argparse.Namespace, stem: str, record: Any) -> tuple[list[Path], list[str]]:
    """Export every format to -o; a format that cannot be written there goes to the data folder instead, so a
    finished transcript is never thrown away. Returns the files written and the lines to tell the user."""
    from app.core.export import describe_write_error, export_each, unchanged_since_written

    may_replace = unchanged_since_written(record)
    result = export_each(transcript, args.output_dir, stem, args.formats, may_replace=may_replace, record=record)
    written = list(result.written)
    problems: list[str] = []
    if result.renamed:
        problems.append(
            f"note: {result.requested_stem}.* in {args.output_dir} were not written by Scriba as they are now "
            f"(edited by hand?): kept them, wrote {result.stem}.* instead"
        )
    if result.failures:
        reasons = "; ".join(f"{fmt}: {describe_write_error(error)}" for fmt, error in result.failures.items())
        fallback = resolve_data_dir(args.data_dir) / "unsaved-exports"
        kept = export_each(transcript, fallback, stem, tuple(result.failures), may_replace=may_replace, record=record)
        written += kept.written
        if kept.written:
            where = f"; the transcript was kept in {', '.join(str(path) for path in kept.written)}"
        else:
            where = f"; it could not be kept in {fallback} either ({kept.summary()})"
        problems.append(f"error: could not write to {args.output_dir} ({reasons}){where}")
    return written, problems


def _set_aside_text(path: Path) -> str:
    return (
        f"the queue database could not be read (damaged); it was moved to {path} (kept, not deleted) and a new, "
        "empty queue was started. Transcripts already made are still in the transcripts folder beside it."
    )


def cmd_models(args: argparse.Namespace) -> int:
    from app.core.errors import ModelError
    from app.core.models import CATALOG, default_model, download_model, installed_models, remove_model

    if getattr(args, "name", None) == "pyannote":
        from app import pyannote_cli

        return pyannote_cli.download() if args.models_command == "download" else pyannote_cli.remove()
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
            from app.pyannote_cli import list_line

            print(list_line())
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
            print(f"a Hugging Face token is available (from {origin}); `scriba models download pyannote` uses it")
        else:
            print(
                "no Hugging Face token. `scriba token set` stores one; `scriba models download pyannote` asks for it."
            )
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


def resolve_data_dir(option: Path | None) -> Path:
    """--data-dir, else SCRIBA_DATA_DIR (portable installs, tests), else the platform's user data folder."""
    if option is not None:
        return option
    from_environment = os.environ.get("SCRIBA_DATA_DIR")
    if from_environment:
        return Path(from_environment)
    from app.core.paths import data_dir

    return data_dir()


def _format_seconds(seconds: float | None) -> str:
    from app.core.export import clock

    return "-" if seconds is None else clock(seconds)


def cmd_queue(args: argparse.Namespace) -> int:
    from app.core.jobs import JobNotFoundError, JobStateError, JobStore, media_files

    try:
        store = JobStore(resolve_data_dir(args.data_dir))
    except (OSError, sqlite3.Error, RuntimeError) as error:  # unreadable, full, or from a newer Scriba
        print(
            f"scriba: error: the queue in {resolve_data_dir(args.data_dir)} cannot be opened: {error}", file=sys.stderr
        )
        return 1
    if store.set_aside is not None:
        print(f"note: {_set_aside_text(store.set_aside)}", file=sys.stderr)
    for job_id in store.recovered:
        print(f"note: job {job_id} was interrupted (its process stopped) and is queued again", file=sys.stderr)
    try:
        if args.queue_command == "add":
            return _queue_add(store, args, media_files)
        if args.queue_command == "list":
            return _queue_list(store, args.json)
        if args.queue_command == "run":
            return _queue_run(store, args.until_empty)
        if args.queue_command == "cancel":
            job = store.cancel(args.job_id)
            what = "cancel requested" if job.state.value == "running" else "cancelled"
            print(f"job {job.id} ({job.source.name}): {what}")
            return 0
        if args.queue_command == "retry":
            if args.job_id in store.recovered:  # a stuck job, just taken back when the queue was opened
                job = store.get(args.job_id)
                print(f"job {job.id} ({job.source.name}): queued again")
                return 0
            job = store.retry(args.job_id)
            print(f"job {job.id} ({job.source.name}): queued again")
            return 0
        if args.queue_command == "remove":
            store.remove(args.job_id)
            print(f"job {args.job_id} removed")
            return 0
        if args.queue_command == "move":
            store.move(args.job_id, args.offset)
            return 0
        if args.queue_command == "export":
            from app.core.export import export_each, unchanged_since_written

            job = store.get(args.job_id)
            result = export_each(
                store.load_transcript(job.id),
                args.output_dir,
                job.source.stem,
                args.formats,
                may_replace=unchanged_since_written(store),
                record=store,
            )
            for path in result.written:
                print(path)
            if result.renamed or result.failures:
                print(f"{'scriba: error' if result.failures else 'note'}: {result.summary()}", file=sys.stderr)
            return 1 if result.failures else 0
    except (JobNotFoundError, JobStateError) as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return 1
    finally:
        store.close()
    return 2


def job_options_from_args(args: argparse.Namespace) -> Any:
    """The JobOptions of the options added by ``_add_job_options``."""
    from app.core.jobs import JobOptions

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
    )


def _queue_add(store: Any, args: argparse.Namespace, media_files: Any) -> int:
    from app.core.audio import probe_duration

    options = job_options_from_args(args)
    files = media_files(args.inputs)
    if not files:
        print("scriba: error: no media files found in what was given", file=sys.stderr)
        return 1
    for path in files:
        earlier = store.find_by_source(path)
        job = store.add(path, options, probe_duration(path) if path.is_file() else None)
        line = f"job {job.id}: {path}"
        if earlier:
            line += f" (also in the queue as job {', '.join(str(e.id) for e in earlier)}; added again)"
        print(line)
    return 0


def _queue_list(store: Any, as_json: bool) -> int:
    import json

    jobs = store.jobs()
    if as_json:
        print(json.dumps([job.to_dict() for job in jobs], indent=1))
        return 0
    if not jobs:
        print("the queue is empty (`scriba queue add FILE…`)")
        return 0
    print(f"{'id':>4}  {'state':9} {'progress':>8} {'length':>8} {'speed':>7}  file")
    for job in jobs:
        speed = f"{job.speed:.1f}x" if job.speed else "-"
        state = "partial" if job.partial else job.state.value  # done, but part of the recording is missing
        print(
            f"{job.id:>4}  {state:9} {job.progress:>8.0%} {_format_seconds(job.duration):>8} {speed:>7}  {job.source}"
        )
        for warning in job.warnings:
            print(f"      warning: {warning}")
        if job.error:
            print(f"      error: {job.error}")
        elif job.note:
            print(f"      note: {job.note}")
    return 0


def _queue_run(store: Any, until_empty: bool) -> int:
    import signal

    from app.core.worker import JobEvent, QueueWorker

    failures = 0
    bars: dict[int, ProgressBar] = {}

    def on_event(event: JobEvent) -> None:
        nonlocal failures
        if event.kind in ("waiting", "recovered"):
            print(f"note: {event.message}", file=sys.stderr)
        if event.kind == "error":  # the queue's disk refused a write: one line, no traceback
            failures += 1
            print(f"scriba: error: {event.message}", file=sys.stderr)
            return
        if event.job_id is None or event.source is None:
            return
        bar = bars.setdefault(event.job_id, ProgressBar(f"[{event.job_id}] {event.source.name}", sys.stderr, True))
        if event.kind == "progress":
            bar.update(event)
        elif event.kind == "done":
            speed = f", {event.speed:.1f}x real time" if event.speed else ""
            note = f"; {event.message}" if event.message else ""
            bar.finish(f"done: job {event.job_id} {event.source}{speed}{note}")
        elif event.kind == "failed":
            failures += 1
            bar.finish(f"failed: job {event.job_id}: {event.message}")
        elif event.kind == "cancelled":
            bar.finish(f"cancelled: job {event.job_id} {event.source}")
        elif event.kind == "requeued":
            bar.finish(f"stopped: job {event.job_id} {event.source} goes back to the queue")

    worker = QueueWorker(store, on_event=on_event)

    def interrupt(signum: int, frame: object) -> None:
        worker.stop()

    previous = signal.signal(signal.SIGINT, interrupt)
    previous_term = signal.signal(signal.SIGTERM, interrupt)
    try:
        worker.run(until_empty=until_empty)
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
    if worker.stopping:
        return 130
    return 1 if failures else 0


COMMANDS = frozenset({"transcribe", "models", "token", "queue"})


def split_open_files(argv: list[str]) -> tuple[list[str], list[Path]]:
    """`scriba FILE…` (how a file manager's "Open with Scriba" starts us) opens the window with the files
    queued. Only when the first such argument exists: a mistyped command still gets argparse's message."""
    for index, argument in enumerate(argv):
        if argument in COMMANDS:
            break
        if argument.startswith("-") or (index and argv[index - 1] == "--data-dir"):
            continue
        if Path(argument).exists():
            return argv[:index], [Path(item) for item in argv[index:]]
        break
    return argv, []


def _input_device(text: str | None) -> int | str | None:
    return int(text) if text is not None and text.isdigit() else text


def cmd_dictate(args: argparse.Namespace) -> int:
    import json
    import signal
    import threading

    from app.core.dictation import (
        AudioInputError,
        Dictation,
        DictationEvent,
        DictationOptions,
        FileSource,
        MicrophoneSource,
        list_input_devices,
    )
    from app.core.errors import ScribaError
    from app.core.transcribe import select_device

    if args.list_devices:
        try:
            devices = list_input_devices()
        except AudioInputError as error:
            print(f"scriba: error: {error}", file=sys.stderr)
            return 1
        for device in devices:
            if args.jsonl:
                print(json.dumps(device))
            else:
                mark = "*" if device["is_default"] else " "
                print(
                    f"{mark} {device['index']:>3}  {device['name']}  ({device['channels']} ch, "
                    f"{device['default_samplerate']:.0f} Hz, {device['hostapi']})"
                )
        if not devices and not args.jsonl:
            print("no input devices found (is a microphone connected, and PortAudio/PulseAudio running?)")
        return 0
    if args.realtime and args.from_file is None:
        print("scriba: error: --realtime replays a file: give --from-file F too", file=sys.stderr)
        return 2

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

    try:
        device, _ = select_device(args.compute_device)
        options = DictationOptions(model=args.model, language=args.language, device=device)  # type: ignore[arg-type]
        source = (
            FileSource(args.from_file, realtime=args.realtime)
            if args.from_file is not None
            else MicrophoneSource(_input_device(args.device))
        )
        dictation = Dictation(options, source, show)
        if args.from_file is not None:
            dictation.run()
        else:
            stop = threading.Event()
            previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
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
        return 1
    if args.save is not None:
        from app.core.dictation_save import save_dictation
        from app.core.jobs import JobStore

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
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    import json

    from app.core.doctor import format_report, run_doctor

    report, code = run_doctor(smoke_test=not args.no_smoke_test)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return code


def main(argv: Sequence[str] | None = None) -> int:
    import multiprocessing

    # The inference process is started with "spawn"; in a frozen (PyInstaller) build the child re-enters
    # here and must be diverted to its work.
    multiprocessing.freeze_support()
    parser = build_parser()
    arguments, open_files = split_open_files(list(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(arguments)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if args.command == "queue":
        return cmd_queue(args)
    if args.command is None:
        from app.gui.main import run_gui

        return run_gui(resolve_data_dir(args.data_dir), open_files)
    if args.command == "speakers":
        from app.speakers_cli import cmd_speakers

        return cmd_speakers(args, resolve_data_dir(args.data_dir))
    if args.command == "transcribe":
        return cmd_transcribe(args)
    if args.command == "models":
        return cmd_models(args)
    if args.command == "token":
        return cmd_token(args)
    if args.command == "doctor":
        return cmd_doctor(args)
    if args.command == "dictate":
        return cmd_dictate(args)
    if args.command == "worker":
        from app.cloud.run_cli import cmd_worker

        return cmd_worker(args)
    if args.command == "offload" and args.offload_command == "estimate":
        from app.cloud.offload_cli import cmd_offload_estimate

        return cmd_offload_estimate(args)
    if args.command == "offload" and args.offload_command == "sweep":
        from app.cloud.run_cli import cmd_offload_sweep

        return cmd_offload_sweep(resolve_data_dir(args.data_dir))
    if args.command == "offload" and args.offload_command == "key":
        from app.cloud.run_cli import cmd_offload_key

        return cmd_offload_key(args)
    if args.command == "offload":
        from app.cloud.run_cli import cmd_offload_run

        return cmd_offload_run(args, job_options_from_args, resolve_data_dir(args.data_dir))
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
