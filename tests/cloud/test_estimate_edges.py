"""The estimate's edges that mutation testing found unpinned: the shapes it hands out (`scriba offload estimate
--json`, the offload dialog's rows) key by key, billing and transfer arithmetic at their limits, live price lists
that fail or come back, and the rows of this computer and of an own SSH host. Values are written here: a renamed
key or a changed rounding breaks every script that reads them."""

from __future__ import annotations

import dataclasses
import os
from datetime import date
from pathlib import Path

import pytest

from app.cloud.pricing.estimate import (
    Assumptions,
    Breakdown,
    Excluded,
    Job,
    Option,
    billed_seconds,
    collect_offers,
    estimate,
    price_date_text,
    ssh_offer,
    transfer_seconds,
    usable_cores,
    within_budget,
)
from app.cloud.pricing.prices import MeasuredSpeeds, PriceTable, Speed, Throughput, load_price_table
from app.cloud.types import Offer

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers

A10 = Offer(
    provider="lambda",
    offer="gpu_1x_a10",
    gpu="A10",
    gpu_count=2,
    vram_gb=24.0,
    usd_per_hour=0.75,
    spot_usd_per_hour=0.4,
    billing="per-minute",
    boot_minutes=3.0,
    price_source="https://example.org/prices",
    price_date="2025-01-02",
    launchable=False,
    region="us-east-1",
)
BREAKDOWN = Breakdown(180.04, 210.26, 12.349, 33.3333, 600.06, 123.45, 7.77)


def option(diarize: Speed | None, cost: float = 0.070017) -> Option:
    return Option(
        offer=A10,
        usd_per_hour=0.4,
        spot=True,
        breakdown=BREAKDOWN,
        billed_seconds=1200.0,
        est_cost_usd=cost,
        transcribe_speed=Speed(41.2345, "estimate", "published benchmark"),
        diarize_speed=diarize,
        audio_seconds=3600.0,
        price_note="table price",
        notes=("spot", "billing"),
        cheapest=True,
        fastest=False,
    )


def test_a_breakdown_is_given_in_tenths_of_a_second() -> None:
    assert BREAKDOWN.to_dict() == {
        "boot_s": 180.0,
        "setup_s": 210.3,
        "model_download_s": 12.3,
        "upload_s": 33.3,
        "transcribe_s": 600.1,
        "diarize_s": 123.5,
        "download_s": 7.8,
    }


def test_an_option_as_json_names_every_field_and_rounds_each_its_own_way() -> None:
    assert option(Speed(98.7654, "measured", "local benchmark")).to_dict() == {
        "provider": "lambda",
        "offer": "gpu_1x_a10",
        "gpu": "A10",
        "vram_gb": 24.0,
        "usd_per_hour": 0.4,
        "est_seconds": 1167.3,  # 180.04 + 210.26 + 12.349 + 33.3333 + 600.06 + 123.45 + 7.77 = 1167.2623
        "est_cost_usd": 0.07,  # $0.070017
        "audio_hours_per_usd": 14.28,  # 1 h / $0.070017 = 14.2822
        "price_source": "https://example.org/prices",
        "price_date": "2025-01-02",
        "price_note": "table price",
        "gpu_count": 2,
        "billing": "per-minute",
        "billed_seconds": 1200.0,
        "spot": True,
        "launchable": False,
        "region": "us-east-1",
        "cheapest": True,
        "fastest": False,
        "breakdown": {
            "boot_s": 180.0,
            "setup_s": 210.3,
            "model_download_s": 12.3,
            "upload_s": 33.3,
            "transcribe_s": 600.1,
            "diarize_s": 123.5,
            "download_s": 7.8,
        },
        "transcribe_x": 41.23,
        "transcribe_speed_kind": "estimate",
        "transcribe_speed_source": "published benchmark",
        "diarize_x": 98.77,
        "diarize_speed_kind": "measured",
        "diarize_speed_source": "local benchmark",
        "notes": ["spot", "billing"],
    }


