"""What came back from the remote, kept safe on this computer before the remote copy is removed.

The transcripts are paid work: each one's JSON is written (atomically, synced) under the data folder's
``offload-results`` as soon as it is downloaded, and only then may the teardown remove the remote work folder. Once
the exports are written (to -o or the data folder's unsaved-exports) the stored copy is removed; one that nothing
else holds stays, and the user is told where."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from app.core.files import write_atomic
from app.core.transcript.document import Transcript
from app.core.transcript.formats import to_json
from app.core.transcript.save import describe_write_error

RESULTS_FOLDER = "offload-results"


def results_dir(data_dir: Path) -> Path:
    return data_dir / RESULTS_FOLDER


def store_locally(
    keep_dir: Path | None, run_name: str, transcripts: dict[int, Transcript]
) -> tuple[dict[int, Path], str | None]:
    """Each transcript as ``keep_dir/<time>-<run_name>/<index>.json``. Returns the files and None, or the files
    stored before a write failed and why it failed (then the remote copy must be kept)."""
    if keep_dir is None or not transcripts:
        return {}, None
    folder = keep_dir / f"{time.strftime('%Y%m%dT%H%M%S')}-{run_name}"
    stored: dict[int, Path] = {}
    try:
        for index, transcript in sorted(transcripts.items()):
            path = folder / f"{index:04d}.json"
            write_atomic(path, to_json(transcript))
            stored[index] = path
    except OSError as error:
        return stored, f"{describe_write_error(error)}"
    return stored, None


def forget_stored(path: Path) -> None:
    """The exports hold the transcript now: the stored copy (and its run's folder, once empty) goes."""
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)
        path.parent.rmdir()  # fails while other transcripts of the run are still there
