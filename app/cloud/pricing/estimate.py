"""What a transcription job would cost and take on each rentable GPU, and on this computer.

Qt-free and free of network access: live prices come in through ``live`` callables (the provider adapters'
``offers()``), speeds through :class:`~app.cloud.pricing.prices.Throughput`, so a test or the GUI can hand in
anything. The whole job is estimated, not just the GPU time: boot + set-up + model download + upload +
transcription (+ diarization) + download of the results, billed at the provider's granularity.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from app.cloud.pricing.prices import (
    BILLING_UNITS,
    CPU,
    MeasuredSpeeds,
    PriceTable,
    ProviderInfo,
    Speed,
    Throughput,
    gpu_key,
    load_price_table,
)
from app.cloud.types import Billing, Offer

LiveOffers = Callable[[], Sequence[Offer]]

LOCAL_PROVIDER = "local"
SSH_PROVIDER = "ssh"


@dataclass(frozen=True)
class Job:
    """The work: total audio length, the model, diarization on or off, and the bytes that must travel."""

    audio_seconds: float
    model: str
    diarize: bool = True
    upload_bytes: int | None = None  # the files' total size; None: assume compressed audio at assumed_audio_kbps
    files: int = 1


@dataclass(frozen=True)
class Assumptions:
    """Everything the estimate assumes that is not in the price table; each one is a knob for the caller."""

    upload_mbps: float = 20.0  # the user's uplink: the files go up over it
    user_download_mbps: float = 50.0  # results coming back, and a model download on this computer
    provider_download_mbps: float = 400.0  # the rented machine fetching the model from the Hugging Face hub
    setup_seconds: float = 150.0  # install Scriba and its CUDA libraries on a fresh machine (2-3 minutes)
    diarize_setup_seconds: float = 60.0  # torch + pyannote wheels on top of that, when diarizing
    model_load_seconds: float = 20.0  # reading the model into GPU memory once
    transfer_overhead_seconds: float = 5.0  # SSH/SFTP handshake and checksum, per direction
    result_bytes_per_audio_hour: float = 2_000_000  # JSON with word timings, SRT, VTT, TXT
    assumed_audio_kbps: float = 128.0  # file size per second of audio when the caller gives no byte count
    diarize_vram_gb: float = 1.5  # pyannote stays loaded next to Whisper (the engine keeps both)
    use_spot: bool = False  # price rows with a spot price at that price (and the risk of preemption)
    include_local: bool = True
    local_gpu: str | None = None  # None: this computer transcribes on its CPU
    local_vram_gb: float | None = None
    local_cpu_cores: int | None = None  # None: os.cpu_count()
    local_model_on_disk: bool = True  # False: the local row includes downloading the model first


@dataclass(frozen=True)
class Breakdown:
    boot_s: float
    setup_s: float
    model_download_s: float
    upload_s: float
    transcribe_s: float
    diarize_s: float
    download_s: float

    @property
    def total_s(self) -> float:
        return (
            self.boot_s
            + self.setup_s
            + self.model_download_s
            + self.upload_s
            + self.transcribe_s
            + self.diarize_s
            + self.download_s
        )

    def to_dict(self) -> dict[str, float]:
        return {name: round(value, 1) for name, value in dataclasses.asdict(self).items()}


@dataclass(frozen=True)
class Option:
    """One way to run the job, with its estimated time and cost."""

    offer: Offer
    usd_per_hour: float  # the rate used: on-demand, or spot when asked for and offered
    spot: bool
    breakdown: Breakdown
    billed_seconds: float
    est_cost_usd: float
    transcribe_speed: Speed
    diarize_speed: Speed | None
    audio_seconds: float
    price_note: str = ""
    notes: tuple[str, ...] = ()
    cheapest: bool = False
    fastest: bool = False

    @property
    def est_seconds(self) -> float:
        return self.breakdown.total_s

    @property
    def audio_hours_per_usd(self) -> float | None:
        """None for a free option (this computer, an own SSH host at $0/h): the ratio is unbounded."""
        if self.est_cost_usd <= 0:
            return None
        return (self.audio_seconds / 3600) / self.est_cost_usd

    @property
    def is_rented(self) -> bool:
        return self.offer.provider != LOCAL_PROVIDER and self.usd_per_hour > 0

    def to_dict(self) -> dict[str, Any]:
        per_usd = self.audio_hours_per_usd
        return {
            "provider": self.offer.provider,
            "offer": self.offer.offer,
            "gpu": self.offer.gpu,
            "vram_gb": self.offer.vram_gb,
            "usd_per_hour": self.usd_per_hour,
            "est_seconds": round(self.est_seconds, 1),
            "est_cost_usd": round(self.est_cost_usd, 4),
            "audio_hours_per_usd": None if per_usd is None else round(per_usd, 2),
            "price_source": self.offer.price_source,
            "price_date": self.offer.price_date,
            "price_note": self.price_note,
            "gpu_count": self.offer.gpu_count,
            "billing": self.offer.billing,
            "billed_seconds": self.billed_seconds,
            "spot": self.spot,
            "launchable": self.offer.launchable,
            "region": self.offer.region,
            "cheapest": self.cheapest,
            "fastest": self.fastest,
            "breakdown": self.breakdown.to_dict(),
            "transcribe_x": round(self.transcribe_speed.x_realtime, 2),
            "transcribe_speed_kind": self.transcribe_speed.kind,
            "transcribe_speed_source": self.transcribe_speed.source,
            "diarize_x": None if self.diarize_speed is None else round(self.diarize_speed.x_realtime, 2),
            "diarize_speed_kind": None if self.diarize_speed is None else self.diarize_speed.kind,
            "diarize_speed_source": None if self.diarize_speed is None else self.diarize_speed.source,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Excluded:
    offer: Offer
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.offer.provider,
            "offer": self.offer.offer,
            "gpu": self.offer.gpu,
            "vram_gb": self.offer.vram_gb,
            "usd_per_hour": self.offer.usd_per_hour,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Estimate:
    job: Job
    upload_bytes: int
    options: list[Option]  # sorted by cost, then time
    excluded: list[Excluded] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def cheapest(self) -> Option | None:
        return next((option for option in self.options if option.cheapest), None)

    @property
    def fastest(self) -> Option | None:
        return next((option for option in self.options if option.fastest), None)

    def to_dict(self) -> dict[str, Any]:
        """The shape `scriba offload estimate --json` prints: these four keys and no others at the top."""
        return {
            "audio_seconds": self.job.audio_seconds,
            "options": [option.to_dict() for option in self.options],
            "excluded": [excluded.to_dict() for excluded in self.excluded],
            "notes": list(self.notes),
        }


# ------------------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------------------


def billed_seconds(seconds: float, billing: Billing, minimum_seconds: float = 0.0) -> float:
    """The time a provider charges for ``seconds`` of use: rounded up to its unit, at least its minimum."""
    unit = BILLING_UNITS[billing]
    # A hair of tolerance so 3600.0000001 s (float noise) is not billed as two hours.
    units = math.ceil(max(seconds, 0.0) / unit - 1e-9)
    return float(max(units * unit, minimum_seconds))


def usable_cores() -> int:
    """CPU cores this process may use (a container's limit, not the host's count, where the OS tells)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def transfer_seconds(size_bytes: float, mbps: float) -> float:
    if mbps <= 0:
        raise ValueError(f"a bandwidth must be positive, not {mbps} Mbit/s")
    return size_bytes * 8 / (mbps * 1_000_000)


