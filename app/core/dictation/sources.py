"""Where dictation's audio comes from: a microphone through PortAudio (sounddevice, imported only when one is
opened or the devices are listed), or samples and files replayed at real speed for tests and benchmarks. Every
source pushes 16 kHz mono float32 blocks into an :class:`AudioSink`."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from app.core.engine.audio import SAMPLE_RATE, decode_audio
from app.core.errors import ScribaError

log = logging.getLogger(__name__)


class AudioInputError(ScribaError):
    """The microphone cannot be opened: no sounddevice/PortAudio, an unknown device, or a refused format."""


class AudioSink(Protocol):
    """Where a source delivers audio. ``write`` must be cheap: a microphone calls it from PortAudio's thread."""

    def write(self, samples: np.ndarray) -> None:
        """16 kHz mono float32 samples in [-1, 1], in order."""

    def end(self) -> None:
        """The source has no more audio (end of a file); :meth:`Dictation.run` returns after the flush."""

    def warn(self, message: str) -> None:
        """Something the person should know (input overflow); becomes a "status" event."""


class AudioSource(Protocol):
    def start(self, sink: AudioSink) -> None: ...

    def stop(self) -> None:
        """Stop delivering; after it returns, ``sink.write`` is not called again."""


class ArraySource:
    """Samples replayed as a microphone would deliver them: ``chunk_s`` blocks at real speed (or ``speed``
    times faster), or everything at once with ``realtime=False``."""

    def __init__(
        self, samples: np.ndarray, *, realtime: bool = True, speed: float = 1.0, chunk_s: float = 0.05
    ) -> None:
        if speed <= 0 or chunk_s <= 0:
            raise ValueError("speed and chunk_s must be positive")
        self.samples = np.ascontiguousarray(samples, dtype=np.float32).reshape(-1)
        self.realtime = realtime
        self.speed = speed
        self.chunk = max(1, int(chunk_s * SAMPLE_RATE))
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def duration(self) -> float:
        return len(self.samples) / SAMPLE_RATE

    def start(self, sink: AudioSink) -> None:
        self._thread = threading.Thread(target=self._feed, args=(sink,), name="dictation-replay", daemon=True)
        self._thread.start()

    def _feed(self, sink: AudioSink) -> None:
        started = time.monotonic()
        for offset in range(0, len(self.samples), self.chunk):
            block = self.samples[offset : offset + self.chunk]
            if self.realtime:
                # A block is delivered once its last sample "has been spoken", as from a sound card; the
                # schedule is absolute, so sleeping late once does not shift the rest of the replay.
                due = started + (offset + len(block)) / SAMPLE_RATE / self.speed
                if self._stopping.wait(max(0.0, due - time.monotonic())):
                    return
            elif self._stopping.is_set():
                return
            sink.write(block)
        sink.end()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class FileSource(ArraySource):
    """An audio or video file, decoded to 16 kHz mono, replayed like a microphone (see :class:`ArraySource`)."""

    def __init__(self, path: Path | str, *, realtime: bool = True, speed: float = 1.0, chunk_s: float = 0.05) -> None:
        self.path = Path(path)
        super().__init__(decode_audio(self.path).samples, realtime=realtime, speed=speed, chunk_s=chunk_s)


def _import_sounddevice() -> Any:
    try:
        import sounddevice
    except ImportError as error:
        missing = AudioInputError("This installation of Scriba cannot record from a microphone: reinstall Scriba.")
        missing.cli_hint = "(the Python package 'sounddevice' is missing: `pip install sounddevice`)"
        raise missing from error
    except OSError as error:  # sounddevice raises OSError when the PortAudio library itself is missing
        no_library = AudioInputError(
            "The computer's sound recording library (PortAudio) is not installed: install PortAudio with the "
            "system's software manager (the package libportaudio2 on Debian and Ubuntu)."
        )
        no_library.cli_hint = (
            f"({error}; `apt install libportaudio2` on Debian/Ubuntu, `brew install portaudio` on macOS)"
        )
        raise no_library from error
    return sounddevice


def list_input_devices(sounddevice: Any = None, *, rescan: bool = False) -> list[dict[str, Any]]:
    """Every device that can record: index, name, channels, default samplerate, is_default, hostapi.

    PortAudio takes its list of devices once, when it starts: a microphone plugged in (or a sound server
    started) later is missing until it starts again. ``rescan`` restarts it first, which closes any open
    stream: call it only while nothing records.
    """
    sd = sounddevice if sounddevice is not None else _import_sounddevice()
    if rescan:
        try:
            sd._terminate()
            sd._initialize()
        except Exception as error:  # PortAudio's own error type; the message says what failed
            raise AudioInputError(f"PortAudio could not list the devices again: {error}") from error
    try:
        default_input = int(sd.default.device[0])
    except (TypeError, ValueError, IndexError):
        default_input = -1
    hostapis = sd.query_hostapis()
    devices = []
    for index, info in enumerate(sd.query_devices()):
        if int(info["max_input_channels"]) <= 0:
            continue
        devices.append(
            {
                "index": index,
                "name": str(info["name"]),
                "channels": int(info["max_input_channels"]),
                "default_samplerate": float(info["default_samplerate"]),
                "is_default": index == default_input,
                "hostapi": str(hostapis[int(info["hostapi"])]["name"]),
            }
        )
    return devices


