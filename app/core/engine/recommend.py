"""Which speech model this computer should use: a fast, a balanced and an accurate choice, the one recommended,
why in words, and how long an hour of audio takes here with each.

The machine is read by ``scriba doctor``'s own checks (NVML for the GPU and its memory, CTranslate2 for whether
Scriba can use it, psutil for the memory) without its smoke test. The times are the queue's own estimates
(:mod:`app.core.engine.stage_costs`): tiny.en measured on a 2-core CPU, larger models scaled by their encoder
and decoder sizes, a GPU by the factor measured there; on a CPU also by its cores. Nothing here downloads.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.core.engine.models import BUNDLED_MODEL, CATALOG, installed_models
from app.core.engine.stage_costs import StageCosts

TIERS = ("fast", "balanced", "accurate")
# The CPU the tiny.en figure was measured on, and the most cores the estimate credits (past about 8, CTranslate2
# gains little from more threads on one recording).
MEASURED_CORES = 2
MOST_CORES_COUNTED = 8
# A model slower than the recording itself is never offered; the recommendation is the most accurate choice that
# takes at most a quarter of the recording's length.
SLOWEST_MINUTES_PER_HOUR = 60.0
RECOMMENDED_MINUTES_PER_HOUR = 15.0
# Without a GPU a model runs in int8, in about half its float16 memory (the catalog's figure): a model fits when
# that figure is within the RAM, so at least half the RAM is left to everything else.
CPU_MEMORY_SHARE = 1.0


@dataclass(frozen=True)
class Machine:
    """What doctor found: the device Scriba would use, the GPU (when the driver lists one), cores and memory."""

    device: str  # "cuda" or "cpu"
    cpu_cores: int
    ram_gb: float | None = None
    gpu_name: str | None = None
    gpu_memory_gb: float | None = None
    gpu_problem: str = ""  # why a GPU the driver lists is not used

    def describe(self) -> str:
        memory = f" and {self.ram_gb:.0f} GB of memory" if self.ram_gb else ""
        cores = f"{self.cpu_cores} CPU core{'s' if self.cpu_cores != 1 else ''}{memory}"
        if self.device == "cuda" and self.gpu_name:
            size = f" with {self.gpu_memory_gb:.0f} GB of memory" if self.gpu_memory_gb else ""
            return f"This computer's graphics card, {self.gpu_name}{size}, can be used by Scriba ({cores} besides)."
        if self.gpu_name:
            return (
                f"This computer's graphics card, {self.gpu_name}, cannot be used by Scriba yet "
                f"({self.gpu_problem}), so Scriba works on its {cores}."
            )
        return f"This computer has no NVIDIA graphics card Scriba can use; it works on its {cores}."


def machine_from_doctor(report: dict[str, Any], cpu_cores: int | None = None) -> Machine:
    """The machine as ``run_doctor``'s report describes it (its "gpus", "host" and "selected" device)."""
    gpus = [gpu for gpu in report.get("gpus") or [] if gpu.get("memory_total_mb")]
    first = gpus[0] if gpus else None
    host = report.get("host") or {}
    device = str(report.get("selected", {}).get("device", "cpu"))
    problems = report.get("problems") or []
    return Machine(
        device="cuda" if device == "cuda" and first is not None else "cpu",
        cpu_cores=cpu_cores or os.cpu_count() or 1,
        ram_gb=round(host["ram_total_mb"] / 1024, 1) if host.get("ram_total_mb") else None,
        gpu_name=str(first["name"]) if first else None,
        gpu_memory_gb=round(first["memory_total_mb"] / 1024, 1) if first else None,
        gpu_problem=("; ".join(str(problem) for problem in problems) or "its libraries are missing") if first else "",
    )


def read_machine(nvml: Any | None = None) -> Machine:
    """This computer, by doctor's checks (seconds: it loads CTranslate2 and torch, but runs no model)."""
    from app.core.doctor import run_doctor

    report, _code = run_doctor(nvml=nvml, smoke_test=False)
    return machine_from_doctor(report)


