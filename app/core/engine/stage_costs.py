"""What each stage of a job costs per second of audio, so that progress (and the ETA computed from it as
``elapsed * (1 - fraction) / fraction``) moves at an even pace through a job of any length.

Fixed shares per stage were right for one set-up only: with tiny.en on a CPU, finding speakers takes about as
long as transcribing, so a job sat at 80 % for half its time; with large-v3 on a GPU transcription is most of
it. The first job uses the estimates below; after that, the engine's own measurements of each stage with the
same model, backend and device replace them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

STAGES = ("decode", "transcribe", "diarize", "merge")

# Seconds per second of audio on a 2-core x86 CPU with tiny.en (docs/benchmarks.md).
_CPU_TINY_TRANSCRIBE = 0.07
_CPU_DIARIZE = {"embedded": 0.03, "pyannote": 0.05}
_DECODE = 0.003
_MERGE = 0.002
# A CUDA GPU runs both networks about this much faster than such a CPU (FACTS: large-v3 batched on an H100).
_GPU_SPEEDUP = 25.0
# Whisper sizes' cost relative to tiny, by their encoder and decoder sizes; checked in the name's order.
_MODEL_COST = (
    ("distil", 8.0),
    ("turbo", 8.0),
    ("large", 25.0),
    ("medium", 12.0),
    ("small", 5.0),
    ("base", 2.0),
    ("tiny", 1.0),
)
# Shorter jobs are not measured: model loading and start-up would dominate their rate.
_SHORTEST_MEASURED_S = 30.0


def model_cost(model: str) -> float:
    name = model.lower()
    return next((cost for key, cost in _MODEL_COST if key in name), 5.0)


@dataclass
class StageCosts:
    """Per-stage rates (seconds of work per second of audio), estimated, then measured."""

    _measured: dict[tuple[str, str], float] = field(default_factory=dict)

    def rates(
        self, model: str, transcribe_device: str, diarizer: str | None, diarize_device: str, alongside: bool = False
    ) -> dict[str, float]:
        """Each stage's rate for a job with this model and diarizer (None: no diarization); ``alongside``: the two
        run at once, each on part of the CPU (measured apart from one after the other)."""
        estimate = {
            "decode": _DECODE,
            "transcribe": _CPU_TINY_TRANSCRIBE
            * model_cost(model)
            / (_GPU_SPEEDUP if transcribe_device == "cuda" else 1.0),
            "diarize": 0.0
            if diarizer is None
            else _CPU_DIARIZE.get(diarizer, 0.03) / (_GPU_SPEEDUP if diarize_device == "cuda" else 1.0),
            "merge": _MERGE,
        }
        keys = self._keys(model, transcribe_device, diarizer, diarize_device, alongside)
        return {
            stage: (self._measured.get((stage, keys[stage]), estimate[stage]) if estimate[stage] > 0 else 0.0)
            for stage in STAGES
        }

    def record(
        self,
        timings: dict[str, float],
        audio_seconds: float,
        model: str,
        transcribe_device: str,
        diarizer: str | None,
        diarize_device: str,
        alongside: bool = False,
    ) -> None:
        if audio_seconds < _SHORTEST_MEASURED_S:
            return
        keys = self._keys(model, transcribe_device, diarizer, diarize_device, alongside)
        for stage in STAGES:
            if stage in timings and (stage != "diarize" or diarizer is not None):
                self._measured[(stage, keys[stage])] = timings[stage] / audio_seconds

    @staticmethod
    def _keys(
        model: str, transcribe_device: str, diarizer: str | None, diarize_device: str, alongside: bool
    ) -> dict[str, str]:
        together = " alongside" if alongside else ""
        return {
            "decode": "",
            "transcribe": f"{model}@{transcribe_device}{together}",
            "diarize": f"{diarizer}@{diarize_device}{together}",
            "merge": "",
        }


def stage_layout(rates: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """(offset, share) of each stage in the whole job's progress, proportional to its rate."""
    total = sum(rates.values()) or 1.0
    offsets: dict[str, float] = {}
    shares: dict[str, float] = {}
    position = 0.0
    for stage in STAGES:
        offsets[stage] = position
        shares[stage] = rates.get(stage, 0.0) / total
        position += shares[stage]
    return offsets, shares


def job_fraction(offsets: dict[str, float], shares: dict[str, float], stage: str, stage_fraction: float) -> float:
    """The whole job's progress when `stage` is `stage_fraction` done, in [0, 1]."""
    stage_fraction = min(1.0, max(0.0, stage_fraction))
    if stage == STAGES[-1] and stage_fraction == 1.0:
        # Exactly 1.0 at the end: the summed float shares can land one ulp short, and a
        # finished job must read 100 %, not 99.99...
        return 1.0
    return min(1.0, offsets[stage] + shares[stage] * stage_fraction)
