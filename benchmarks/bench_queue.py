"""Queue benchmark: the window's responsiveness while a job runs, and memory over many jobs. Prints tables.

    .venv/bin/python benchmarks/bench_queue.py [--audio FILE] [--jobs 20] [--idle 10] [--quick]
                                               [--only stall,memory,window-memory,cancel]

Every case runs in its own process (offscreen Qt, a temporary data, config and cache directory, no Hugging
Face token, a null keyring: the bundled tiny.en and the built-in diarizer run, offline). Cases:
- stall: a MainWindow with its worker; a 10 ms QTimer records how late each tick fires (lateness = actual
  interval - 10 ms), first while idle (the baseline), then while a job runs on a cold engine (child process
  spawned, torch imported, model loaded), then on the warm engine. The job is selected, so the finished
  transcript is loaded into the view inside the measured span. Target: max stall <= 100 ms. Each tick later
  than 50 ms is attributed: the main thread's CPU time and run-queue wait (Linux schedstat) over it, and a
  faulthandler dump of every thread's Python stack taken 60 ms into it.
- memory: N consecutive jobs (sample.wav, diarization on) through QueueWorker + EngineProcess; RSS (and
  USS) of the parent and of the engine child after job 1 and after job N. Target: total within 10%.
- window-memory: the same through the window (one job added at a time, each selected when done, so the
  transcript view is filled N times): the parent is the GUI process.
- cancel: how long a cancel takes to land (what `scriba queue cancel` and the window do: a flag in the
  queue) at several points of a job: early and late in transcription and during diarization, on four
  minutes of the sample call; and whether the inference process was gone afterwards. Target: under 2 s.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.bench_engine import sample_dir, table  # noqa: E402 (needs ROOT on the path)

OUT = ROOT / "benchmarks" / "out"
TICK_MS = 10
STALL_TARGET_MS = 100.0
MEMORY_TARGET = 0.10


def sample_wav() -> Path:
    return sample_dir() / "sample.wav"


def make_conversation(seconds: float) -> Path:
    """An espeak-ng conversation of three voices, at least ``seconds`` long (cached in benchmarks/out)."""
    from tests import synth

    OUT.mkdir(parents=True, exist_ok=True)
    wav = OUT / f"conversation_{seconds:g}s.wav"
    if wav.exists():
        return wav
    turns = int(seconds / 4.6) + 1  # an espeak sentence plus its pause lasts about 4.6 s
    samples, _ = synth.meeting(n_speakers=3, n_turns=turns)
    while len(samples) / synth.SAMPLE_RATE < seconds:
        turns += 3
        samples, _ = synth.meeting(n_speakers=3, n_turns=turns)
    return synth.write_wav(wav, samples)


def case_environment(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("HF_TOKEN", "SCRIBA_HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        env.pop(name, None)
    env.update(
        {
            "QT_QPA_PLATFORM": "offscreen",
            "PYANNOTE_METRICS_ENABLED": "0",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_OFFLINE": "1",
            "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
            # No user model cache: the default model is the bundled tiny.en; no user settings either.
            "XDG_CACHE_HOME": str(home / "cache"),
            "XDG_DATA_HOME": str(home / "data"),
            "XDG_CONFIG_HOME": str(home / "config"),
        }
    )
    return env


# ------------------------------------------------------------------------------------------------ measuring


def process_memory(pid: int | None, descendants: bool) -> dict[str, float]:
    """RSS and USS in MB of a process, and of its descendants if asked (0 when there is none)."""
    import psutil

    if pid is None:
        return {"rss": 0.0, "uss": 0.0}
    try:
        root = psutil.Process(pid)
        processes = [root, *(root.children(recursive=True) if descendants else [])]
    except psutil.NoSuchProcess:
        return {"rss": 0.0, "uss": 0.0}
    rss = uss = 0
    for process in processes:
        try:
            info = process.memory_full_info()
        except psutil.NoSuchProcess:
            continue
        rss += info.rss
        uss += info.uss
    return {"rss": rss / 2**20, "uss": uss / 2**20}


def memory_sample(index: int, engine_pid: int | None) -> dict[str, Any]:
    # The parent alone (its other children, multiprocessing's resource tracker, are not Scriba's memory).
    parent = process_memory(os.getpid(), descendants=False)
    child = process_memory(engine_pid, descendants=True)
    return {
        "job": index,
        "parent_rss": parent["rss"],
        "parent_uss": parent["uss"],
        "child_rss": child["rss"],
        "child_uss": child["uss"],
        "engine_pid": engine_pid,
        "time": time.monotonic(),
    }


def lateness_stats(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"ticks": 0, "median": 0.0, "p99": 0.0, "max": 0.0, "over50": 0}
    ordered = sorted(samples)
    return {
        "ticks": len(ordered),
        "median": statistics.median(ordered),
        "p99": ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
        "max": ordered[-1],
        "over50": sum(1 for value in ordered if value > 50.0),
    }


# ------------------------------------------------------------------------------------------------ Qt helpers


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Run the event loop until ``condition()`` holds (checked every 20 ms) or ``timeout`` seconds pass."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    deadline = time.monotonic() + timeout
    check = QTimer()
    check.setInterval(20)
    check.timeout.connect(lambda: loop.quit() if condition() or time.monotonic() > deadline else None)
    check.start()
    if not condition():
        loop.exec()
    check.stop()
    if not condition():
        raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def _pause(seconds: float) -> None:
    until = time.monotonic() + seconds
    _wait(lambda: time.monotonic() >= until, seconds + 5, "a pause")


def _summarise_dump(text: str) -> str:
    """A faulthandler dump of every thread, cut to where the main thread was (and where the others were)."""
    import re
    import threading

    names = {thread.ident: thread.name for thread in threading.enumerate()}
    main = threading.main_thread().ident
    where, others = "?", []
    for block in text.strip().split("\n\n"):
        header = re.search(r"^Thread (0x[0-9a-f]+)", block, re.MULTILINE)
        if header is None:
            continue
        frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', block)  # innermost first
        labels = [f"{Path(file).name}:{line} {name}" for file, line, name in frames]
        if int(header.group(1), 16) == main:
            # The innermost frame, then the innermost two of Scriba's own (what called it).
            ours = [label for (file, _, _), label in zip(frames[1:], labels[1:], strict=True) if "/app/" in file]
            where = " < ".join(labels[:1] + ours[:2]) or "?"
            if frames and frames[0][2] in ("_tick", "_runqueue_wait", "_arm"):
                where = "? (the dump came after the stall had ended)"
        elif labels:
            others.append(f"{names.get(int(header.group(1), 16), 'thread')}: {labels[0]}")
    return f"main: {where}" + (f" | {'; '.join(others)}" if others else "")


class Ticker:
    """A 10 ms precise QTimer; while a phase is open, records each tick's lateness in ms.

    Each tick also arms faulthandler's C watchdog: when the next tick is more than 50 ms late, it dumps
    every thread's Python stack (without needing the GIL, and naming the thread that holds it), so that
    each long stall is attributed. Re-arming costs a few microseconds per tick.
    """

    def __init__(self, dump_path: Path) -> None:
        import threading

        from PySide6.QtCore import Qt, QTimer

        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(self._tick)
        self.samples: list[float] | None = None
        self.stalls: list[dict[str, Any]] = []  # ticks later than 50 ms: when, how late, where
        self._last = 0.0
        self._last_cpu = 0.0
        self._last_wait = 0.0
        # The main thread's time spent runnable but not running (Linux schedstat), to tell a stall caused by
        # other load on the machine from one caused by the window's own work.
        try:
            self._schedstat: int | None = os.open(f"/proc/self/task/{threading.get_native_id()}/schedstat", os.O_RDONLY)
        except OSError:
            self._schedstat = None
        self._phase_start = 0.0
        self._dump = dump_path.open("w+", encoding="utf-8")
        self._read = 0

    def start_phase(self) -> None:
        self.samples, self.stalls = [], []
        self._last = self._phase_start = time.monotonic()
        self._last_cpu = time.thread_time()
        self._last_wait = self._runqueue_wait()
        self._arm()
        self.timer.start()  # (re)started: the first interval is a whole one

    def end_phase(self) -> list[float]:
        import faulthandler

        self.timer.stop()
        faulthandler.cancel_dump_traceback_later()
        samples, self.samples = self.samples or [], None
        return samples

    def _runqueue_wait(self) -> float:
        if self._schedstat is None:
            return 0.0
        return int(os.pread(self._schedstat, 128, 0).split()[1]) / 1e6

    def _arm(self) -> None:
        import faulthandler

        faulthandler.dump_traceback_later((TICK_MS + 50) / 1000, repeat=False, file=self._dump, exit=False)

    def _tick(self) -> None:
        now, cpu, wait = time.monotonic(), time.thread_time(), self._runqueue_wait()
        if self.samples is not None:
            late = (now - self._last) * 1000.0 - TICK_MS
            self.samples.append(late)
            if late > 45.0:
                import faulthandler

                faulthandler.cancel_dump_traceback_later()  # waits for a dump being written to be complete
                self._dump.seek(self._read)
                dump = self._dump.read()
                self._read = self._dump.tell()
                if late > 50.0 or dump:
                    where = _summarise_dump(dump) if dump else "?"
                    self.stalls.append(
                        {
                            "at": self._last - self._phase_start,
                            "late": late,
                            "cpu": (cpu - self._last_cpu) * 1000.0,
                            "runqueue": wait - self._last_wait if self._schedstat is not None else None,
                            "where": where,
                        }
                    )
            self._arm()
        self._last, self._last_cpu, self._last_wait = now, cpu, wait


def _window(home: Path) -> tuple[Any, Any, Any, list[Any]]:
    from app.core.config.settings import SettingsStore
    from app.core.queue.jobs import JobStore
    from app.gui.main import create_application
    from app.gui.window import MainWindow

    app = create_application(["bench_queue"])
    store = JobStore(home / "queue")
    window = MainWindow(store, SettingsStore(home / "settings"))
    window.resize(1300, 800)
    window.show()
    events: list[Any] = []
    # Connected after the window's own handler: an event is recorded once the window has handled it.
    window.bridge.job_event.connect(lambda event: events.append((time.monotonic(), event)))
    return app, store, window, events


def _run_in_window(window: Any, events: list[Any], audio: Path, timeout: float) -> dict[str, Any]:
    """Add ``audio``, select its job, wait until the window has handled its end; returns the job's facts."""
    started = time.monotonic()
    (job,) = window.add_paths([audio])
    window.select_job(job.id)

    def ended() -> Any:
        for _, event in events:
            if event.job_id == job.id and event.kind in ("done", "failed", "cancelled"):
                return event
        return None

    _wait(lambda: ended() is not None, timeout, f"job {job.id}")
    event = ended()
    finished = next(stamp for stamp, item in events if item is event)
    if event.kind != "done":
        raise RuntimeError(f"job {job.id} {event.kind}: {event.message}")
    return {"id": job.id, "wall": finished - started, "duration": event.duration}


