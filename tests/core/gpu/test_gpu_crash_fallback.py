"""A GPU library that crashes the engine process (no Python error to classify) costs the GPU, not the job: the
queue runs the job again on the CPU, says so in the job's notes, and `scriba doctor` can tell. A crash of a job
that ran on the CPU, or a kill by the system, still fails the job."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from app.core.gpu import faults
from app.core.queue.engine_process import EngineCrashedError, EngineProcess, gpu_crash_note
from app.core.queue.jobs import JobOptions, JobState, JobStore
from app.core.queue.worker import JobEvent, QueueWorker
from tests.core.gpu.gpu_crash_child import aborts_on_the_gpu

FAST = JobOptions(diarizer="embedded", formats=("txt",), language="en")


def _gpu_for_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process (the queue's side) believes in a GPU, so the job's options say "cuda"; the engine child,
    a fresh process, does not share the belief (it aborts on "cuda" in gpu_crash_child)."""
    import app.core.engine.transcribe as transcribe

    monkeypatch.setattr(transcribe, "resolve_device", lambda device: "cpu" if device == "cpu" else "cuda")


def test_a_crash_on_the_gpu_reruns_the_job_on_the_cpu_and_says_so(
    tmp_path: Path, sample_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _gpu_for_this_process(monkeypatch)
    record = tmp_path / "last-gpu-fault.json"
    monkeypatch.setattr(faults, "fault_file", lambda: record)
    store = JobStore(tmp_path / "data")
    job_id = store.add(sample_dir / "sample.wav", FAST).id
    events: list[JobEvent] = []
    worker = QueueWorker(
        store, EngineProcess(child_main=aborts_on_the_gpu), on_event=events.append, token_provider=lambda: None
    )
    try:
        worker.run(until_empty=True, idle_poll=0.1)
    finally:
        worker.engine.close()
    job = store.get(job_id)
    assert job.state is JobState.DONE, job.error
    transcript = store.load_transcript(job_id)
    assert "neither did i" in transcript.text.lower()  # the real engine's words, from the CPU
    crash_notes = [w for w in transcript.warnings if "crashed the transcription process (SIGABRT" in w]
    assert len(crash_notes) == 1 and crash_notes[0].endswith("the job ran on the CPU instead")
    done = [event for event in events if event.kind == "done"]
    assert done and "SIGABRT" in (done[0].message or "")
    recorded = faults.last_fault(record)
    assert recorded is not None and recorded.name == "gpu-process-crash" and "SIGABRT" in recorded.note


@pytest.mark.unit
@pytest.mark.parametrize(
    ("device", "exitcode", "falls_back"),
    [
        ("cuda", -signal.SIGABRT, True),
        ("cuda", -signal.SIGSEGV, True),
        ("cuda", -signal.SIGKILL, False),  # the system out of memory: a second run meets it again
        ("cuda", 1, False),  # the process exited on its own: not a library crash
        ("cpu", -signal.SIGABRT, False),  # nothing to fall back to
    ],
)
def test_only_a_native_crash_on_the_gpu_earns_a_run_on_the_cpu(device: str, exitcode: int, falls_back: bool) -> None:
    from app.core.engine.diarize import DiarizerOptions
    from app.core.engine.pipeline import PipelineOptions
    from app.core.engine.transcribe import TranscriptionOptions

    options = PipelineOptions(
        transcription=TranscriptionOptions(device=device),  # type: ignore[arg-type]
        diarizer=DiarizerOptions(device=device),
    )
    note = gpu_crash_note(options, EngineCrashedError("talk.wav", exitcode), "transcribe")
    assert (note is not None) is falls_back
