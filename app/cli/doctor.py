"""`scriba doctor`: what Scriba finds on this machine and would use."""

from __future__ import annotations

import argparse


def add_doctor_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = commands.add_parser("doctor", help="check the GPU, drivers and libraries; say what Scriba would use")
    doctor.add_argument("--json", action="store_true", help="the report as JSON (stable top-level keys)")
    doctor.add_argument("--no-smoke-test", action="store_true", help="do not run tiny.en on the selected device")


def cmd_doctor(args: argparse.Namespace) -> int:
    import json

    from app.core.doctor import format_report, run_doctor

    report, code = run_doctor(smoke_test=not args.no_smoke_test)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return code