@dataclass(frozen=True)
class Choice:
    tier: str  # "fast", "balanced" or "accurate"
    model: str
    minutes_per_hour: float  # expected minutes to transcribe an hour of audio here
    size_mb: int
    memory_gb: float
    on_disk: bool

    def time_words(self) -> str:
        return minutes_words(self.minutes_per_hour)

    def short_time(self) -> str:
        """ "8 min per hour of audio" (the table's column)."""
        if self.minutes_per_hour < 1.0:
            return "under 1 min per hour of audio"
        return f"{round(self.minutes_per_hour)} min per hour of audio"


@dataclass(frozen=True)
class Recommendation:
    machine: Machine
    choices: tuple[Choice, ...]  # fast, balanced, accurate (the same model twice on a very small machine)
    recommended: str  # the tier
    reasons: tuple[str, ...]
    basis: str  # how the times were estimated

    def choice(self, tier: str) -> Choice:
        return next(choice for choice in self.choices if choice.tier == tier)

    @property
    def best(self) -> Choice:
        return self.choice(self.recommended)

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": asdict(self.machine),
            "choices": [asdict(choice) for choice in self.choices],
            "recommended": self.recommended,
            "recommended_model": self.best.model,
            "reasons": list(self.reasons),
            "basis": self.basis,
        }

    def format(self) -> str:
        """The recommendation for people: the machine, the reasons, the three choices, the basis."""
        lines = [*self.reasons, ""]
        for choice in self.choices:
            mark = "  (recommended)" if choice.tier == self.recommended else ""
            where = "on disk" if choice.on_disk else f"{choice.size_mb:,} MB to download"
            lines.append(f"{choice.tier:<9} {choice.model:<9} {choice.short_time():>29}   {where}{mark}")
        lines += ["", f"Times: {self.basis}"]
        return "\n".join(lines)


def minutes_words(minutes: float) -> str:
    """ "about 6 minutes for an hour of audio here", in whole minutes."""
    if minutes < 1.0:
        return "under a minute for an hour of audio here"
    whole = round(minutes)
    return f"about {whole} minute{'s' if whole != 1 else ''} for an hour of audio here"


def minutes_per_hour(model: str, machine: Machine, cpu_tiny_rate: float | None = None) -> float:
    """Minutes to transcribe an hour of audio with ``model`` on ``machine``: the queue's estimate, and on a CPU
    scaled by its cores. ``cpu_tiny_rate``: seconds per audio second of tiny.en on a 2-core CPU (the measured
    figure by default)."""
    costs = StageCosts()
    rate = costs.rates(model, machine.device, None, "cpu")["transcribe"]
    if cpu_tiny_rate is not None:
        rate *= cpu_tiny_rate / costs.rates(BUNDLED_MODEL, "cpu", None, "cpu")["transcribe"]
    if machine.device != "cuda":
        rate *= MEASURED_CORES / min(max(machine.cpu_cores, 1), MOST_CORES_COUNTED)
    return rate * 60.0


def _fits(name: str, machine: Machine) -> bool:
    need = CATALOG[name].vram_gb
    if machine.device == "cuda":
        return machine.gpu_memory_gb is None or need <= machine.gpu_memory_gb
    return machine.ram_gb is None or need <= machine.ram_gb * CPU_MEMORY_SHARE


