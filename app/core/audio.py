"""Decode any audio or video file to 16 kHz mono float32, once, for every stage of the pipeline.

PyAV (FFmpeg) is already a dependency of faster-whisper, so decoding needs no system FFmpeg. The samples
are handed as one array to transcription and diarization alike: decoding a long file twice costs seconds
and memory for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from app.core.errors import (
    CorruptMediaError,
    EmptyMediaFileError,
    MediaFileMissingError,
    NoAudioStreamError,
    NotAMediaFileError,
    UnsupportedCodecError,
    ZeroLengthAudioError,
)

SAMPLE_RATE = 16000

# Extensions offered in file dialogs and accepted when a folder is added. Decoding itself never looks at
# the extension: FFmpeg probes the content.
MEDIA_EXTENSIONS = frozenset(
    {
        ".wav",
        ".flac",
        ".mp3",
        ".m4a",
        ".aac",
        ".ogg",
        ".oga",
        ".opus",
        ".wma",
        ".aiff",
        ".aif",
        ".amr",
        ".mp4",
        ".m4v",
        ".mkv",
        ".webm",
        ".mov",
        ".avi",
        ".wmv",
        ".mpg",
        ".mpeg",
        ".ts",
        ".3gp",
    }
)


@dataclass(frozen=True)
class Audio:
    """Decoded audio: mono float32 samples in [-1, 1] at ``sample_rate``."""

    samples: np.ndarray
    sample_rate: int
    source: Path
    warnings: tuple[str, ...] = field(default=())

    @property
    def duration(self) -> float:
        return len(self.samples) / self.sample_rate


def decode_audio(path: Path | str, sample_rate: int = SAMPLE_RATE) -> Audio:
    """Decode the first audio stream of ``path`` to mono float32 at ``sample_rate``.

    Raises a subclass of :class:`app.core.errors.MediaError` that says what is wrong with the file.
    """
    import av  # imported here: PyAV loads FFmpeg's shared libraries, which the GUI does not need at start-up

    source = Path(path)
    if not source.exists():
        raise MediaFileMissingError(source)
    if source.is_dir():
        raise NotAMediaFileError(source, "it is a folder")
    if source.stat().st_size == 0:
        raise EmptyMediaFileError(source)

    try:
        container = av.open(str(source), metadata_errors="ignore")
    except av.FFmpegError as error:
        raise NotAMediaFileError(source, _ffmpeg_reason(error)) from error

    warnings: list[str] = []
    chunks: list[np.ndarray] = []
    with container:
        if not container.streams.audio:
            raise NoAudioStreamError(source)
        stream = container.streams.audio[0]
        codec_name = _codec_name(stream)
        if codec_name is None:
            raise UnsupportedCodecError(source, _codec_tag(stream))
        # Only the audio stream is demuxed; video packets are skipped by FFmpeg without being decoded.
        resampler = av.AudioResampler(format="flt", layout="mono", rate=sample_rate)
        try:
            for frame in container.decode(stream):
                frame.pts = None  # let the resampler count samples itself; broken timestamps must not shift audio
                for resampled in resampler.resample(frame):
                    chunks.append(resampled.to_ndarray().reshape(-1))
        except av.FFmpegError as error:
            if not chunks:
                if isinstance(error, av.error.PatchWelcomeError | av.error.DecoderNotFoundError):
                    raise UnsupportedCodecError(source, codec_name) from error
                raise CorruptMediaError(source, _ffmpeg_reason(error)) from error
            # A damaged tail (a recording cut off by a crash) still has good audio before it: keep it.
            decoded = sum(len(chunk) for chunk in chunks) / sample_rate
            warnings.append(f"decoding stopped after {decoded:.1f} s: {_ffmpeg_reason(error)}")
        for resampled in resampler.resample(None):
            chunks.append(resampled.to_ndarray().reshape(-1))

    if not chunks:
        raise ZeroLengthAudioError(source)
    samples = np.concatenate(chunks).astype(np.float32, copy=False)
    if samples.size == 0:
        raise ZeroLengthAudioError(source)
    return Audio(samples=samples, sample_rate=sample_rate, source=source, warnings=tuple(warnings))


def _codec_name(stream: object) -> str | None:
    context = getattr(stream, "codec_context", None)
    codec = getattr(context, "codec", None) if context is not None else None
    name = getattr(codec, "name", None)
    if not name or name == "none":
        return None
    return str(name)


def _codec_tag(stream: object) -> str:
    context = getattr(stream, "codec_context", None)
    tag = getattr(context, "codec_tag", None) if context is not None else None
    return str(tag) if tag else "unknown"


def _ffmpeg_reason(error: Exception) -> str:
    strerror = getattr(error, "strerror", None)
    return str(strerror or error).strip() or type(error).__name__


def probe_duration(path: Path | str) -> float | None:
    """Duration in seconds from the container header (no decoding); None when the file does not say."""
    import av

    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            if not container.streams.audio:
                return None
            stream = container.streams.audio[0]
            if stream.duration is not None and stream.time_base is not None:
                return float(stream.duration * stream.time_base)
            if container.duration is not None:
                return container.duration / 1_000_000  # AV_TIME_BASE
    except (av.FFmpegError, OSError, ValueError):
        return None
    return None
