"""What runs on the remote machine: ``scriba worker run`` (the same engine as at home) and ``scriba worker watchdog``.

Everything goes through one work directory, so a dropped connection costs nothing but a reconnect: the client
reads ``events.jsonl`` from the offset it had reached, and a restarted worker skips files whose transcript
is already in ``out/``.

    WORK/spec.json        what to do (files by neutral name, the job's options); written by the client
    WORK/in/0000.wav      the uploaded files
    WORK/heartbeat        touched by the client every few seconds
    WORK/events.jsonl     one JSON object per line: started, progress, gpu, done, failed, finished
    WORK/out/0000.json    transcripts (engine JSON), written to a temporary name and renamed
    WORK/worker.pid, WORK/done, WORK/watchdog.log

The watchdog is started before the worker and ends the work when the client's heartbeat stops, at the budget's
hard deadline, or after the work is done and nobody came for it. It ends the machine too (``--on-expire``) only
where the provider gives the machine its own scoped way to do so (RunPod's ``runpodctl``); on Vast.ai and Lambda
that would take the user's account-wide key onto the machine, which Scriba never does: there the ledger's sweep
at the next start of Scriba on the user's computer terminates the machine.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

SPEC_VERSION = 1
log = logging.getLogger(__name__)


class EventLog:
    """Appends JSON lines; each line is flushed whole, so a reader never sees half an event."""

    def __init__(self, path: Path) -> None:
        self._handle = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"type": kind, "time": round(time.time(), 3), **fields}, ensure_ascii=False)
        with self._lock:
            self._handle.write(line + "\n")
            self._handle.flush()

    def close(self) -> None:
        self._handle.close()


def _gpu_summary(snapshot: Any) -> dict[str, Any]:
    return {
        "nvml": snapshot.nvml_available,
        "reason": snapshot.nvml_reason,
        "gpus": [
            {
                "name": gpu.name,
                "utilization_pct": gpu.utilization_pct,
                "memory_used_mb": gpu.memory_used_mb,
                "memory_total_mb": gpu.memory_total_mb,
                "temperature_c": gpu.temperature_c,
                "power_w": gpu.power_w,
            }
            for gpu in snapshot.gpus
        ],
        "cpu_pct": snapshot.host.cpu_pct if snapshot.host else None,
    }


def run_worker(work: Path) -> int:
    """Transcribe every file of ``WORK/spec.json``; the events say how it goes. Exit 0 when the run ended
    normally (some files may have failed, each with its reason), 2 when the spec is unusable."""
    from app.core.engine.pipeline import Engine, Progress
    from app.core.errors import ScribaError
    from app.core.files import write_atomic
    from app.core.gpu.gpustats import GpuStatsSampler
    from app.core.queue.jobs import JobOptions

    events = EventLog(work / "events.jsonl")
    (work / "worker.pid").write_text(str(os.getpid()))
    try:
        spec = json.loads((work / "spec.json").read_text(encoding="utf-8"))
        if spec.get("version") != SPEC_VERSION:
            raise ValueError(f"spec version {spec.get('version')} (this worker reads {SPEC_VERSION})")
        options = JobOptions.from_dict(spec["options"])
        # A file may carry its own options (jobs queued with different settings, offloaded together).
        files = [
            (
                int(entry["index"]),
                work / str(entry["name"]),
                JobOptions.from_dict(entry["options"]) if entry.get("options") else options,
            )
            for entry in spec["files"]
        ]
    except (OSError, ValueError, KeyError, TypeError) as error:
        events.write("finished", error=f"unusable spec.json: {error}")
        return 2
    token_file = work / "hf_token"
    token = token_file.read_text().strip() if token_file.is_file() else None
    token_file.unlink(missing_ok=True)  # read once into memory; never left on a machine we do not own
    if token and any(opts.diarize and opts.diarizer != "embedded" for _, _, opts in files):
        # The user sent the token for pyannote: fetch community-1 once into this machine's cache, checked as
        # on the user's own computer, so that the automatic choice finds it; without it the built-in diarizer
        # runs and the transcript says why.
        from app.core.engine.diarize.pyannote_models import download_pipeline

        try:
            download_pipeline(token)
        except ScribaError as error:
            log.warning("pyannote not available on this machine: %s", error)

    sampler = GpuStatsSampler()
    sampler.start(lambda snapshot: events.write("gpu", **_gpu_summary(snapshot)), float(spec.get("gpu_interval", 2.0)))
    engine = Engine()
    out = work / "out"
    out.mkdir(exist_ok=True)
    try:
        for index, path, file_options in files:
            target = out / f"{index:04d}.json"
            if target.is_file():
                events.write("done", index=index, transcript=str(target.relative_to(work)), skipped=True)
                continue
            events.write("started", index=index)
            started = time.monotonic()
            last_report = 0.0

            def report(progress: Progress, index: int = index, started: float = started) -> None:
                nonlocal last_report
                now = time.monotonic()
                if now - last_report < 0.5 and progress.fraction < 1.0:
                    return
                last_report = now
                elapsed = now - started
                processed = progress.fraction * progress.audio_seconds
                events.write(
                    "progress",
                    index=index,
                    fraction=round(progress.fraction, 4),
                    stage=progress.stage,
                    duration=progress.audio_seconds,
                    speed=round(processed / elapsed, 2) if elapsed > 0 and processed > 0 else None,
                )

            try:
                transcript = engine.run(path, file_options.to_pipeline(token), report)
            except ScribaError as error:
                events.write("failed", index=index, error=str(error))
                continue
            except Exception as error:  # one file's unexpected failure must not lose the others
                events.write("failed", index=index, error=f"unexpected error ({type(error).__name__}: {error})")
                continue
            write_atomic(target, json.dumps(transcript.to_dict(), ensure_ascii=False))
            elapsed = time.monotonic() - started
            events.write(
                "done",
                index=index,
                transcript=str(target.relative_to(work)),
                seconds=round(elapsed, 2),
                duration=transcript.duration,
                speed=round(transcript.duration / elapsed, 2) if elapsed > 0 else None,
                device=transcript.device,
                model=transcript.model,
            )
        events.write("finished")
        (work / "done").touch()
        return 0
    finally:
        sampler.close()
        events.close()


def _age(path: Path, now: float) -> float | None:
    try:
        return now - path.stat().st_mtime
    except FileNotFoundError:
        return None


def _kill_worker(work: Path) -> None:
    try:
        pid = int((work / "worker.pid").read_text())
    except (OSError, ValueError):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # the worker is a session leader (setsid): its children go too
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def run_watchdog(
    work: Path,
    *,
    heartbeat_timeout_s: float,
    deadline: float | None,
    done_grace_s: float,
    on_expire: list[str] | None,
    remove_work: bool,
    poll_s: float = 2.0,
) -> int:
    """Watch the client's heartbeat, the deadline and the done marker; on expiry, end the work (and the machine)."""
    log_path = work / "watchdog.log"

    def note(text: str) -> None:
        with contextlib.suppress(OSError), log_path.open("a", encoding="utf-8") as handle:
            handle.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text}\n")

    note(f"watching: heartbeat {heartbeat_timeout_s:.0f} s, deadline {deadline}, on-expire {bool(on_expire)}")
    while True:
        if not work.is_dir():
            return 0  # the client cleaned up: the job is over and nothing is left to guard
        now = time.time()
        heartbeat_age = _age(work / "heartbeat", now)
        done_age = _age(work / "done", now)
        reason = None
        if heartbeat_age is None or heartbeat_age > heartbeat_timeout_s:
            reason = f"no heartbeat from the client for {heartbeat_timeout_s:.0f} s"
        elif deadline is not None and now > deadline:
            reason = "the budget's hard deadline was reached"
        elif done_age is not None and done_age > done_grace_s:
            reason = f"the work was done {done_grace_s:.0f} s ago and nobody collected it"
        if reason is not None:
            note(f"expired: {reason}")
            _kill_worker(work)
            if on_expire:
                # The provider's own way to end this machine (containers ignore `shutdown`).
                result = subprocess.run(on_expire, capture_output=True, text=True, timeout=120)
                note(f"on-expire exited {result.returncode}: {result.stderr.strip()[-300:]}")
            if remove_work:
                import shutil

                shutil.rmtree(work, ignore_errors=True)
            return 1
        time.sleep(poll_s)