# ------------------------------------------------------------------------------------------------ cases


def case_stall(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    app, store, window, events = _window(home)
    ticker = Ticker(home / "stall-dumps.txt")
    _pause(1.0)  # first paint, the worker thread's first look at the (empty) queue
    ticker.start_phase()
    _pause(args.idle)
    idle = ticker.end_phase()
    longest = sorted(ticker.stalls, key=lambda stall: -stall["late"])[:5]
    phases: dict[str, Any] = {"idle": {"stats": lateness_stats(idle), "seconds": args.idle, "stalls": longest}}
    for name in ("cold engine", "warm engine"):
        ticker.start_phase()
        job = _run_in_window(window, events, Path(args.audio), args.timeout)
        samples = ticker.end_phase()
        job["stalls"] = sorted(ticker.stalls, key=lambda stall: -stall["late"])[:5]
        transcript = store.load_transcript(job["id"])
        job["speakers"] = len(transcript.speakers)
        job["backend"] = transcript.diarization.backend if transcript.diarization else "none"
        job["segments"] = len(transcript.segments)
        job["view_rows"] = len(window.transcript_view.paragraphs)  # speaker paragraphs shown
        phases[name] = {"stats": lateness_stats(samples), **job}
        _pause(0.5)
    result = {"phases": phases, "torch_in_gui": "torch" in sys.modules}
    window.close()
    store.close()
    app.processEvents()
    return result


def case_memory(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    from app.core.queue.engine_process import EngineProcess
    from app.core.queue.jobs import JobOptions, JobStore
    from app.core.queue.worker import JobEvent, QueueWorker

    store = JobStore(home / "queue")
    for _ in range(args.jobs):
        store.add(Path(args.audio), JobOptions(diarize=True))
    engine = EngineProcess()
    samples: list[dict[str, Any]] = []
    failures: list[str] = []
    started = time.monotonic()

    def on_event(event: JobEvent) -> None:
        # Called in the worker's thread right after the job ended, before it claims the next one: the
        # child is alive and idle, holding what it keeps between jobs.
        if event.kind == "done":
            sample = memory_sample(len(samples) + 1, engine.pid)
            sample["speed"] = event.speed
            samples.append(sample)
        elif event.kind == "failed":
            failures.append(event.message or "")

    QueueWorker(store, engine=engine, on_event=on_event, token_provider=lambda: None).run(until_empty=True)
    store.close()
    return {
        "samples": samples,
        "failures": failures,
        "wall": time.monotonic() - started,
        "torch_in_parent": "torch" in sys.modules,
    }


def case_window_memory(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    app, store, window, events = _window(home)
    samples: list[dict[str, Any]] = []
    started = time.monotonic()
    for index in range(1, args.jobs + 1):
        job = _run_in_window(window, events, Path(args.audio), args.timeout)
        _pause(0.3)  # the queue is empty again: the worker is idle, the child keeps its model
        sample = memory_sample(index, window.bridge.engine_pid)
        sample["speed"] = job["duration"] / job["wall"] if job["wall"] else None
        sample["view_rows"] = len(window.transcript_view.paragraphs)  # speaker paragraphs shown
        samples.append(sample)
    result = {
        "samples": samples,
        "failures": [],
        "wall": time.monotonic() - started,
        "torch_in_parent": "torch" in sys.modules,
    }
    window.close()
    store.close()
    app.processEvents()
    return result


# Of the whole job (a job event's fraction): early and late in transcription, while diarizing.
CANCEL_POINTS = (0.05, 0.35, 0.8)


def _poll(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait, without Qt, until ``condition()`` holds (checked every 10 ms)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.01)


def _reached(events: list[Any], fraction: float) -> bool:
    return any(e.kind == "progress" and e.fraction >= fraction for e in events)


def _reached_end(events: list[Any]) -> bool:
    return any(e.kind == "cancelled" for e in events)


def case_cancel(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    import threading

    import numpy as np
    import psutil
    import soundfile

    from app.core.queue.engine_process import EngineProcess
    from app.core.queue.jobs import JobOptions, JobStore
    from app.core.queue.worker import JobEvent, QueueWorker

    samples, rate = soundfile.read(args.audio, dtype="float32")
    repeats = max(1, int(240 / (len(samples) / rate)))  # about four minutes
    long_audio = home / "long call.wav"
    soundfile.write(long_audio, np.tile(samples, repeats), rate)
    rows: list[dict[str, Any]] = []
    for fraction in CANCEL_POINTS:
        store = JobStore(home / f"queue-{fraction}")
        job = store.add(long_audio, JobOptions(diarize=True))
        events: list[JobEvent] = []
        engine = EngineProcess()
        worker = QueueWorker(store, engine=engine, on_event=events.append, token_provider=lambda: None)
        thread = threading.Thread(target=worker.run, kwargs={"until_empty": True}, daemon=True)
        thread.start()
        _poll(functools.partial(_reached, events, fraction), args.timeout, f"the job at {fraction:.0%}")
        stage = next(e.stage for e in reversed(events) if e.kind == "progress")
        pid = engine.pid
        requested = time.monotonic()
        store.cancel(job.id)
        _poll(functools.partial(_reached_end, events), 120, "the cancel")
        took = time.monotonic() - requested
        thread.join(60)
        gone = pid is None or not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        rows.append({"stage": stage, "fraction": fraction, "seconds": took, "engine_gone": gone})
        store.close()
    return {"rows": rows, "audio_seconds": repeats * len(samples) / rate}


def report_cancel(result: dict[str, Any]) -> None:
    print(
        f"## (c) Cancel: from the request to the job cancelled ({result['audio_seconds']:.0f} s of the sample call)\n"
    )
    rows = [
        [
            f"{row['stage']} ({row['fraction']:.0%} of the job)",
            f"{row['seconds']:.2f}",
            "yes" if row["engine_gone"] else "no",
        ]
        for row in result["rows"]
    ]
    print(table(["cancelled during", "seconds to cancelled", "inference process gone"], rows))
    print()


CASES: dict[str, Callable[[argparse.Namespace, Path], dict[str, Any]]] = {
    "stall": case_stall,
    "memory": case_memory,
    "window-memory": case_window_memory,
    "cancel": case_cancel,
}


def run_case(name: str, audio: Path, args: argparse.Namespace, jobs: int = 1) -> dict[str, Any]:
    """One case in a fresh interpreter with its own temporary home; its JSON result is its last line."""
    with tempfile.TemporaryDirectory(prefix="scriba-bench-") as tmp:
        home = Path(tmp)
        command = [sys.executable, __file__, "--case", name, "--audio", str(audio), "--jobs", str(jobs)]
        command += ["--idle", str(args.idle), "--timeout", str(args.timeout), "--home", str(home)]
        result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=case_environment(home))
    if result.returncode != 0:
        raise RuntimeError(f"case {name} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------------ report


def audio_duration(path: Path) -> float:
    from app.core.engine.audio import probe_duration

    return probe_duration(path) or 0.0


def report_stall(result: dict[str, Any], audio: Path) -> None:
    rows = []
    for name, phase in result["phases"].items():
        stats = phase["stats"]
        if name == "idle":
            job = [f"{phase['seconds']:g} s idle", "-", "-", "-"]
        else:
            job = [
                f"{phase['wall']:.1f}",
                f"{phase['duration'] / phase['wall']:.1f}x",
                f"{phase['speakers']} ({phase['backend']})",
                f"{phase['segments']}/{phase['view_rows']}",
            ]
        ok = "yes" if stats["max"] <= STALL_TARGET_MS else "NO"
        rows.append(
            [
                name,
                str(stats["ticks"]),
                f"{stats['median']:.2f}",
                f"{stats['p99']:.1f}",
                f"{stats['max']:.1f}",
                str(stats["over50"]),
                ok,
                *job,
            ]
        )
    print(
        f"## (a) Event-loop stall in the window (offscreen Qt, {TICK_MS} ms precise QTimer), "
        f"{audio.name} ({audio_duration(audio):.0f} s audio)\n"
    )
    headers = ["phase", "ticks", "median ms", "p99 ms", "max ms", "ticks > 50 ms", "max <= 100 ms"]
    headers += ["job wall s", "x real time", "speakers", "segments/paragraphs"]
    print(table(headers, rows))
    print(
        "\nlateness = actual tick interval - 10 ms; a job phase spans add_paths() to the window having handled "
        "its 'done' event (transcript loaded into the view). torch imported in the GUI process: "
        f"{'yes' if result['torch_in_gui'] else 'no'}.\n"
    )
    stalls = [(name, stall) for name, phase in result["phases"].items() for stall in phase.get("stalls", [])]
    if stalls:
        print(
            "Longest stalls (> 50 ms). Main thread, over the stalled interval: CPU time (its own work), and time "
            "runnable but waiting for a CPU (Linux schedstat: other load on the machine). Then where every thread "
            "was 60 ms into it (faulthandler; innermost frame first, then Scriba's callers): 'bench_queue.py "
            "_wait' is Qt's event loop (C++ code, or waiting for the GIL to call a slot); '?': no dump, the "
            "watchdog thread itself did not get a CPU in time.\n"
        )
        rows = [
            [
                name,
                f"{stall['at']:.2f}",
                f"{stall['late']:.0f}",
                f"{stall['cpu']:.0f}",
                "-" if stall["runqueue"] is None else f"{stall['runqueue']:.0f}",
                stall["where"],
            ]
            for name, stall in stalls
        ]
        print(table(["phase", "at s", "late ms", "main CPU ms", "main waiting for CPU ms", "during the stall"], rows))
        print()


def report_memory(title: str, result: dict[str, Any]) -> None:
    samples = result["samples"]
    if result["failures"]:
        print(f"{len(result['failures'])} job(s) failed: {result['failures'][0]}")
    if not samples:
        print(f"## {title}\n\nno job finished\n")
        return
    first, last = samples[0], samples[-1]
    rows = []
    for label, key in (("parent", "parent"), ("engine child", "child")):
        a, b = first[f"{key}_rss"], last[f"{key}_rss"]
        ua, ub = first[f"{key}_uss"], last[f"{key}_uss"]
        rows.append([label, f"{a:.0f}", f"{b:.0f}", f"{b / a:.3f}" if a else "-", f"{ua:.0f}", f"{ub:.0f}"])
    a = first["parent_rss"] + first["child_rss"]
    b = last["parent_rss"] + last["child_rss"]
    ua = first["parent_uss"] + first["child_uss"]
    ub = last["parent_uss"] + last["child_uss"]
    rows.append(["sum", f"{a:.0f}", f"{b:.0f}", f"{b / a:.3f}", f"{ua:.0f}", f"{ub:.0f}"])
    n = last["job"]
    print(f"## {title}\n")
    headers = ["process", "RSS MB after job 1", f"RSS MB after job {n}", f"ratio {n}/1"]
    headers += ["USS MB after job 1", f"USS MB after job {n}"]
    print(table(headers, rows))
    ratio = b / a
    verdict = "within" if abs(ratio - 1.0) <= MEMORY_TARGET else "OUTSIDE"
    same_child = "yes" if len({sample["engine_pid"] for sample in samples}) == 1 else "no"
    torch_in_parent = "yes" if result["torch_in_parent"] else "no"
    speeds = [sample["speed"] for sample in samples if sample.get("speed")]
    print(
        f"\n{n} jobs in {result['wall']:.0f} s (median {statistics.median(speeds):.1f}x real time); total RSS "
        f"{verdict} {MEMORY_TARGET:.0%} of job 1 ({(ratio - 1) * 100:+.1f}%); one engine child for all jobs: "
        f"{same_child}; torch imported in the parent: {torch_in_parent}."
    )
    trend = ", ".join(
        f"{sample['job']}: {sample['parent_rss'] + sample['child_rss']:.0f}"
        for sample in samples
        if sample["job"] in (1, 2, 3, 5, 10, 15, n) or sample["job"] % 10 == 0
    )
    print(f"total RSS MB after job k: {trend}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--audio", type=Path, help="file for the stall case (default: a 2.5 min espeak-ng talk)")
    parser.add_argument("--memory-audio", type=Path, help="file for the memory cases (default: sample.wav)")
    parser.add_argument("--jobs", type=int, default=20, help="consecutive jobs in the memory cases")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle baseline")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one job may take")
    parser.add_argument("--quick", action="store_true", help="smoke run: sample.wav, 3 jobs, 3 s idle")
    parser.add_argument("--only", default="stall,memory,window-memory,cancel", help="comma-separated cases to run")
    parser.add_argument("--case", choices=sorted(CASES), help=argparse.SUPPRESS)
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.case:
        print(json.dumps(CASES[args.case](args, args.home)))
        return

    if args.quick:
        args.jobs, args.idle = min(args.jobs, 3), min(args.idle, 3.0)
    stall_audio = args.audio or (sample_wav() if args.quick else make_conversation(150))
    memory_audio = args.memory_audio or sample_wav()
    only = {name.strip() for name in args.only.split(",") if name.strip()}
    unknown = only - set(CASES)
    if unknown:
        parser.error(f"unknown case(s): {', '.join(sorted(unknown))}")

    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"# Scriba queue benchmark, {time.strftime('%Y-%m-%d %H:%M')}{' (--quick)' if args.quick else ''}")
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average {load}; "
        "model: bundled tiny.en (default options), diarization on (built-in backend: no token)\n"
    )
    if "stall" in only:
        report_stall(run_case("stall", stall_audio, args), stall_audio)
    if "memory" in only:
        report_memory(
            f"(b) Memory after {args.jobs} consecutive jobs vs after the 1st: QueueWorker + EngineProcess "
            f"(no window), {memory_audio.name}",
            run_case("memory", memory_audio, args, args.jobs),
        )
    if "window-memory" in only:
        report_memory(
            f"(b') The same through the window (MainWindow, offscreen; the parent is the GUI process), "
            f"{memory_audio.name}",
            run_case("window-memory", memory_audio, args, args.jobs),
        )
    if "cancel" in only:
        report_cancel(run_case("cancel", memory_audio, args))


if __name__ == "__main__":
    main()
