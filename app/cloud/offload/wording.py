"""What an offload says to the person in the window: the summary of the jobs, a row's breakdown, the question
before a rental, the errors, and what a run left behind. Plain strings, so they are tested without Qt and the
window only places them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.cloud.pricing.estimate import Option, price_date_text
from app.cloud.pricing.spread import Spread
from app.core.transcript.times import format_duration

if TYPE_CHECKING:
    from app.cloud.offload.base import Teardown
    from app.cloud.offload.selection import SelectedJobs


def format_size(size_bytes: float) -> str:
    return f"{size_bytes / 1_000_000:.1f} MB" if size_bytes < 1e9 else f"{size_bytes / 1e9:.2f} GB"


def provider_title(name: str) -> str:
    from app.cloud.providers import PROVIDER_CLASSES

    cls = PROVIDER_CLASSES.get(name)
    return cls.title if cls is not None else name


def summary_text(selected: SelectedJobs, why_no_estimate: str | None) -> str:
    """The line above the estimate: how much audio, what it uploads, the model; and why an estimate is partial."""
    count = len(selected.job_ids)
    diarization = f"on ({selected.options.diarizer})" if selected.diarize else "off"
    lines = [
        f"{count} job{'s' if count != 1 else ''}: {format_duration(selected.audio_seconds)} of audio, "
        f"{format_size(selected.total_bytes)} to upload · model {selected.model} · diarization {diarization}"
    ]
    if selected.unknown_lengths:
        lines.append(
            f"The length of {selected.unknown_lengths} file(s) is unknown: the estimate counts only the others."
        )
    if selected.mixed_options:
        lines.append("The jobs have different options: the estimate uses the first job's.")
    if why_no_estimate:
        lines.append(why_no_estimate[:1].upper() + why_no_estimate[1:] + ". Your own SSH host can still run them.")
    return "\n".join(lines)


def breakdown_text(option: Option) -> str:
    """The tooltip of a row: where the time goes, and how the cost follows from it."""
    parts = option.breakdown
    speed = option.transcribe_speed
    lines = [
        f"{option.offer.provider} {option.offer.offer}: about {format_duration(option.est_seconds)}, "
        f"${option.est_cost_usd:.3f}",
        f"boot {format_duration(parts.boot_s)} · set-up {format_duration(parts.setup_s)} · "
        f"model download {format_duration(parts.model_download_s)}",
        f"upload {format_duration(parts.upload_s)} · transcription {format_duration(parts.transcribe_s)} "
        f"({speed.x_realtime:.1f}× real time, {speed.kind})",
    ]
    if option.diarize_speed is not None:
        lines.append(
            f"diarization {format_duration(parts.diarize_s)} ({option.diarize_speed.x_realtime:.1f}× real time, "
            f"{option.diarize_speed.kind}) · download {format_duration(parts.download_s)}"
        )
    else:
        lines.append(f"download {format_duration(parts.download_s)}")
    if option.usd_per_hour > 0:
        lines.append(
            f"billed {format_duration(option.billed_seconds)} at ${option.usd_per_hour:.3f}/h"
            + (" (spot)" if option.spot else "")
        )
    if option.price_note:
        lines.append(option.price_note)
    lines.extend(option.notes)
    return "\n".join(lines)


def confirmation_text(option: Option, budget: float, spread: Spread | None = None) -> str:
    """The question asked before anything is rented: what, where, at which price, and when it ends. ``spread``:
    the same row on several machines."""
    offer = option.offer
    vram = f" ({offer.vram_gb:g} GB)" if offer.vram_gb else ""
    if spread is None or spread.nodes == 1:
        return (
            f"Rent {offer.gpu}{vram} on {provider_title(offer.provider)} at ${option.usd_per_hour:.3f} per hour?\n\n"
            f"Estimate: about {format_duration(option.est_seconds)} and ${option.est_cost_usd:.2f} "
            f"(prices of {price_date_text(offer)}).\n"
            f"Budget: ${budget:.2f}; the remote work stops when it is spent.\n\n"
            "The machine is destroyed when the jobs finish, fail or are cancelled."
        )
    enough = (
        f"\nAbout {spread.useful_nodes} would be enough: past that, your upload or the number of files sets the pace.\n"
        if spread.useful_nodes < spread.nodes
        else ""
    )
    return (
        f"Rent {spread.nodes} machines with {offer.gpu}{vram} on {provider_title(offer.provider)} at "
        f"${option.usd_per_hour:.3f} per hour each?\n\n"
        f"Estimate: about {format_duration(spread.wall_s)} and ${spread.cost_usd:.2f} for all of them "
        f"(prices of {price_date_text(offer)}).\n{enough}"
        f"Budget: ${budget:.2f} for all of them; the remote work stops when it is spent.\n\n"
        "Each machine is destroyed as soon as the queue has nothing left for it, and all of them when the jobs "
        "finish, fail or are cancelled."
    )


def describe_error(error: BaseException) -> str:
    """What went wrong, said so the user knows what to do next (the typed errors already carry that text)."""
    from app.cloud.providers import AuthError, NoCapacity
    from app.cloud.remote.transport import HostKeyError
    from app.core.errors import ScribaError

    text = str(error).strip() or type(error).__name__
    if isinstance(error, AuthError):
        # Said in the window, which has an “API keys…” button: its own words, not the command line's.
        from app.cloud.providers import PROVIDER_CLASSES

        title = PROVIDER_CLASSES[error.provider].title if error.provider in PROVIDER_CLASSES else "the provider"
        if error.status is None:
            return f"No usable API key: none is stored for {title}. Add it with “API keys…”, then Run again."
        return (
            f"No usable API key: {title} refused the stored key (HTTP {error.status}). Check that it is valid and "
            "may create and delete machines, and store it again with “API keys…”."
        )
    if isinstance(error, NoCapacity):
        return f"No machine free. {text}"
    if isinstance(error, HostKeyError):
        if error.mid_session:  # its own text says what had been sent before the key changed
            return f"The host's key changed during the session, so Scriba stopped. {text}"
        return f"The host's key was refused; nothing was sent. {text}"
    if isinstance(error, ScribaError):  # written for the user already
        return text
    if isinstance(error, FileNotFoundError | PermissionError):
        return f"{type(error).__name__}: {text}"
    return f"Unexpected error ({type(error).__name__}): {text}"


def teardown_text(teardown: Teardown | None) -> str:
    """What a run left behind remotely, as its teardown found it. "Torn down" only when the provider confirmed
    every machine gone: a teardown that could not confirm it must not read like one that did."""
    if teardown is None or teardown.state == "not_started":
        # Cancelled before the offload wrote a launch down, so before it asked any provider for a machine.
        return "nothing was started remotely"
    if teardown.state == "terminated":
        return "everything remote was torn down"
    if teardown.state == "nothing_to_end":
        # The user's own host, or an interrupted launch whose label the provider's list does not show.
        return teardown.message or "no machine was rented, so none bills"
    # Unconfirmed: the teardown's message names the machine, says it may bill and what to do.
    return teardown.message or (
        "the teardown could not confirm that the machine is gone: it may still be billing. Run "
        "`scriba offload sweep`, or check the provider's console."
    )


def gpu_event_text(data: dict[str, Any]) -> str:
    """``remote GPU 87% · 3.1/16.0 GB · 61 °C`` from a remote worker's "gpu" event."""
    gpus = data.get("gpus") or []
    if not gpus:
        cpu = data.get("cpu_pct")
        return f"remote: no GPU reading · CPU {cpu:.0f}%" if isinstance(cpu, int | float) else ""
    gpu = gpus[0]
    parts = ["remote GPU"]
    if gpu.get("utilization_pct") is not None:
        parts.append(f"{gpu['utilization_pct']:.0f}%")
    if gpu.get("memory_used_mb") is not None and gpu.get("memory_total_mb"):
        parts.append(f"{gpu['memory_used_mb'] / 1024:.1f}/{gpu['memory_total_mb'] / 1024:.1f} GB")
    if gpu.get("temperature_c") is not None:
        parts.append(f"{gpu['temperature_c']:.0f} °C")
    return " · ".join(parts)
