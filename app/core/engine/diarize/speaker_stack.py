"""The libraries every diarizer stands on (torch, torchaudio, pyannote.audio), checked before one is loaded.

torchaudio's compiled library loads only into the torch it was built for: after `pip install -U` of either,
every diarized job would fail with "Could not load this library: …libtorchaudio.so". This names the two
versions and the command that matches them instead.
"""

from __future__ import annotations

import importlib.metadata
import os
from functools import lru_cache

from app.core.engine.quiet_imports import silence_pyannote_torchcodec_warning
from app.core.errors import DiarizationError


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _release(version: str) -> str:
    """``2.11.0+cu130`` -> ``2.11.0``: the wheel's build tag is no part of the pairing."""
    return version.split("+", 1)[0]


@lru_cache(maxsize=1)
def speaker_stack_problem() -> str | None:
    """None when torch, torchaudio and pyannote.audio import; otherwise what is wrong and how to fix it."""
    try:
        import torch
    except (ImportError, OSError) as error:
        return (
            f"torch cannot be imported ({type(error).__name__}: {error}). Reinstall Scriba (`make venv` from a "
            "checkout) so that torch and torchaudio are installed as a pair."
        )
    torch_version = _release(str(torch.__version__))
    try:
        import torchaudio  # noqa: F401  (loads its compiled library into torch)
    except (ImportError, OSError) as error:
        audio_version = _version("torchaudio")
        cause = f"{type(error).__name__}: {error}"
        if audio_version is None:
            return (
                f"torchaudio is not installed ({cause}). Install the one that matches torch: "
                f"`pip install torchaudio=={torch_version}`."
            )
        if _release(audio_version) != torch_version:
            return (
                f"torchaudio {audio_version} does not match torch {torch_version}, so its compiled library cannot "
                f"load ({cause}). Install the matching one: `pip install torchaudio=={torch_version}` "
                "(from a checkout: `make venv`)."
            )
        return (
            f"torchaudio {audio_version}'s compiled library cannot load into torch {torch_version} ({cause}). "
            f"Reinstall the pair: `pip install --force-reinstall torch=={torch_version} "
            f"torchaudio=={torch_version}`."
        )
    # pyannote.audio 4 reports usage to its authors unless told not to; Scriba sends nothing anywhere.
    os.environ["PYANNOTE_METRICS_ENABLED"] = "0"
    silence_pyannote_torchcodec_warning()
    try:
        import pyannote.audio  # noqa: F401
    except (ImportError, OSError) as error:
        return f"pyannote.audio cannot be imported ({type(error).__name__}: {error}). Reinstall Scriba."
    return None


def require_speaker_stack() -> None:
    """Raise a DiarizationError that says what to install when the diarizers' libraries cannot load."""
    problem = speaker_stack_problem()
    if problem is not None:
        raise DiarizationError(f"Speakers cannot be found: {problem}")
