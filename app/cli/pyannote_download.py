"""`scriba models download|remove pyannote` and pyannote's line in `scriba models list`.

Kept apart from app/cli/main.py so that the command module only registers and dispatches.
"""

from __future__ import annotations

import sys
from typing import TextIO

from app.cli.progress import DownloadBar
from app.core.engine.diarize.pyannote_models import (
    LICENSE,
    PYANNOTE_MODEL_NAME,
    PYANNOTE_SIZE_MB,
    directory_size,
    download_pipeline,
    find_pipeline,
    how_to_get,
    remove_pipeline,
)
from app.core.errors import ExitCode


def list_line() -> str:
    """pyannote's row for `scriba models list` (same columns as the Whisper models)."""
    found = find_pipeline()
    if found is None:
        status = "not downloaded (speaker detection; `scriba models download pyannote`)"
        size = PYANNOTE_SIZE_MB
    else:
        status = f"{found.origin}: {found.path}  (speaker detection, {LICENSE})"
        size = max(1, round(directory_size(found.path) / 1e6))
    return f"{PYANNOTE_MODEL_NAME:18} {size:>5} MB {'-':>6}  {status}"


def _ask_token(stream: TextIO) -> tuple[str | None, bool]:
    """The token (from the environment or keyring, else asked for) and whether it was typed just now."""
    from app.core.secrets import huggingface_token

    token, origin = huggingface_token()
    if token:
        stream.write(f"using the Hugging Face token from {origin}\n")
        return token, False
    if not sys.stdin.isatty():
        value = sys.stdin.readline().strip()
    else:
        import getpass

        value = getpass.getpass("Hugging Face read token (input hidden): ").strip()
    return value or None, True


def _store(token: str, stream: TextIO) -> None:
    from app.core.secrets import HF_TOKEN_KEY, set_secret

    try:
        set_secret(HF_TOKEN_KEY, token)
        stream.write("token stored in the system keyring\n")
    except Exception as error:  # no keyring: the download worked anyway, and pyannote no longer needs it
        stream.write(f"note: the token could not be stored in the keyring ({type(error).__name__})\n")


def download(stream: TextIO = sys.stderr) -> int:
    from app.core.errors import ModelError

    found = find_pipeline()
    if found is not None:
        print(f"{PYANNOTE_MODEL_NAME}: {found.path}")
        return ExitCode.OK
    stream.write(how_to_get() + "\n")
    token, typed = _ask_token(stream)
    if not token:
        stream.write("scriba: error: no Hugging Face token given; nothing downloaded\n")
        return ExitCode.FAILED
    try:
        # The hub's address comes from the hub client's own setting (HF_ENDPOINT), as for any hub download.
        with DownloadBar("downloading pyannote", stream) as bar:
            path = download_pipeline(token, progress=bar)
    except KeyboardInterrupt:  # what arrived is kept in the cache's partial folder
        stream.write("interrupted: run the same command again to resume the download\n")
        return ExitCode.INTERRUPTED
    except ModelError as error:
        stream.write(f"scriba: error: {error}\n")
        return ExitCode.FAILED
    if typed:  # kept only once the hub accepted it
        _store(token, stream)
    stream.write("done: pyannote runs offline from now on; the token is no longer needed for it\n")
    print(f"{PYANNOTE_MODEL_NAME}: {path}")
    return ExitCode.OK


def remove(stream: TextIO = sys.stderr) -> int:
    from app.core.errors import ModelError

    try:
        print(f"removed {remove_pipeline()}")
    except ModelError as error:
        stream.write(f"scriba: error: {error}\n")
        return ExitCode.FAILED
    return ExitCode.OK