def test_an_option_without_diarization_or_cost_has_nulls_there() -> None:
    shape = option(None, cost=0.0).to_dict()
    assert (shape["diarize_x"], shape["diarize_speed_kind"], shape["diarize_speed_source"]) == (None, None, None)
    assert shape["audio_hours_per_usd"] is None and shape["est_cost_usd"] == 0.0


def test_an_excluded_offer_as_json() -> None:
    assert Excluded(A10, "too small").to_dict() == {
        "provider": "lambda",
        "offer": "gpu_1x_a10",
        "gpu": "A10",
        "vram_gb": 24.0,
        "usd_per_hour": 0.75,
        "reason": "too small",
    }


def test_an_own_ssh_host_is_one_free_launchable_gpu_priced_by_the_user_today() -> None:
    host = ssh_offer("RTX 4090", 24.0)
    assert (host.provider, host.offer, host.gpu, host.gpu_count, host.vram_gb) == (
        "ssh",
        "own host",
        "RTX 4090",
        1,
        24.0,
    )
    assert (host.usd_per_hour, host.spot_usd_per_hour, host.billing, host.boot_minutes) == (
        0.0,
        None,
        "per-second",
        0.0,
    )
    assert (host.price_source, host.price_date, host.launchable) == ("user", date.today().isoformat(), True)
    named = ssh_offer("A100", 80.0, usd_per_hour=1.5, name="lab box")
    assert (named.offer, named.usd_per_hour) == ("lab box", 1.5)


def test_a_cost_equal_to_the_budget_fits_it() -> None:
    assert within_budget(option(None, cost=2.5), 2.5)
    assert not within_budget(option(None, cost=2.5001), 2.5)


@pytest.mark.parametrize(
    ("provider", "source", "expected"),
    [
        ("local", "local", "-"),
        ("vast", "api:vast", "2025-01-02 (live)"),
        ("vast", "https://vast.ai/pricing", "2025-01-02"),
        ("aws", "API: copied by hand", "2025-01-02"),
    ],
)
def test_how_a_price_date_is_shown(provider: str, source: str, expected: str) -> None:
    offer = Offer(
        provider=provider,
        offer="x",
        gpu="T4",
        gpu_count=1,
        vram_gb=16.0,
        usd_per_hour=0.5,
        spot_usd_per_hour=None,
        billing="per-second",
        boot_minutes=1.0,
        price_source=source,
        price_date="2025-01-02",
        launchable=True,
    )
    assert price_date_text(offer) == expected


@pytest.mark.parametrize(
    ("gpu", "vram_gb", "expected"),
    [
        ("rtx 4090", None, ("RTX 4090", 24.0)),  # the card's own memory, under its canonical name
        ("RTX 4090", 10.0, ("RTX 4090", 10.0)),  # what the user says is free wins
        (None, None, ("CPU", 0.0)),
    ],
)
def test_this_computer_is_the_gpu_the_user_names_or_its_cpu(
    gpu: str | None, vram_gb: float | None, expected: tuple[str, float]
) -> None:
    assumptions = Assumptions(local_gpu=gpu, local_vram_gb=vram_gb)
    result = estimate(Job(3600, "small"), assumptions=assumptions, offers=[], today=date(2025, 3, 4))
    local = result.options[0].offer
    assert (local.provider, local.offer, local.billing) == ("local", "this computer", "per-second")
    assert (local.gpu, local.vram_gb) == expected
    assert (local.gpu_count, local.boot_minutes, local.usd_per_hour, local.spot_usd_per_hour) == (1, 0.0, 0.0, None)
    assert (local.price_source, local.price_date, local.launchable) == ("local", "2025-03-04", True)


