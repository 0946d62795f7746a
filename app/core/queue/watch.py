"""A watch folder: recordings that appear in it are queued, and their transcripts exported beside them.

Polled, not notified: a listing every few seconds works the same on every platform and on network shares
(where inotify and FSEvents see nothing of changes made by another machine), and costs a directory read.

A file is queued once it has *settled*: the same size and modification time at two scans in a row. A
recording still being copied in, or still being written by a recorder, is never queued half-written. A file
that a job already holds (queued, running, finished or failed, from this run or an earlier one) is left alone,
so restarting the watch never queues the folder twice.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from app.core.engine.audio import MEDIA_EXTENSIONS
from app.core.queue.jobs import Job, JobOptions, JobStore

log = logging.getLogger(__name__)


class WatchFolder:
    def __init__(self, folder: Path, options: JobOptions, store: JobStore, recursive: bool = False) -> None:
        self.folder = Path(folder).expanduser().absolute()
        # Exported beside the recording, in the watch's formats, whatever the options said about a folder.
        self.options = options
        self.store = store
        self.recursive = recursive
        self._last_seen: dict[Path, tuple[int, int]] = {}  # path -> (size, mtime_ns) at the previous scan
        self._held: set[Path] = set()  # files a job already holds: never looked up again

    def scan(self) -> list[Job]:
        """Queue every settled media file that no job holds yet; the jobs added."""
        if not self.folder.is_dir():
            return []  # an unplugged drive or a share that dropped: nothing to do until it is back
        now: dict[Path, tuple[int, int]] = {}
        settled: list[Path] = []
        for path in self._media():
            if path in self._held:
                continue
            try:
                status = path.stat()
            except OSError:
                continue  # removed between the listing and now
            now[path] = (status.st_size, status.st_mtime_ns)
            if status.st_size > 0 and self._last_seen.get(path) == now[path]:
                settled.append(path)
        self._last_seen = now
        added: list[Job] = []
        for path in settled:
            if self.store.find_by_source(path):
                self._held.add(path)
                continue
            options = replace(self.options, output_dir=str(path.parent))
            added.append(self.store.add(path, options))
            self._held.add(path)
            log.info("watch folder %s: queued %s", self.folder, path.name)
        return added

    def _media(self) -> list[Path]:
        try:
            children = self.folder.rglob("*") if self.recursive else self.folder.iterdir()
            return sorted(
                child
                for child in children
                if child.suffix.lower() in MEDIA_EXTENSIONS and not child.name.startswith(".") and child.is_file()
            )
        except OSError as error:
            log.warning("watch folder %s cannot be read: %s", self.folder, error)
            return []
