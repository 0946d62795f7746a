"""`scriba watch FOLDER`: recordings that appear in the folder are transcribed, their exports written beside them."""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

from app.cli.common import add_job_options, job_options_from_args, resolve_data_dir, set_aside_text
from app.core.errors import ExitCode


def add_watch_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    watch = commands.add_parser(
        "watch", help="transcribe every recording that appears in a folder; exports go beside each one"
    )
    watch.add_argument("folder", type=Path, metavar="FOLDER")
    watch.add_argument("--recursive", action="store_true", help="look in sub-folders too")
    watch.add_argument("--interval", type=float, default=3.0, help="seconds between looks at the folder (default 3)")
    add_job_options(watch, output_help="ignored: exports are written beside each recording")


def cmd_watch(args: argparse.Namespace) -> int:
    import signal

    from app.cli.queue import EventPrinter
    from app.core.queue.jobs import JobStore
    from app.core.queue.watch import WatchFolder
    from app.core.queue.worker import QueueWorker

    folder = args.folder.expanduser()
    if not folder.is_dir():
        print(f"scriba: error: {folder} is not a folder: give the folder to watch", file=sys.stderr)
        return ExitCode.USAGE
    store = JobStore(resolve_data_dir(args.data_dir))
    if store.set_aside is not None:
        print(f"note: {set_aside_text(store.set_aside)}", file=sys.stderr)
    watch = WatchFolder(
        folder,
        job_options_from_args(args),
        store,
        recursive=args.recursive,
        on_notice=lambda text: print(f"watch: {text}", file=sys.stderr),
    )
    printer = EventPrinter()
    # The worker gets its own connection (it commits from its thread while this one adds jobs).
    worker = QueueWorker(JobStore(store.directory, recover=False), on_event=printer)
    stop = threading.Event()
    stopped_by: list[int] = []

    def interrupt(signum: int, frame: object) -> None:
        stopped_by.append(signum)
        stop.set()
        worker.stop()

    previous = signal.signal(signal.SIGINT, interrupt)
    previous_term = signal.signal(signal.SIGTERM, interrupt)
    runner = threading.Thread(target=worker.run, name="scriba-watch-worker", daemon=True)
    runner.start()
    print(f"watching {watch.folder} (Ctrl-C stops; a job running then goes back to the queue)", file=sys.stderr)
    try:
        while not stop.is_set():
            for job in watch.scan():
                again = " again" if job.attempts else ""  # a file that changed after its job had run
                print(f"queued{again}: job {job.id} {job.source}", file=sys.stderr)
                worker.wake()
            stop.wait(max(0.2, args.interval))
    finally:
        worker.stop()
        runner.join()
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
        store.close()
    return ExitCode.for_signal(signal.Signals(stopped_by[0])) if stopped_by else ExitCode.INTERRUPTED