def test_a_local_gpu_the_tables_do_not_know_has_no_memory_to_count_on() -> None:
    result = estimate(Job(3600, "small"), assumptions=Assumptions(local_gpu="Quantum X9"), offers=[])
    assert result.options == []
    assert [(e.offer.gpu, e.offer.vram_gb) for e in result.excluded] == [("Quantum X9", 0.0)]
    assert "the Quantum X9 has 0 GB" in result.excluded[0].reason


def test_usable_cores_are_the_ones_this_process_may_run_on() -> None:
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        assert usable_cores() == 1
    finally:
        os.sched_setaffinity(0, before)


def test_billing_of_no_time_is_nothing_and_the_minimum_applies_only_when_given() -> None:
    assert billed_seconds(0.0, "per-second") == 0.0
    assert billed_seconds(-5.0, "per-minute") == 0.0
    assert billed_seconds(0.4, "per-second") == 1.0
    assert billed_seconds(0.4, "per-second", minimum_seconds=60.0) == 60.0
    assert billed_seconds(61.0, "per-minute") == 120.0


def test_transfer_time_is_bytes_over_the_bandwidth() -> None:
    assert transfer_seconds(1_000_000, 8.0) == 1.0  # 8 Mbit at 8 Mbit/s
    assert transfer_seconds(1_000_000, 0.5) == 16.0  # a thin line is slow, not refused
    with pytest.raises(ValueError, match=r"a bandwidth must be positive, not 0 Mbit/s"):
        transfer_seconds(1_000_000, 0)


def _live(provider: str, source: str) -> Offer:
    return Offer(
        provider=provider,
        offer="live row",
        gpu="RTX 4090",
        gpu_count=1,
        vram_gb=24.0,
        usd_per_hour=0.3,
        spot_usd_per_hour=None,
        billing="per-second",
        boot_minutes=2.0,
        price_source=source,
        price_date="",
        launchable=True,
    )


def test_live_offers_replace_the_table_rows_of_their_provider_even_after_another_provider_failed() -> None:
    def broken() -> list[Offer]:
        raise ConnectionError("no route")

    def vast() -> list[Offer]:
        # The adapter's own spelling of the provider and of a source; the estimate files them under its key.
        return [_live("vast.ai", "https://vast.ai/bundles"), _live("vast.ai", "api:vast/bundles?id=7")]

    offers, notes = collect_offers(load_price_table(), {"nobody": broken, "vast": vast}, date(2025, 3, 4))
    assert notes[0] == (
        "nobody: live prices unavailable (ConnectionError: no route); showing the price table's figures (dated none)"
    )
    assert notes[1] == "vast: 2 live price(s) read from its API on 2025-03-04"
    vast_rows = [o for o in offers if o.provider == "vast"]
    assert [(o.offer, o.price_source, o.price_date) for o in vast_rows] == [
        ("live row", "api:vast", "2025-03-04"),
        ("live row", "api:vast/bundles?id=7", "2025-03-04"),
    ]
    assert not [o for o in offers if o.provider == "vast.ai"]


def _t4(vram_gb: float) -> Offer:
    return Offer(
        provider="vast",
        offer="t4",
        gpu="T4",
        gpu_count=1,
        vram_gb=vram_gb,
        usd_per_hour=0.2,
        spot_usd_per_hour=None,
        billing="per-second",
        boot_minutes=2.0,
        price_source="https://example.org/pricing",
        price_date="2025",
        launchable=True,
    )


def test_a_card_with_just_the_memory_the_model_needs_is_offered() -> None:
    # small needs 2 GB, and 1.5 GB more for diarization (written in Assumptions and the model catalogue).
    alone = Assumptions(include_local=False)
    exact = estimate(Job(600, "small", diarize=False), assumptions=alone, offers=[_t4(2.0)])
    assert [o.offer.vram_gb for o in exact.options] == [2.0]
    with_diarization = estimate(Job(600, "small"), assumptions=alone, offers=[_t4(3.5)])
    assert [o.offer.vram_gb for o in with_diarization.options] == [3.5]
    too_small = estimate(Job(600, "small", diarize=False), assumptions=alone, offers=[_t4(1.0)])
    assert [(e.offer.offer, e.reason) for e in too_small.excluded] == [
        ("t4", "small needs about 2 GB of GPU memory; the T4 has 1 GB")
    ]


