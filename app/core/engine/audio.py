"""Decode any audio or video file to 16 kHz mono float32, once, for every stage of the pipeline.

PyAV (FFmpeg) is already a dependency of faster-whisper, so decoding needs no system FFmpeg. The samples
are handed as one array to transcription and diarization alike: decoding a long file twice costs seconds
and memory for nothing. The array is grown in place as frames arrive (never a list of pieces joined at the
end, which would hold the file twice: 1.4 GB at the peak for three hours instead of 0.7 GB).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from app.core.errors import (
    CorruptMediaError,
    EmptyMediaFileError,
    ImplausibleAudioError,
    MediaFileMissingError,
    NoAudioStreamError,
    NotAMediaFileError,
    UnsupportedCodecError,
    ZeroLengthAudioError,
)

SAMPLE_RATE = 16000
# No real recording is sampled below telephone quality's 8 kHz; 2 kHz leaves room for odd old files while
# refusing a header that claims 1 Hz (a 32 KB file that would decode to 4.4 hours and 5 GB).
MIN_SOURCE_RATE = 2000
# Where the two channels of a stereo file cancel out when added (one wired with inverted polarity), the mono mix
# of a stretch keeps less than this share of the channels' energy; real stereo keeps about half or more.
CANCELLED_SHARE = 0.05
# Once cancelling, the channels count as wired the ordinary way again only where the mix keeps this much: a
# frame in between (a lossy codec's stereo coding, noise) changes nothing.
RESTORED_SHARE = 0.25
# Frames heard before either way is known are held (both ways) for at most this long: a file that starts with a
# long quiet stretch is then mixed as ordinary stereo from there on, until sound says otherwise.
UNDECIDED_SECONDS = 30.0

# The most channels a WAV header may claim: third-order ambisonics has 16, the largest microphone arrays 64.
MAX_CHANNELS = 64

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
    with container:
        if not container.streams.audio:
            raise NoAudioStreamError(source)
        stream = container.streams.audio[0]
        codec_name = _codec_name(stream)
        if codec_name is None:
            raise UnsupportedCodecError(source, _codec_tag(stream))
        source_rate = int(getattr(stream.codec_context, "sample_rate", 0) or 0)
        if 0 < source_rate < MIN_SOURCE_RATE:
            raise ImplausibleAudioError(
                source, f"a sample rate of {source_rate} Hz; real recordings use 8000 Hz or more"
            )
        channels = int(getattr(stream.codec_context, "channels", 0) or 0)
        if codec_name.startswith("pcm_"):
            # Plain samples take their shape from the header alone: one that cannot be right is said as such, not
            # met later as a decoder's "Invalid argument" (0 or 999 channels) or decoded as noise (3-bit samples).
            problem = _wav_header_problem(source) or (None if channels > 0 else "the header gives it no channels")
            if problem:
                raise ImplausibleAudioError(source, problem)
        samples = _GrowingSamples(_expected_samples(stream, container, sample_rate))
        # Stereo is mixed here rather than by FFmpeg so that channels that cancel out can be caught (below);
        # anything else (5.1 and up) is mixed by FFmpeg, which weights the centre (dialogue) channel properly.
        stereo = channels == 2
        resampler = av.AudioResampler(
            format="fltp" if stereo else "flt", layout="stereo" if stereo else "mono", rate=sample_rate
        )
        mixer = _Mixer(samples, stereo, sample_rate)
        damage = _Damage(_byte_rate(stream, container), _header_duration(stream, container))
        try:
            for packet in container.demux(stream):
                try:
                    frames = packet.decode()
                except av.FFmpegError as error:
                    if samples.size == 0 and isinstance(
                        error, av.error.PatchWelcomeError | av.error.DecoderNotFoundError
                    ):
                        raise UnsupportedCodecError(source, codec_name) from error
                    # A damaged stretch (bad sectors, a broken copy): skip its packets, as FFmpeg itself does,
                    # and go on with the good audio after it.
                    damage.bad_packet(samples.size / sample_rate, error)
                    continue
                if frames and packet.size and damage.bad_since is not None:
                    # Silence where the damaged stretch was keeps every later word at its time in the file.
                    gap = damage.resumed(packet.pos, samples.size / sample_rate)
                    samples.append(np.zeros(round(gap * sample_rate), dtype=np.float32))
                damage.good_packet(packet.pos, packet.size)
                for frame in frames:
                    frame.pts = None  # let the resampler count samples itself; broken timestamps must not shift audio
                    for resampled in resampler.resample(frame):
                        mixer.add(resampled)
        except av.FFmpegError as error:
            # The demuxer gave up (a file cut off part-way): what was decoded before stays.
            damage.bad_packet(samples.size / sample_rate, error)
        for resampled in resampler.resample(None):
            mixer.add(resampled)
        mixer.finish()
        if damage.bad_since is not None:
            if samples.size == 0:
                raise CorruptMediaError(source, _ffmpeg_reason(damage.error)) from damage.error
            # A damaged tail (a recording cut off by a crash) still has good audio before it: keep it.
            decoded = samples.size / sample_rate
            warnings.append(f"decoding stopped after {decoded:.1f} s: {_ffmpeg_reason(damage.error)}")
        warnings[:0] = [
            f"could not decode {start:.1f} s to {end:.1f} s: {_ffmpeg_reason(reason)}"
            for start, end, reason in damage.stretches
        ]

    if samples.size == 0:
        raise ZeroLengthAudioError(source)
    if mixer.inverted_seconds >= 1.0:
        warnings.append(
            f"the two stereo channels cancel each other out in {mixer.inverted_seconds:.0f} s of the file (one channel "
            "has inverted polarity); their difference was used there instead of their sum"
        )
    return Audio(samples=samples.finish(), sample_rate=sample_rate, source=source, warnings=tuple(warnings))


class _GrowingSamples:
    """A float32 array grown in place (``ndarray.resize`` reallocates, which for large arrays remaps pages
    rather than copying them) and trimmed to its length at the end."""

    def __init__(self, expected: int) -> None:
        self._buffer = np.empty(max(expected, SAMPLE_RATE), dtype=np.float32)
        self.size = 0

    def append(self, chunk: np.ndarray) -> None:
        needed = self.size + len(chunk)
        if needed > len(self._buffer):
            self._buffer.resize(max(needed, len(self._buffer) * 3 // 2), refcheck=False)
        self._buffer[self.size : needed] = chunk
        self.size = needed

    def finish(self) -> np.ndarray:
        self._buffer.resize(self.size, refcheck=False)
        return self._buffer


class _Damage:
    """The damaged stretches met while decoding, in seconds of the decoded audio.

    Where the good audio resumes after a damaged stretch is told by the bytes skipped, at the stream's bit rate:
    the packets' timestamps cannot tell it, because a demuxer that resyncs on garbage (MP3, ADTS) numbers the
    packets after it as if nothing had been lost."""

    def __init__(self, byte_rate: float | None, claimed_seconds: float | None) -> None:
        self.byte_rate = byte_rate
        self.claimed_seconds = claimed_seconds
        self.stretches: list[tuple[float, float, Exception]] = []
        self.bad_since: float | None = None
        self.error: Exception = Exception()
        self._good_end: int | None = None  # the byte just after the last packet that decoded

    def bad_packet(self, position: float, error: Exception) -> None:
        if self.bad_since is None:
            self.bad_since, self.error = position, error

    def good_packet(self, byte: int | None, size: int) -> None:
        if byte is not None and byte >= 0 and size > 0:
            self._good_end = byte + size

    def resumed(self, byte: int | None, position: float) -> float:
        """Good audio again, at ``byte``: the seconds of silence that stand for the stretch skipped."""
        start = self.bad_since if self.bad_since is not None else position
        gap = 0.0
        if self.byte_rate and byte is not None and self._good_end is not None and byte > self._good_end:
            gap = (byte - self._good_end) / self.byte_rate - (position - start)
            if self.claimed_seconds:
                gap = min(gap, max(0.0, self.claimed_seconds - position))
            gap = max(gap, 0.0)
        end = position + gap
        if self.stretches and start - self.stretches[-1][1] < 1.0:
            # Damage a moment apart is one stretch to the person reading the note.
            start, _, self.error = self.stretches.pop()
        self.stretches.append((start, end, self.error))
        self.bad_since = None
        return gap


def _byte_rate(stream: object, container: object) -> float | None:
    """Bytes per second of the audio stream: its bit rate, else the container's; None when neither says."""
    for holder in (stream, getattr(stream, "codec_context", None), container):
        bit_rate = getattr(holder, "bit_rate", None) if holder is not None else None
        if bit_rate:
            return float(bit_rate) / 8
    return None


