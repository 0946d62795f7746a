"""How loud a recording's speech is, and the gain that brings a quiet one up to where the networks hear it.

Silero VAD (faster-whisper's ``vad_filter``) and segmentation-3.0 both depend on the recording level:
- Silero has no input normalisation. On mfa_en_spontaneous_b (real-speech/, loud speech at -24 dBFS) it found
  24.3 s of speech in 25.7 s; at -3 dB 14.2 s, at -6 dB 6.8 s, at -10 dB 0.9 s. Plain faster-whisper with the
  VAD then transcribed nothing of it (WER 1.000 at a fifth of its level), and at half its level WER 0.810.
- segmentation-3.0 normalises each 10 s chunk with an epsilon (1e-5) that is as large as the whole variance
  of a chunk at -50 dBFS: a quiet recording is heard muffled (the AMI clips at a twentieth of their level:
  mean DER 0.261 instead of 0.242).
Whisper's own features are a log spectrogram whose level is not normalised away either.

So a recording whose loud speech is quieter than ``SPEECH_LEVEL_DB`` is raised to it before any network
hears it; a louder one is left exactly as it is (Scriba's text then equals plain faster-whisper's).
"""

from __future__ import annotations

from collections import deque

import numpy as np

# Loud speech (the 95th percentile of 100 ms RMS) at -20 dBFS: a normally recorded voice; podcasts sit above it,
# meeting rooms and laptop microphones well below (the AMI clips: -21 to -37 dBFS).
SPEECH_LEVEL_DB = -20.0
# The loudest 100 ms of the raised recording stays under this: a file that is mostly silence (its 95th
# percentile is room noise) is not raised until its speech is far louder than any real recording.
CEILING_DB = -3.0
FRAME_S = 0.1


def loudness_db(samples: np.ndarray, sample_rate: int, block: int = 1 << 20) -> tuple[float, float] | None:
    """(loud speech, loudest 100 ms) in dBFS: the 95th percentile and the maximum of the RMS of 100 ms frames.

    None for a recording shorter than one frame or digitally silent. Computed a block of samples at a time,
    so a three-hour recording needs no second copy of itself."""
    frame = max(1, int(sample_rate * FRAME_S))
    n = len(samples) // frame
    if n == 0:
        return None
    energies = np.empty(n)
    per_block = max(1, block // frame)
    for first in range(0, n, per_block):
        last = min(n, first + per_block)
        piece = samples[first * frame : last * frame].reshape(last - first, frame)
        energies[first:last] = np.mean(np.square(piece, dtype=np.float64), axis=1)
    loud, loudest = np.percentile(energies, 95), energies.max()
    if loud <= 0.0:
        return None
    return 10 * float(np.log10(loud)), 10 * float(np.log10(loudest))


def speech_gain(samples: np.ndarray, sample_rate: int, level_db: float = SPEECH_LEVEL_DB) -> float:
    """The factor that raises a quiet recording's loud speech to ``level_db`` (never below 1: loud recordings
    are left alone), limited so that its loudest 100 ms stay under ``CEILING_DB``."""
    measured = loudness_db(samples, sample_rate)
    return 1.0 if measured is None else gain_for(*measured, level_db=level_db)


def gain_for(loud_db: float, loudest_db: float, level_db: float = SPEECH_LEVEL_DB) -> float:
    """The rule itself, shared by a file (:func:`speech_gain`) and a live stream (:class:`RunningGain`)."""
    raise_db = min(level_db - loud_db, CEILING_DB - loudest_db)
    return float(10 ** (raise_db / 20)) if raise_db > 0 else 1.0


class RunningGain:
    """The same rule for a live stream (dictation), on the last ``history_s`` of audio.

    A file is measured whole; a microphone is heard as it comes, and in a silent room the 95th percentile of
    what came is the room's noise: raising that to speech level invites Whisper's "Thank you." on noise. So the
    gain follows the rule only while something in the history stands ``speech_above_noise_db`` over the noise
    floor (its 10th percentile; stationary noise varies by a few dB from one 100 ms frame to the next, speech by
    20-40 dB), once ``min_history_s`` has come (the first onset alone would set it), and only where the owner
    allows it (dictation: not inside an utterance, whose words would otherwise be heard at two levels). Until
    then, and when the stream falls silent again, the last gain stays."""

    def __init__(
        self,
        sample_rate: int,
        history_s: float = 30.0,
        speech_above_noise_db: float = 10.0,
        min_history_s: float = 2.0,
    ) -> None:
        self.frame = max(1, int(sample_rate * FRAME_S))
        self.gain = 1.0
        self._energies: deque[float] = deque(maxlen=max(1, round(history_s / FRAME_S)))
        self._partial = np.zeros(0, dtype=np.float64)
        self._standing_out = 10 ** (speech_above_noise_db / 10)  # as a ratio of energies
        self._min_frames = round(min_history_s / FRAME_S)

    def apply(self, samples: np.ndarray, adapt: bool = True) -> np.ndarray:
        """``samples`` times the gain judged on the audio up to and including them (or the gain as it was,
        when not ``adapt``: the history still takes them in)."""
        joined = np.concatenate([self._partial, np.asarray(samples, dtype=np.float64).reshape(-1)])
        whole = len(joined) // self.frame * self.frame
        if whole:
            frames = joined[:whole].reshape(-1, self.frame)
            self._energies.extend(np.mean(np.square(frames), axis=1).tolist())
            if adapt and len(self._energies) >= self._min_frames:
                self._judge()
        self._partial = joined[whole:]
        if self.gain == 1.0:
            return samples
        return np.asarray(samples, dtype=np.float32) * np.float32(self.gain)  # float32 times float32: one copy

    def _judge(self) -> None:
        energies = np.asarray(self._energies)
        floor, loud, loudest = np.percentile(energies, 10), np.percentile(energies, 95), energies.max()
        if loud <= 0.0 or loud < floor * self._standing_out:
            return
        self.gain = gain_for(10 * float(np.log10(loud)), 10 * float(np.log10(loudest)))