def test_a_card_no_table_knows_is_excluded_by_name() -> None:
    mystery = dataclasses.replace(_t4(24.0), gpu="Radeon Mystery", offer="mystery")
    result = estimate(Job(600, "small"), assumptions=Assumptions(include_local=False), offers=[mystery])
    assert [(e.offer, e.reason) for e in result.excluded] == [
        (mystery, "no speed figure for small on Radeon Mystery (not in the throughput table)")
    ]


def test_this_computer_without_diarization_spends_no_time_on_it_and_more_cores_diarize_faster() -> None:
    plain = estimate(Job(600, "small", diarize=False), offers=[]).options[0]
    assert (plain.diarize_speed, plain.breakdown.diarize_s) == (None, 0.0)
    two, eight = (
        estimate(Job(600, "small"), assumptions=Assumptions(local_cpu_cores=cores), offers=[]).options[0]
        for cores in (2, 8)
    )
    assert two.diarize_speed is not None and eight.diarize_speed is not None
    assert eight.diarize_speed.x_realtime > two.diarize_speed.x_realtime


def test_a_cost_a_hair_over_the_budget_still_fits_it() -> None:
    # Float noise in a sum of dollars must not refuse a launch the user sized exactly.
    assert within_budget(option(None, cost=1e-9), 0.0)


# Every assumption that adds time written out, so each part of the breakdown is a sum done here.
BARE = Assumptions(
    upload_mbps=8.0,
    user_download_mbps=8.0,
    provider_download_mbps=400.0,
    setup_seconds=100.0,
    diarize_setup_seconds=50.0,
    model_load_seconds=20.0,
    transfer_overhead_seconds=5.0,
    result_bytes_per_audio_hour=1_000_000_000,
    include_local=False,
)


def test_a_rented_machines_time_is_boot_setup_upload_and_download_as_written() -> None:
    job = Job(3600, "small", diarize=False, upload_bytes=8_000_000)
    row = estimate(job, assumptions=BARE, offers=[_t4(16.0)]).options[0]
    b = row.breakdown
    assert (b.boot_s, b.setup_s, b.upload_s, b.diarize_s) == (120.0, 100.0, 13.0, 0.0)  # 8 MB at 8 Mbit/s + 5 s
    assert b.download_s == 1005.0  # 1 GB of results per audio hour, one hour, at 8 Mbit/s, + 5 s
    with_diarization = estimate(Job(3600, "small", upload_bytes=8_000_000), assumptions=BARE, offers=[_t4(16.0)])
    assert with_diarization.options[0].breakdown.setup_s == 150.0


def test_this_computers_time_is_the_work_alone_and_a_missing_model_comes_down_first() -> None:
    from app.core.engine.models import CATALOG

    on_disk = estimate(Job(600, "small"), offers=[]).options[0].breakdown
    assert (on_disk.boot_s, on_disk.setup_s, on_disk.model_download_s, on_disk.upload_s, on_disk.download_s) == (
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
    )
    fetch = Assumptions(local_model_on_disk=False, user_download_mbps=8.0)
    missing = estimate(Job(600, "small"), assumptions=fetch, offers=[]).options[0].breakdown
    # The catalogue's size in MB, at 8 Mbit/s: one second per MB.
    assert missing.model_download_s == pytest.approx(CATALOG["small"].size_mb)


