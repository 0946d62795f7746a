"""The price table and speed figures behind every cloud estimate, and the speeds Scriba measured itself.

``resources/prices.toml`` holds what providers rent (as :class:`~app.cloud.types.Offer` rows, each with its
source and date) and how fast Whisper and diarization run on each GPU (each figure with its source, or
marked as an estimate with its derivation). :class:`MeasuredSpeeds` keeps the figures Scriba measured on
this machine or on finished remote jobs; :class:`Throughput` prefers them over anything in the table, so
estimates get better the more the user runs.
"""

from __future__ import annotations

import json
import logging
import os
import re
import statistics
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Literal, cast, get_args

from app.cloud.types import Billing, Offer
from app.core.errors import ScribaError
from app.core.files import write_atomic

log = logging.getLogger(__name__)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 needs the tomli backport (pyproject: tomli; python_version < '3.11')
    import tomli as tomllib

PRICES_FILE = "prices.toml"
SUPPORTED_SCHEMA = 1
BILLING_UNITS: dict[Billing, int] = {"per-second": 1, "per-minute": 60, "per-hour": 3600}
CPU = "CPU"  # the GPU name under which the local machine's CPU speeds are stored and looked up

SpeedKind = Literal["measured", "published", "estimate"]
Task = Literal["transcribe", "diarize"]


class PriceTableError(ScribaError, ValueError):
    """The price table is malformed: a missing source or date, an unknown billing granularity, …"""


@dataclass(frozen=True)
class ProviderInfo:
    key: str  # "aws", "lambda", …: the Offer.provider value
    name: str
    launchable: bool
    billing: Billing
    min_billing_seconds: float
    billing_source: str
    boot_minutes: float
    boot_note: str = ""
    billing_note: str = ""
    cost_note: str = ""  # a cost the estimate leaves out (Vast's bandwidth charges)


@dataclass(frozen=True)
class PriceTable:
    providers: dict[str, ProviderInfo]
    offers: tuple[Offer, ...]
    # Per (provider, offer): where the figure was read when not on the pricing page, and the date caveat.
    row_notes: dict[tuple[str, str], str] = field(default_factory=dict)

    def offers_of(self, provider: str) -> list[Offer]:
        return [offer for offer in self.offers if offer.provider == provider]

    def note_for(self, offer: Offer) -> str:
        return self.row_notes.get((offer.provider, offer.offer), "")


@dataclass(frozen=True)
class Speed:
    """How many seconds of audio one second of processing gets through, and where that figure comes from."""

    x_realtime: float
    kind: SpeedKind
    source: str


@dataclass(frozen=True)
class GpuClass:
    name: str
    aliases: tuple[str, ...]
    vram_gb: float
    factor: float  # transcription speed relative to the reference GPU
    diarize_x: float
    source: str
    derivation: str = ""


# ------------------------------------------------------------------------------------------------------------
# Loading the table
# ------------------------------------------------------------------------------------------------------------


def load_table_data(path: Path | None = None) -> dict[str, Any]:
    """The raw TOML document (the packaged one unless ``path`` is given)."""
    if path is None:
        from app.resources import resource_path

        path = resource_path(PRICES_FILE)
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    if data.get("schema") != SUPPORTED_SCHEMA:
        raise PriceTableError(f"{path}: schema {data.get('schema')!r}, expected {SUPPORTED_SCHEMA}")
    return data


def _require(row: Mapping[str, Any], key: str, where: str) -> Any:
    value = row.get(key)
    if value is None or value == "":
        raise PriceTableError(f"{where}: '{key}' is missing")
    return value


def _billing(value: object, where: str) -> Billing:
    if value not in get_args(Billing):
        raise PriceTableError(f"{where}: billing {value!r} is not one of {', '.join(get_args(Billing))}")
    return cast(Billing, value)


