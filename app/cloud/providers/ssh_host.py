""" "My SSH host": a machine the user already has (a workstation with a GPU, a university server).

Nothing is launched or terminated: the machine is the user's. Its host key must already be in a known-hosts
file (never accepted silently), and the offload removes its work directory at the end.
"""

from __future__ import annotations

from app.cloud.remote.transport import SshEndpoint
from app.cloud.types import Instance, Offer
from app.core.cancel import CancelToken


class SshHostProvider:
    name = "ssh"
    rents_machines = False  # nothing to launch or terminate: the offload only removes its work directory

    def __init__(self, endpoint: SshEndpoint, usd_per_hour: float = 0.0) -> None:
        self.endpoint = endpoint
        self.usd_per_hour = usd_per_hour

    def offer(self, gpu: str = "your GPU", vram_gb: float = 0.0) -> Offer:
        return Offer(
            provider="ssh",
            offer=str(self.endpoint),
            gpu=gpu,
            gpu_count=1,
            vram_gb=vram_gb,
            usd_per_hour=self.usd_per_hour,
            spot_usd_per_hour=None,
            billing="per-second",
            boot_minutes=0.0,
            price_source="user",
            price_date="",
            launchable=True,
        )

    def _instance(self) -> Instance:
        endpoint = self.endpoint
        return Instance("ssh", f"ssh://{endpoint}", "running", endpoint.host, endpoint.port, endpoint.user)

    def offers(self) -> list[Offer]:
        return [self.offer()]

    def launch(self, offer: Offer, ssh_public_key: str, label: str) -> Instance:
        return self._instance()

    def wait_ready(
        self, instance_id: str, timeout_s: float = 0.0, poll_s: float = 0.0, cancel: CancelToken | None = None
    ) -> Instance:
        return self._instance()

    def terminate(self, instance_id: str) -> None:
        """The machine is the user's: there is nothing to terminate (its work directory is removed)."""

    def is_terminated(self, instance_id: str) -> bool:
        return True

    def self_terminate_command(self, instance_id: str) -> list[str] | None:
        return None  # the user's own machine is never ended by Scriba

    def list_ours(self, label_prefix: str = "scriba-") -> list[Instance]:
        return []