def recommend(
    machine: Machine, cache: Path | None = None, cpu_tiny_rate: float | None = None, on_disk: set[str] | None = None
) -> Recommendation:
    """Three choices among the multilingual models this machine can run no slower than the recording: the most
    accurate (accurate), the next one down (balanced), the one below that (fast); models that another choice
    beats on both speed and accuracy are left out. ``on_disk``: the models present (read from ``cache``)."""
    present = on_disk if on_disk is not None else {model.name for model in installed_models(cache)}
    times = {name: minutes_per_hour(name, machine, cpu_tiny_rate) for name in CATALOG}
    usable = [
        name
        for name, entry in CATALOG.items()
        if entry.multilingual and _fits(name, machine) and times[name] <= SLOWEST_MINUTES_PER_HOUR
    ]
    if not usable:  # a very slow machine: the fastest multilingual model all the same
        usable = [min((name for name in CATALOG if CATALOG[name].multilingual), key=lambda name: times[name])]
    # Leave out a model that another usable one beats: as fast or faster and more accurate (medium beside turbo).
    ladder = sorted(
        (
            name
            for name in usable
            if not any(CATALOG[other].rank > CATALOG[name].rank and times[other] <= times[name] for other in usable)
        ),
        key=lambda name: CATALOG[name].rank,
    )
    picks = {
        "accurate": ladder[-1],
        "balanced": ladder[-2] if len(ladder) >= 2 else ladder[-1],
        "fast": ladder[-3] if len(ladder) >= 3 else ladder[0],
    }
    choices = tuple(
        Choice(
            tier,
            picks[tier],
            round(times[picks[tier]], 1),
            CATALOG[picks[tier]].size_mb,
            CATALOG[picks[tier]].vram_gb,
            picks[tier] in present,
        )
        for tier in TIERS
    )
    recommended = next((tier for tier in reversed(TIERS) if times[picks[tier]] <= RECOMMENDED_MINUTES_PER_HOUR), "fast")
    best = picks[recommended]
    reasons = [machine.describe(), _why(best, recommended, machine, times, picks, usable)]
    if best not in present:
        reasons.append(
            f"It is a {CATALOG[best].size_mb:,} MB download, once. Until then the built-in {BUNDLED_MODEL} works "
            "(English only, least accurate)."
        )
    basis = (
        f"{BUNDLED_MODEL} measured at {times_basis(cpu_tiny_rate)} on a {MEASURED_CORES}-core CPU; larger models "
        "scaled by the size of their networks, "
        + (
            "and a GPU by the speed-up measured on one (a small card is slower)."
            if machine.device == "cuda"
            else f"and by this computer's CPU cores ({machine.cpu_cores}; counted up to {MOST_CORES_COUNTED})."
        )
    )
    return Recommendation(machine, choices, recommended, tuple(reasons), basis)


def times_basis(cpu_tiny_rate: float | None) -> str:
    rate = (
        cpu_tiny_rate
        if cpu_tiny_rate is not None
        else StageCosts().rates(BUNDLED_MODEL, "cpu", None, "cpu")["transcribe"]
    )
    return f"{rate * 60:.1f} minutes per hour of audio"


def _why(
    best: str, tier: str, machine: Machine, times: dict[str, float], picks: dict[str, str], usable: list[str]
) -> str:
    where = "here" if machine.device == "cpu" else "on this GPU"
    text = f"Recommended: {best} ({tier}), {minutes_words(times[best]).replace(' here', f' {where}')}."
    if machine.device == "cuda" and machine.gpu_memory_gb is not None:
        text += f" It needs about {CATALOG[best].vram_gb:.0f} GB of the GPU's {machine.gpu_memory_gb:.0f} GB."
    better = [name for name in (picks["balanced"], picks["accurate"]) if CATALOG[name].rank > CATALOG[best].rank]
    if better:
        slower = better[-1]
        text += (
            f" {slower} is more accurate but needs {minutes_words(times[slower]).replace(' here', '')}; {best} is "
            f"the most accurate model that needs at most {RECOMMENDED_MINUTES_PER_HOUR:.0f} minutes for an hour."
        )
    elif machine.device == "cuda":
        larger = [
            name
            for name, entry in CATALOG.items()
            if entry.multilingual and entry.rank > CATALOG[best].rank and name not in usable
        ]
        if larger:
            biggest = max(larger, key=lambda name: CATALOG[name].rank)
            text += f" {biggest} would need {CATALOG[biggest].vram_gb:.0f} GB."
    else:
        text += " It is the most accurate model that runs faster than the recording here."
    return text


# Errors (by class name, as each HTTP library has its own) that mean the hub could not be reached at all.
_UNREACHABLE_NAMES = ("ConnectError", "ConnectTimeout", "ConnectionError", "NameResolutionError")


def cannot_connect(error: BaseException) -> bool:
    """Whether a failed download failed because this computer is offline (or the hub cannot be reached), as
    opposed to the hub answering with an error."""
    import socket

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, socket.gaierror | ConnectionError | TimeoutError):
            return True
        if type(current).__name__ in _UNREACHABLE_NAMES:
            return True
        current = current.__cause__ or current.__context__
    return False