def load_price_table(data: Mapping[str, Any] | None = None) -> PriceTable:
    """Parse the providers and offers; every offer must carry a source and a date."""
    data = load_table_data() if data is None else data
    providers: dict[str, ProviderInfo] = {}
    for key, row in data.get("providers", {}).items():
        where = f"providers.{key}"
        providers[key] = ProviderInfo(
            key=key,
            name=str(_require(row, "name", where)),
            launchable=bool(row.get("launchable", False)),
            billing=_billing(row.get("billing"), where),
            min_billing_seconds=float(row.get("min_billing_seconds", 0)),
            billing_source=str(_require(row, "billing_source", where)),
            boot_minutes=float(_require(row, "boot_minutes", where)),
            boot_note=str(row.get("boot_note", "")),
            billing_note=str(row.get("billing_note", "")),
            cost_note=str(row.get("cost_note", "")),
        )
    offers: list[Offer] = []
    notes: dict[tuple[str, str], str] = {}
    for index, row in enumerate(data.get("offers", [])):
        where = f"offers[{index}] ({row.get('provider')} {row.get('offer')})"
        provider_key = str(_require(row, "provider", where))
        provider = providers.get(provider_key)
        if provider is None:
            raise PriceTableError(f"{where}: provider '{provider_key}' has no [providers.{provider_key}] section")
        spot = row.get("spot_usd_per_hour")
        offer = Offer(
            provider=provider_key,
            offer=str(_require(row, "offer", where)),
            gpu=str(_require(row, "gpu", where)),
            gpu_count=int(row.get("gpu_count", 1)),
            vram_gb=float(_require(row, "vram_gb", where)),
            usd_per_hour=float(_require(row, "usd_per_hour", where)),
            spot_usd_per_hour=None if spot is None else float(spot),
            billing=_billing(row.get("billing", provider.billing), where),
            boot_minutes=float(row.get("boot_minutes", provider.boot_minutes)),
            price_source=str(_require(row, "source", where)),
            price_date=str(_require(row, "date", where)),
            launchable=bool(row.get("launchable", provider.launchable)),
            region=row.get("region"),
        )
        offers.append(offer)
        parts = []
        if row.get("date_note"):
            parts.append(str(row["date_note"]))
        if row.get("via"):
            parts.append(f"read via {row['via']}")
        if parts:
            notes[(offer.provider, offer.offer)] = "; ".join(parts)
    return PriceTable(providers=providers, offers=tuple(offers), row_notes=notes)


# ------------------------------------------------------------------------------------------------------------
# GPU names
# ------------------------------------------------------------------------------------------------------------


def gpu_key(name: str) -> str:
    """A spelling-insensitive key: "NVIDIA GeForce RTX 4090" and "rtx_4090" both become "rtx4090"."""
    lowered = name.lower()
    for noise in ("nvidia", "geforce", "tesla"):
        lowered = lowered.replace(noise, "")
    return re.sub(r"[^a-z0-9]", "", lowered)


def model_key(model: str) -> str:
    """English-only variants run at the speed of their multilingual twin: "small.en" -> "small"."""
    return model[: -len(".en")] if model.endswith(".en") else model


# ------------------------------------------------------------------------------------------------------------
# Measured speeds
# ------------------------------------------------------------------------------------------------------------


def measured_speeds_path(data_dir: Path | None = None) -> Path:
    """The measured-speeds file of ``data_dir``; by default of SCRIBA_DATA_DIR, else of the platform's user data
    folder: the folder the CLI and the window use when no --data-dir is given (app.cli.common.resolve_data_dir)."""
    if data_dir is None:
        from_environment = os.environ.get("SCRIBA_DATA_DIR")
        if from_environment:
            data_dir = Path(from_environment)
        else:
            from app.core.paths import data_dir as platform_data_dir

            data_dir = platform_data_dir()
    return data_dir / "offload" / "measured_speeds.json"


@dataclass(frozen=True)
class SpeedRecord:
    gpu: str
    model: str
    task: Task
    x_realtime: float
    source: str  # "local benchmark", "lambda job 1234", …
    date: str
    audio_seconds: float | None = None


