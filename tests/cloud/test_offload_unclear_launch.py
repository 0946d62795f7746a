"""A launch whose outcome is unclear is never written off as "not launched" on a guess (issue 18): Lambda Cloud
accepts the launch but answers in a shape Scriba does not know. Lambda's documented API replayed on loopback;
the offload is the real one, up to the point where the machine turns out unusable and is torn down."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.cloud.offload.base import OffloadConfig, OffloadTiming
from app.cloud.offload.ledger import LaunchState, Ledger
from app.cloud.offload.run import Offload
from app.cloud.providers import LambdaCloud, LaunchFailed, ProviderError
from app.cloud.types import Offer
from app.core.queue.jobs import JobOptions
from tests.cloud.replay_server import FakeClock, Recorded, ReplayServer, Reply

KEY = "lambda-key-unclear-DO-NOT-LEAK"
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILXGDN/SclOozk1xsDztpmhGiKkkrfQB9SKoO8dSIQQZ scriba-job"
LAMBDA_ID = "0920582c7ff041399e34823a0be62549"
OFFER = Offer(
    "lambda", "gpu_1x_a10", "A10", 1, 24.0, 0.75, None, "per-minute", 5.0, "api:lambda", "2026-11-21", True, "us-east-1"
)


@dataclass
class LambdaAccount:
    label: str | None = None
    terminated: bool = False

    def instance(self) -> dict[str, Any]:
        status = "terminated" if self.terminated else "unhealthy"  # up, but unusable: the offload ends it
        return {"id": LAMBDA_ID, "name": self.label, "ip": "198.51.100.7", "status": status}


@pytest.fixture
def api() -> Iterator[ReplayServer]:
    with ReplayServer() as replay:
        yield replay
    assert not replay.unmatched, [f"{r.method} {r.path}" for r in replay.unmatched]


def route_lambda(api: ReplayServer, account: LambdaAccount, listing: Any = None) -> None:
    def launch(request: Recorded) -> dict[str, Any]:
        account.label = request.json()["name"]
        # Accepted (HTTP 200), but not the documented {"data": {"instance_ids": [...]}}.
        return {"instances": [{"id": LAMBDA_ID}]}

    def terminate(request: Recorded) -> dict[str, Any]:
        account.terminated = True
        return {"data": {"terminated_instances": [account.instance()]}}

    api.route("GET", "/api/v1/ssh-keys", {"data": [{"id": "k1", "name": "scriba-k", "public_key": PUBLIC_KEY}]})
    api.route("POST", "/api/v1/instance-operations/launch", launch)
    api.route(
        "GET",
        "/api/v1/instances",
        listing if listing is not None else (lambda request: {"data": [account.instance()]}),
    )
    api.route("GET", f"/api/v1/instances/{LAMBDA_ID}", lambda request: {"data": account.instance()})
    api.route("POST", "/api/v1/instance-operations/terminate", terminate)


def offload(api: ReplayServer, tmp_path: Path) -> Offload:
    clock = FakeClock()
    provider = LambdaCloud(KEY, base_url=api.url + "/api/v1", sleep=clock.sleep, clock=clock.monotonic)
    config = OffloadConfig(
        options=JobOptions(model="tiny.en"),
        key_file=None,
        public_key=PUBLIC_KEY,
        known_hosts=tmp_path / "known_hosts",
        pin_new_host=True,
        timing=OffloadTiming(reconnect_wait_s=0.01, unclear_launch_spacing_s=0.01),
    )
    return Offload(provider, OFFER, Ledger(tmp_path / "cloud-ledger.sqlite3"), config)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "talk.wav"
    path.write_bytes(b"RIFF")
    return path


def test_an_accepted_launch_in_an_unknown_shape_is_found_by_label_and_ended(
    api: ReplayServer, tmp_path: Path, source: Path
) -> None:
    account = LambdaAccount()
    route_lambda(api, account)
    run = offload(api, tmp_path)
    with pytest.raises(LaunchFailed):
        run.run([source])
    [entry] = Ledger(tmp_path / "cloud-ledger.sqlite3").entries()
    assert entry.instance_id == LAMBDA_ID and entry.state is LaunchState.TERMINATED and entry.verified
    assert account.terminated and run.teardown.state == "terminated"


def test_an_unclear_launch_stays_open_while_the_providers_list_cannot_be_read(
    api: ReplayServer, tmp_path: Path, source: Path
) -> None:
    account = LambdaAccount()
    route_lambda(api, account, listing=Reply(500, {"error": {"code": "global/unknown", "message": "Oops"}}))
    run = offload(api, tmp_path)
    with pytest.raises(ProviderError) as caught:
        run.run([source])
    assert caught.value.maybe_created
    [entry] = Ledger(tmp_path / "cloud-ledger.sqlite3").entries()
    assert entry.is_open and entry.state is LaunchState.INTENDED  # never "not launched" on a guess
    assert run.teardown.state == "unconfirmed" and "may be billing" in run.teardown.message
    assert not account.terminated  # nothing known to terminate: the next start's sweep looks again


def test_an_unclear_launch_the_list_never_shows_stays_open_after_several_reads(
    api: ReplayServer, tmp_path: Path, source: Path
) -> None:
    """A provider's list can lag behind the create: an empty list, read however often, never proves that nothing
    was launched. The entry stays open (outcome unknown) for the next start or `offload sweep`."""
    account = LambdaAccount()
    route_lambda(api, account, listing={"data": []})
    run = offload(api, tmp_path)
    with pytest.raises(ProviderError):
        run.run([source])
    assert len(api.calls("GET", "/api/v1/instances")) > 1
    [entry] = Ledger(tmp_path / "cloud-ledger.sqlite3").entries()
    assert entry.is_open and entry.state is LaunchState.INTENDED and "outcome unknown" in (entry.reason or "")
    assert run.teardown.state == "unconfirmed" and "scriba offload sweep" in run.teardown.message
