"""One file from the Hugging Face hub, resumable across attempts: shared by the Whisper model and pyannote
downloads. ``token``: a token, None for the one the hub client has stored, False for none (public models)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def fetch_file(
    url: str, target: Path, size: int, token: str | bool | None, timeout_s: float, report: Callable[[int], None]
) -> None:
    """Download one file to ``target``, continuing a ``.part`` file left by an earlier, interrupted attempt.

    huggingface_hub's own downloader resumes only within one call (its partial file is per process and deleted
    on failure), so a closed laptop or a lost connection would start a 30 MB download over; this keeps the part
    and asks the hub (through the hub client's own HTTP session and headers) for the rest with a range request.
    """
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    part = target.with_name(target.name + ".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    have = part.stat().st_size if part.exists() else 0
    if have > size:  # the file changed on the hub since: start again
        part.unlink()
        have = 0
    if have == size and size > 0:
        # Every byte arrived before the last attempt stopped (cancelled right after its final chunk): asking for
        # the range past the end would be refused (416), so finish the file instead.
        report(have)
        part.replace(target)
        return
    headers = build_hf_headers(token=token, library_name="scriba")
    # Byte counts and ranges must refer to the file itself, not to a compressed transfer of it.
    headers["Accept-Encoding"] = "identity"
    if have:
        headers["Range"] = f"bytes={have}-"
    with get_session().stream("GET", url, headers=headers, follow_redirects=True, timeout=timeout_s) as response:
        if response.status_code >= 400:
            response.read()  # the hub's error code and message are in the body and headers
        hf_raise_for_status(response)
        if have and response.status_code != 206:  # the range was ignored: the whole file comes again
            have = 0
        report(have)
        with part.open("ab" if have else "wb") as handle:
            for chunk in response.iter_bytes(1 << 20):
                handle.write(chunk)
                have += len(chunk)
                report(have)
    if have != size:
        raise ConnectionError(f"{target.name}: {have} of {size} bytes arrived")
    part.replace(target)
