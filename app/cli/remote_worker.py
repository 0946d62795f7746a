"""`scriba worker`: the remote machine's side of an offload (app/cloud/remote/agent.py, app/cloud/fleet/node.py),
started over SSH by `scriba offload run`. The command keeps its name: a host with another Scriba version still
understands it."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_worker_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser("worker", help="(on a remote machine) run an offloaded job; used by `offload run`")
    actions = worker.add_subparsers(dest="worker_command", metavar="ACTION", required=True)
    run = actions.add_parser("run", help="transcribe the files of WORK/spec.json, events to WORK/events.jsonl")
    run.add_argument("--dir", type=Path, required=True)
    # "batch-node" is the action's former name: a script that starts a node by it keeps working; not listed.
    for name in ("fleet-node", "batch-node"):
        if name == "fleet-node":
            node = actions.add_parser(name, help="take jobs from a fleet's queue (broker password on stdin)")
        else:
            node = actions.add_parser(name)  # no help: argparse then leaves it out of the list
        node.add_argument("--broker-port", type=int, required=True, help="the queue's tunnel on this machine")
        node.add_argument("--files-port", type=int, required=True, help="the recordings' tunnel on this machine")
        node.add_argument("--name", required=True)
        node.add_argument("--visibility-timeout", type=float, default=3 * 3600.0)
        node.add_argument(
            "--broker-timeout",
            type=float,
            default=180.0,
            help="end when the queue has not answered this long (seconds)",
        )
        node.add_argument("--deadline", type=float, default=None, help="epoch seconds: the budget's hard stop")
        node.add_argument("--on-expire", nargs=argparse.REMAINDER, default=None, help="command that ends the machine")
    watchdog = actions.add_parser("watchdog", help="end the work when the client's heartbeat stops")
    watchdog.add_argument("--dir", type=Path, required=True)
    watchdog.add_argument("--heartbeat-timeout", type=float, default=180.0)
    watchdog.add_argument("--deadline", type=float, default=None, help="epoch seconds: the budget's hard stop")
    watchdog.add_argument("--done-grace", type=float, default=900.0)
    watchdog.add_argument("--remove-work", action="store_true", help="delete the work directory on expiry")
    watchdog.add_argument("--on-expire", nargs=argparse.REMAINDER, default=None, help="command that ends the machine")


def cmd_worker(args: argparse.Namespace) -> int:
    from app.cloud.remote.agent import run_watchdog, run_worker

    if args.worker_command == "run":
        return run_worker(args.dir)
    if args.worker_command in ("fleet-node", "batch-node"):
        from app.cloud.fleet.node import run_node

        return run_node(
            args.broker_port,
            args.files_port,
            args.name,
            args.visibility_timeout,
            broker_timeout_s=args.broker_timeout,
            deadline=args.deadline,
            on_expire=args.on_expire or None,
        )
    return run_watchdog(
        args.dir,
        heartbeat_timeout_s=args.heartbeat_timeout,
        deadline=args.deadline,
        done_grace_s=args.done_grace,
        on_expire=args.on_expire or None,
        remove_work=args.remove_work,
    )
