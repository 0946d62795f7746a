"""The price table, the speed figures and the cost/time estimator, through the API and `offload estimate`."""

from __future__ import annotations

import itertools
import json
import math
from datetime import date
from pathlib import Path

import numpy as np
import pytest
import soundfile

from app.cli.main import build_parser
from app.cli.offload_estimate import cmd_offload_estimate
from app.cloud.pricing.estimate import (
    Assumptions,
    Job,
    Option,
    billed_seconds,
    estimate,
    ssh_offer,
    within_budget,
)
from app.cloud.pricing.prices import MeasuredSpeeds, Throughput, load_price_table, load_table_data
from app.cloud.types import Offer
from app.core.engine.models import CATALOG
from tests.test_cli import scriba

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers

TABLE_PROVIDERS = {"aws", "lambda", "vast", "runpod", "salad"}
OPTION_KEYS = {
    "provider",
    "offer",
    "gpu",
    "vram_gb",
    "usd_per_hour",
    "est_seconds",
    "est_cost_usd",
    "audio_hours_per_usd",
    "price_source",
    "price_date",
}
TODAY = date(2026, 11, 21)


def offer(
    gpu: str,
    vram_gb: float,
    usd_per_hour: float = 1.0,
    *,
    provider: str = "vast",
    name: str | None = None,
    billing: str = "per-second",
    boot_minutes: float = 2.0,
    price_source: str = "https://example.org/pricing",
    price_date: str = "2025",
    spot: float | None = None,
) -> Offer:
    return Offer(
        provider=provider,
        offer=name or f"{gpu} offer",
        gpu=gpu,
        gpu_count=1,
        vram_gb=vram_gb,
        usd_per_hour=usd_per_hour,
        spot_usd_per_hour=spot,
        billing=billing,  # type: ignore[arg-type]
        boot_minutes=boot_minutes,
        price_source=price_source,
        price_date=price_date,
        launchable=True,
    )


def table_only(**overrides: object) -> Assumptions:
    return Assumptions(include_local=False, **overrides)  # type: ignore[arg-type]


@pytest.fixture
def throughput(tmp_path: Path) -> Throughput:
    """The packaged table with an empty measured-speeds file of its own."""
    return Throughput(measured=MeasuredSpeeds(tmp_path / "measured.json"))


