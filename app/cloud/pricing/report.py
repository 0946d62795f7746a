"""The estimate as text: one table, cheapest and fastest marked, used by `scriba offload estimate` and `offload run`
(the window lays the same Estimate out in its own widgets)."""

from __future__ import annotations

from collections.abc import Sequence

from app.cloud.pricing.estimate import Estimate, Option, price_date_text, within_budget
from app.core.transcript.times import format_duration


def _size(size_bytes: float) -> str:
    return f"{size_bytes / 1_000_000:.1f} MB" if size_bytes < 1e9 else f"{size_bytes / 1e9:.2f} GB"


def _marks(option: Option, budget: float | None) -> str:
    marks = []
    if option.cheapest:
        marks.append("cheapest")
    if option.fastest:
        marks.append("fastest")
    if budget is not None and not within_budget(option, budget):
        marks.append("over budget")
    return ", ".join(marks)


def option_figures(option: Option) -> list[str]:
    """One estimate row's figures, the same in the command's table and the window's: VRAM, price per hour, time,
    cost, audio hours per dollar and the price's date."""
    offer = option.offer
    per_usd = option.audio_hours_per_usd
    return [
        f"{offer.vram_gb:g} GB" if offer.vram_gb else "-",
        f"{option.usd_per_hour:.3f}" + (" spot" if option.spot else ""),
        format_duration(option.est_seconds),
        f"${option.est_cost_usd:.2f}",
        "-" if per_usd is None else f"{per_usd:.1f}",
        price_date_text(offer),
    ]


def format_estimate(result: Estimate, budget: float | None = None) -> str:
    """A table sorted by cost, the fastest and cheapest marked, the price date per row, then the rest."""
    job = result.job
    lines = [
        f"{job.files} file(s), {format_duration(job.audio_seconds)} of audio ({_size(result.upload_bytes)} to upload), "
        f"model {job.model}, diarization {'on' if job.diarize else 'off'}",
        "",
    ]
    headers = ["", "provider", "offer", "GPU", "VRAM", "$/h", "time", "cost", "audio h/$", "price date", "launch"]
    rows: list[list[str]] = []
    for option in result.options:
        offer = option.offer
        marks = _marks(option, budget)
        rows.append(
            [
                "*" if option.cheapest or option.fastest else "",
                offer.provider,
                offer.offer if len(offer.offer) <= 24 else offer.offer[:23] + "…",
                offer.gpu if offer.gpu_count == 1 else f"{offer.gpu_count}x {offer.gpu}",
                *option_figures(option),
                ("yes" if offer.launchable else "no") + (f"  <- {marks}" if marks else ""),
            ]
        )
    widths = [max(len(row[index]) for row in [headers, *rows]) for index in range(len(headers))]
    for row in [headers, *rows]:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    lines.append("")
    lines.append(
        "time = boot + set-up + model download + upload + transcription"
        + (" + diarization" if job.diarize else "")
        + " + download; cost = that time at the provider's billing granularity. launch: Scriba can rent it."
    )
    fastest, cheapest = result.fastest, result.cheapest
    if cheapest is not None:
        lines.append(f"cheapest: {_describe(cheapest)}")
    if fastest is not None:
        lines.append(f"fastest:  {_describe(fastest)}")
    if result.excluded:
        lines.append("")
        lines.append("left out:")
        for excluded in result.excluded:
            lines.append(
                f"  {excluded.offer.provider} {excluded.offer.offer} ({excluded.offer.gpu}): {excluded.reason}"
            )
    if result.notes:
        lines.append("")
        lines.append("notes:")
        lines.extend(f"  {note}" for note in result.notes)
    return "\n".join(lines)


def _describe(option: Option) -> str:
    parts = option.breakdown
    speed = f"{option.transcribe_speed.x_realtime:.1f}x real time ({option.transcribe_speed.kind})"
    return (
        f"{option.offer.provider} {option.offer.offer}, {format_duration(option.est_seconds)}, "
        f"${option.est_cost_usd:.2f}; transcription {speed}; boot {format_duration(parts.boot_s)}, "
        f"set-up {format_duration(parts.setup_s)}, upload {format_duration(parts.upload_s)}"
    )


def format_spread(result: Estimate, counts: Sequence[int], rows: int = 5, minimum_billing_s: float = 0.0) -> str:
    """The cheapest rented rows again, each spread over each machine count in ``counts``: time, cost, and how
    many machines the uplink lets help."""
    from app.cloud.pricing.spread import spread_over

    rented = [option for option in result.options if option.is_rented and option.offer.launchable][:rows]
    if not rented:
        return "no rentable row to spread over several machines"
    headers = ["provider", "GPU", "machines", "time", "cost", "the uplink lets help"]
    table: list[list[str]] = []
    for option in rented:
        for count in counts:
            spread = spread_over(option, count, result.job.files, minimum_billing_s)
            table.append(
                [
                    option.offer.provider,
                    option.offer.gpu,
                    str(count),
                    format_duration(spread.wall_s),
                    f"${spread.cost_usd:.2f}",
                    f"{spread.useful_nodes}" + ("  (waiting for the upload)" if spread.upload_bound else ""),
                ]
            )
    widths = [max(len(row[index]) for row in [headers, *table]) for index in range(len(headers))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *table]
    ]
    lines.append("")
    lines.append(
        "each machine boots, installs and loads the model at once; the audio is shared out by a queue; every file "
        "still goes up your one uplink, so past 'the uplink lets help' more machines only wait (and bill)."
    )
    return "\n".join(lines)