def test_notes_say_when_a_machine_has_more_gpus_than_a_job_uses_and_when_a_price_is_spot() -> None:
    two = dataclasses.replace(_t4(16.0), gpu_count=2, offer="two", spot_usd_per_hour=0.1)
    one = dataclasses.replace(_t4(16.0), offer="one")
    spot = dataclasses.replace(BARE, use_spot=True)
    rows = {o.offer.offer: o for o in estimate(Job(600, "small"), assumptions=spot, offers=[two, one]).options}
    assert rows["two"].notes == (
        "uses 1 of its 2 GPUs: Scriba runs one job at a time",
        "spot price: the machine can be taken back mid-job",
    )
    assert rows["one"].notes == ()


def test_a_providers_minimum_billing_and_note_apply_and_a_free_host_bills_nothing() -> None:
    quick = Assumptions(
        setup_seconds=0.0,
        diarize_setup_seconds=0.0,
        model_load_seconds=0.0,
        transfer_overhead_seconds=0.0,
        result_bytes_per_audio_hour=0.0,
        include_local=False,
    )
    fast = dataclasses.replace(_t4(16.0), boot_minutes=0.0, billing="per-second")
    job = Job(10, "small", diarize=False, upload_bytes=0)
    # The packaged table: AWS bills at least 60 s, Salad's billing is noted as unverified.
    aws = estimate(job, assumptions=quick, offers=[dataclasses.replace(fast, provider="aws")]).options[0]
    assert aws.billed_seconds == 60.0
    nowhere = estimate(job, assumptions=quick, offers=[dataclasses.replace(fast, provider="nowhere")]).options[0]
    assert nowhere.billed_seconds < 60.0  # a provider with no minimum: the seconds used
    salad = estimate(job, assumptions=quick, offers=[dataclasses.replace(fast, provider="salad")]).options[0]
    assert salad.notes == ("billing: not verified: whole hours assumed so the estimate errs high",)
    free = estimate(job, assumptions=quick, offers=[ssh_offer("T4", 16.0)]).options[0]
    assert (free.billed_seconds, free.est_cost_usd) == (0.0, 0.0)


def test_a_rented_cpu_machines_speed_does_not_depend_on_this_computers_cores() -> None:
    remote_cpu = dataclasses.replace(_t4(0.0), gpu="CPU", offer="cpu box")
    speeds = {
        estimate(
            Job(600, "small", diarize=False),
            assumptions=dataclasses.replace(BARE, local_cpu_cores=cores),
            offers=[remote_cpu],
        )
        .options[0]
        .transcribe_speed.x_realtime
        for cores in (2, 16)
    }
    assert len(speeds) == 1


def test_a_card_with_a_measured_transcription_speed_but_no_diarization_figure_is_excluded_by_name(
    tmp_path: Path,
) -> None:
    measured = MeasuredSpeeds(tmp_path / "speeds.json")
    measured.record("Quantum X9", "small", 50.0, "a job here")
    mystery = dataclasses.replace(_t4(24.0), gpu="Quantum X9", offer="mystery")
    result = estimate(Job(600, "small"), assumptions=BARE, offers=[mystery], throughput=Throughput(measured=measured))
    assert [(e.offer, e.reason) for e in result.excluded] == [(mystery, "no diarization speed figure for Quantum X9")]


def test_a_failed_live_list_names_every_date_of_the_table_rows_shown_instead() -> None:
    def broken() -> list[Offer]:
        raise TimeoutError("slow")

    rows = (
        dataclasses.replace(_t4(16.0), price_date="2025-01"),
        dataclasses.replace(_t4(16.0), price_date="2024-05", offer="older"),
    )
    offers, notes = collect_offers(PriceTable(providers={}, offers=rows), {"vast": broken}, date(2025, 3, 4))
    assert offers == list(rows)
    assert notes == [
        "vast: live prices unavailable (TimeoutError: slow); showing the price table's figures (dated 2024-05, 2025-01)"
    ]


SPEEDS_NOTE = (
    "speeds marked 'estimate' are derived from published benchmarks, not measured by Scriba; "
    "measured speeds replace them once recorded"
)


