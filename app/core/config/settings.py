"""User settings: declared once here, with types and defaults; stored as JSON under the config folder.

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

from app.core.engine.export import FORMATS, write_atomic
from app.core.queue.jobs import JobOptions

if TYPE_CHECKING:
    from app.core.engine.diarize import Backend
    from app.core.engine.transcribe import Device

log = logging.getLogger(__name__)

SETTINGS_VERSION = 1
SETTINGS_FILE = "settings.json"


@dataclass(frozen=True)
class Settings:
    model: str | None = None  # None: the best model on disk
    device: Device = "auto"
    compute_type: str = "auto"
    language: str | None = None  # None: detect
    diarize: bool = True
    diarizer: Backend = "auto"
    identify_speakers: bool = True  # name speakers found in the known-speaker library
    num_speakers: int | None = None
    min_speakers: int | None = None
    max_speakers: int | None = None
    formats: tuple[str, ...] = FORMATS
    output_dir: str | None = None  # None: exports only on request
    # Window state, opaque to the core (Qt's saveGeometry/saveState, base64).
    window_geometry: str | None = None
    window_state: str | None = None
    splitter_state: str | None = None
    last_folder: str | None = None
    # Dictation into other programs: "type" or "copy" besides the panel (None: the panel only), and the global
    # hotkey ("ctrl+alt+d"; None: none) with its mode, "toggle" or "push" (push-to-talk).
    dictation_output: str | None = None
    dictation_hotkey: str | None = None
    dictation_hotkey_mode: str = "toggle"
    extra: dict[str, Any] = field(default_factory=dict)  # keys written by a newer Scriba, kept on save

    def job_options(self) -> JobOptions:
        return JobOptions(
            model=self.model,
            language=self.language,
            diarize=self.diarize,
            diarizer=self.diarizer,
            identify=self.identify_speakers,
            num_speakers=self.num_speakers,
            min_speakers=self.min_speakers,
            max_speakers=self.max_speakers,
            device=self.device,
            compute_type=self.compute_type,
            formats=self.formats,
            output_dir=self.output_dir,
        )

    def with_changes(self, **changes: Any) -> Settings:
        return replace(self, **changes)


def _upgrade_from_0(data: dict[str, Any]) -> dict[str, Any]:
    # Version 0 (never released as a file format, kept as the example): "speakers" meant num_speakers.
    if "speakers" in data:
        data["num_speakers"] = data.pop("speakers")
    return data


_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {0: _upgrade_from_0}


def _check_type(name: str, value: Any, default: Any) -> bool:
    if value is None:
        return name in _OPTIONAL
    if isinstance(default, bool) or name == "diarize":
        return isinstance(value, bool)
    if name.endswith("_speakers"):
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1
    if name == "formats":
        return isinstance(value, list | tuple) and bool(value) and all(item in FORMATS for item in value)
    if name == "extra":
        return isinstance(value, dict)
    return isinstance(value, str)


_DEFAULTS = Settings()
_OPTIONAL = {
    "model",
    "language",
    "num_speakers",
    "min_speakers",
    "max_speakers",
    "output_dir",
    "window_geometry",
    "window_state",
    "splitter_state",
    "last_folder",
    "dictation_output",
    "dictation_hotkey",
}


def settings_from_dict(data: dict[str, Any]) -> Settings:
    version = int(data.pop("version", 0))
    while version < SETTINGS_VERSION:
        data = _UPGRADES[version](data)
        version += 1
    known = {item.name for item in fields(Settings)}
    values: dict[str, Any] = {}
    extra = dict(data.get("extra") or {})
    for key, value in data.items():
        if key == "extra":
            continue
        if key not in known:
            extra[key] = value
            continue
        default = getattr(_DEFAULTS, key)
        if _check_type(key, value, default):
            values[key] = tuple(value) if key == "formats" else value
        else:
            log.warning("setting %s has an invalid value %r; using the default %r", key, value, default)
    return Settings(**values, extra=extra)


def settings_to_dict(settings: Settings) -> dict[str, Any]:
    data = asdict(settings)
    data["formats"] = list(settings.formats)
    extra = data.pop("extra")
    return {"version": SETTINGS_VERSION, **data, "extra": extra}


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
