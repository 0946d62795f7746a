"""Queue jobs offloaded to a rented machine: while it boots (RunPod's documented API replayed, the pod
provisioning for as long as the test needs), the jobs keep reporting to the queue, so that a worker on another
computer sharing the queue does not take them back, and a cancel from the queue ends the machine."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from app.cloud.offload.base import OffloadConfig, OffloadTiming
from app.cloud.offload.ledger import Ledger
from app.cloud.offload.queue_offload import QueueOffload
from app.cloud.offload.run import Offload
from app.cloud.providers import RunPod
from app.cloud.types import Offer
from app.core.queue.jobs import JobOptions, JobState, JobStore
from tests.cloud.replay_server import ReplayServer
from tests.cloud.runpod_pods import ReplayedPods

OFFER = Offer(
    "runpod", "NVIDIA GeForce RTX 3090", "RTX 3090", 1, 24.0, 0.44, None, "per-second", 1.0, "api:runpod",
    "2026-11-24", True,
)  # fmt: skip


def _reported_since_claimed(database: Path, job_id: int) -> bool:
    """Whether the running job's last report is later than its claim (both None until it is claimed)."""
    with sqlite3.connect(database) as db:
        started_at, heartbeat_at = db.execute(
            "SELECT started_at, heartbeat_at FROM jobs WHERE id = ? AND state = 'running'", (job_id,)
        ).fetchone() or (None, None)
    return started_at is not None and heartbeat_at is not None and heartbeat_at > started_at


def test_jobs_on_a_machine_still_booting_keep_reporting_and_a_cancel_ends_the_machine(
    tmp_path: Path, sample_dir: Path
) -> None:
    store = JobStore(tmp_path / "data")
    job = store.add(sample_dir / "sample.wav", JobOptions(model="tiny.en"))
    pods = ReplayedPods([0], booting=True)
    ledger = Ledger(tmp_path / "cloud-ledger.sqlite3")
    config = OffloadConfig(
        options=JobOptions(model="tiny.en"),
        known_hosts=tmp_path / "known_hosts",
        pin_new_host=True,
        public_key="ssh-ed25519 AAAA scriba",
        timing=OffloadTiming(poll_s=0.2, verify_timeout_s=10.0),
    )
    outcome: list[object] = []
    with ReplayServer() as api:
        pods.route(api)
        provider = RunPod("runpod-key", base_url=api.url + "/v2")
        offload = QueueOffload(store, [job.id], lambda: Offload(provider, OFFER, ledger, config))
        runner = threading.Thread(target=lambda: outcome.append(offload.run()), daemon=True)
        runner.start()

        deadline = time.monotonic() + 60
        while True:  # no progress comes from a machine that is booting: only the offload's own heartbeat
            if _reported_since_claimed(tmp_path / "data" / "queue.sqlite3", job.id):
                break
            assert time.monotonic() < deadline, "the offloaded job never reported while its machine booted"
            time.sleep(0.1)
        assert pods.created == ["pod0"] and not pods.ended_at
        assert store.get(job.id).state is JobState.RUNNING

        store.cancel(job.id)
        runner.join(timeout=60)
        assert not runner.is_alive()
    assert outcome == [None]
    assert store.get(job.id).state is JobState.CANCELLED
    assert list(pods.ended_at) == ["pod0"]
    assert not ledger.open_entries()
