"""Offload jobs of the queue: the jobs stay in the queue and tell the truth while they run elsewhere.

The selected jobs are taken (state running, owned by this process, so the local worker leaves them alone and
a crash puts them back in the queue at the next start); the remote progress, speed and cost so far reach
their rows; each finishes, fails with its reason, or goes back to the queue when the user cancels.
A cancel of any of them (from the window or `scriba queue cancel`) cancels the offload and tears it down.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from app.cloud.offload.base import OffloadCancelled, OffloadEvent, OffloadLike, OffloadResult
from app.cloud.offload.results import forget_stored
from app.core.cancel import CancelToken
from app.core.queue.exports import auto_export
from app.core.queue.jobs import Job, JobOptions, JobStore, JobTakenOverError
from app.core.queue.worker import HEARTBEAT_INTERVAL

log = logging.getLogger(__name__)

OffloadFactory = Callable[[], OffloadLike]


def resolved_options(options: JobOptions) -> JobOptions:
    """A job left on "best model on disk" means this computer's best model, which is what the estimate priced;
    sent unresolved, a fresh remote machine would pick its own (the bundled tiny.en)."""
    if options.model not in (None, "auto"):
        return options
    from app.core.engine.models import default_model

    return replace(options, model=default_model().name)


class QueueOffload:
    def __init__(
        self,
        store: JobStore,
        job_ids: Sequence[int],
        make_offload: OffloadFactory,
        on_event: Callable[[OffloadEvent], None] | None = None,
        cancel: CancelToken | None = None,
    ) -> None:
        """``make_offload()`` builds the :class:`Offload` (provider, offer, keys); it is called after the jobs are
        taken. ``on_event`` hears the run's events after the queue's rows have been updated from them."""
        self.store = store
        self.job_ids = list(job_ids)
        self._make_offload = make_offload
        self._on_event = on_event
        # One token for the whole run: the caller's, this class's (a cancel in the database) and the offload's.
        self.cancel_token = cancel if cancel is not None else CancelToken()
        self._finished = threading.Event()
        self._last_note = 0.0
        self._remote_started = False

    def cancel(self) -> None:
        self.cancel_token.cancel()  # the offload checks it between steps; the teardown is in its finally

    def run(self) -> OffloadResult | None:
        worker = f"offload@{socket.gethostname()}:{os.getpid()}"
        jobs: list[Job] = []
        try:
            for job_id in self.job_ids:
                jobs.append(self.store.claim(job_id, worker))
            watcher = threading.Thread(target=self._watch, daemon=True, name="offload-watch")
            watcher.start()
            # Built after the jobs are taken (so the local worker cannot start them meanwhile) and inside the
            # try: a missing key or no capacity puts them back in the queue, as they were.
            offload = self._make_offload()
            result = offload.run(
                [job.source for job in jobs],
                f"jobs {','.join(map(str, self.job_ids))}",
                [resolved_options(job.options) for job in jobs],
                on_event=self._event,
                cancel=self.cancel_token,
            )
        except OffloadCancelled:
            for job in jobs:
                self.store.mark_cancelled(job.id)
            return None
        except BaseException as error:
            for job in jobs:
                if self._remote_started:
                    self.store.fail(job.id, f"{job.source.name}: offload failed: {error}")
                else:
                    # Nothing ran anywhere (no capacity, a bad key, an unknown host key): the job is as it was.
                    self.store.requeue(job.id, f"offload not started: {error}")
            raise
        finally:
            self._finished.set()
        for index, job in enumerate(jobs):
            if index in result.transcripts:
                transcript = result.transcripts[index]
                try:
                    self.store.finish(
                        job.id, transcript, result.speeds.get(index), exports_pending=bool(job.options.output_dir)
                    )
                except JobTakenOverError as error:  # another worker holds it now; its result stands
                    log.warning("%s", error)
                    continue
                if index in result.stored:  # the queue holds it now
                    forget_stored(result.stored[index])
                # Exported as a job done here is: its output folder, what may be replaced, what was kept.
                exported = auto_export(self.store, job, transcript)
                where = f"transcribed on {offload.offer.gpu} ({offload.provider.name})"
                self.store.set_note(job.id, f"{where}; {exported}" if exported else where)
            else:
                reason = result.failures.get(index, f"{job.source.name}: the remote run gave no transcript")
                self.store.fail(job.id, reason)
        return result

    def _watch(self) -> None:
        # The cancel flag lives in the database, so a cancel from any process (another window, the CLI) counts.
        # The heartbeat keeps a worker on another computer sharing the queue from taking the jobs back while the
        # offload is quiet (a machine booting, an upload), which would set the paid-for result aside.
        last_heartbeat = time.monotonic()
        while not self._finished.wait(0.5):
            if any(self.store.cancel_requested(job_id) for job_id in self.job_ids):
                self.cancel_token.cancel()
                return
            if time.monotonic() - last_heartbeat >= HEARTBEAT_INTERVAL:
                last_heartbeat = time.monotonic()
                for job_id in self.job_ids:
                    self.store.heartbeat(job_id)

    def _event(self, event: OffloadEvent) -> None:
        if event.kind == "started":
            self._remote_started = True
        if event.kind == "progress" and event.index is not None and event.index < len(self.job_ids):
            self.store.report_progress(
                self.job_ids[event.index], float(event.fraction or 0.0), "remote", speed=event.speed
            )
        now = time.monotonic()
        if event.kind in ("status", "upload", "started", "done") or now - self._last_note > 5:
            self._last_note = now
            text = event.message or event.kind
            for job_id in self.job_ids:
                self.store.set_note(job_id, f"{text} · ${event.cost_usd:.3f} so far")
        if self._on_event is not None:
            self._on_event(event)
