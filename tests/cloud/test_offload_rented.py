"""A rented machine from launch to verified teardown: Vast.ai's documented API replayed by a local HTTP server,
and the "instance" it reports is the real OpenSSH server on 127.0.0.1 running `scriba worker`.

This is the path a user's one click takes: ledger intent, rent, wait for SSH, pin the new host key, upload,
run, download, remove the work, destroy, verify destroyed, ledger closed, pinned key forgotten.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from app.cloud.offload.base import OffloadConfig, OffloadTiming, RemoteSetup
from app.cloud.offload.ledger import Ledger
from app.cloud.offload.run import Offload
from app.cloud.providers import VastAI
from app.cloud.types import Offer
from app.core.queue.jobs import JobOptions
from tests.cloud.replay_server import FakeClock, ReplayServer
from tests.cloud.sshd import LoopbackSshd

REPO = Path(__file__).resolve().parents[2]
KEY = "vast-key-3c1e-DO-NOT-LEAK"


def _instance(sshd: LoopbackSshd, actual: str | None, ssh: bool) -> dict[str, Any]:
    return {
        "instances": {
            "id": 4020,
            "actual_status": actual,
            "cur_state": "running",
            "intended_status": "running",
            "label": "scriba-offload",
            "image_runtype": "ssh",
            "status_msg": "",
            "ssh_host": "127.0.0.1" if ssh else None,
            "ssh_port": sshd.port if ssh else None,
            "public_ipaddr": "127.0.0.1",
            "gpu_name": "RTX 4090",
            "extra_env": [],
        }
    }


@pytest.fixture()
def rented(tmp_path: Path) -> Any:
    server = LoopbackSshd(tmp_path / "sshd")
    server.start()
    yield server
    server.stop()


def test_rent_run_destroy_verify(rented: LoopbackSshd, tmp_path: Path, sample_dir: Path) -> None:
    clock = FakeClock()
    with ReplayServer() as api:
        api.route("PUT", "/api/v0/asks/12345678/", {"success": True, "new_contract": 4020})
        api.route("POST", "/api/v0/instances/4020/ssh/", {"success": True})
        booting = _instance(rented, "loading", ssh=False)
        running = _instance(rented, "running", ssh=True)
        # Booting twice, then running for the whole job; after the destroy, gone.
        api.route("GET", "/api/v0/instances/4020/", booting, booting, *[running] * 3, {"instances": None})
        api.route("DELETE", "/api/v0/instances/4020/", {"success": True})
        provider = VastAI(KEY, base_url=api.url + "/api", sleep=clock.sleep, clock=clock.monotonic)
        offer = Offer(
            "vast", "12345678", "RTX 4090", 1, 24.0, 0.40, None, "per-second", 2.0, "api:vast", "2026-11-21", True
        )
        ledger = Ledger(tmp_path / "ledger.sqlite3")
        pinned = tmp_path / "scriba_known_hosts"
        events: list[str] = []
        config = OffloadConfig(
            options=JobOptions(model="tiny.en", language="en", diarizer="embedded"),
            key_file=rented.client_key,
            public_key=rented.client_key.with_suffix(".pub").read_text().strip(),
            known_hosts=pinned,
            pin_new_host=True,
            setup=RemoteSetup((sys.executable, "-m", "app"), (("PYTHONPATH", str(REPO)),)),
            budget_usd=1.0,
            estimate_usd=0.05,
            timing=OffloadTiming(heartbeat_s=1.0, poll_s=0.2, reconnect_wait_s=0.1),
        )
        offload = Offload(provider, offer, ledger, config)
        result = offload.run([sample_dir / "sample.wav"], on_event=lambda event: events.append(event.message))
        assert result.transcripts[0].text.lower().startswith("hello")
        assert not api.unmatched, [f"{r.method} {r.path}" for r in api.unmatched]
        assert api.calls("POST", "/api/v0/instances/4020/ssh/")[0].json() == {
            "ssh_key": rented.client_key.with_suffix(".pub").read_text().strip()
        }
        assert len(api.calls("DELETE", "/api/v0/instances/4020/")) == 1
        assert all(KEY not in (r.body.decode() + str(r.query)) for r in api.requests)
    [entry] = ledger.entries()
    assert ledger.open_entries() == []
    assert entry.instance_id == "4020" and entry.verified
    assert "vast instance 4020 terminated (verified)" in events
    # The pinned key is forgotten once the machine is gone: the address will be someone else's next.
    assert "127.0.0.1" not in pinned.read_text()
    assert 0 < result.cost_usd <= 0.40 * result.seconds / 3600
    # The measured speed of this card now takes precedence over the table's estimate in the next estimate.
    from app.cloud.pricing.prices import MeasuredSpeeds

    [record] = [r for r in MeasuredSpeeds().records() if r.task == "transcribe"]
    assert (record.gpu, record.model, record.source) == ("RTX 4090", "tiny.en", "Scriba job on vast")
    assert record.x_realtime > 1
