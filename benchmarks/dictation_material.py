"""Conversations for the dictation benchmark, each with its true utterance times and the words spoken.

No figure may hold for one recording only, so there are three of unlike kinds:
- ``espeak-3-voices``: three espeak-ng voices taking turns with the ordinary 0.6 s pause (the first one built);
- ``espeak-other-voices``: other voices, other speeds and other sentences, pauses from 0.3 s (shorter than
  the end of an utterance: two turns run together) to 1.5 s;
- ``real-readings``: every single-speaker real recording with a human transcript (../shared/real-speech), cut
  at its own pauses of 0.3 s or more and put back together with those pauses changed to 0.3-1.5 s (the room
  noise of each pause is stretched or cut, not replaced by digital silence).
All are cached in benchmarks/out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
RATE = 16_000
# The pauses between turns of the two varied conversations, cycled: shorter and longer than end_silence_s.
VARIED_PAUSES = (0.3, 0.9, 1.5, 0.5, 1.1, 0.4, 0.7, 1.3)
OTHER_VOICES = (("en-us+f3", 60, 150), ("en-gb+m2", 35, 185), ("en-us+m1", 50, 175), ("en+f5", 75, 160))
OTHER_SENTENCES = (
    "Could you read the last paragraph of the interview again?",
    "The second speaker mentions a grant that ended in March.",
    "Right, and she says the survey had almost four hundred answers.",
    "Let me check the recording, the battery died halfway through.",
    "We still have the backup from the phone on the table.",
    "Then we should compare both before we quote anyone.",
    "Agreed. Who is writing the methods section this week?",
    "I can do it, but I need the consent forms scanned first.",
    "They are in the blue folder next to the printer.",
    "Thanks. Let us meet again on Thursday at ten.",
    "Before that, somebody has to rename the files properly.",
    "I will do that tonight and send a short list of changes.",
)


@dataclass(frozen=True)
class Sentence:
    start: float
    end: float
    text: str


@dataclass(frozen=True)
class Conversation:
    name: str
    path: Path
    sentences: list[Sentence]  # true times; ``text`` is the words spoken ("" where only the whole is known)
    reference: str  # every word spoken, in order
    about: str


def _cached(name: str) -> tuple[Path, Path]:
    OUT.mkdir(parents=True, exist_ok=True)
    return OUT / f"dictation_{name}.wav", OUT / f"dictation_{name}.json"


def _load(name: str, about: str) -> Conversation | None:
    wav, meta = _cached(name)
    if not (wav.exists() and meta.exists()):
        return None
    data = json.loads(meta.read_text())
    return Conversation(name, wav, [Sentence(**row) for row in data["sentences"]], data["reference"], about)


def _save(name: str, samples: np.ndarray, sentences: list[Sentence], reference: str, about: str) -> Conversation:
    from tests import synth

    wav, meta = _cached(name)
    synth.write_wav(wav, samples)
    meta.write_text(json.dumps({"sentences": [s.__dict__ for s in sentences], "reference": reference}))
    return Conversation(name, wav, sentences, reference, about)


def espeak_other_voices() -> Conversation:
    about = "4 espeak-ng voices unlike the first three, speeds 150-185, other sentences, pauses 0.3-1.5 s"
    name = "espeak-other-voices"
    if (cached := _load(name, about)) is not None:
        return cached
    from tests import synth

    pieces, sentences, clock = [np.zeros(RATE // 2, dtype=np.float32)], [], 0.5
    for index in range(2 * len(OTHER_SENTENCES)):  # twice round, each sentence in another voice the second time
        text = OTHER_SENTENCES[index % len(OTHER_SENTENCES)]
        voice, pitch, speed = OTHER_VOICES[(index * 3 + index // len(OTHER_SENTENCES)) % len(OTHER_VOICES)]
        samples = synth.speak(text, voice, pitch, speed) * 0.8
        pause = VARIED_PAUSES[index % len(VARIED_PAUSES)]
        sentences.append(Sentence(clock, clock + len(samples) / RATE, text))
        pieces += [samples, np.zeros(int(pause * RATE), dtype=np.float32)]
        clock += len(samples) / RATE + pause
    reference = " ".join(s.text for s in sentences)
    return _save(name, np.concatenate(pieces), sentences, reference, about)


def _stretches(samples: np.ndarray) -> list[tuple[int, int]]:
    """Speech stretches (sample bounds) separated by pauses of 0.3 s or more, by Silero VAD."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    chunks = get_speech_timestamps(samples, VadOptions(min_silence_duration_ms=300, speech_pad_ms=0))
    return [(chunk["start"], chunk["end"]) for chunk in chunks]


def real_readings() -> Conversation | None:
    """None without ../shared/real-speech."""
    from tests import metrics

    folder = metrics.real_speech_dir()
    if folder is None:
        return None
    references = sorted(folder.glob("*.ref.txt"))
    names = [reference.name.removesuffix(".ref.txt") for reference in references]
    about = f"{len(names)} real readers ({', '.join(names)}), cut at their pauses, pauses set to 0.3-1.5 s"
    name = "real-readings"
    if (cached := _load(name, about)) is not None:
        return cached
    from app.core.engine.audio import decode_audio

    pieces, sentences, clock, turn = [np.zeros(RATE // 2, dtype=np.float32)], [], 0.5, 0
    for reference in references:
        samples = decode_audio(reference.with_name(reference.name.removesuffix(".ref.txt") + ".wav")).samples
        bounds = _stretches(samples)
        for index, (start, end) in enumerate(bounds):
            speech = samples[start:end]
            gap_end = bounds[index + 1][0] if index + 1 < len(bounds) else min(len(samples), end + RATE)
            room = samples[end:gap_end]
            pause = VARIED_PAUSES[turn % len(VARIED_PAUSES)]
            # The room's own noise fills the new pause (tiled when the pause grows, cut when it shrinks).
            filler = np.resize(room, int(pause * RATE)) if room.size else np.zeros(int(pause * RATE), np.float32)
            sentences.append(Sentence(clock, clock + len(speech) / RATE, ""))
            pieces += [speech, filler.astype(np.float32)]
            clock += len(speech) / RATE + pause
            turn += 1
    text = " ".join(" ".join(reference.read_text().split()) for reference in references)
    return _save(name, np.concatenate(pieces), sentences, text, about)


def conversations(espeak_three: tuple[Path, list[Sentence]]) -> list[Conversation]:
    """The three conversations (two without the real recordings); ``espeak_three`` is bench_dictation's."""
    path, sentences = espeak_three
    found = [
        Conversation(
            "espeak-3-voices",
            path,
            sentences,
            " ".join(s.text for s in sentences),
            "3 espeak-ng voices taking turns, 0.6 s pauses",
        ),
        espeak_other_voices(),
    ]
    real = real_readings()
    if real is not None:
        found.append(real)
    return found