@pytest.fixture(scope="module")
def hour_flac(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One hour of silence as FLAC: about 90 kB on disk, and its header says 3600 s."""
    path = tmp_path_factory.mktemp("hour") / "one hour.flac"
    with soundfile.SoundFile(path, "w", samplerate=8000, channels=1, format="FLAC", subtype="PCM_16") as sink:
        minute = np.zeros(8000 * 60, dtype=np.int16)
        for _ in range(60):
            sink.write(minute)
    return path


def run_cli(*argv: str) -> int:
    """`scriba offload …` through the command's own parser, in this process (the output is captured by capsys)."""
    args = build_parser().parse_args(["offload", *argv])
    assert args.offload_command == "estimate"
    return cmd_offload_estimate(args)


# ------------------------------------------------------------------------------------------------------------
# The table
# ------------------------------------------------------------------------------------------------------------


def test_every_price_row_has_a_source_a_date_and_an_honest_date_note() -> None:
    data = load_table_data()
    assert data["offers"], "the price table is empty"
    for row in data["offers"]:
        where = f"{row['provider']} {row['offer']}"
        assert str(row["source"]).startswith("https://"), where
        assert row["date"], where
        if len(str(row["date"])) == 4:  # only a year: the source gave no date, and the row must say so
            assert "undated in source" in row["date_note"], where
    for key, provider in data["providers"].items():
        assert str(provider["billing_source"]).startswith("https://"), key
        assert provider["billing"] in {"per-second", "per-minute", "per-hour"}, key


def test_the_seed_aws_rows_and_which_providers_scriba_can_launch() -> None:
    table = load_price_table()
    aws = {row.offer: row for row in table.offers_of("aws")}
    expected = {
        "g4dn.xlarge": ("T4", 16, 0.526),
        "g4dn.2xlarge": ("T4", 16, 0.752),
        "g5.xlarge": ("A10G", 24, 1.006),
        "g5.2xlarge": ("A10G", 24, 1.212),
        "p3.2xlarge": ("V100", 16, 3.06),
        "p4d.24xlarge": ("A100-40GB", 40, 32.77),
    }
    assert {name: (row.gpu, row.vram_gb, row.usd_per_hour) for name, row in aws.items()} == expected
    assert aws["p4d.24xlarge"].gpu_count == 8
    assert all(row.billing == "per-second" for row in aws.values())
    assert table.providers["aws"].min_billing_seconds == 60
    assert {row.provider for row in table.offers} == TABLE_PROVIDERS
    launchable = {key for key, provider in table.providers.items() if provider.launchable}
    assert launchable == {"lambda", "vast", "runpod"}
    assert all(row.launchable == (row.provider in launchable) for row in table.offers)
    lambda_rows = {row.offer: row.usd_per_hour for row in table.offers_of("lambda")}
    assert lambda_rows["gpu_1x_a10"] == 1.29 and lambda_rows["gpu_1x_h100_sxm5"] == 4.29
    assert table.offers_of("salad")[0].usd_per_hour == 0.10


def test_every_table_gpu_has_speeds_for_the_main_models_each_with_a_source(throughput: Throughput) -> None:
    for row in load_price_table().offers:
        for model in ("large-v3", "turbo", "distil-large-v3", "small"):
            speed = throughput.transcription(row.gpu, model)
            assert speed is not None, (row.gpu, model)
            assert speed.x_realtime > 0 and speed.source
            if speed.kind == "estimate":
                assert speed.source.startswith("estimate")
        diarize = throughput.diarization(row.gpu)
        assert diarize is not None and diarize.x_realtime > 0 and diarize.source
    # Spellings the provider adapters produce map onto the table's classes.
    for spelling, name in {
        "A100 SXM": "A100-40GB",
        "A100-SXM-80GB": "A100-80GB",
        "H100": "H100 PCIe",
        "H100 SXM": "H100 SXM",
        "RTX A6000": "A6000",
        "Quadro RTX 6000": "RTX 6000",
        "NVIDIA GeForce RTX 4090": "RTX 4090",
    }.items():
        assert throughput.canonical_gpu(spelling) == name
    for model in CATALOG:  # every model Scriba offers can be estimated on a GPU and on the CPU
        assert throughput.transcription("A10G", model) is not None, model
        assert throughput.cpu_transcription(model) is not None, model
    published = throughput.transcription("NVIDIA GeForce RTX 3060", "large-v3")
    assert published is not None and published.kind == "published" and published.x_realtime == 20.0
    assert "blog.salad.com" in published.source
    v100 = throughput.diarization("Tesla V100")
    assert v100 is not None and v100.x_realtime == 40 and "pyannote" in v100.source
    cpu = throughput.cpu_transcription("tiny.en")
    assert cpu is not None and cpu.x_realtime == 14.3 and "Measured" in cpu.source


# ------------------------------------------------------------------------------------------------------------
# The estimator
# ------------------------------------------------------------------------------------------------------------


def test_one_hour_of_large_v3_lists_every_provider_cheapest_first(throughput: Throughput) -> None:
    result = estimate(Job(3600, "large-v3"), throughput=throughput, today=TODAY)
    assert {option.offer.provider for option in result.options} == TABLE_PROVIDERS | {"local"}
    assert result.excluded == []  # every table GPU has at least 12 GB
    costs = [option.est_cost_usd for option in result.options]
    assert costs == sorted(costs)
    g4dn = next(option for option in result.options if option.offer.offer == "g4dn.xlarge")
    assert g4dn.usd_per_hour == 0.526 and g4dn.offer.price_date == "2025"
    assert "undated in source" in g4dn.price_note

    rented = [option for option in result.options if option.offer.provider != "local"]
    assert [option.cheapest for option in result.options].count(True) == 1
    assert [option.fastest for option in result.options].count(True) == 1
    assert result.cheapest is not None and result.cheapest.est_cost_usd == min(o.est_cost_usd for o in rented)
    assert result.fastest is not None and result.fastest.est_seconds == min(o.est_seconds for o in result.options)
    for option in rented:
        parts = option.breakdown
        assert parts.boot_s == option.offer.boot_minutes * 60 > 0
        assert parts.setup_s > 0 and parts.model_download_s > 0 and parts.upload_s > 0 and parts.download_s > 0
        assert parts.transcribe_s > 3600 / option.transcribe_speed.x_realtime
        assert option.diarize_speed is not None and parts.diarize_s == pytest.approx(
            3600 / option.diarize_speed.x_realtime
        )
        assert option.est_seconds == pytest.approx(parts.total_s)
        assert option.billed_seconds >= option.est_seconds
        assert option.audio_hours_per_usd == pytest.approx(1 / option.est_cost_usd)

    without_diarization = estimate(Job(3600, "large-v3", diarize=False), throughput=throughput, today=TODAY)
    same = next(option for option in without_diarization.options if option.offer.offer == "g4dn.xlarge")
    assert same.breakdown.diarize_s == 0 and same.est_seconds < g4dn.est_seconds


def test_the_estimated_time_is_every_stage_added_up_boot_included(tmp_path: Path) -> None:
    """Every figure the estimate uses is set here, and the expected time is summed here from them: a stage left
    out of the total (the boot, say) shows as a wrong sum, not as the code agreeing with its own definition."""
    measured = MeasuredSpeeds(tmp_path / "speeds.json")
    measured.record("RTX 4090", "turbo", 40.0, "test")
    measured.record("RTX 4090", "any", 60.0, "test", task="diarize")
    assumptions = table_only(
        upload_mbps=8,
        user_download_mbps=4,
        provider_download_mbps=800,
        setup_seconds=100,
        diarize_setup_seconds=50,
        model_load_seconds=10,
        transfer_overhead_seconds=2,
        result_bytes_per_audio_hour=1_000_000,
    )
    card = offer("RTX 4090", 24, 0.36, boot_minutes=4)
    job = Job(3600, "turbo", upload_bytes=10_000_000)
    option = estimate(job, offers=[card], assumptions=assumptions, throughput=Throughput(measured=measured)).options[0]

    boot = 4 * 60
    setup = 100 + 50
    model_download = CATALOG["turbo"].size_mb * 8 / 800  # MB over the provider's 800 Mbit/s
    upload = 10 * 8 / 8 + 2  # 10 MB at 8 Mbit/s, plus the handshake
    transcribe = 3600 / 40 + 10  # 40x real time, plus loading the model
    diarize = 3600 / 60
    download = 1 * 8 / 4 + 2  # 1 MB of results at 4 Mbit/s, plus the handshake
    expected = boot + setup + model_download + upload + transcribe + diarize + download
    assert option.breakdown.boot_s == pytest.approx(boot)
    assert option.est_seconds == pytest.approx(expected)
    assert option.to_dict()["est_seconds"] == pytest.approx(expected, abs=0.05)
    assert option.billed_seconds == math.ceil(expected)  # billed by the second
    assert option.est_cost_usd == pytest.approx(math.ceil(expected) / 3600 * 0.36)


def test_a_model_that_does_not_fit_the_card_is_excluded_with_the_reason(throughput: Throughput) -> None:
    small_card = offer("RTX 3070 Ti", 8)
    eleven_gb = offer("RTX 3060", 11, name="11 GB card")
    result = estimate(
        Job(3600, "large-v3"), offers=[small_card, eleven_gb], assumptions=table_only(), throughput=throughput
    )
    assert result.options == []
    reasons = {excluded.offer.offer: excluded.reason for excluded in result.excluded}
    assert "10 GB" in reasons["RTX 3070 Ti offer"] and "8 GB" in reasons["RTX 3070 Ti offer"]
    assert "diarization" in reasons["11 GB card"]  # 10 GB of Whisper + pyannote next to it

    plain = estimate(
        Job(3600, "large-v3", diarize=False),
        offers=[small_card, eleven_gb],
        assumptions=table_only(),
        throughput=throughput,
    )
    assert [option.offer.offer for option in plain.options] == ["11 GB card"]
    fits = estimate(Job(3600, "small"), offers=[small_card], assumptions=table_only(), throughput=throughput)
    assert len(fits.options) == 1 and fits.excluded == []


def test_a_gpu_without_a_speed_figure_is_excluded_not_guessed(throughput: Throughput) -> None:
    result = estimate(
        Job(600, "small"), offers=[offer("Radeon Mystery", 24)], assumptions=table_only(), throughput=throughput
    )
    assert result.options == [] and "no speed figure" in result.excluded[0].reason


def test_billing_granularity_and_minimums() -> None:
    assert billed_seconds(0.4, "per-second") == 1
    assert billed_seconds(61, "per-minute") == 120
    assert billed_seconds(60, "per-minute") == 60
    assert billed_seconds(3601, "per-hour") == 7200
    assert billed_seconds(3600.0000001, "per-hour") == 3600  # float noise is not a second hour
    assert billed_seconds(10, "per-second", minimum_seconds=60) == 60


def test_the_estimate_bills_whole_hours_and_minutes(throughput: Throughput) -> None:
    hourly = offer("RTX 4090", 24, 0.50, billing="per-hour", name="hourly")
    minutely = offer("RTX 4090", 24, 0.50, billing="per-minute", name="minutely")
    secondly = offer("RTX 4090", 24, 0.50, billing="per-second", name="secondly")
    result = estimate(
        Job(600, "large-v3"), offers=[hourly, minutely, secondly], assumptions=table_only(), throughput=throughput
    )
    by_name = {option.offer.offer: option for option in result.options}
    seconds = by_name["secondly"].est_seconds
    assert seconds < 3600
    assert by_name["hourly"].billed_seconds == 3600 and by_name["hourly"].est_cost_usd == pytest.approx(0.50)
    assert by_name["minutely"].billed_seconds == math.ceil(seconds / 60) * 60
    assert by_name["secondly"].est_cost_usd == pytest.approx(math.ceil(seconds) / 3600 * 0.50)
    assert [option.offer.offer for option in result.options] == ["secondly", "minutely", "hourly"]


def test_upload_time_follows_the_users_uplink(throughput: Throughput) -> None:
    card = [offer("RTX 4090", 24)]
    job = Job(3600, "turbo", upload_bytes=100_000_000)
    slow = estimate(job, offers=card, assumptions=table_only(upload_mbps=10), throughput=throughput).options[0]
    fast = estimate(job, offers=card, assumptions=table_only(upload_mbps=100), throughput=throughput).options[0]
    overhead = Assumptions().transfer_overhead_seconds
    assert slow.breakdown.upload_s == pytest.approx(80 + overhead)  # 800 Mbit at 10 Mbit/s
    assert fast.breakdown.upload_s == pytest.approx(8 + overhead)
    model_mb = CATALOG["turbo"].size_mb
    assert slow.breakdown.model_download_s == pytest.approx(model_mb * 8 / Assumptions().provider_download_mbps)


def test_spot_prices_are_used_only_when_asked(throughput: Throughput) -> None:
    card = [offer("T4", 16, 0.526, spot=0.20)]
    on_demand = estimate(Job(3600, "small"), offers=card, assumptions=table_only(), throughput=throughput).options[0]
    spot = estimate(Job(3600, "small"), offers=card, assumptions=table_only(use_spot=True), throughput=throughput)
    assert on_demand.usd_per_hour == 0.526 and not on_demand.spot
    assert spot.options[0].usd_per_hour == 0.20 and spot.options[0].spot
    assert any("taken back" in note for note in spot.options[0].notes)


def test_measured_speeds_take_precedence_over_the_table(tmp_path: Path) -> None:
    measured = MeasuredSpeeds(tmp_path / "speeds.json")
    throughput = Throughput(measured=measured)
    table_speed = throughput.transcription("T4", "large-v3")
    assert table_speed is not None and table_speed.kind == "estimate"

    measured.record("Tesla T4", "large-v3", 30.0, "aws job 1", audio_seconds=1800)
    measured.record("T4", "large-v3", 50.0, "aws job 2")
    measured.record("T4", "large-v3", 40.0, "aws job 3")
    measured.record("T4", "pyannote", 90.0, "aws job 3", task="diarize")
    speed = throughput.transcription("NVIDIA T4", "large-v3")
    assert speed is not None and speed.kind == "measured" and speed.x_realtime == 40.0  # the median
    assert "aws job 3" in speed.source
    diarize = throughput.diarization("T4")
    assert diarize is not None and diarize.x_realtime == 90.0
    other = throughput.transcription("T4", "turbo")  # measured for large-v3 only
    assert other is not None and other.kind == "estimate"

    saved = json.loads((tmp_path / "speeds.json").read_text())
    assert [record["source"] for record in saved["records"]] == ["aws job 1", "aws job 2", "aws job 3", "aws job 3"]

    g4dn = [row for row in load_price_table().offers if row.offer == "g4dn.xlarge"]
    option = estimate(Job(3600, "large-v3"), offers=g4dn, assumptions=table_only(), throughput=throughput).options[0]
    assert option.transcribe_speed.kind == "measured"
    assert option.breakdown.transcribe_s == pytest.approx(3600 / 40 + Assumptions().model_load_seconds)
    assert option.breakdown.diarize_s == pytest.approx(3600 / 90)


def test_measured_speeds_live_in_the_user_data_folder_and_survive_a_damaged_file(tmp_path: Path) -> None:
    default = MeasuredSpeeds()
    assert "scriba" in str(default.path) and default.records() == []
    default.record("CPU", "tiny.en", 12.0, "local benchmark")
    assert default.path.is_file() and len(MeasuredSpeeds().records()) == 1
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert MeasuredSpeeds(broken).records() == []
    with pytest.raises(ValueError):
        default.record("CPU", "tiny.en", 0.0, "nonsense")


def test_live_offers_replace_that_providers_table_rows(throughput: Throughput) -> None:
    live_a10 = offer(
        "A10", 24, 0.99, provider="lambda", name="gpu_1x_a10", price_source="api:lambda", price_date=TODAY.isoformat()
    )
    unlabelled = offer("H100 SXM", 80, 2.49, provider="lambda", name="gpu_1x_h100_sxm5", price_source="", price_date="")
    result = estimate(
        Job(3600, "large-v3"),
        assumptions=table_only(),
        throughput=throughput,
        live={"lambda": lambda: [live_a10, unlabelled]},
        today=TODAY,
    )
    lambda_rows = [option for option in result.options if option.offer.provider == "lambda"]
    assert {option.offer.offer: option.usd_per_hour for option in lambda_rows} == {
        "gpu_1x_a10": 0.99,
        "gpu_1x_h100_sxm5": 2.49,
    }
    assert all(option.offer.price_source == "api:lambda" for option in lambda_rows)
    assert all(option.offer.price_date == TODAY.isoformat() for option in lambda_rows)
    assert any("lambda: 2 live price(s)" in note for note in result.notes)
    assert any(option.offer.provider == "vast" for option in result.options)  # other providers keep their rows


def test_a_failing_live_hook_falls_back_to_the_table_and_says_so(throughput: Throughput) -> None:
    def broken() -> list[Offer]:
        raise ConnectionError("console.vast.ai unreachable")

    result = estimate(
        Job(3600, "large-v3"), assumptions=table_only(), throughput=throughput, live={"vast": broken}, today=TODAY
    )
    vast_rows = [option for option in result.options if option.offer.provider == "vast"]
    table_vast = load_price_table().offers_of("vast")
    assert {option.offer.offer for option in vast_rows} == {row.offer for row in table_vast}
    assert all(option.offer.price_date == "2025" for option in vast_rows)
    note = next(note for note in result.notes if note.startswith("vast:") and "unavailable" in note)
    assert "ConnectionError" in note and "2025" in note

    empty = estimate(
        Job(3600, "large-v3"), assumptions=table_only(), throughput=throughput, live={"runpod": list}, today=TODAY
    )
    assert not any(option.offer.provider == "runpod" for option in empty.options)
    assert any("runpod" in note and "no offers" in note for note in empty.notes)


def test_the_local_row_costs_nothing_and_uses_the_measured_cpu_speed(tmp_path: Path) -> None:
    measured = MeasuredSpeeds(tmp_path / "speeds.json")
    throughput = Throughput(measured=measured)
    assumptions = Assumptions(local_cpu_cores=2)
    local = estimate(Job(3600, "tiny.en"), throughput=throughput, assumptions=assumptions).options[0]
    assert local.offer.provider == "local" and local.est_cost_usd == 0 and local.audio_hours_per_usd is None
    assert not local.cheapest  # "cheapest" names the cheapest machine to rent
    assert local.breakdown.boot_s == local.breakdown.upload_s == local.breakdown.setup_s == 0
    assert local.transcribe_speed.x_realtime == 14.3 and "Measured" in local.transcribe_speed.source

    measured.record("CPU", "tiny.en", 20.0, "local benchmark")
    again = estimate(Job(3600, "tiny.en"), throughput=throughput, assumptions=assumptions).options[0]
    assert again.transcribe_speed.kind == "measured" and again.transcribe_speed.x_realtime == 20.0
    quad = estimate(Job(3600, "small"), throughput=throughput, assumptions=Assumptions(local_cpu_cores=4)).options[0]
    assert quad.transcribe_speed.kind == "estimate" and "4 cores" in quad.transcribe_speed.source

    missing_model = Assumptions(local_cpu_cores=2, local_model_on_disk=False)
    download = estimate(Job(3600, "large-v3"), throughput=throughput, assumptions=missing_model).options[0]
    assert download.breakdown.model_download_s == pytest.approx(CATALOG["large-v3"].size_mb * 8 / 50)
    gone = estimate(Job(3600, "tiny.en"), throughput=throughput, assumptions=table_only())
    assert all(option.offer.provider != "local" for option in gone.options)


def test_an_own_ssh_host_is_a_row_at_its_own_price(throughput: Throughput) -> None:
    host = ssh_offer("RTX 3090", 24, usd_per_hour=0.0)
    result = estimate(
        Job(3600, "turbo"), offers=[], extra_offers=[host], assumptions=table_only(), throughput=throughput
    )
    option = result.options[0]
    assert option.offer.provider == "ssh" and option.est_cost_usd == 0 and option.breakdown.boot_s == 0
    paid = estimate(
        Job(3600, "turbo"), offers=[], extra_offers=[ssh_offer("RTX 3090", 24, 0.30)], assumptions=table_only()
    ).options[0]
    assert paid.est_cost_usd == pytest.approx(math.ceil(paid.est_seconds) / 3600 * 0.30)


def test_budget_and_keeping_the_cheapest_offers_per_gpu(throughput: Throughput) -> None:
    market = [offer("RTX 4090", 24, price, name=f"4090 at {price}") for price in (0.55, 0.35, 0.45)]
    result = estimate(Job(3600, "large-v3"), offers=market, assumptions=table_only(), throughput=throughput)
    cheapest: Option = result.options[0]
    assert cheapest.offer.offer == "4090 at 0.35" and cheapest.cheapest
    assert within_budget(cheapest, cheapest.est_cost_usd) and within_budget(cheapest, 1.0)
    assert not within_budget(cheapest, cheapest.est_cost_usd / 2)
    trimmed = estimate(
        Job(3600, "large-v3"), offers=market, assumptions=table_only(), throughput=throughput, max_per_gpu=1
    )
    assert [option.offer.offer for option in trimmed.options] == ["4090 at 0.35"]


def test_bad_job_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown model"):
        estimate(Job(3600, "whisper-xxl"))
    with pytest.raises(ValueError, match="nothing to transcribe"):
        estimate(Job(0, "small"))


# ------------------------------------------------------------------------------------------------------------
# `scriba offload estimate`
# ------------------------------------------------------------------------------------------------------------


def test_cli_json_for_a_one_hour_file(hour_flac: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("estimate", str(hour_flac), "--model", "large-v3", "--json") == 0
    payload = json.loads(capsys.readouterr().out)
    assert set(payload) == {"audio_seconds", "options", "excluded", "notes"}
    assert payload["audio_seconds"] == pytest.approx(3600)
    options = payload["options"]
    assert all(set(option) >= OPTION_KEYS for option in options)
    assert [option["est_cost_usd"] for option in options] == sorted(option["est_cost_usd"] for option in options)
    assert {option["provider"] for option in options} >= TABLE_PROVIDERS
    g4dn = next(option for option in options if option["offer"] == "g4dn.xlarge")
    assert g4dn["usd_per_hour"] == 0.526 and g4dn["price_date"] == "2025" and g4dn["est_cost_usd"] > 0
    assert sum(option["cheapest"] for option in options) == 1 and sum(option["fastest"] for option in options) == 1
    assert payload["excluded"] == [] and isinstance(payload["notes"], list)
    # The files' real size goes up at the default 20 Mbit/s, plus the SFTP overhead.
    expected_upload = hour_flac.stat().st_size * 8 / 20e6 + Assumptions().transfer_overhead_seconds
    assert g4dn["breakdown"]["upload_s"] == pytest.approx(expected_upload, abs=0.1)

    assert run_cli("estimate", str(hour_flac), "--json", "--budget", "0.1", "--no-local") == 0
    budgeted = json.loads(capsys.readouterr().out)["options"]
    assert [option["within_budget"] for option in budgeted] == [option["est_cost_usd"] <= 0.1 for option in budgeted]
    assert True in [option["within_budget"] for option in budgeted]


def test_cli_human_table_marks_and_dates(hour_flac: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("estimate", str(hour_flac), "--model", "large-v3", "--upload-mbps", "5", "--budget", "0.2") == 0
    out = capsys.readouterr().out
    assert "1 h 00 min of audio" in out and "model large-v3" in out
    lines = out.splitlines()
    g4dn = next(line for line in lines if "g4dn.xlarge" in line)
    assert "0.526" in g4dn and "2025" in g4dn
    assert any("<- cheapest" in line for line in lines) and any("fastest" in line for line in lines)
    assert "over budget" in out
    for provider in TABLE_PROVIDERS:
        assert any(provider in line.split()[:2] for line in lines), provider  # a row starts with it (after a mark)


def test_cli_reads_a_real_recording_and_adds_files_up(
    hour_flac: Path, sample_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sample = sample_dir / "sample.wav"
    assert run_cli("estimate", str(sample), "--no-diarize", "--model", "small", "--json", "--no-local") == 0
    single = json.loads(capsys.readouterr().out)
    assert single["audio_seconds"] == pytest.approx(30, abs=1)
    assert {option["provider"] for option in single["options"]} >= {"lambda", "vast", "runpod"}
    assert all(option["diarize_x"] is None and option["breakdown"]["diarize_s"] == 0 for option in single["options"])
    assert all(option["provider"] != "local" for option in single["options"])
    assert run_cli("estimate", str(sample), str(hour_flac), "--json", "--ssh-gpu", "RTX 3090") == 0
    both = json.loads(capsys.readouterr().out)
    assert both["audio_seconds"] == pytest.approx(3600 + single["audio_seconds"])
    assert any(option["provider"] == "ssh" and option["est_cost_usd"] == 0 for option in both["options"])


def test_cli_names_a_missing_an_empty_or_a_non_media_file(
    tmp_path: Path, corrupt_file: Path, hour_flac: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "gone.wav"
    assert run_cli("estimate", str(hour_flac), str(missing)) == 2
    assert str(missing) in capsys.readouterr().err
    empty = tmp_path / "empty.mp3"
    empty.write_bytes(b"")
    assert run_cli("estimate", str(empty)) == 2
    assert str(empty) in capsys.readouterr().err
    assert run_cli("estimate", str(corrupt_file), "--json") == 2
    captured = capsys.readouterr()
    assert str(corrupt_file) in captured.err and "not an audio or video file" in captured.err
    assert captured.out == ""
    text = tmp_path / "notes.txt"
    text.write_text("meeting notes, not a recording\n" * 50)
    assert run_cli("estimate", str(text)) == 2
    assert str(text) in capsys.readouterr().err


def test_offload_is_a_group_of_actions(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    assert parser.parse_args(["offload", "sweep"]).offload_command == "sweep"
    assert parser.parse_args(["offload", "estimate", "a.wav"]).offload_command == "estimate"
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["offload"])
    assert exit_info.value.code == 2
    capsys.readouterr()


def test_a_fleet_of_n_machines_waits_for_start_up_once_and_for_the_uplink_always(throughput: Throughput) -> None:
    from app.cloud.pricing.spread import spread_over

    # 100 hours in 100 files, 5.76 GB at 128 kbit/s, over a 20 Mbit/s uplink: 38 min of upload however many GPUs.
    job = Job(100 * 3600, "large-v3", upload_bytes=5_760_000_000, files=100)
    one = estimate(
        job, offers=[offer("RTX 4090", 24, 0.5)], assumptions=table_only(upload_mbps=20), throughput=throughput
    )
    option = one.options[0]
    spreads = [spread_over(option, count, job.files) for count in (1, 2, 4, 8, 16)]
    parts = option.breakdown
    start = parts.boot_s + parts.setup_s + parts.model_download_s
    work = parts.transcribe_s + parts.diarize_s
    assert spreads[0].wall_s == pytest.approx(start + work + parts.download_s + parts.upload_s / 100, rel=0.01)
    # More machines: never slower, never cheaper (each pays its own start-up), and never faster than the upload.
    assert all(later.wall_s <= earlier.wall_s for earlier, later in itertools.pairwise(spreads))
    assert all(later.cost_usd >= earlier.cost_usd for earlier, later in itertools.pairwise(spreads))
    assert all(spread.wall_s >= start + parts.upload_s for spread in spreads)
    useful = spreads[0].useful_nodes
    assert useful == math.ceil((work - Assumptions().model_load_seconds) / parts.upload_s)
    past = [spread for spread in spreads if spread.nodes > useful]
    assert past and all(spread.upload_bound for spread in past)
    assert len({round(spread.wall_s) for spread in past}) == 1  # past the uplink's limit the time stops falling
    assert not spreads[0].upload_bound
    with pytest.raises(ValueError, match="at least one machine"):
        spread_over(option, 0, job.files)


def test_cli_spreads_the_cheapest_rows_over_several_machines(
    hour_flac: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("estimate", str(hour_flac), "--gpus", "1,4") == 0
    out = capsys.readouterr().out
    assert "spread over several machines:" in out and "the uplink lets help" in out
    rows = [row.split("  ") for row in out.split("spread over several machines:")[1].splitlines()[2:] if "$" in row]
    cells = [[cell.strip() for cell in row if cell.strip()] for row in rows]
    assert {row[2] for row in cells} == {"1", "4"}
    # One file of an hour: a fleet cuts it into four 15-minute pieces, so four machines are faster than one (but
    # each pays its start-up: dearer).
    by_gpu: dict[tuple[str, str], dict[str, list[str]]] = {}
    for row in cells:
        by_gpu.setdefault((row[0], row[1]), {})[row[2]] = row
    for pair in by_gpu.values():
        assert _seconds(pair["4"][3]) < _seconds(pair["1"][3]) and float(pair["4"][4][1:]) > float(pair["1"][4][1:])
    assert run_cli("estimate", str(hour_flac), "--gpus", "0") == 2
    assert "machine counts of 1 or more" in capsys.readouterr().err


def _seconds(text: str) -> float:
    """'1 h 02 min', '13 min 26 s', '42 s' as seconds."""
    units = {"h": 3600, "min": 60, "s": 1}
    words = text.split()
    return sum(float(number) * units[unit] for number, unit in zip(words[::2], words[1::2], strict=True))


@pytest.mark.parametrize(
    "content",
    ['{"version": 1, "records": 5}', '{"records": null}', '[{"gpu": "T4"}]', '"just a string"'],
    ids=["records-a-number", "records-null", "a-list", "a-string"],
)
def test_a_measured_speeds_file_of_another_shape_is_set_aside_and_the_estimate_goes_on(
    hour_flac: Path, content: str
) -> None:
    """Issue 38, D12: valid JSON of another structure made `offload estimate` fail with a TypeError."""
    path = MeasuredSpeeds().path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    result = scriba("offload", "estimate", str(hour_flac), "--model", "large-v3", "--no-local")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "unexpected error" not in result.stderr
    assert "RTX 4090" in result.stdout
    # Kept under a new name that the warning gives, never deleted; the next measurement starts a new file.
    [aside] = path.parent.glob("measured_speeds.json.damaged-*")
    assert aside.read_text(encoding="utf-8") == content and not path.exists()
    [warning] = [line for line in result.stderr.splitlines() if str(path) in line]
    assert warning.startswith("warning:") and str(aside) in warning


def test_an_implausible_measured_speed_is_set_aside_and_never_priced(hour_flac: Path) -> None:
    """A measured speed of 1e-12 x real time showed a row of $3,333,333,333: such a record is set aside with a
    warning, and the plausible ones beside it still count."""
    path = MeasuredSpeeds().path
    path.parent.mkdir(parents=True, exist_ok=True)
    good = {"gpu": "RTX 4090", "model": "large-v3", "task": "transcribe", "x_realtime": 42.0, "source": "job 1"}
    absurd = {**good, "x_realtime": 1e-12, "source": "job 2"}
    path.write_text(json.dumps({"version": 1, "records": [good, absurd]}), encoding="utf-8")

    result = scriba("offload", "estimate", str(hour_flac), "--model", "large-v3", "--no-local", "--json")
    assert result.returncode == 0, result.stderr
    options = json.loads(result.stdout)["options"]
    assert max(option["est_cost_usd"] for option in options) < 100  # one hour of audio on any listed card
    rtx = [option for option in options if option["gpu"] == "RTX 4090"]
    assert rtx and all(option["transcribe_x"] == 42.0 for option in rtx)  # the plausible record still counts
    assert all(option["transcribe_speed_kind"] == "measured" for option in rtx)
    assert "warning:" in result.stderr and "1e-12" in result.stderr
    kept = json.loads(path.read_text(encoding="utf-8"))["records"]
    assert [record["source"] for record in kept] == ["job 1"]
    [aside] = path.parent.glob("measured_speeds.json.set-aside-*")
    assert json.loads(aside.read_text(encoding="utf-8"))["records"][0]["x_realtime"] == 1e-12
    with pytest.raises(ValueError):
        MeasuredSpeeds().record("RTX 4090", "large-v3", 1e-12, "nonsense")


def speeds_file(data_dir: Path, content: str) -> Path:
    path = data_dir / "offload" / "measured_speeds.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return path


def test_measured_speeds_are_read_from_scriba_data_dir(hour_flac: Path, tmp_path: Path) -> None:
    """SCRIBA_DATA_DIR moves the queue, the ledger and the transcripts: the measured speeds go with them."""
    data = tmp_path / "portable"
    record = {"gpu": "RTX 4090", "model": "large-v3", "task": "transcribe", "x_realtime": 42.0, "source": "job 1"}
    speeds_file(data, json.dumps({"version": 1, "records": [record]}))

    result = scriba(
        "offload", "estimate", str(hour_flac), "--model", "large-v3", "--no-local", "--json",
        env={"SCRIBA_DATA_DIR": str(data)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rtx = [option for option in json.loads(result.stdout)["options"] if option["gpu"] == "RTX 4090"]
    assert rtx and all(option["transcribe_x"] == 42.0 for option in rtx)
    assert all(option["transcribe_speed_kind"] == "measured" for option in rtx)


def test_offload_runs_own_estimate_says_once_that_a_damaged_speeds_file_was_set_aside(
    hour_flac: Path, tmp_path: Path
) -> None:
    """`offload estimate` warned; `offload run`, whose estimate decides what is rented, set the file aside silently."""
    data = tmp_path / "portable"
    path = speeds_file(data, '{"version": 1, "records": 5}')

    # No terminal and no --yes: it stops after the estimate, before anything is rented or any key is needed.
    result = scriba("offload", "run", str(hour_flac), "--provider", "vast", env={"SCRIBA_DATA_DIR": str(data)})
    assert "renting needs a yes" in result.stderr and "estimate: vast" in result.stderr, result.stderr
    [aside] = path.parent.glob("measured_speeds.json.damaged-*")
    assert aside.read_text(encoding="utf-8") == '{"version": 1, "records": 5}' and not path.exists()
    warnings = [line for line in result.stderr.splitlines() if str(path) in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning:") and str(aside) in warnings[0]
    assert "Traceback" not in result.stderr
