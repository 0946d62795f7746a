"""User settings, with types and defaults; stored as JSON under the config folder. The job defaults' fields are
the job options' (declared in :mod:`app.core.queue.options`, with their kinds and the keys older files used).

Four parts, each changed by a different part of the program: :class:`JobDefaults`, :class:`WindowState`,
:class:`DictationPreferences` and :class:`OffloadPreferences`.

Secrets never live here (the Hugging Face token is in the keyring, see :mod:`app.core.secrets`). The file
carries a version; :data:`_UPGRADES` turns an older file into the current shape, and a value of the wrong
type falls back to its default instead of stopping the program from starting.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.files import write_atomic
from app.core.queue.options import OPTION, OPTIONS, JobOptions, Option
from app.core.transcript.formats import DEFAULT_FORMATS

if TYPE_CHECKING:
    from app.core.engine.diarize import Backend
    from app.core.engine.transcribe import Device, Task

log = logging.getLogger(__name__)

SETTINGS_VERSION = 2
SETTINGS_FILE = "settings.json"


@dataclass(frozen=True)
class JobDefaults:
    """What a job added from the window is given (Settings' "Transcription" and "Speakers" parts): the job
    options that are not one file's own, and the watch folder."""

    model: str | None = None  # None: the best model on disk
    language: str | None = None  # None: detect
    diarize: bool = True
    diarizer: Backend = "auto"
    identify: bool = True  # name speakers found in the known-speaker library
    num_speakers: int | None = None
    min_speakers: int | None = None
    max_speakers: int | None = None
    prompt: str | None = None  # names and jargon to expect
    hotwords: str | None = None
    task: Task = "transcribe"  # or "translate" (into English)
    device: Device = "auto"
    compute_type: str = "auto"
    batch_size: int = -1  # auto
    formats: tuple[str, ...] = DEFAULT_FORMATS
    output_dir: str | None = None  # None: exports only on request
    # Recordings that appear here are queued with these defaults, their exports written beside them.
    watch_folder: str | None = None

    def job_options(self) -> JobOptions:
        return JobOptions(**{option.name: getattr(self, option.name) for option in OPTIONS if option.persisted})


@dataclass(frozen=True)
class WindowState:
    """Where the window was left: opaque to the core (Qt's saveGeometry/saveState, base64), and the last folder."""

    geometry: str | None = None
    state: str | None = None
    splitter: str | None = None
    last_folder: str | None = None
    theme: str = "system"  # or "light", "dark" (View › Theme)
    # The first-run page (what this computer can run, which model) was answered; it does not open again by itself.
    first_run_done: bool = False
    # The sheet of options opens when files are added (its "Don't ask again" turns it off, Settings back on).
    ask_options_on_add: bool = True
    # The export sheet's last choices: the folder, the formats (None: the job formats) and what the files show.
    export_folder: str | None = None
    export_formats: tuple[str, ...] | None = None
    export_timestamps: bool = True
    export_speakers: bool = True
    export_paragraphs: bool = True


@dataclass(frozen=True)
class DictationPreferences:
    """Dictation into other programs: "type" or "copy" besides the panel (None: the panel only), the global
    hotkey ("ctrl+alt+d"; None: none) with its mode (app.core.dictation.modes: "hold", "toggle", "continuous";
    "push" is hold's earlier name), and the start/stop sound."""

    output: str | None = None
    hotkey: str | None = None
    hotkey_mode: str = "toggle"
    sounds: bool = True
    commands: bool = False  # spoken punctuation and commands ("comma", "scratch that")
    numbers: bool = False  # numbers said as words typed as digits
    # Dictation's own model and language (file jobs use JobDefaults'): it must keep up with speech on the CPU.
    model: str = "tiny.en"
    language: str | None = None
    final_model: str | None = None  # a bigger model for the final text only (None: ``model``'s)
    # The file queue's running job is frozen while the person speaks (its decoding would slow dictation's).
    pause_queue: bool = True


@dataclass(frozen=True)
class OffloadPreferences:
    """The offload dialog's last choices. Never a secret: the SSH identity is a key file's path, not the key."""

    ssh_host: dict[str, str | bool] | None = None  # url, identity, known_hosts, command as typed; install
    budget_usd: float | None = None


Section = JobDefaults | WindowState | DictationPreferences | OffloadPreferences
SECTIONS: dict[str, type[Section]] = {
    "job": JobDefaults,
    "window": WindowState,
    "dictation": DictationPreferences,
    "offload": OffloadPreferences,
}


@dataclass(frozen=True)
class Settings:
    """Everything the user set, in four parts that change for different reasons: job defaults (Settings
    dialog), window state (every close), dictation preferences (the dictation panel) and offload preferences
    (the offload dialog)."""

    job: JobDefaults = field(default_factory=JobDefaults)
    window: WindowState = field(default_factory=WindowState)
    dictation: DictationPreferences = field(default_factory=DictationPreferences)
    offload: OffloadPreferences = field(default_factory=OffloadPreferences)
    # Keys written by a newer Scriba, kept on save: top-level ones, and each part's under that part's name.
    extra: dict[str, Any] = field(default_factory=dict)

    def job_options(self) -> JobOptions:
        return self.job.job_options()

    def with_job(self, **changes: Any) -> Settings:
        return replace(self, job=replace(self.job, **changes))

    def with_window(self, **changes: Any) -> Settings:
        return replace(self, window=replace(self.window, **changes))

    def with_dictation(self, **changes: Any) -> Settings:
        return replace(self, dictation=replace(self.dictation, **changes))

    def with_offload(self, **changes: Any) -> Settings:
        return replace(self, offload=replace(self.offload, **changes))


def _upgrade_from_0(data: dict[str, Any]) -> dict[str, Any]:
    # Version 0 (never released as a file format, kept as the example): "speakers" meant num_speakers.
    if "speakers" in data:
        data["num_speakers"] = data.pop("speakers")
    return data


# Settings-file keys earlier versions wrote for a job option, and the option.
_JOB_ALIASES = {alias: option.name for option in OPTIONS for alias in option.aliases}

# Version 1 was flat; the offload dialog's choices lived in "extra" under these names.
_FLAT_TO_PARTS = {
    **{name: ("job", name) for name in [*(item.name for item in fields(JobDefaults)), *_JOB_ALIASES]},
    "window_geometry": ("window", "geometry"),
    "window_state": ("window", "state"),
    "splitter_state": ("window", "splitter"),
    "last_folder": ("window", "last_folder"),
    "dictation_output": ("dictation", "output"),
    "dictation_hotkey": ("dictation", "hotkey"),
    "dictation_hotkey_mode": ("dictation", "hotkey_mode"),
}
_EXTRA_TO_PARTS = {"offload_ssh_host": ("offload", "ssh_host"), "offload_budget_usd": ("offload", "budget_usd")}


def _upgrade_from_1(data: dict[str, Any]) -> dict[str, Any]:
    parts: dict[str, Any] = {name: {} for name in SECTIONS}
    stored_extra = data.pop("extra", None)
    extra = dict(stored_extra) if isinstance(stored_extra, dict) else {}
    for key, value in data.items():
        if key in _FLAT_TO_PARTS:
            part, name = _FLAT_TO_PARTS[key]
            parts[part][name] = value
        else:
            extra[key] = value
    for key, (part, name) in _EXTRA_TO_PARTS.items():
        if key in extra:
            parts[part][name] = extra.pop(key)
    return {**parts, "extra": extra}


_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {0: _upgrade_from_0, 1: _upgrade_from_1}


# Fields outside the job part stored in a job option's shape (read and checked by that option's kind).
_SHAPED: dict[tuple[type[Section], str], Option] = {(WindowState, "export_formats"): OPTION["formats"]}


def _valid(name: str, value: Any, default: Any, option: Option | None) -> bool:
    if value is None:
        return default is None  # only what may be unset may be None
    if option is not None:
        return option.kind.valid(value)
    if isinstance(default, bool):
        return isinstance(value, bool)
    if name == "theme":
        return value in ("system", "light", "dark")
    if name == "budget_usd":
        return isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    if name == "ssh_host":
        return isinstance(value, dict) and all(isinstance(item, str | bool) for item in value.values())
    return isinstance(value, str)


def _section_from_dict(kind: type[Section], data: Any, kept: dict[str, Any]) -> Section:
    defaults = kind()
    values: dict[str, Any] = {}
    known = {item.name for item in fields(kind)}
    stored = data if isinstance(data, dict) else {}
    for key, value in stored.items():
        if kind is JobDefaults and key in _JOB_ALIASES:
            if _JOB_ALIASES[key] in stored:
                continue  # the key this version writes wins over the older one
            key = _JOB_ALIASES[key]
        if key not in known:
            kept[key] = value
            continue
        default = getattr(defaults, key)
        option = OPTION.get(key) if kind is JobDefaults else _SHAPED.get((kind, key))
        if _valid(key, value, default, option):
            values[key] = option.kind.from_json(value) if option is not None and value is not None else value
        else:
            log.warning("setting %s has an invalid value %r; using the default %r", key, value, default)
    return kind(**values)


def settings_from_dict(data: dict[str, Any]) -> Settings:
    version = int(data.pop("version", 0))
    while version < SETTINGS_VERSION:
        data = _UPGRADES[version](data)
        version += 1
    extra = dict(data.get("extra") or {}) if isinstance(data.get("extra"), dict) else {}
    for key, value in data.items():
        if key not in SECTIONS and key != "extra":
            extra[key] = value
    parts: dict[str, Any] = {}
    for name, kind in SECTIONS.items():
        kept: dict[str, Any] = {}
        parts[name] = _section_from_dict(kind, data.get(name), kept)
        if kept:
            earlier = extra.get(name)
            extra[name] = {**(earlier if isinstance(earlier, dict) else {}), **kept}
    return Settings(**parts, extra=extra)


def settings_to_dict(settings: Settings) -> dict[str, Any]:
    extra = dict(settings.extra)
    result: dict[str, Any] = {"version": SETTINGS_VERSION}
    for name in SECTIONS:
        part = asdict(getattr(settings, name))
        kept = extra.pop(name, None)
        result[name] = {**(kept if isinstance(kept, dict) else {}), **part}
    for name, value in result["job"].items():
        if name in OPTION:
            result["job"][name] = OPTION[name].kind.to_json(value)
    return {**result, "extra": extra}


class SettingsStore:
    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / SETTINGS_FILE

    def load(self) -> Settings:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return Settings()
        except (OSError, ValueError) as error:
            # A damaged settings file must not stop the program: keep it aside and start from defaults.
            aside = self.path.with_suffix(".damaged.json")
            log.warning("settings file %s is unreadable (%s); moved to %s, using defaults", self.path, error, aside)
            with contextlib.suppress(OSError):
                self.path.replace(aside)
            return Settings()
        if not isinstance(data, dict):
            return Settings()
        return settings_from_dict(data)

    def save(self, settings: Settings) -> None:
        write_atomic(self.path, json.dumps(settings_to_dict(settings), indent=2, ensure_ascii=False))
