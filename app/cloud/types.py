"""The records every part of the offload shares:
what can be rented (:class:`Offer`), and what was (:class:`Instance`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Billing = Literal["per-second", "per-minute", "per-hour"]
InstanceState = Literal["requested", "booting", "running", "stopping", "terminated", "failed", "unknown"]


@dataclass(frozen=True)
class Offer:
    """One thing a provider rents, with its price and where that price comes from."""

    provider: str  # "aws", "lambda", "vast", "runpod", "salad", "ssh", "local"
    offer: str  # the provider's name or id for it: "g4dn.xlarge", "gpu_1x_a10", a Vast offer id
    gpu: str  # the card, as the throughput table names it: "T4", "A10G", "RTX 4090", "H100 SXM"
    gpu_count: int
    vram_gb: float  # per GPU
    usd_per_hour: float  # on-demand
    spot_usd_per_hour: float | None
    billing: Billing
    boot_minutes: float  # typical time from launch until SSH answers
    price_source: str  # a URL, or "api:<provider>" for a live price
    price_date: str  # ISO date the price was read
    launchable: bool  # Scriba has an adapter that can rent it in one click
    region: str | None = None
    upload_mbps: float | None = None  # the machine's own measured bandwidth, where the provider reports it
    download_mbps: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Instance:
    """A machine rented (or an SSH host given), as the provider last described it."""

    provider: str
    instance_id: str
    state: InstanceState
    host: str | None = None
    port: int = 22
    user: str = "root"
    offer: str | None = None
    label: str | None = None  # every machine Scriba rents is labelled "scriba-<job>", to find orphans

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