def within_budget(option: Option, budget_usd: float) -> bool:
    """True when the option's estimated cost fits the budget (a launch is refused otherwise)."""
    return option.est_cost_usd <= budget_usd + 1e-9


def ssh_offer(gpu: str, vram_gb: float, usd_per_hour: float = 0.0, name: str = "own host") -> Offer:
    """The user's own GPU machine reached over SSH: no boot, cost 0 or what the user says it costs."""
    return Offer(
        provider=SSH_PROVIDER,
        offer=name,
        gpu=gpu,
        gpu_count=1,
        vram_gb=vram_gb,
        usd_per_hour=usd_per_hour,
        spot_usd_per_hour=None,
        billing="per-second",
        boot_minutes=0.0,
        price_source="user",
        price_date=date.today().isoformat(),
        launchable=True,
    )


def collect_offers(
    table: PriceTable,
    live: Mapping[str, LiveOffers] | None,
    today: date,
) -> tuple[list[Offer], list[str]]:
    """The table's offers, with each provider that has a working live hook replaced by its live rows."""
    offers = list(table.offers)
    notes: list[str] = []
    for provider, fetch in (live or {}).items():
        table_rows = table.offers_of(provider)
        try:
            fetched = list(fetch())
        except Exception as error:
            # Any failure of a provider's API (network, auth, 429, a changed schema) must leave the estimate
            # usable: fall back to the table, keep its dates, and say so.
            dates = ", ".join(sorted({offer.price_date for offer in table_rows})) or "none"
            notes.append(
                f"{provider}: live prices unavailable ({type(error).__name__}: {error}); "
                f"showing the price table's figures (dated {dates})"
            )
            continue
        fresh = [
            dataclasses.replace(
                offer,
                provider=provider,
                price_source=offer.price_source if offer.price_source.startswith("api:") else f"api:{provider}",
                price_date=offer.price_date or today.isoformat(),
            )
            for offer in fetched
        ]
        offers = [offer for offer in offers if offer.provider != provider] + fresh
        if fresh:
            notes.append(f"{provider}: {len(fresh)} live price(s) read from its API on {today.isoformat()}")
        else:
            notes.append(f"{provider}: its API lists no offers right now (no capacity?); none shown")
    return offers, notes


