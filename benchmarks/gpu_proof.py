"""The GPU proof: Scriba's CUDA path run for real, in one go, with one report (Markdown and JSON).

Run by `benchmarks/gpu_kit/device.sh run` on the GPU machine (docs/gpu.md says how), and by
`make gpu-kit-rehearse` here on the CPU, where every GPU step says "no GPU" and the others run as there.

Each step runs in a process of its own with its own time limit, so a step that crashes CUDA, hangs or fails
is recorded and the next one still runs. Steps:

- environment: the GPU as nvidia-smi and torch see it, the packages, the cuBLAS 12 that CTranslate2 opens;
- doctor: `scriba doctor --json` and its verdict, with NVML's readings;
- choices: device, compute type and batch size as Scriba chooses them for tiny.en and for a large-v3-shaped
  model with random weights (memory and batch sizing only, never words);
- oom: the out-of-memory halving provoked for real (memory held so that the batch asked for cannot fit);
- cancel: the GPU memory held before, during and after a job is cancelled (Scriba kills its inference child);
- diarizer: the built-in diarizer on the GPU against the CPU on the same real meetings (seconds, DER);
- speed: Scriba against plain faster-whisper on the same GPU, file and settings, with the GPU panel's sampler
  running during Scriba's job (its samples are the table).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STAND_IN_NOTE = (
    "cuBLAS 12 stand-in: libcublas.so.12 is CUDA 13's cuBLAS under CUDA 12's name (the GPU machine has no CUDA 12 "
    "cuBLAS); CTranslate2 figures hold for that library, not for the one users install"
)


@dataclass(frozen=True)
class Context:
    kit: Path  # the unpacked kit: audio/, proof/, manifest.json
    work: Path  # scratch space: the long recording, the random large-v3 model
    cublas: str  # "stand-in" or "real"

    @property
    def audio(self) -> Path:
        return self.kit / "audio"


class NoGpu(Exception):
    """The step needs a CUDA GPU and there is none: recorded as "no GPU", not as a failure."""


# --- helpers shared by the steps ---------------------------------------------------------------------------


def cuda_available() -> bool:
    from app.core.engine.transcribe import cuda_device_count

    return cuda_device_count() > 0


def require_gpu() -> None:
    if not cuda_available():
        raise NoGpu("CTranslate2 sees no CUDA GPU")


def nvml_memory() -> dict[str, float | None]:
    """GPU 0's memory now (MB), and what Scriba's processes hold of it, as the GPU panel reads them."""
    from app.core.gpu.gpustats import GpuStatsSampler

    sampler = GpuStatsSampler()
    try:
        if not sampler.open():
            return {"used_mb": None, "total_mb": None, "ours_mb": None}
        gpu = sampler.sample().gpus[0]
        return {"used_mb": gpu.memory_used_mb, "total_mb": gpu.memory_total_mb, "ours_mb": gpu.our_memory_mb}
    finally:
        sampler.close()


def recordings(ctx: Context, suffix: str = ".flac") -> list[Path]:
    return sorted(ctx.audio.glob(f"*{suffix}"))


def long_recording(ctx: Context, minutes: float) -> Path:
    """Every real recording end to end, repeated up to ``minutes``: a long meeting-like file (WAV)."""
    import numpy as np
    import soundfile

    target = ctx.work / f"long-{minutes:g}min.wav"
    if target.exists():
        return target
    pieces = [soundfile.read(path, dtype="float32")[0] for path in recordings(ctx)]
    one_pass = np.concatenate(pieces)
    needed = int(minutes * 60 * 16000)
    repeats = -(-needed // len(one_pass))
    samples = np.tile(one_pass, repeats)[:needed]
    ctx.work.mkdir(parents=True, exist_ok=True)
    soundfile.write(target, samples, 16000, subtype="PCM_16")
    return target


def large_v3_random(ctx: Context) -> Path:
    """The large-v3-shaped model with random weights, built once per machine (about a minute, 3 GB)."""
    folder = ctx.work / "large-v3-random"
    if (folder / "model.bin").exists():
        return folder
    sys.path.insert(0, str(ctx.kit / "proof"))
    from random_whisper import LARGE_V3, build

    from app.core.engine.models import BUNDLED_MODEL, resolve_model

    tokenizer = resolve_model(BUNDLED_MODEL).path / "tokenizer.json"
    return build(LARGE_V3, folder, tokenizer)


def describe_transcriber(transcriber: Any) -> dict[str, Any]:
    batch_size = transcriber._initial_batch_size()
    from app.core.engine.gpu_plan import choose_batch_size

    gpu = transcriber._gpu()
    _, batch_reason = choose_batch_size(transcriber.model_ref.name, transcriber.device, gpu.free_mb if gpu else None)
    return {
        "model": transcriber.model_ref.name,
        "model_reason": transcriber.model_reason,
        "device": transcriber.device,
        "device_reason": transcriber.device_reason,
        "compute_type": transcriber.compute_type,
        "compute_type_fallbacks": list(transcriber.fallbacks),
        "batch_size": batch_size if transcriber.options.batch_size < 0 else transcriber.options.batch_size,
        "batch_reason": batch_reason,
    }


# --- the steps -------------------------------------------------------------------------------------------------


def step_environment(ctx: Context) -> dict[str, Any]:
    import importlib.metadata

    result: dict[str, Any] = {"cublas": ctx.cublas, "python": sys.version.split()[0]}
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        result["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        result["nvidia_smi"] = f"not available: {error}"
    versions = {}
    for name in ("scriba", "torch", "ctranslate2", "faster-whisper", "av", "pyannote.audio", "onnxruntime", "numpy"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    result["packages"] = versions
    import torch

    result["torch_cuda"] = {
        "available": torch.cuda.is_available(),
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    from app.core.gpu.cuda_libs import preload_cuda_libraries

    result["cuda_libraries"] = [status.to_dict() for status in preload_cuda_libraries()]
    result["manifest"] = json.loads((ctx.kit / "manifest.json").read_text())
    return result


def step_doctor(ctx: Context) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "app", "doctor", "--json"], capture_output=True, text=True, timeout=240
    )
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"doctor printed no JSON (exit {done.returncode}): {done.stderr[-2000:]}") from None
    return {
        "exit_code": done.returncode,
        "verdict": report.get("verdict"),
        "selected": report.get("selected"),
        "gpus": report.get("gpus"),
        "nvml": report.get("nvml"),
        "torch_cuda": report.get("torch_cuda"),
        "problems": report.get("problems"),
        "smoke_test": report.get("smoke_test"),
        "speaker_libraries": report.get("speaker_libraries"),
        "cuda_libraries": report.get("cuda_libraries"),
    }


def step_choices(ctx: Context) -> dict[str, Any]:
    from app.core.engine.transcribe import Transcriber, TranscriptionOptions

    rows: dict[str, Any] = {}
    before = nvml_memory()
    tiny = Transcriber(TranscriptionOptions(model=None, device="auto"))
    tiny.load()
    rows["tiny.en (auto)"] = describe_transcriber(tiny) | {"nvml_after_load": nvml_memory()}
    tiny.unload()
    started = time.perf_counter()
    folder = large_v3_random(ctx)
    built_s = time.perf_counter() - started
    large = Transcriber(TranscriptionOptions(model=str(folder), device="auto"))
    started = time.perf_counter()
    large.load()
    load_s = time.perf_counter() - started
    rows["large-v3-shaped, random weights"] = describe_transcriber(large) | {
        "nvml_after_load": nvml_memory(),
        "built_s": round(built_s, 1),
        "load_s": round(load_s, 1),
        "label": "random weights: memory and batch sizing only, never words",
    }
    return {"nvml_before": before, "models": rows}


def step_oom(ctx: Context) -> dict[str, Any]:
    require_gpu()
    import torch

    from app.core.engine.audio import decode_audio
    from app.core.engine.transcribe import Transcriber, TranscriptionOptions

    audio = decode_audio(long_recording(ctx, 10))
    folder = large_v3_random(ctx)
    attempts = []
    # Memory is held so that the model fits and a batch of 16 does not; the halving must find what fits. The
    # margin left is tried from large to small until a halving happens (a GPU's allocator may pack tighter).
    for leave_mb in (1536, 768, 384):
        transcriber = Transcriber(
            TranscriptionOptions(model=str(folder), device="cuda", batch_size=16, language="en", piece_s=240.0)
        )
        transcriber.load()
        free = nvml_memory()
        hold_mb = max(0.0, (free["total_mb"] or 0) - (free["used_mb"] or 0) - leave_mb)
        held = torch.empty(int(hold_mb * 1024 * 1024), dtype=torch.uint8, device="cuda")
        attempt: dict[str, Any] = {"leave_mb": leave_mb, "held_mb": round(hold_mb), "nvml_held": nvml_memory()}
        started = time.perf_counter()
        try:
            result = transcriber.transcribe(audio)
            attempt |= {"outcome": "finished", "final_batch_size": result.batch_size, "segments": len(result.segments)}
        except Exception as error:
            attempt |= {
                "outcome": f"{type(error).__name__}: {str(error)[:400]}",
                "trace": traceback.format_exc()[-2500:],
            }
        attempt |= {"seconds": round(time.perf_counter() - started, 1), "fallbacks": list(transcriber.fallbacks)}
        del held
        torch.cuda.empty_cache()
        transcriber.unload()
        attempts.append(attempt)
        if transcriber.fallbacks:
            break
    return {"pieces_of_s": 240.0, "audio_s": round(audio.duration, 1), "attempts": attempts}


def step_cancel(ctx: Context) -> dict[str, Any]:
    require_gpu()
    from app.core.engine.pipeline import PipelineOptions, Progress
    from app.core.engine.transcribe import TranscriptionOptions
    from app.core.errors import CancelledError
    from app.core.queue.engine_process import EngineProcess

    source = long_recording(ctx, 10)
    options = PipelineOptions(
        transcription=TranscriptionOptions(model=str(large_v3_random(ctx)), device="cuda", language="en"),
        diarize=False,
        check_language=False,
    )
    readings: dict[str, Any] = {"before": nvml_memory()}
    progress_seen: list[Progress] = []
    during_at: list[float] = []
    cancel_at: list[float] = []

    def should_cancel() -> bool:
        if progress_seen and progress_seen[-1].stage == "transcribe" and progress_seen[-1].stage_fraction > 0:
            if not during_at:
                readings["during"] = nvml_memory()
                during_at.append(time.perf_counter())
            cancel_at.append(time.perf_counter())
            return True
        return False

    engine = EngineProcess(niceness=0)
    started = time.perf_counter()
    outcome = "finished before the cancel"
    try:
        engine.run(source, options, progress_seen.append, should_cancel)
    except CancelledError:
        outcome = "cancelled"
    killed = time.perf_counter()
    # The driver takes the memory back when the child ends; wait for it (a condition, bounded).
    baseline = readings["before"]["used_mb"] or 0.0
    while time.perf_counter() - killed < 30:
        now = nvml_memory()
        if (now["used_mb"] or 0.0) <= baseline + 64:
            break
        time.sleep(0.1)
    readings["after"] = nvml_memory()
    return {
        "outcome": outcome,
        "job_started_to_cancel_s": round((cancel_at[0] if cancel_at else killed) - started, 1),
        "memory_back_after_s": round(time.perf_counter() - killed, 2),
        "readings": readings,
    }


def step_diarizer(ctx: Context) -> dict[str, Any]:
    sys.path.append(str(ROOT))  # after the installed Scriba: the scoring helpers only
    from app.core.engine.audio import decode_audio
    from app.core.engine.diarize import DiarizerOptions
    from app.core.engine.pipeline import Engine
    from tests.metrics import der, rttm_annotation, turns_annotation

    devices = (["cuda"] if cuda_available() else []) + ["cpu"]
    meetings = [path for path in recordings(ctx) if path.stem.startswith("ami_")]
    rows: list[dict[str, Any]] = []
    loads: dict[str, float] = {}
    for device in devices:
        engine = Engine()
        options = DiarizerOptions(backend="embedded", device=device)
        started = time.perf_counter()
        engine.diarize(decode_audio(meetings[0]), options)  # loads (and on a CPU exports) the networks
        loads[device] = round(time.perf_counter() - started, 1)
        for path in meetings:
            audio = decode_audio(path)
            started = time.perf_counter()
            result = engine.diarize(audio, options)
            seconds = time.perf_counter() - started
            reference = rttm_annotation(path.with_suffix(".rttm"))
            hypothesis = turns_annotation((turn.start, turn.end, turn.speaker) for turn in result.turns)
            rows.append(
                {
                    "file": path.stem,
                    "device": device,
                    "ran_on": result.device,
                    "seconds": round(seconds, 2),
                    "der": round(der(reference, hypothesis), 3),
                    "speakers": len({turn.speaker for turn in result.turns}),
                }
            )
    return {"devices": devices, "first_call_s": loads, "rows": rows}


def step_speed(ctx: Context) -> dict[str, Any]:
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    from app.core.engine.audio import decode_audio
    from app.core.engine.transcribe import Transcriber, TranscriptionOptions
    from app.core.gpu.gpustats import GpuStatsSampler

    gpu = cuda_available()
    audio = decode_audio(long_recording(ctx, 10 if gpu else 2))
    warm = decode_audio(recordings(ctx)[0])
    scriba = Transcriber(TranscriptionOptions(model=None, device="auto", language="en"))
    scriba.load()
    scriba.transcribe(warm)
    batch_size = scriba.batch_size
    plain_model = WhisperModel(str(scriba.model_ref.path), device=scriba.device, compute_type=scriba.compute_type)
    plain = BatchedInferencePipeline(plain_model) if batch_size > 0 else None
    settings = {"language": "en", "beam_size": 5, "vad_filter": True, "word_timestamps": True}

    def run_plain() -> int:
        if plain is not None:
            segments, _ = plain.transcribe(audio.samples, batch_size=batch_size, **settings)
        else:
            segments, _ = plain_model.transcribe(audio.samples, **settings)
        return len(list(segments))

    run_plain()  # warm-up on the same file: both sides then run warm

    samples: list[dict[str, Any]] = []
    sampler = GpuStatsSampler()
    sampling = sampler.open()

    def keep(snapshot: Any) -> None:
        for reading in snapshot.gpus:
            samples.append(
                {
                    "t": round(snapshot.time, 2),
                    "util_pct": reading.utilization_pct,
                    "memory_used_mb": reading.memory_used_mb,
                    "temperature_c": reading.temperature_c,
                    "power_w": reading.power_w,
                    "scriba_mb": reading.our_memory_mb,
                }
            )

    scriba_s: list[float] = []
    plain_s: list[float] = []
    segments = {"scriba": 0, "plain": 0}
    for _ in range(2):
        if sampling and not scriba_s:
            sampler.start(keep, interval=0.25)
        started = time.perf_counter()
        segments["scriba"] = len(scriba.transcribe(audio).segments)
        scriba_s.append(time.perf_counter() - started)
        if sampling and len(scriba_s) == 1:
            sampler.stop()
        started = time.perf_counter()
        segments["plain"] = run_plain()
        plain_s.append(time.perf_counter() - started)
    sampler.close()
    first = samples[0]["t"] if samples else 0.0
    for sample in samples:
        sample["t"] = round(sample["t"] - first, 2)
    return {
        "audio_s": round(audio.duration, 1),
        "device": scriba.device,
        "compute_type": scriba.compute_type,
        "batch_size": batch_size,
        "scriba_s": [round(value, 2) for value in scriba_s],
        "plain_s": [round(value, 2) for value in plain_s],
        "ratio_best": round(min(scriba_s) / min(plain_s), 3),
        "segments": segments,
        "sampler": samples,
        "sampler_reason": sampler.reason if not sampling else None,
    }


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[Context], dict[str, Any]]
    limit_s: float


STEPS = (
    Step("environment", step_environment, 60),
    Step("doctor", step_doctor, 150),
    Step("choices", step_choices, 240),
    Step("oom", step_oom, 180),
    Step("cancel", step_cancel, 120),
    Step("diarizer", step_diarizer, 240),
    Step("speed", step_speed, 300),
)


# --- running the steps and writing the report --------------------------------------------------------------


def run_one(step_name: str, ctx: Context, result_file: Path) -> int:
    step = next(step for step in STEPS if step.name == step_name)
    try:
        outcome: dict[str, Any] = {"status": "ok", "data": step.run(ctx)}
    except NoGpu as reason:
        outcome = {"status": "no GPU", "detail": str(reason)}
    except BaseException as error:  # recorded, never fatal: the next step still runs
        outcome = {"status": "failed", "detail": f"{type(error).__name__}: {error}", "trace": traceback.format_exc()}
    result_file.write_text(json.dumps(outcome, indent=2, default=str))
    return 0


def run_all(ctx: Context, out: Path, budget_s: float, only: set[str] | None) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    ctx.work.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + budget_s
    results: dict[str, Any] = {}
    log = (out / "steps.log").open("w")
    for step in STEPS:
        if only and step.name not in only:
            continue
        left = deadline - time.monotonic()
        if left < 10:
            results[step.name] = {"status": "skipped", "detail": "the proof's time budget was spent"}
            continue
        limit = min(step.limit_s, left)
        result_file = ctx.work / f"step-{step.name}.json"
        result_file.unlink(missing_ok=True)
        command = [sys.executable, __file__, "--step", step.name, "--kit", str(ctx.kit), "--work", str(ctx.work)]
        command += ["--cublas", ctx.cublas, "--result", str(result_file)]
        started = time.perf_counter()
        print(f"[{step.name}] up to {limit:.0f} s", flush=True)
        log.write(f"===== {step.name}\n")
        log.flush()
        try:
            done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=limit)
            code: int | None = done.returncode
        except subprocess.TimeoutExpired:
            code = None
        seconds = round(time.perf_counter() - started, 1)
        if result_file.exists():
            result = json.loads(result_file.read_text())
        elif code is None:
            result = {"status": "timeout", "detail": f"over its {limit:.0f} s limit"}
        else:
            result = {"status": "failed", "detail": f"the step's process ended with code {code} and no result"}
        result["seconds"] = seconds
        results[step.name] = result
        print(f"[{step.name}] {result['status']} in {seconds} s {result.get('detail', '')}", flush=True)
    log.close()
    report = {"cublas": ctx.cublas, "cublas_note": STAND_IN_NOTE if ctx.cublas == "stand-in" else None}
    report["steps"] = results
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    (out / "report.md").write_text(markdown(report))
    return report


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join("" if cell is None else str(cell) for cell in row) + " |" for row in rows]
    return lines


def markdown(report: dict[str, Any]) -> str:
    steps = report["steps"]
    lines = ["# Scriba GPU proof", ""]
    if report["cublas_note"]:
        lines += [f"**{report['cublas_note']}.**", ""]
    lines += _table(
        ["step", "status", "seconds", "detail"],
        [[name, step["status"], step.get("seconds"), step.get("detail", "")[:160]] for name, step in steps.items()],
    )

    def data(name: str) -> dict[str, Any] | None:
        step = steps.get(name, {})
        return step.get("data") if step.get("status") == "ok" else None

    if env := data("environment"):
        lines += ["", "## Machine", "", f"- nvidia-smi: {env['nvidia_smi']}", f"- torch: {env['torch_cuda']}"]
        lines.append(f"- packages: {env['packages']}")
        for library in env["cuda_libraries"]:
            state = "loaded" if library["loaded"] else "MISSING"
            lines.append(f"- {library['soname']}: {state} ({library['path'] or library['origin']})")
    if doctor := data("doctor"):
        lines += ["", "## scriba doctor", "", f"Exit code {doctor['exit_code']}: {doctor['verdict']}", ""]
        for gpu in doctor.get("gpus") or []:
            lines.append(f"- NVML: {gpu}")
        lines.append(f"- selected: {doctor['selected']}")
    if choices := data("choices"):
        lines += ["", "## What Scriba chooses", ""]
        rows = []
        for name, row in choices["models"].items():
            after = row["nvml_after_load"]
            rows.append(
                [name, row["device"], row["compute_type"], row["batch_size"], row["batch_reason"], after.get("used_mb")]
            )
        lines += _table(["model", "device", "compute type", "batch", "why", "GPU MB used after load"], rows)
    if oom := data("oom"):
        lines += ["", "## Out of memory, provoked", ""]
        rows = [
            [
                a["leave_mb"],
                a["held_mb"],
                a["outcome"],
                a.get("final_batch_size"),
                "; ".join(a["fallbacks"]),
                a["seconds"],
            ]
            for a in oom["attempts"]
        ]
        lines += _table(["MB left free", "MB held", "outcome", "final batch", "halvings", "s"], rows)
    if cancel := data("cancel"):
        lines += ["", "## Memory given back on cancel", ""]
        readings = cancel["readings"]
        rows = [
            [when, (readings.get(when) or {}).get("used_mb"), (readings.get(when) or {}).get("ours_mb")]
            for when in ("before", "during", "after")
        ]
        lines += _table(["when", "GPU MB used", "Scriba's processes MB"], rows)
        lines.append(f"\n{cancel['outcome']}; memory back {cancel['memory_back_after_s']} s after the kill.")
    if diarizer := data("diarizer"):
        lines += ["", "## Built-in diarizer, GPU against CPU", ""]
        by_file: dict[str, dict[str, Any]] = {}
        for row in diarizer["rows"]:
            by_file.setdefault(row["file"], {})[row["device"]] = row
        rows = []
        for name, per in by_file.items():
            gpu, cpu = per.get("cuda", {}), per.get("cpu", {})
            rows.append(
                [name, gpu.get("seconds"), cpu.get("seconds"), gpu.get("der"), cpu.get("der"), gpu.get("ran_on")]
            )
        lines += _table(["file", "GPU s", "CPU s", "GPU DER", "CPU DER", "GPU ran on"], rows)
        lines.append(f"\nFirst call (load/export): {diarizer['first_call_s']}")
    if speed := data("speed"):
        lines += ["", "## Scriba against plain faster-whisper", ""]
        lines.append(
            f"{speed['audio_s']} s of audio on {speed['device']} ({speed['compute_type']}, "
            f"batch {speed['batch_size']}): "
            f"Scriba {speed['scriba_s']} s, plain {speed['plain_s']} s; ratio of the best runs {speed['ratio_best']}."
        )
        if speed["sampler"]:
            lines += ["", "GPU panel sampler during Scriba's first run:", ""]
            picked = speed["sampler"][:: max(1, len(speed["sampler"]) // 20)]
            lines += _table(
                ["t s", "util %", "memory MB", "°C", "W", "Scriba MB"],
                [
                    [s["t"], s["util_pct"], s["memory_used_mb"], s["temperature_c"], s["power_w"], s["scriba_mb"]]
                    for s in picked
                ],
            )
        else:
            lines.append(f"\nNo sampler readings: {speed['sampler_reason']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kit", type=Path, required=True, help="the unpacked kit (audio/, proof/, manifest.json)")
    parser.add_argument("--work", type=Path, required=True, help="scratch folder (kept between reruns)")
    parser.add_argument("--out", type=Path, help="where report.md and report.json go")
    parser.add_argument("--cublas", choices=["stand-in", "real"], default="stand-in")
    parser.add_argument("--budget", type=float, default=360.0, help="seconds for all the steps together")
    parser.add_argument("--only", help="comma-separated step names (a rerun of some steps)")
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    ctx = Context(kit=args.kit, work=args.work, cublas=args.cublas)
    if args.step:
        return run_one(args.step, ctx, args.result)
    if args.out is None:
        parser.error("--out is required")
    only = set(args.only.split(",")) if args.only else None
    report = run_all(ctx, args.out, args.budget, only)
    print((args.out / "report.md").read_text())
    failed = [name for name, step in report["steps"].items() if step["status"] in ("failed", "timeout")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
