"""Keeping a dictation: its audio as a WAV file and its final text as a finished job in the queue.

As a job, a dictation can be exported in every format, edited and searched in the window, and retried with
diarization (the retry transcribes the saved audio from the start, with the job's options).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.core.dictation.stream import DictationEvent
from app.core.engine.audio import SAMPLE_RATE
from app.core.files import write_atomic_with
from app.core.queue.jobs import Job, JobOptions, JobStore
from app.core.transcript.document import Segment, Transcript
from app.core.transcript.save import first_free_stem


@dataclass(frozen=True)
class SavedDictation:
    audio: Path
    transcript: Transcript
    job: Job | None  # None when no queue was given


def session_transcript(
    events: Sequence[DictationEvent],
    *,
    source: Path,
    duration: float,
    model: str,
    language: str,
    device: str,
    compute_type: str,
) -> Transcript:
    """One segment per final event (an utterance, or a piece of a long one), with its word timings."""
    segments = tuple(
        Segment(start=event.start, end=event.end, text=event.text.strip(), words=tuple(event.words))
        for event in events
        if event.type == "final" and event.text.strip()
    )
    return Transcript(
        source=str(source),
        duration=duration,
        language=language,
        model=model,
        device=device,
        compute_type=compute_type,
        segments=segments,
    )


def _free_name(directory: Path, stem: str, suffix: str) -> Path:
    return directory / (first_free_stem(stem, lambda candidate: (directory / f"{candidate}{suffix}").exists()) + suffix)


def write_wav(path: Path, samples: np.ndarray) -> None:
    """16-bit PCM at 16 kHz, written to a temporary name and renamed: never a half-written recording."""
    import soundfile

    write_atomic_with(
        path, lambda partial: soundfile.write(partial, np.clip(samples, -1.0, 1.0), SAMPLE_RATE, "PCM_16", format="WAV")
    )


def save_dictation(
    recording: np.ndarray,
    events: Sequence[DictationEvent],
    directory: Path,
    *,
    store: JobStore | None,
    model: str,
    language: str | None,
    device: str = "cpu",
    compute_type: str = "int8",
) -> SavedDictation:
    """Write ``directory/dictation-DATE-TIME.wav`` and, when ``store`` is given, add the session as a done job."""
    directory.mkdir(parents=True, exist_ok=True)
    audio = _free_name(directory, time.strftime("dictation-%Y-%m-%d-%H%M%S"), ".wav")
    write_wav(audio, recording)
    transcript = session_transcript(
        events,
        source=audio.absolute(),
        duration=len(recording) / SAMPLE_RATE,
        model=model,
        language=language or "en",
        device=device,
        compute_type=compute_type,
    )
    job = None
    if store is not None:
        # Diarization on for a retry: a dictation has no speakers yet, and the retry is how one adds them.
        options = JobOptions(model=model, language=language, diarize=True)
        job = store.add_transcribed(audio, options, transcript, note="dictation; retry to diarize")
    return SavedDictation(audio, transcript, job)