def _local_offer(assumptions: Assumptions, throughput: Throughput, today: date) -> Offer:
    gpu = throughput.canonical_gpu(assumptions.local_gpu) if assumptions.local_gpu else CPU
    vram = assumptions.local_vram_gb
    if vram is None and assumptions.local_gpu:
        gpu_class = throughput.gpu_class(assumptions.local_gpu)
        vram = gpu_class.vram_gb if gpu_class else 0.0
    return Offer(
        provider=LOCAL_PROVIDER,
        offer="this computer",
        gpu=gpu,
        gpu_count=1,
        vram_gb=vram or 0.0,
        usd_per_hour=0.0,
        spot_usd_per_hour=None,
        billing="per-second",
        boot_minutes=0.0,
        price_source="local",
        price_date=today.isoformat(),
        launchable=True,
    )


def _plan(
    offer: Offer,
    job: Job,
    upload_bytes: int,
    assumptions: Assumptions,
    throughput: Throughput,
    provider: ProviderInfo | None,
    price_note: str,
) -> Option | Excluded:
    from app.core.engine.models import CATALOG

    entry = CATALOG[job.model]
    local = offer.provider == LOCAL_PROVIDER
    on_cpu = gpu_key(offer.gpu) == gpu_key(CPU)
    if not on_cpu:
        need = entry.vram_gb + (assumptions.diarize_vram_gb if job.diarize else 0.0)
        if offer.vram_gb < need:
            with_diarization = f" ({entry.vram_gb:g} GB + {assumptions.diarize_vram_gb:g} GB for diarization)"
            return Excluded(
                offer,
                f"{job.model} needs about {need:g} GB of GPU memory{with_diarization if job.diarize else ''}; "
                f"the {offer.gpu} has {offer.vram_gb:g} GB",
            )
    cores = (assumptions.local_cpu_cores or usable_cores()) if local else None
    if on_cpu:
        speed = throughput.cpu_transcription(job.model, cores)
        diarize_speed = throughput.cpu_diarization(cores) if job.diarize else None
    else:
        speed = throughput.transcription(offer.gpu, job.model)
        diarize_speed = throughput.diarization(offer.gpu) if job.diarize else None
    if speed is None:
        return Excluded(offer, f"no speed figure for {job.model} on {offer.gpu} (not in the throughput table)")
    if job.diarize and diarize_speed is None:
        return Excluded(offer, f"no diarization speed figure for {offer.gpu}")

    audio = job.audio_seconds
    transcribe_s = audio / speed.x_realtime + assumptions.model_load_seconds
    diarize_s = audio / diarize_speed.x_realtime if diarize_speed is not None else 0.0
    notes: list[str] = []
    if local:
        # Nothing to rent, install or copy: only a missing model has to come down first.
        model_download_s = (
            0.0
            if assumptions.local_model_on_disk
            else transfer_seconds(entry.size_mb * 1_000_000, assumptions.user_download_mbps)
        )
        breakdown = Breakdown(0.0, 0.0, model_download_s, 0.0, transcribe_s, diarize_s, 0.0)
    else:
        provider_mbps = offer.download_mbps or assumptions.provider_download_mbps
        result_bytes = assumptions.result_bytes_per_audio_hour * audio / 3600
        # The upload is bounded by the slower end: usually the user's uplink, sometimes a thin marketplace host.
        upload_mbps = min(assumptions.upload_mbps, offer.download_mbps or math.inf)
        download_mbps = min(assumptions.user_download_mbps, offer.upload_mbps or math.inf)
        breakdown = Breakdown(
            boot_s=offer.boot_minutes * 60,
            setup_s=assumptions.setup_seconds + (assumptions.diarize_setup_seconds if job.diarize else 0.0),
            model_download_s=transfer_seconds(entry.size_mb * 1_000_000, provider_mbps),
            upload_s=transfer_seconds(upload_bytes, upload_mbps) + assumptions.transfer_overhead_seconds,
            transcribe_s=transcribe_s,
            diarize_s=diarize_s,
            download_s=transfer_seconds(result_bytes, download_mbps) + assumptions.transfer_overhead_seconds,
        )
    if offer.gpu_count > 1:
        notes.append(f"uses 1 of its {offer.gpu_count} GPUs: Scriba runs one job at a time")

    spot = assumptions.use_spot and offer.spot_usd_per_hour is not None
    rate = offer.spot_usd_per_hour if spot and offer.spot_usd_per_hour is not None else offer.usd_per_hour
    if spot:
        notes.append("spot price: the machine can be taken back mid-job")
    minimum = provider.min_billing_seconds if provider is not None else 0.0
    billed = billed_seconds(breakdown.total_s, offer.billing, minimum) if rate > 0 else 0.0
    if provider is not None and provider.billing_note:
        notes.append(f"billing: {provider.billing_note}")
    return Option(
        offer=offer,
        usd_per_hour=rate,
        spot=spot,
        breakdown=breakdown,
        billed_seconds=billed,
        est_cost_usd=billed / 3600 * rate,
        transcribe_speed=speed,
        diarize_speed=diarize_speed,
        audio_seconds=audio,
        price_note=price_note,
        notes=tuple(notes),
    )


