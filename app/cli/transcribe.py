"""`scriba transcribe`: files in, transcripts out, with no queue."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.common import (
    add_job_options,
    job_options_from_args,
    log,
    positive,
    resolve_data_dir,
    set_aside_text,
)
from app.cli.progress import ProgressBar
from app.core.errors import ExitCode

if TYPE_CHECKING:
    from app.core.transcript.document import Transcript


def add_transcribe_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    transcribe = commands.add_parser("transcribe", help="transcribe (and diarize) files")
    transcribe.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        type=Path,
        help="audio or video files, or folders (every audio or video file inside, as `queue add` takes them)",
    )
    add_job_options(transcribe, output_dir=Path("."), output_help="where to write (default: .)")
    # What only a direct run takes: the queue's jobs and an offload use the defaults.
    transcribe.add_argument(
        "--pyannote-pipeline",
        type=Path,
        default=None,
        help="a local pyannote pipeline folder (default: the downloaded one)",
    )
    transcribe.add_argument("--beam-size", type=positive, default=5)
    transcribe.add_argument(
        "--threads",
        type=int,
        default=0,
        help="CPU threads for the words (default: all cores; half while the speakers are found beside them)",
    )
    transcribe.add_argument("--no-vad", dest="vad", action="store_false", help="decode silence too")
    transcribe.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def cmd_transcribe(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from app.core.cancel import CancelToken
    from app.core.engine.language_check import NOT_ENGLISH_WARNING, language_cli_hint, suggest_multilingual
    from app.core.engine.pipeline import Engine
    from app.core.errors import ScribaError
    from app.core.secrets import huggingface_token
    from app.core.transcript.save import first_free_stem

    token, _ = huggingface_token() if args.diarize and args.diarizer != "embedded" else (None, "")
    try:
        # The one conversion from a job's options to the engine's, the queue's own; then what only this command
        # sets (beam, VAD, threads, a pipeline folder).
        options = job_options_from_args(args).to_pipeline(token, resolve_data_dir(args.data_dir))
    except (ValueError, ScribaError) as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return ExitCode.USAGE
    options = replace(
        options,
        transcription=replace(
            options.transcription, beam_size=args.beam_size, vad_filter=args.vad, cpu_threads=max(0, args.threads)
        ),
        diarizer=replace(
            options.diarizer,
            # What the user typed, made absolute here: the engine loads pipelines only from absolute paths.
            pyannote_source=str(args.pyannote_pipeline.expanduser().absolute()) if args.pyannote_pipeline else None,
        ),
    )
    sources, empty_folders = _expand_folders(args.inputs)
    if not sources:
        return ExitCode.FAILED
    failures = len(empty_folders)
    args.inputs = sources  # what _save_transcript must never overwrite: the recordings themselves
    engine = Engine()
    cancel = CancelToken()
    used_stems: dict[str, Path] = {}
    record = export_record(args.data_dir)
    for source in sources:
        stem = source.stem
        if stem in used_stems:
            # Two inputs with one name (a/talk.mp3, b/talk.wav) must not overwrite each other's transcript.
            numbered = first_free_stem(stem, used_stems.__contains__)
            print(f"note: {source} has the same name as {used_stems[stem]}; writing {numbered}.*", file=sys.stderr)
            stem = numbered
        used_stems[stem] = source
        bar = ProgressBar(source.name, sys.stderr, not args.quiet)
        try:
            transcript = engine.run(source, options, progress=bar.update, cancel=cancel)
        except KeyboardInterrupt:
            cancel.cancel()
            bar.finish(f"cancelled: {source}")
            return ExitCode.INTERRUPTED
        except ScribaError as error:
            failures += 1
            # Errors about the file name it already; others (a model, a library) get it here.
            named = str(error) if source.name in str(error) else f"{source}: {error}"
            bar.finish(f"error: {named}")
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
            who = (
                f", {len(transcript.speakers)} speaker(s) ({transcript.diarization.reason}{_diarizer_hint(transcript)})"
            )
        bar.finish(
            f"done: {source} -> {', '.join(str(path) for path in written)} "
            f"[{transcript.duration:.1f} s audio, {speed:.1f}x real time, {transcript.model} on "
            f"{transcript.device}/{transcript.compute_type}{who}]"
        )
        for warning in transcript.warnings:
            print(f"warning: {source}: {warning}", file=sys.stderr)
            if warning.startswith(NOT_ENGLISH_WARNING):  # the warning is in words; the commands are said here
                print(f"hint: {language_cli_hint(suggest_multilingual())}", file=sys.stderr)
        for problem in problems:
            print(problem, file=sys.stderr)
        if any(problem.startswith("error:") for problem in problems):
            failures += 1
    if failures:
        print(f"{failures} of {len(sources) + len(empty_folders)} file(s) failed", file=sys.stderr)
    return ExitCode.FAILED if failures else ExitCode.OK


def _expand_folders(inputs: list[Path]) -> tuple[list[Path], list[Path]]:
    """The files to transcribe, each folder replaced by the media files inside it as the queue finds them
    (``media_files``: recursively, sorted), and the folders that hold none, each said on standard error."""
    from app.core.engine.audio import MEDIA_EXTENSIONS
    from app.core.queue.jobs import media_files

    sources: list[Path] = []
    empty: list[Path] = []
    for path in inputs:
        found = media_files([path])
        if path.is_dir() and not found:
            empty.append(path)
            print(
                f"error: {path}: a folder with no audio or video file in it (Scriba looks for "
                f"{', '.join(sorted(MEDIA_EXTENSIONS))}, in it and in the folders under it)",
                file=sys.stderr,
            )
        sources.extend(found)
    return sources, empty


def export_record(data_dir: Path | None) -> Any:
    """The queue database, which remembers the files Scriba wrote (so that an edited one is never replaced);
    None when it cannot be opened: then no existing file is replaced."""
    from app.core.queue.jobs import JobStore, data_folder_problem

    try:
        store = JobStore(resolve_data_dir(data_dir), recover=False)
    except Exception as error:
        log.info("export record not available: %s", error)
        problem = data_folder_problem(resolve_data_dir(data_dir))
        if problem:
            # Transcripts still go to -o; only Scriba's record of its files, and the place for what -o refuses, are
            # missing.
            print(
                f"scriba: warning: {problem}. Until then no existing file is replaced (new names are numbered) and "
                "a transcript that cannot be written to the output folder cannot be kept.",
                file=sys.stderr,
            )
        return None
    if store.set_aside is not None:
        print(f"note: {set_aside_text(store.set_aside)}", file=sys.stderr)
    return store


def _save_transcript(transcript: Any, args: argparse.Namespace, stem: str, record: Any) -> tuple[list[Path], list[str]]:
    """Export every format to -o (app/core/transcript/save.py's save_transcript: a file edited by hand, or one of the
    recordings, is never replaced); a format that cannot be written there goes to the data folder instead, so a
    finished transcript is never thrown away. Returns the files written and the lines to tell the user."""
    from app.core.transcript.save import save_transcript

    saved = save_transcript(
        transcript,
        args.output_dir,
        stem,
        args.formats,
        record=record,
        protect=args.inputs,
        fallback=resolve_data_dir(args.data_dir) / "unsaved-exports",
    )
    return list(saved.written), list(saved.lines)


def _diarizer_hint(transcript: Transcript) -> str:
    """The command that gets the better speaker detection, when the built-in diarizer ran for want of it."""
    if transcript.diarization is None or transcript.diarization.backend != "embedded":
        return ""
    from app.core.engine.diarize import DiarizerOptions, choose_backend

    hint = choose_backend(DiarizerOptions()).cli_hint
    return f" {hint}" if hint else ""