class _Resampler:
    """Streaming rate conversion to 16 kHz through FFmpeg's swresample (PyAV is already a dependency).

    It keeps its filter state between blocks, so block edges do not click as block-wise resampling would.
    """

    def __init__(self, rate: int) -> None:
        import av

        self._av = av
        self.rate = rate
        self._resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)

    def __call__(self, samples: np.ndarray | None) -> np.ndarray:
        """Resample one block; ``None`` flushes the samples still held in the filter."""
        frame = None
        if samples is not None:
            frame = self._av.AudioFrame.from_ndarray(
                np.ascontiguousarray(samples, dtype=np.float32).reshape(1, -1), format="flt", layout="mono"
            )
            frame.sample_rate = self.rate
            frame.pts = None
        pieces = [out.to_ndarray().reshape(-1) for out in self._resampler.resample(frame)]
        return np.concatenate(pieces).astype(np.float32, copy=False) if pieces else np.zeros(0, np.float32)


class MicrophoneSource:
    """A PortAudio input through sounddevice, mono float32, resampled to 16 kHz when the device cannot record
    at 16 kHz itself. ``sounddevice`` can be given (a stand-in in tests); by default it is imported at start."""

    def __init__(self, device: int | str | None = None, *, block_s: float = 0.05, sounddevice: Any = None) -> None:
        self.device = device
        self.block_s = block_s
        self.samplerate = 0  # what the device records at, known after start()
        self._sd = sounddevice
        self._stream: Any = None
        self._resampler: _Resampler | None = None
        self._sink: AudioSink | None = None
        self._lock = threading.Lock()  # stop() and PortAudio's callback thread both touch the resampler

    def _pick_format(self, sd: Any) -> tuple[int, int]:
        """(samplerate, channels): 16 kHz mono when the device records it, else what it offers by default."""
        info = sd.query_devices(self.device, "input")
        rates = (SAMPLE_RATE, int(info["default_samplerate"]))
        # Some hardware devices (ALSA hw:) refuse mono; their first two channels are then mixed down.
        channel_counts = (1, max(1, min(2, int(info["max_input_channels"]))))
        for channels in dict.fromkeys(channel_counts):
            for rate in dict.fromkeys(rates):
                try:
                    sd.check_input_settings(device=self.device, channels=channels, dtype="float32", samplerate=rate)
                except Exception:  # PortAudio says no in several exception types (PortAudioError, ValueError)
                    continue
                return rate, channels
        raise AudioInputError(f"input device {self.device!r} records neither mono nor stereo float32 audio")

    def start(self, sink: AudioSink) -> None:
        sd = self._sd if self._sd is not None else _import_sounddevice()
        try:
            self.samplerate, channels = self._pick_format(sd)
        except AudioInputError:
            raise
        except Exception as error:  # an unknown device name or index
            raise AudioInputError(f"input device {self.device!r} cannot be used: {error}") from error
        self._resampler = _Resampler(self.samplerate) if self.samplerate != SAMPLE_RATE else None
        self._sink = sink

        def callback(indata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
            if status:
                sink.warn(f"audio input: {status}")
            # A new array either way: PortAudio reuses its buffer after the callback returns.
            mono = indata.mean(axis=1, dtype=np.float32) if channels > 1 else np.array(indata[:, 0], np.float32)
            with self._lock:
                if self._resampler is not None:
                    mono = self._resampler(mono)
            if mono.size:
                sink.write(mono)

        try:
            self._stream = sd.InputStream(
                device=self.device,
                channels=channels,
                samplerate=self.samplerate,
                dtype="float32",
                blocksize=max(1, int(self.samplerate * self.block_s)),
                callback=callback,
            )
            self._stream.start()
        except Exception as error:
            self._stream = None
            raise AudioInputError(f"could not open input device {self.device!r}: {error}") from error

    def stop(self) -> None:
        stream, self._stream = self._stream, None
        if stream is None:
            return
        stream.stop()  # returns after the last callback has run
        stream.close()
        with self._lock:
            if self._resampler is not None and self._sink is not None:
                tail = self._resampler(None)
                if tail.size:
                    self._sink.write(tail)