def _mark(options: list[Option]) -> list[Option]:
    """Flag the fastest option overall and the cheapest one that is rented.

    A free option (this computer) is trivially the cheapest; what the user wants to know is which rented
    machine costs least, so "cheapest" goes to the cheapest rented row (or the first row when none is rented).
    """
    if not options:
        return options
    fastest = min(range(len(options)), key=lambda index: (options[index].est_seconds, options[index].est_cost_usd))
    rented = [index for index, option in enumerate(options) if option.is_rented]
    cheapest = rented[0] if rented else 0  # options are already sorted by cost
    return [
        dataclasses.replace(option, cheapest=index == cheapest, fastest=index == fastest)
        for index, option in enumerate(options)
    ]


def estimate(
    job: Job,
    *,
    assumptions: Assumptions | None = None,
    table: PriceTable | None = None,
    throughput: Throughput | None = None,
    offers: Sequence[Offer] | None = None,
    extra_offers: Sequence[Offer] = (),
    live: Mapping[str, LiveOffers] | None = None,
    max_per_gpu: int | None = None,
    today: date | None = None,
) -> Estimate:
    """Every way to run ``job``, cheapest first, with the fastest and the cheapest rented option marked.

    ``offers`` replaces the table's rows (tests, a GUI filter); ``extra_offers`` adds rows (an SSH host);
    ``live`` maps a provider to a callable returning its live offers, which replace that provider's table
    rows when the call succeeds. ``max_per_gpu`` keeps only the N cheapest options per (provider, GPU), for
    marketplaces whose live lists run to hundreds of near-identical offers.
    """
    from app.core.engine.models import CATALOG

    if job.model not in CATALOG:
        raise ValueError(f"unknown model '{job.model}': choose one of {', '.join(CATALOG)}")
    if not job.audio_seconds > 0:
        raise ValueError(f"nothing to transcribe: {job.audio_seconds} s of audio")
    assumptions = assumptions or Assumptions()
    today = today or date.today()
    table = table or load_price_table()
    # Scriba's own measurements (local benchmarks, finished remote jobs) win over the table's figures.
    throughput = throughput or Throughput(measured=MeasuredSpeeds())

    notes: list[str] = []
    if offers is None:
        candidates, live_notes = collect_offers(table, live, today)
        notes.extend(live_notes)
    else:
        candidates = list(offers)
    candidates.extend(extra_offers)
    if assumptions.include_local:
        candidates.insert(0, _local_offer(assumptions, throughput, today))

    upload_bytes = job.upload_bytes
    if upload_bytes is None:
        upload_bytes = int(job.audio_seconds * assumptions.assumed_audio_kbps * 1000 / 8)
        notes.append(f"upload size assumed from the audio length at {assumptions.assumed_audio_kbps:g} kbit/s")

    options: list[Option] = []
    excluded: list[Excluded] = []
    for offer in candidates:
        provider = table.providers.get(offer.provider)
        price_note = table.note_for(offer) if not offer.price_source.startswith("api:") else ""
        planned = _plan(offer, job, upload_bytes, assumptions, throughput, provider, price_note)
        if isinstance(planned, Option):
            options.append(planned)
        else:
            excluded.append(planned)

    options.sort(
        key=lambda option: (option.est_cost_usd, option.est_seconds, option.offer.provider, option.offer.offer)
    )
    if max_per_gpu is not None:
        seen: dict[tuple[str, str], int] = {}
        kept = []
        for option in options:
            key = (option.offer.provider, gpu_key(option.offer.gpu))
            seen[key] = seen.get(key, 0) + 1
            if seen[key] <= max_per_gpu:
                kept.append(option)
        options = kept

    present = {option.offer.provider for option in options}
    for name in sorted(present):
        provider_info = table.providers.get(name)
        if provider_info is not None and provider_info.cost_note:
            notes.append(f"{name}: {provider_info.cost_note}")
    if any(option.transcribe_speed.kind == "estimate" for option in options):
        notes.append(
            "speeds marked 'estimate' are derived from published benchmarks, not measured by Scriba; "
            "measured speeds replace them once recorded"
        )
    return Estimate(job=job, upload_bytes=upload_bytes, options=_mark(options), excluded=excluded, notes=notes)


def price_date_text(offer: Offer) -> str:
    """How a row's price date is shown: "-" for this computer, "(live)" for a price read from the API now."""
    if offer.provider == LOCAL_PROVIDER:
        return "-"
    if offer.price_source.startswith("api:"):
        return f"{offer.price_date} (live)"
    return offer.price_date