class _Mixer:
    """Resampled frames to mono samples. Stereo is the channels' mean, except where they cancel out (one channel
    wired with inverted polarity): there it is their difference, quiet frames included.

    Which way the channels are wired is told by frames with real sound only (in near-silence the ratio of the two
    sums is noise) and holds for the quiet frames around them: judged frame by frame, the quiet parts of speech
    in an inverted file were mixed to nothing (64 % of a real AMI meeting's samples), and the words with them."""

    def __init__(self, samples: _GrowingSamples, stereo: bool, sample_rate: int) -> None:
        self.samples = samples
        self.stereo = stereo
        self.sample_rate = sample_rate
        self.inverted: bool | None = None  # None: no frame with sound yet
        self.inverted_seconds = 0.0
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []  # (mean, difference) until the wiring is known
        self._pending_samples = 0

    def add(self, resampled: object) -> None:
        array = resampled.to_ndarray()  # type: ignore[attr-defined]
        if not self.stereo:
            self.samples.append(array.reshape(-1))
            return
        left, right = array[0], array[1]
        mean, difference = (left + right) * 0.5, (left - right) * 0.5
        channel_energy = float(np.dot(left, left) + np.dot(right, right)) * 0.5
        if channel_energy > 1e-4 * len(left):
            kept = float(np.dot(mean, mean)) / channel_energy
            if kept < CANCELLED_SHARE:
                self._decide(True)
            elif kept > RESTORED_SHARE or self.inverted is None:
                self._decide(False)
        if self.inverted is None:
            self._pending.append((mean, difference))
            self._pending_samples += len(mean)
            if self._pending_samples > UNDECIDED_SECONDS * self.sample_rate:
                self._decide(False)
            return
        self._emit(mean, difference)

    def finish(self) -> None:
        if self._pending:
            self._decide(False)

    def _decide(self, inverted: bool) -> None:
        self.inverted = inverted
        pending, self._pending, self._pending_samples = self._pending, [], 0
        for mean, difference in pending:
            self._emit(mean, difference)

    def _emit(self, mean: np.ndarray, difference: np.ndarray) -> None:
        if self.inverted:
            self.samples.append(difference)
            self.inverted_seconds += len(difference) / self.sample_rate
        else:
            self.samples.append(mean)


