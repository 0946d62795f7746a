"""The queued jobs chosen for an offload, summed up for the estimate: how much audio, what it uploads, the model."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.cloud.pricing.estimate import Job as EstimateJob
from app.core.queue.jobs import Job, JobOptions


@dataclass(frozen=True)
class SelectedJobs:
    """The jobs to offload, summed up for the estimate."""

    job_ids: tuple[int, ...]
    names: tuple[str, ...]
    audio_seconds: float  # of the files whose length is known
    unknown_lengths: int  # files whose length neither the queue nor the file's header gives
    total_bytes: int
    model: str  # a catalog name, or a model directory's path (then nothing can be estimated)
    diarize: bool
    options: JobOptions  # the first job's: the estimate and the remote default use these
    mixed_options: bool

    def estimate_job(self) -> EstimateJob:
        return EstimateJob(
            audio_seconds=self.audio_seconds,
            model=self.model,
            diarize=self.diarize,
            upload_bytes=self.total_bytes,
            files=len(self.job_ids),
        )


def summarize_jobs(jobs: Sequence[Job], probe: Callable[[Path], float | None] | None = None) -> SelectedJobs:
    """Total length and size of ``jobs``; a length the queue does not know yet is read from the file's header.

    Reads files: call it off the main thread.
    """
    if not jobs:
        raise ValueError("no jobs to offload")
    if probe is None:
        from app.core.engine.audio import probe_duration

        probe = probe_duration
    seconds = 0.0
    unknown = 0
    total_bytes = 0
    for job in jobs:
        duration = job.duration if job.duration else probe(job.source)
        if duration:
            seconds += duration
        else:
            unknown += 1
        # A missing file counts nothing here: the offload itself refuses it, with its name.
        with contextlib.suppress(OSError):
            total_bytes += job.source.stat().st_size
    first = jobs[0].options
    model = first.model
    if model is None:
        # "The best model on disk": what this computer would run, so the estimate compares like with like.
        from app.core.engine.models import default_model

        model = default_model().name
    return SelectedJobs(
        job_ids=tuple(job.id for job in jobs),
        names=tuple(job.source.name for job in jobs),
        audio_seconds=seconds,
        unknown_lengths=unknown,
        total_bytes=total_bytes,
        model=model,
        diarize=first.diarize,
        options=first,
        mixed_options=any(job.options != first for job in jobs[1:]),
    )
