"""A speaker encoder that works offline: the GE2E d-vector LSTM whose weights ship in the ``resemblyzer`` package.

We read only the weights file from that package and compute the features ourselves, batched over the
whole recording: the package's own helpers embed one utterance at a time through librosa, which is slow and
would make librosa an import-time cost of diarization.

The network (3-layer LSTM over 40 mel bands, 10 ms frames, then a linear layer, ReLU and L2 norm) was trained
on 1.6 s windows of power (not log) mel spectrograms of audio normalised to -30 dBFS.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from app.core.errors import DiarizationError

SAMPLE_RATE = 16000
WINDOW_SAMPLES = 400  # 25 ms
HOP_SAMPLES = 160  # 10 ms: one frame
N_MELS = 40
TARGET_DBFS = -30.0


def weights_path() -> Path:
    spec = importlib.util.find_spec("resemblyzer")  # locates the package without importing it (and librosa)
    if spec is None or not spec.submodule_search_locations:
        raise DiarizationError(
            "Known speakers need the 'resemblyzer' package (it ships the voiceprint encoder's weights). "
            "Reinstall Scriba (`make venv`)."
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "pretrained.pt"
    if not path.is_file():
        raise DiarizationError(f"The speaker encoder weights are missing at {path}. Reinstall 'resemblyzer'.")
    return path


@lru_cache(maxsize=1)
def _mel_filterbank() -> np.ndarray:
    """Slaney-style mel filterbank (the librosa default the encoder was trained with), shape (n_mels, bins)."""
    n_fft = WINDOW_SAMPLES
    fft_freqs = np.linspace(0, SAMPLE_RATE / 2, n_fft // 2 + 1)

    def hz_to_mel(hz: np.ndarray) -> np.ndarray:
        # Linear below 1 kHz, logarithmic above (Slaney's Auditory Toolbox).
        hz = np.asarray(hz, dtype=np.float64)
        mel = hz / (200.0 / 3)
        log_region = hz >= 1000.0
        mel[log_region] = 15.0 + np.log(hz[log_region] / 1000.0) / (np.log(6.4) / 27.0)
        return mel

    def mel_to_hz(mel: np.ndarray) -> np.ndarray:
        hz = mel * (200.0 / 3)
        log_region = mel >= 15.0
        hz[log_region] = 1000.0 * np.exp((np.log(6.4) / 27.0) * (mel[log_region] - 15.0))
        return hz

    mel_points = np.linspace(hz_to_mel(np.array([0.0]))[0], hz_to_mel(np.array([SAMPLE_RATE / 2]))[0], N_MELS + 2)
    hz_points = mel_to_hz(mel_points)
    widths = np.diff(hz_points)
    ramps = hz_points[:, None] - fft_freqs[None, :]
    weights = np.zeros((N_MELS, len(fft_freqs)))
    for band in range(N_MELS):
        lower = -ramps[band] / widths[band]
        upper = ramps[band + 2] / widths[band + 1]
        weights[band] = np.maximum(0, np.minimum(lower, upper))
    weights *= (2.0 / (hz_points[2 : N_MELS + 2] - hz_points[:N_MELS]))[:, None]
    return weights.astype(np.float32)


def mel_frames(samples: np.ndarray) -> np.ndarray:
    """Power mel spectrogram, one row per 10 ms frame centred on sample ``i * 160``: shape (frames, 40)."""
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if samples.size else 0.0
    if rms > 0:
        gain_db = TARGET_DBFS - 20 * np.log10(rms)
        if gain_db > 0:  # only raise quiet recordings, as in training
            samples = samples * np.float32(10 ** (gain_db / 20))
    padded = np.pad(samples.astype(np.float32, copy=False), WINDOW_SAMPLES // 2)
    n_frames = 1 + (len(padded) - WINDOW_SAMPLES) // HOP_SAMPLES
    frames = np.lib.stride_tricks.as_strided(
        padded,
        shape=(n_frames, WINDOW_SAMPLES),
        strides=(padded.strides[0] * HOP_SAMPLES, padded.strides[0]),
        writeable=False,
    )
    window = np.hanning(WINDOW_SAMPLES + 1)[:-1].astype(np.float32)  # periodic Hann
    power = np.abs(np.fft.rfft(frames * window, axis=1)) ** 2
    return (power.astype(np.float32) @ _mel_filterbank().T).astype(np.float32)


class SpeakerEncoder:
    """Embeds windows of mel frames into 256-dim unit vectors (cosine similarity compares speakers)."""

    def __init__(self, device: str = "cpu", threads: int | None = None) -> None:
        import torch

        if threads:
            torch.set_num_threads(threads)
        self._torch = torch
        self.device = device
        self._lstm = torch.nn.LSTM(N_MELS, 256, 3, batch_first=True)
        self._linear = torch.nn.Linear(256, 256)
        state: dict[str, Any] = torch.load(weights_path(), map_location="cpu", weights_only=True)["model_state"]
        self._lstm.load_state_dict({k[len("lstm.") :]: v for k, v in state.items() if k.startswith("lstm.")})
        self._linear.load_state_dict({k[len("linear.") :]: v for k, v in state.items() if k.startswith("linear.")})
        self._lstm.to(device).eval()
        self._linear.to(device).eval()

    def embed(self, mels: np.ndarray, starts: np.ndarray, length: int, batch_size: int = 256) -> np.ndarray:
        """Embed ``mels[s : s + length]`` for every s in ``starts``; returns (len(starts), 256)."""
        torch = self._torch
        out = np.zeros((len(starts), 256), dtype=np.float32)
        mel_tensor = torch.from_numpy(np.ascontiguousarray(mels))
        offsets = torch.arange(length)
        with torch.inference_mode():
            for first in range(0, len(starts), batch_size):
                batch_starts = torch.from_numpy(np.asarray(starts[first : first + batch_size], dtype=np.int64))
                batch = mel_tensor[batch_starts[:, None] + offsets[None, :]].to(self.device)
                _, (hidden, _) = self._lstm(batch)
                raw = torch.relu(self._linear(hidden[-1]))
                norm = torch.linalg.norm(raw, dim=1, keepdim=True).clamp_min(1e-8)
                out[first : first + len(batch_starts)] = (raw / norm).cpu().numpy()
        return out