def test_the_estimate_assumes_an_upload_size_from_the_length_and_says_what_it_assumed(tmp_path: Path) -> None:
    measured = MeasuredSpeeds(tmp_path / "speeds.json")
    measured.record("T4", "small", 30.0, "a job here")
    result = estimate(
        Job(3600, "small", diarize=False),
        assumptions=dataclasses.replace(BARE, assumed_audio_kbps=96.0),
        offers=[_t4(16.0)],
        throughput=Throughput(measured=measured),
    )
    assert result.upload_bytes == 43_200_000  # an hour at 96 kbit/s
    # A measured speed is no estimate: no note about estimates.
    assert result.notes == ["upload size assumed from the audio length at 96 kbit/s", "vast: " + VAST_COST_NOTE]
    guessed = estimate(Job(3600, "small", diarize=False), assumptions=BARE, offers=[_t4(16.0)])
    assert guessed.notes[-1] == SPEEDS_NOTE


VAST_COST_NOTE = load_price_table().providers["vast"].cost_note


def test_speeds_measured_here_are_used_when_no_throughput_is_given() -> None:
    MeasuredSpeeds().record("T4", "small", 77.0, "a job here")  # the test's own data folder (conftest)
    row = estimate(Job(600, "small", diarize=False), assumptions=BARE, offers=[_t4(16.0)]).options[0]
    assert (row.transcribe_speed.x_realtime, row.transcribe_speed.kind) == (77.0, "measured")


def test_what_the_estimate_refuses() -> None:
    with pytest.raises(ValueError, match=r"^unknown model 'huge': choose one of ([a-z0-9.-]+, )+[a-z0-9.-]+$"):
        estimate(Job(600, "huge"))
    with pytest.raises(ValueError, match=r"^nothing to transcribe: 0 s of audio$"):
        estimate(Job(0, "small"))
    assert estimate(Job(0.5, "small"), offers=[]).options  # half a second is something


def test_this_computer_comes_first_among_the_excluded_and_the_cheapest_without_rentals_is_the_first_row() -> None:
    mystery = dataclasses.replace(_t4(24.0), gpu="Radeon Mystery", offer="mystery")
    result = estimate(Job(600, "small"), assumptions=Assumptions(local_gpu="Quantum X9"), offers=[mystery])
    assert [e.offer.offer for e in result.excluded] == ["this computer", "mystery"]
    free = estimate(Job(600, "small"), offers=[ssh_offer("T4", 16.0)])
    # Both free: the faster (the GPU host) is first, and with nothing rented the first row is the cheapest.
    assert [(o.offer.provider, o.cheapest) for o in free.options] == [("ssh", True), ("local", False)]


def test_a_table_rows_note_is_shown_but_not_for_a_live_price() -> None:
    table_row = dataclasses.replace(_t4(16.0), offer="t4")
    live_row = dataclasses.replace(_t4(16.0), offer="t4", price_source="api:vast", usd_per_hour=0.3)
    table = PriceTable(providers={}, offers=(), row_notes={("vast", "t4"): "interruptible host"})
    result = estimate(Job(600, "small", diarize=False), assumptions=BARE, table=table, offers=[table_row, live_row])
    assert [(o.offer.price_source, o.price_note) for o in result.options] == [
        ("https://example.org/pricing", "interruptible host"),
        ("api:vast", ""),
    ]


def test_keeping_the_cheapest_per_gpu_keeps_one_of_each_card() -> None:
    cards = [
        dataclasses.replace(_t4(16.0), offer="t4 cheap", usd_per_hour=0.1),
        dataclasses.replace(_t4(16.0), offer="t4 dear", usd_per_hour=0.5),
        dataclasses.replace(_t4(24.0), gpu="RTX 4090", offer="4090"),
    ]
    result = estimate(Job(600, "small", diarize=False), assumptions=BARE, offers=cards, max_per_gpu=1)
    assert sorted(o.offer.offer for o in result.options) == ["4090", "t4 cheap"]
