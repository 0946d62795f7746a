"""`scriba offload run` (this machine's side) and `scriba worker` (the remote machine's side)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.cloud.offload import OffloadEvent

PROVIDERS = ("ssh", "lambda", "vast", "runpod")


def add_run_parser(offload_commands: Any, job_options: Any) -> None:
    """``offload run``; ``job_options`` adds the shared --model/--language/--diarize/... options."""
    run = offload_commands.add_parser("run", help="run files on a rented GPU or your own SSH host, then tear down")
    run.add_argument("inputs", nargs="+", type=Path, metavar="FILE")
    run.add_argument("--provider", choices=PROVIDERS, required=True)
    run.add_argument("--gpu", default=None, help="the GPU to rent (e.g. A10, 'RTX 4090'); default: the cheapest fit")
    run.add_argument("--budget", type=float, default=None, metavar="USD", help="refuse estimates above; hard stop")
    run.add_argument("--host", default=None, help="--provider ssh: ssh://user@host:port")
    run.add_argument("--identity", type=Path, default=None, help="private key for the SSH host")
    run.add_argument(
        "--known-hosts",
        type=Path,
        default=Path("~/.ssh/known_hosts").expanduser(),
        help="known-hosts file with the SSH host's key (default: ~/.ssh/known_hosts)",
    )
    run.add_argument(
        "--remote-command",
        default="scriba",
        help="how to run Scriba on the remote (default: scriba), e.g. '/opt/venv/bin/python -m app'",
    )
    run.add_argument("--remote-env", action="append", default=[], metavar="NAME=VALUE", help="remote environment")
    run.add_argument(
        "--send-hf-token",
        action="store_true",
        help="let this job's remote use your Hugging Face token (for pyannote); never sent otherwise",
    )
    run.add_argument("-y", "--yes", action="store_true", help="do not ask before renting")
    job_options(run)


def add_worker_parser(commands: Any) -> None:
    worker = commands.add_parser("worker", help="(on a remote machine) run an offloaded job; used by `offload run`")
    actions = worker.add_subparsers(dest="worker_command", metavar="ACTION", required=True)
    run = actions.add_parser("run", help="transcribe the files of WORK/spec.json, events to WORK/events.jsonl")
    run.add_argument("--dir", type=Path, required=True)
    watchdog = actions.add_parser("watchdog", help="end the work when the client's heartbeat stops")
    watchdog.add_argument("--dir", type=Path, required=True)
    watchdog.add_argument("--heartbeat-timeout", type=float, default=180.0)
    watchdog.add_argument("--deadline", type=float, default=None, help="epoch seconds: the budget's hard stop")
    watchdog.add_argument("--done-grace", type=float, default=900.0)
    watchdog.add_argument("--remove-work", action="store_true", help="delete the work directory on expiry")
    watchdog.add_argument("--on-expire", nargs=argparse.REMAINDER, default=None, help="command that ends the machine")


def cmd_worker(args: argparse.Namespace) -> int:
    from app.cloud.remote_worker import run_watchdog, run_worker

    if args.worker_command == "run":
        return run_worker(args.dir)
    return run_watchdog(
        args.dir,
        heartbeat_timeout_s=args.heartbeat_timeout,
        deadline=args.deadline,
        done_grace_s=args.done_grace,
        on_expire=args.on_expire or None,
        remove_work=args.remove_work,
    )


def _print_event(event: OffloadEvent) -> None:
    if event.kind in ("status", "started", "done", "failed", "finished"):
        cost = f" · ${event.cost_usd:.3f}" if event.cost_usd else ""
        print(f"[{event.elapsed_s:6.0f} s{cost}] {event.message}", file=sys.stderr, flush=True)


def cmd_offload_run(args: argparse.Namespace, job_options_from_args: Any, data_dir: Path) -> int:
    from app.cloud.ledger import Ledger
    from app.cloud.offload import Offload, OffloadError, RemoteSetup
    from app.cloud.ssh_host import SshHostProvider
    from app.cloud.transport import TransportError, parse_ssh_url
    from app.core.export import export

    missing = [path for path in args.inputs if not path.is_file()]
    if missing:
        print(f"scriba: error: {missing[0]}: no such file; nothing was launched", file=sys.stderr)
        return 2
    if args.provider != "ssh":
        print(
            f"scriba: error: --provider {args.provider}: renting needs its API key (`scriba offload key set "
            f"{args.provider}`) and is started from the estimate: run `scriba offload estimate` first",
            file=sys.stderr,
        )
        return 2
    if not args.host:
        print("scriba: error: --provider ssh needs --host ssh://user@host:port", file=sys.stderr)
        return 2
    try:
        endpoint = parse_ssh_url(args.host, args.identity)
    except TransportError as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return 2
    env = []
    for item in args.remote_env:
        name, separator, value = item.partition("=")
        if not separator or not name:
            print(f"scriba: error: --remote-env {item!r}: write NAME=VALUE", file=sys.stderr)
            return 2
        env.append((name, value))
    token = None
    if args.send_hf_token:
        from app.core.secrets import huggingface_token

        token, _ = huggingface_token()
    provider = SshHostProvider(endpoint)
    options = job_options_from_args(args)
    offload = Offload(
        provider,
        provider.offer(),
        Ledger(data_dir / "cloud-ledger.sqlite3"),
        options=options,
        key_file=args.identity,
        known_hosts=args.known_hosts,
        pin_new_host=False,
        setup=RemoteSetup(tuple(shlex.split(args.remote_command)), tuple(env)),
        hf_token=token,
        budget_usd=args.budget,
        on_event=_print_event,
    )
    try:
        result = offload.run(args.inputs)
    except KeyboardInterrupt:
        print("scriba: cancelled; the remote work was removed", file=sys.stderr)
        return 130
    except (OffloadError, TransportError) as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return 1
    output = Path(options.output_dir) if options.output_dir else Path.cwd()
    used: dict[str, Path] = {}
    for index, transcript in sorted(result.transcripts.items()):
        source = args.inputs[index]
        stem = source.stem
        number = 2
        while stem in used and used[stem] != source:
            stem = f"{source.stem}-{number}"
            number += 1
        used[stem] = source
        paths = export(transcript, output, stem, options.formats)
        speed = result.speeds.get(index)
        print(f"done: {source} -> {', '.join(str(path) for path in paths)}" + (f" [{speed:.1f}x]" if speed else ""))
    for reason in result.failures.values():
        print(f"failed: {reason}", file=sys.stderr)
    return 1 if result.failures else 0