def _speed_record(item: Any) -> SpeedRecord | None:
    """One record of the measured-speeds file, or None when it is not one."""
    if not isinstance(item, dict):
        return None
    try:
        seconds = item.get("audio_seconds")
        return SpeedRecord(
            gpu=str(item["gpu"]),
            model=str(item["model"]),
            task="diarize" if item.get("task") == "diarize" else "transcribe",
            x_realtime=float(item["x_realtime"]),
            source=str(item["source"]),
            date=str(item.get("date", "")),
            audio_seconds=None if seconds is None else float(seconds),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _write_json(path: Path, payload: Any) -> None:
    write_atomic(path, json.dumps(payload, indent=1))  # a crash never leaves half a file


class MeasuredSpeeds:
    """Speeds Scriba measured itself (local benchmarks, finished remote jobs), kept as JSON per user.

    A lookup returns the median of the last :attr:`WINDOW` records for that GPU and model, so one odd job
    (a file of silence, a slow host) does not swing the next estimate.
    """

    WINDOW = 5
    VERSION = 1
    # Speeds outside these bounds are no measurement (a timing of zero, a unit slip, a hand edit): large-v3 on a
    # slow CPU runs at about 0.1x real time and tiny on a big GPU at a few hundred x.
    MIN_X_REALTIME = 0.01
    MAX_X_REALTIME = 10_000.0

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else measured_speeds_path()
        # What was set aside and why, for the caller to tell the user (each said once).
        self.warnings: list[str] = []
        self._checked = False  # a file set aside (or that could not be) is not tried again by this instance

    @classmethod
    def plausible(cls, x_realtime: float) -> bool:
        return cls.MIN_X_REALTIME <= x_realtime <= cls.MAX_X_REALTIME

    def records(self) -> list[SpeedRecord]:
        """The plausible records. A file of another shape is moved aside whole, and records that are malformed or
        implausible are moved to a file beside it: kept, never deleted, and :attr:`warnings` says where."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as error:
            # Unreadable (permissions): an estimate goes on with the table's figures; the file stays as it is.
            self._warn(f"{self.path} cannot be read ({error.strerror or error}); the table's speeds are used")
            return []
        try:
            data = json.loads(text)
        except ValueError as error:
            self._set_aside_file(f"is not JSON ({error})")
            return []
        items = data.get("records") if isinstance(data, dict) else None
        if not isinstance(items, list):
            self._set_aside_file('is not a list of measured speeds ({"records": [...]})')
            return []
        records: list[SpeedRecord] = []
        rejected: list[tuple[Any, str]] = []
        for item in items:
            record = _speed_record(item)
            if record is None:
                rejected.append((item, "not a speed record (gpu, model, x_realtime, source)"))
            elif not self.plausible(record.x_realtime):
                rejected.append((item, f"{record.x_realtime:g}x real time is not a plausible speed"))
            else:
                records.append(record)
        if rejected:
            self._set_aside_records(rejected, records)
        return records

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            # The caller says it to the user (the CLI on standard error): here it is only logged.
            log.info("%s", message)
            self.warnings.append(message)

    def _set_aside_file(self, why: str) -> None:
        if self._checked:
            return
        self._checked = True
        from app.core.queue.sqlite_db import move_aside

        try:
            aside = move_aside(self.path, "damaged")
        except OSError as error:
            self._warn(f"{self.path} {why} and could not be moved aside ({error}); the table's speeds are used")
            return
        self._warn(
            f"{self.path} {why}: it was moved to {aside} (kept, not deleted); the table's speeds are used and "
            "new measurements start a new file"
        )

    def _set_aside_records(self, rejected: list[tuple[Any, str]], kept: list[SpeedRecord]) -> None:
        if self._checked:
            return
        self._checked = True
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = self.path.with_name(f"{self.path.name}.set-aside-{stamp}")
        number = 2
        while aside.exists():
            aside = self.path.with_name(f"{self.path.name}.set-aside-{stamp}-{number}")
            number += 1
        reasons = "; ".join(sorted({why for _, why in rejected}))
        try:
            _write_json(aside, {"reason": reasons, "records": [item for item, _ in rejected]})
            self._write(kept)
        except OSError as error:
            self._warn(
                f"{self.path}: {len(rejected)} record(s) left out of estimates ({reasons}); they could not be "
                f"moved aside ({error})"
            )
            return
        self._warn(f"{self.path}: {len(rejected)} record(s) set aside in {aside} and left out of estimates ({reasons})")

    def _write(self, records: list[SpeedRecord]) -> None:
        _write_json(self.path, {"version": self.VERSION, "records": [record.__dict__ for record in records]})

    def record(
        self,
        gpu: str,
        model: str,
        x_realtime: float,
        source: str,
        *,
        task: Task = "transcribe",
        audio_seconds: float | None = None,
        when: date | None = None,
    ) -> SpeedRecord:
        """Append one measurement; written to a temporary file and renamed, so a crash never truncates it."""
        if not self.plausible(x_realtime):
            raise ValueError(
                f"a speed must be between {self.MIN_X_REALTIME:g} and {self.MAX_X_REALTIME:g}x real time, "
                f"not {x_realtime}"
            )
        entry = SpeedRecord(
            gpu, model, task, float(x_realtime), source, (when or date.today()).isoformat(), audio_seconds
        )
        self._write([*self.records(), entry])
        return entry

    def lookup(self, gpu: str, model: str | None, task: Task = "transcribe") -> Speed | None:
        """The median of the latest measurements for this GPU (and model, for transcription), or None."""
        wanted_gpu = gpu_key(gpu)
        wanted_model = model_key(model) if model is not None else None
        matching = [
            record
            for record in self.records()
            if record.task == task
            and gpu_key(record.gpu) == wanted_gpu
            and (wanted_model is None or model_key(record.model) == wanted_model)
        ]
        if not matching:
            return None
        latest = matching[-self.WINDOW :]
        value = statistics.median(record.x_realtime for record in latest)
        last = latest[-1]
        count = f"median of {len(latest)} runs, " if len(latest) > 1 else ""
        return Speed(value, "measured", f"measured ({count}latest {last.date}: {last.source})")


# ------------------------------------------------------------------------------------------------------------
# Throughput
# ------------------------------------------------------------------------------------------------------------


class Throughput:
    """Looks up how fast a model transcribes (and pyannote diarizes) on a GPU, measured figures first.

    Order for transcription: Scriba's own measurement for that GPU and model, a published figure for that
    pair from the table, then reference x GPU factor x model factor (an estimate, with its derivation in
    the returned :class:`Speed`). On the CPU: measurement, then the table's CPU figures scaled by cores.
    """

    def __init__(self, data: Mapping[str, Any] | None = None, measured: MeasuredSpeeds | None = None) -> None:
        data = load_table_data() if data is None else data
        self.measured = measured
        reference = data["reference"]
        self.reference_gpu = str(reference["gpu"])
        self.reference_x = float(reference["x_realtime"])
        self.reference_derivation = str(reference.get("derivation", ""))
        self.model_factors: dict[str, tuple[float, str]] = {
            name: (float(row["factor"]), str(row.get("derivation") or row.get("source", "")))
            for name, row in data.get("models", {}).items()
        }
        self.gpus: dict[str, GpuClass] = {}
        for row in data.get("gpus", []):
            gpu = GpuClass(
                name=str(row["name"]),
                aliases=tuple(str(alias) for alias in row.get("aliases", ())),
                vram_gb=float(row["vram_gb"]),
                factor=float(row["factor"]),
                diarize_x=float(row["diarize_x"]),
                source=str(row.get("source", "estimate")),
                derivation=str(row.get("derivation", "")),
            )
            for spelling in (gpu.name, *gpu.aliases):
                known = self.gpus.setdefault(gpu_key(spelling), gpu)
                if known is not gpu:
                    raise PriceTableError(f"GPU spelling '{spelling}' names both {known.name} and {gpu.name}")
        self.published: dict[tuple[str, str], Speed] = {}
        for row in data.get("speeds", []):
            gpu_name = self.canonical_gpu(str(row["gpu"]))
            text = f"{row['source']} ({row['derivation']})" if row.get("derivation") else str(row["source"])
            kind: SpeedKind = "estimate" if row["source"] == "estimate" else "published"
            self.published[(gpu_key(gpu_name), model_key(str(row["model"])))] = Speed(
                float(row["x_realtime"]), kind, text
            )
        cpu = data.get("cpu", {})
        self.cpu_cores = int(cpu.get("cores", 2))
        self.cpu_diarize = Speed(float(cpu.get("diarize_x", 0) or 0), "published", str(cpu.get("diarize_source", "")))
        self.cpu_models: dict[str, Speed] = {}
        for name, row in cpu.get("models", {}).items():
            estimated = row.get("source") == "estimate"
            self.cpu_models[name] = Speed(
                float(row["x_realtime"]),
                "estimate" if estimated else "published",
                f"estimate: {row.get('derivation', '')}" if estimated else str(row["source"]),
            )

    def gpu_class(self, name: str) -> GpuClass | None:
        return self.gpus.get(gpu_key(name))

    def canonical_gpu(self, name: str) -> str:
        """The table's name for a GPU as a provider spells it ("NVIDIA GeForce RTX 4090" -> "RTX 4090")."""
        found = self.gpu_class(name)
        return found.name if found else name

    def transcription(self, gpu: str, model: str) -> Speed | None:
        """Speed of ``model`` on one ``gpu``, or None when neither a measurement nor the table knows the GPU."""
        if gpu_key(gpu) == gpu_key(CPU):
            return self.cpu_transcription(model)
        name = self.canonical_gpu(gpu)
        if self.measured is not None:
            measured = self.measured.lookup(name, model, "transcribe")
            if measured is not None:
                return measured
        published = self.published.get((gpu_key(name), model_key(model)))
        if published is not None:
            return published
        gpu_class = self.gpu_class(name)
        factor = self.model_factors.get(model_key(model))
        if gpu_class is None or factor is None:
            return None
        x = self.reference_x * gpu_class.factor * factor[0]
        return Speed(
            x,
            "estimate",
            f"estimate: {self.reference_x:g}x for large-v3 on {self.reference_gpu} (faster-whisper README, "
            f"calibrated on Salad's benchmark) x {gpu_class.factor:g} for {gpu_class.name} x {factor[0]:g} "
            f"for {model_key(model)}",
        )

    def diarization(self, gpu: str) -> Speed | None:
        if gpu_key(gpu) == gpu_key(CPU):
            return self.cpu_diarization()
        name = self.canonical_gpu(gpu)
        if self.measured is not None:
            measured = self.measured.lookup(name, None, "diarize")
            if measured is not None:
                return measured
        gpu_class = self.gpu_class(name)
        if gpu_class is None:
            return None
        if gpu_class.name == "V100":
            source = "huggingface.co/pyannote/speaker-diarization-3.1: real-time factor 2.5% on a V100"
            return Speed(gpu_class.diarize_x, "published", source)
        return Speed(
            gpu_class.diarize_x,
            "estimate",
            f"estimate: pyannote's 40x on a V100 (its model card) scaled to {gpu_class.name}",
        )

    def _cpu_scale(self, cpu_cores: int | None) -> tuple[float, str]:
        if cpu_cores is None or cpu_cores == self.cpu_cores:
            return 1.0, ""
        # Whisper on a CPU scales sub-linearly with threads; cap the gain so a 64-core box is not promised 32x.
        scale = min(max(cpu_cores / self.cpu_cores, 0.5), 4.0)
        return scale, f", scaled x{scale:g} for {cpu_cores} cores (estimate)"

    def cpu_transcription(self, model: str, cpu_cores: int | None = None) -> Speed | None:
        if self.measured is not None:
            measured = self.measured.lookup(CPU, model, "transcribe")
            if measured is not None:
                return measured
        base = self.cpu_models.get(model_key(model))
        if base is None:
            return None
        scale, note = self._cpu_scale(cpu_cores)
        kind: SpeedKind = base.kind if scale == 1.0 else "estimate"
        return Speed(base.x_realtime * scale, kind, base.source + note)

    def cpu_diarization(self, cpu_cores: int | None = None) -> Speed | None:
        if self.measured is not None:
            measured = self.measured.lookup(CPU, None, "diarize")
            if measured is not None:
                return measured
        if self.cpu_diarize.x_realtime <= 0:
            return None
        scale, note = self._cpu_scale(cpu_cores)
        kind: SpeedKind = self.cpu_diarize.kind if scale == 1.0 else "estimate"
        return Speed(self.cpu_diarize.x_realtime * scale, kind, self.cpu_diarize.source + note)
