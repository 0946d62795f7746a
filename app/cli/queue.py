"""`scriba queue`: the persistent job queue shared with the window, headless."""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.common import (
    add_job_options,
    formats,
    job_options_from_args,
    resolve_data_dir,
    set_aside_text,
)
from app.cli.progress import ProgressBar
from app.core.errors import ExitCode
from app.core.transcript.formats import DEFAULT_FORMATS

if TYPE_CHECKING:
    from app.core.queue.worker import JobEvent


def add_queue_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    queue = commands.add_parser("queue", help="the persistent job queue shared with the window")
    actions = queue.add_subparsers(dest="queue_command", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="queue files (folders: every media file inside)")
    add.add_argument("inputs", nargs="+", metavar="FILE", type=Path)
    add_job_options(add)
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
    export.add_argument("-f", "--formats", type=formats, default=DEFAULT_FORMATS)
    export.add_argument("-o", "--output-dir", type=Path, default=Path("."))


def cmd_queue(args: argparse.Namespace) -> int:
    from app.core.queue.jobs import JobNotFoundError, JobStateError, JobStore, data_folder_problem, media_files

    try:
        store = JobStore(resolve_data_dir(args.data_dir))
    except (OSError, sqlite3.Error, RuntimeError) as error:  # unreadable, full, or from a newer Scriba
        problem = data_folder_problem(resolve_data_dir(args.data_dir))
        print(
            f"scriba: error: {problem}"
            if problem
            else f"scriba: error: the queue in {resolve_data_dir(args.data_dir)} cannot be opened: {error}",
            file=sys.stderr,
        )
        return ExitCode.FAILED
    if store.set_aside is not None:
        print(f"note: {set_aside_text(store.set_aside)}", file=sys.stderr)
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
            return ExitCode.OK
        if args.queue_command == "retry":
            if args.job_id in store.recovered:  # a stuck job, just taken back when the queue was opened
                job = store.get(args.job_id)
                print(f"job {job.id} ({job.source.name}): queued again")
                return ExitCode.OK
            job = store.retry(args.job_id)
            print(f"job {job.id} ({job.source.name}): queued again")
            return ExitCode.OK
        if args.queue_command == "remove":
            store.remove(args.job_id)
            print(f"job {args.job_id} removed")
            return ExitCode.OK
        if args.queue_command == "move":
            store.move(args.job_id, args.offset)
            return ExitCode.OK
        if args.queue_command == "export":
            from app.core.queue.exports import export_job

            saved = export_job(store, args.job_id, args.output_dir, args.formats)
            for path in saved.written:
                print(path)
            for line in saved.lines:
                print(line if line.startswith("note:") else f"scriba: {line}", file=sys.stderr)
            return ExitCode.FAILED if saved.failed else ExitCode.OK
    except (JobNotFoundError, JobStateError) as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return error.exit_code
    finally:
        store.close()
    return ExitCode.USAGE


def _queue_add(store: Any, args: argparse.Namespace, media_files: Any) -> int:
    from app.core.engine.audio import probe_duration

    options = job_options_from_args(args)
    files = media_files(args.inputs)
    if not files:
        print("scriba: error: no media files found in what was given", file=sys.stderr)
        return ExitCode.FAILED
    for path in files:
        earlier = store.find_by_source(path)
        job = store.add(path, options, probe_duration(path) if path.is_file() else None)
        line = f"job {job.id}: {path}"
        if earlier:
            line += f" (also in the queue as job {', '.join(str(e.id) for e in earlier)}; added again)"
        print(line)
    return ExitCode.OK


