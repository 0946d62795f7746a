"""Building an :class:`Offload` for a provider: its key from the keyring, Scriba's own SSH key for rented
machines, the pinned known-hosts file, the ledger, and a live offer for the row the user picked."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from app.cloud.offload.base import OffloadConfig, OffloadError, RemoteSetup
from app.cloud.offload.ledger import DATABASE_NAME, Ledger
from app.cloud.offload.results import results_dir
from app.cloud.offload.run import Offload
from app.cloud.providers import NoCapacity, Provider, normalize_gpu_name, provider_from_keyring
from app.cloud.types import Offer
from app.core.queue.jobs import JobOptions
from app.core.queue.sqlite_db import NewerFileError, is_corruption, move_aside


def cloud_dir(data_dir: Path) -> Path:
    path = data_dir / "cloud"
    path.mkdir(parents=True, exist_ok=True)
    return path


def ledger_for(data_dir: Path) -> Ledger:
    """The ledger in ``data_dir``; :class:`OffloadError` (one line) when it cannot be opened or written."""
    path = data_dir / DATABASE_NAME
    try:
        return Ledger(path)
    except (sqlite3.Error, OSError) as error:  # a full or read-only data disk, a broken file
        advice = (
            "run `scriba offload sweep`: it sets the damaged file aside (kept) and ends Scriba's machines from the "
            "providers' own lists"
            if is_corruption(error)
            else "free space in Scriba's data folder, or make it writable, and try again"
        )
        raise OffloadError(
            f"the cloud ledger {path} cannot be opened or written ({type(error).__name__}: {error}). Nothing is "
            f"rented without it: {advice}."
        ) from None


@dataclass
class SweepLedger:
    """The ledger as `offload sweep` finds it. ``readable`` False: its entries are lost to the sweep, which then
    works from the providers' own lists; ``ledger`` is then a fresh one to record in (None: none could be made),
    and ``problem`` says what happened to the old file."""

    ledger: Ledger | None
    readable: bool
    problem: str = ""


def ledger_for_sweep(data_dir: Path) -> SweepLedger:
    """Open the ledger for a sweep; a damaged one (not a database, a malformed page) is moved aside, kept and never
    deleted, and a fresh ledger started beside it. One that cannot be opened for another reason (a read-only or
    locked file, a newer Scriba's) is left where it is."""
    path = data_dir / DATABASE_NAME
    ledger: Ledger | None = None
    try:
        ledger = Ledger(path)
        ledger.entries()  # every row read now: a damaged page fails here, not halfway through the sweep
        return SweepLedger(ledger, True)
    except (sqlite3.Error, OSError, NewerFileError) as error:
        if ledger is not None:
            with contextlib.suppress(Exception):
                ledger.close()
        problem = f"{type(error).__name__}: {error}"
        if not is_corruption(error):
            return SweepLedger(
                None, False, f"the cloud ledger {path} cannot be opened or written ({problem}); it was left as it is"
            )
        try:
            aside = move_aside(path, "damaged")
        except OSError as move_error:
            return SweepLedger(
                None,
                False,
                f"the cloud ledger {path} is damaged ({problem}) and could not be moved aside ({move_error}); "
                "it was left as it is",
            )
    told = f"the cloud ledger {path} is damaged ({problem}): it was moved to {aside} (kept, not deleted)"
    try:
        return SweepLedger(Ledger(path), False, f"{told} and a new ledger was started")
    except (sqlite3.Error, OSError) as error:
        return SweepLedger(None, False, f"{told}; a new ledger could not be started ({type(error).__name__}: {error})")


def sweep_left_behind(
    data_dir: Path, notify: Callable[[str], None], providers: Mapping[str, Provider] | None = None
) -> int:
    """The start-up sweep (the window's, `offload run`'s): end the machines of runs that died and check the ledger
    against the list of every provider that has a key, even when the ledger looks clean (a ledger that was wrong
    or could not be written must not hide a machine that bills). Returns how many entries are still open.
    ``providers``: default, every provider whose key is set."""
    from app.cloud.providers import configured_providers

    ledger = ledger_for(data_dir)
    try:
        if providers is None:
            providers = configured_providers()
        if providers or ledger.open_entries():
            ledger.sweep_orphans(providers, notify)
        return len(ledger.open_entries())
    finally:
        ledger.close()


def rented_machine_key(data_dir: Path) -> tuple[Path, str]:
    """Scriba's own SSH key for machines it rents (never the user's personal key): path and public line."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = cloud_dir(data_dir) / "id_ed25519"
    public = private.with_suffix(".pub")
    if not private.is_file() or not public.is_file():
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
        line = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        descriptor = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(pem)
        public.write_text(line.decode() + " scriba-rented-machines\n")
    return private, public.read_text().strip()


def live_offer_for(provider: Provider, chosen: Offer) -> Offer:
    """The provider's current, rentable offer for the row the user picked (the table's rows are prices, not ids).

    The cheapest live offer with the same GPU and at least as much memory; :class:`NoCapacity` when none is free.
    """
    if chosen.price_source.startswith("api:"):
        return chosen
    wanted = normalize_gpu_name(chosen.gpu)
    candidates = [
        offer
        for offer in provider.offers()
        if normalize_gpu_name(offer.gpu) == wanted and offer.vram_gb >= chosen.vram_gb - 0.5
    ]
    if not candidates:
        raise NoCapacity(
            f"{provider.title} has no {chosen.gpu} free right now: pick another row of the estimate",
            provider=provider.name,
        )
    return min(candidates, key=lambda offer: offer.usd_per_hour)


def live_offers_for(provider: Provider, chosen: Offer, count: int) -> list[Offer]:
    """Offers for ``count`` machines like ``chosen``: the same one ``count`` times where an offer can be rented
    again and again, else the ``count`` cheapest distinct ones (fewer when fewer are free; none is NoCapacity)."""
    if not provider.offer_is_one_machine:
        return [live_offer_for(provider, chosen)] * count
    wanted = normalize_gpu_name(chosen.gpu)
    candidates = sorted(
        (
            offer
            for offer in provider.offers()
            if normalize_gpu_name(offer.gpu) == wanted and offer.vram_gb >= chosen.vram_gb - 0.5
        ),
        key=lambda offer: offer.usd_per_hour,
    )
    if not candidates:
        raise NoCapacity(
            f"{provider.title} has no {chosen.gpu} free right now: pick another row of the estimate",
            provider=provider.name,
        )
    return candidates[:count]


def build_rented_offload(
    provider_name: str,
    chosen: Offer,
    data_dir: Path,
    *,
    options: JobOptions,
    budget_usd: float | None,
    estimate_usd: float | None,
    hf_token: str | None = None,
    setup: RemoteSetup | None = None,
) -> Offload:
    provider = provider_from_keyring(provider_name)
    config = rented_config(data_dir, options, budget_usd, estimate_usd, hf_token, setup)
    return Offload(provider, live_offer_for(provider, chosen), ledger_for(data_dir), config)


def rented_config(
    data_dir: Path,
    options: JobOptions,
    budget_usd: float | None,
    estimate_usd: float | None,
    hf_token: str | None = None,
    setup: RemoteSetup | None = None,
) -> OffloadConfig:
    """How Scriba reaches and trusts a machine it rents: its own key, the pinned known-hosts file, Scriba
    installed there."""
    key_file, public_key = rented_machine_key(data_dir)
    return OffloadConfig(
        options=options,
        key_file=key_file,
        public_key=public_key,
        known_hosts=cloud_dir(data_dir) / "known_hosts",
        pin_new_host=True,  # a machine rented a minute ago: its first key is pinned, any change aborts
        setup=setup or RemoteSetup(install_missing=True),
        hf_token=hf_token,
        budget_usd=budget_usd,
        estimate_usd=estimate_usd,
        keep_dir=results_dir(data_dir),
    )


def build_ssh_offload(
    url: str,
    data_dir: Path,
    *,
    identity: Path | None,
    known_hosts: Path,
    options: JobOptions,
    hf_token: str | None = None,
    setup: RemoteSetup | None = None,
    usd_per_hour: float = 0.0,
) -> Offload:
    """An offload to the user's own SSH host (``ssh://user@host:port``): nothing rented, its key must be known."""
    from app.cloud.providers.ssh_host import SshHostProvider
    from app.cloud.remote.transport import parse_ssh_url

    provider = SshHostProvider(parse_ssh_url(url, identity), usd_per_hour)
    config = OffloadConfig(
        options=options,
        key_file=identity,
        known_hosts=known_hosts,
        pin_new_host=False,
        setup=setup or RemoteSetup(),
        hf_token=hf_token,
        keep_dir=results_dir(data_dir),
    )
    return Offload(provider, provider.offer(), ledger_for(data_dir), config)
