"""`offload run`'s code path in a process of its own, for tests that stop it with real signals.

It builds a rented offload the way `scriba offload run` does, except that the provider's base URL points at the
replay server of the test (the CLI has no switch for that, and should not), and hands it to
:func:`app.cli.offload.run_offload`, the function the CLI uses: signal handling, teardown and what is printed
are the CLI's own.

    python -m tests.cloud.offload_child API_URL DATA_DIR FILE [--quick-teardown] [--disk-full-after-launch]

``--quick-teardown``: give up verifying a termination after a second (a provider that never confirms).
``--disk-full-after-launch``: from the launch on, this process cannot write a byte to any file (the kernel's
file-size limit set to 0, so every write fails as on a full disk); its stdout and stderr are pipes and unaffected.
"""

from __future__ import annotations

import resource
import signal
import sys
from pathlib import Path

from app.cli.offload import _print_event, run_offload
from app.cloud.offload.base import OffloadConfig, OffloadEvent, OffloadTiming
from app.cloud.offload.ledger import Ledger
from app.cloud.offload.run import Offload
from app.cloud.providers import VastAI
from app.cloud.types import Offer
from app.core.queue.jobs import JobOptions

KEY = "vast-key-child-DO-NOT-LEAK"
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILXGDN/SclOozk1xsDztpmhGiKkkrfQB9SKoO8dSIQQZ scriba-job"
OFFER = Offer("vast", "12345678", "RTX 4090", 1, 24.0, 0.40, None, "per-second", 2.0, "api:vast", "2026-11-21", True)


def main(argv: list[str]) -> int:
    # The tests play a person pressing Ctrl-C at a terminal. A suite started in the background by a
    # non-interactive shell (`make test &`) hands its children SIGINT ignored, which Python then keeps;
    # Ctrl-C would never arrive and the cases would hang. Take SIGINT the way a foreground process has it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    flags = {item for item in argv if item.startswith("--")}
    api, data, source = (item for item in argv if not item.startswith("--"))
    disk_full = "--disk-full-after-launch" in flags

    def on_event(event: OffloadEvent) -> None:
        if disk_full and event.kind == "status" and event.message.startswith("launching"):
            _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
            resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))
        _print_event(event)

    quick = "--quick-teardown" in flags
    config = OffloadConfig(
        options=JobOptions(model="tiny.en", language="en"),
        key_file=None,
        public_key=PUBLIC_KEY,
        known_hosts=Path(data) / "known_hosts",
        pin_new_host=True,
        timing=OffloadTiming(
            reconnect_wait_s=0.05,
            terminate_attempts=2 if quick else 5,
            verify_timeout_s=1.0 if quick else 120.0,
            unclear_launch_spacing_s=0.05,  # the list read six times, a few tenths of a second in all
        ),
    )
    offload = Offload(VastAI(KEY, base_url=api + "/api"), OFFER, Ledger(Path(data) / "cloud-ledger.sqlite3"), config)
    status, _ = run_offload(offload, [Path(source)], on_event=on_event)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