def _queue_list(store: Any, as_json: bool) -> int:
    import json

    jobs = store.jobs()
    if as_json:
        print(json.dumps([job.to_dict() for job in jobs], indent=1))
        return ExitCode.OK
    if not jobs:
        print("the queue is empty (`scriba queue add FILE…`)")
        return ExitCode.OK
    print(f"{'id':>4}  {'state':9} {'progress':>8} {'length':>8} {'speed':>7}  file")
    for job in jobs:
        speed = f"{job.speed:.1f}x" if job.speed else "-"
        state = "partial" if job.partial else job.state.value  # done, but part of the recording is missing
        print(
            f"{job.id:>4}  {state:9} {job.progress:>8.0%} {_format_seconds(job.duration):>8} {speed:>7}  {job.source}"
        )
        for warning in job.warnings:
            print(f"      warning: {warning}")
        if job.exports_pending:
            print(
                f"      note: the exports to {job.options.output_dir} are not all written yet; if the program "
                "writing them stopped, the next `scriba queue run` (or the window) finishes them"
            )
        if job.error:
            print(f"      error: {job.error}")
        elif job.note:
            print(f"      note: {job.note}")
    return ExitCode.OK


def _queue_run(store: Any, until_empty: bool) -> int:
    import contextlib
    import os
    import signal
    import time

    from app.core.queue.worker import QueueWorker

    printer = EventPrinter()
    worker = QueueWorker(store, on_event=printer)

    def interrupt(signum: int, frame: object) -> None:
        worker.stop()

    def suspend(signum: int, frame: object) -> None:
        # The engine runs in a process group of its own (a terminal's SIGINT or SIGTERM is this process's to
        # decide on), so Ctrl-Z would stop only this one while the job went on: stop the engine with it.
        engine = worker.engine.pid
        if engine is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(engine, signal.SIGSTOP)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        stopped_at = time.monotonic()
        signal.raise_signal(signal.SIGTSTP)  # stops here until `fg`/`bg` (SIGCONT)
        worker.add_frozen(time.monotonic() - stopped_at)
        signal.signal(signal.SIGTSTP, suspend)
        if engine is not None and not worker.engine.suspended:
            with contextlib.suppress(ProcessLookupError):
                os.kill(engine, signal.SIGCONT)

    previous = signal.signal(signal.SIGINT, interrupt)
    previous_term = signal.signal(signal.SIGTERM, interrupt)
    previous_stop = signal.signal(signal.SIGTSTP, suspend)
    try:
        worker.run(until_empty=until_empty)
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
        signal.signal(signal.SIGTSTP, previous_stop)
    if worker.stopping:
        return ExitCode.INTERRUPTED
    return ExitCode.FAILED if printer.failures else ExitCode.OK


class EventPrinter:
    """A queue worker's events on the terminal: a progress line per job, then one line for how it ended."""

    def __init__(self) -> None:
        self.failures = 0
        self.bars: dict[int, ProgressBar] = {}

    def __call__(self, event: JobEvent) -> None:
        if event.kind in ("waiting", "recovered"):
            print(f"note: {event.message}", file=sys.stderr)
        if event.kind == "error":  # the queue's disk refused a write: one line, no traceback
            self.failures += 1
            print(f"scriba: error: {event.message}", file=sys.stderr)
            return
        if event.job_id is None or event.source is None:
            return
        name = f"[{event.job_id}] {event.source.name}"
        bar = self.bars.setdefault(event.job_id, ProgressBar(name, sys.stderr, True))
        if event.kind == "progress":
            bar.update(event)
        elif event.kind == "done":
            speed = f", {event.speed:.1f}x real time" if event.speed else ""
            note = f"; {event.message}" if event.message else ""
            bar.finish(f"done: job {event.job_id} {event.source}{speed}{note}")
        elif event.kind == "failed":
            self.failures += 1
            hint = f" {event.cli_hint}" if event.cli_hint else ""
            bar.finish(f"failed: job {event.job_id}: {event.message}{hint}")
        elif event.kind == "cancelled":
            bar.finish(f"cancelled: job {event.job_id} {event.source}")
        elif event.kind == "requeued":
            bar.finish(f"stopped: job {event.job_id} {event.source} goes back to the queue")
        elif event.kind == "taken_over":
            bar.finish(f"set aside: {event.message}")


def _format_seconds(seconds: float | None) -> str:
    from app.core.transcript.times import clock

    return "-" if seconds is None else clock(seconds)