def _wav_header_problem(path: Path) -> str | None:
    """What cannot be right in a WAV file's format chunk (channels, bits a sample); None when it is plausible or
    the file is no WAV. FFmpeg does not say: it reads 3-bit samples as 8-bit ones, and any channel count it
    cannot lay out as none."""
    import struct

    try:
        with path.open("rb") as stream:
            head = stream.read(65536)
    except OSError:
        return None
    if len(head) < 12 or head[:4] not in (b"RIFF", b"RF64") or head[8:12] != b"WAVE":
        return None
    position = 12
    while position + 8 <= len(head):
        chunk, size = head[position : position + 4], struct.unpack_from("<I", head, position + 4)[0]
        if chunk == b"fmt " and position + 24 <= len(head):
            tag, channels, _, _, _, bits = struct.unpack_from("<HHIIHH", head, position + 8)
            if tag == 0xFFFE and size >= 40 and position + 34 <= len(head):  # WAVE_FORMAT_EXTENSIBLE
                tag = struct.unpack_from("<H", head, position + 32)[0]  # the sub-format's first two bytes
            if channels == 0:
                return "the header says it has 0 channels"
            if channels > MAX_CHANNELS:
                return f"the header says it has {channels} channels; recordings have 1 to {MAX_CHANNELS}"
            if tag in (1, 3) and not 8 <= bits <= 64:  # PCM and IEEE float
                return f"the header gives {bits}-bit samples; PCM audio has 8, 16, 24 or 32 bits a sample"
            return None
        position += 8 + size + (size & 1)  # chunks are padded to an even size
    return None


def _expected_samples(stream: object, container: object, sample_rate: int) -> int:
    """The decoded length the header promises, capped at an hour: a header can lie, and the array grows anyway."""
    duration = _header_duration(stream, container)
    if duration is None or duration <= 0:
        return 60 * sample_rate
    return int(min(duration, 3600.0) * sample_rate) + sample_rate


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


def _header_duration(stream: object, container: object) -> float | None:
    duration = getattr(stream, "duration", None)
    time_base = getattr(stream, "time_base", None)
    if duration is not None and time_base is not None:
        return float(duration * time_base)
    container_duration = getattr(container, "duration", None)
    if container_duration is not None:
        return float(container_duration) / 1_000_000  # AV_TIME_BASE
    return None


def probe_duration(path: Path | str) -> float | None:
    """Duration in seconds from the container header (no decoding); None when the file does not say."""
    import av

    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            if not container.streams.audio:
                return None
            return _header_duration(container.streams.audio[0], container)
    except (av.FFmpegError, OSError, ValueError):
        return None


def media_seconds(path: Path) -> float:
    """The duration of a media file without decoding it; raises a MediaError naming the file otherwise."""
    import av

    from app.core.engine.audio import probe_duration
    from app.core.errors import (
        EmptyMediaFileError,
        MediaFileMissingError,
        NoAudioStreamError,
        NotAMediaFileError,
        ZeroLengthAudioError,
    )

    if not path.exists():
        raise MediaFileMissingError(path)
    if path.is_dir():
        raise NotAMediaFileError(path, "it is a folder")
    if path.stat().st_size == 0:
        raise EmptyMediaFileError(path)
    seconds = probe_duration(path)
    if seconds is not None and seconds > 0:
        return seconds
    # The header gave no duration (or the file is not media at all): walk the packets, which costs a read of
    # the file but no decoding, and tells a real but header-less stream from something that is not audio.
    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            if not container.streams.audio:
                raise NoAudioStreamError(path)
            stream = container.streams.audio[0]
            total = 0.0
            for packet in container.demux(stream):
                if packet.duration is not None and packet.time_base is not None:
                    total += float(packet.duration * packet.time_base)
    except av.FFmpegError as error:
        raise NotAMediaFileError(path, str(getattr(error, "strerror", None) or error).strip()) from error
    if total <= 0:
        raise ZeroLengthAudioError(path)
    return total
