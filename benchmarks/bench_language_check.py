"""Language check benchmark: false alarms on real English speech, detections on speech in other languages.

    .venv/bin/python benchmarks/bench_language_check.py [--voices de,de+m3,...]

Prints one row per recording and the totals, asserts nothing. English: every recording in
../shared/real-speech (SCRIBA_REAL_SPEECH) and pyannote's sample.wav, none of which may be flagged. Other
languages: espeak-ng speaking tests/synth.py's OTHER_LANGUAGES in three voices each (no real non-English
recording is on the machines this was measured on). The judge is the bundled English-only tiny.en's own
confidence (app.core.engine.language_check.english_model_verdict), the check a job runs when no multilingual
model is on disk.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from app.core.engine.audio import decode_audio  # noqa: E402
from app.core.engine.language_check import NOT_ENGLISH_SCORE, english_model_verdict, first_speech  # noqa: E402
from app.core.engine.models import bundled_model_path  # noqa: E402
from tests import metrics  # noqa: E402
from tests.synth import OTHER_LANGUAGES, other_language_speech  # noqa: E402


def english_recordings() -> list[Path]:
    folder = metrics.real_speech_dir()
    found = sorted(folder.glob("*.wav")) if folder else []
    import pyannote.audio

    return [*found, Path(pyannote.audio.__file__).parent / "sample" / "sample.wav"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_voices = ",".join(f"{lang}{variant}" for lang in OTHER_LANGUAGES for variant in ("", "+m3", "+f2"))
    parser.add_argument("--voices", default=default_voices, help="espeak-ng voices, language first")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    from faster_whisper import WhisperModel

    model = WhisperModel(str(bundled_model_path()), device="cpu", compute_type="int8", cpu_threads=args.threads)
    print(f"tiny.en confidence check; flagged when score >= {NOT_ENGLISH_SCORE}")
    print(f"{'recording':30} {'truth':5} {'score':>5} {'flag':4} {'time':>5}  evidence")
    false_alarms = english = detected = other = 0
    rows: list[tuple[str, str, np.ndarray]] = [
        (path.stem, "en", decode_audio(path).samples) for path in english_recordings()
    ]
    for voice in args.voices.split(","):
        rows.append((f"espeak {voice}", voice.split("+")[0], other_language_speech(voice.split("+")[0], voice)))
    scores: dict[str, list[float]] = {"en": [], "other": []}
    for name, truth, samples in rows:
        started = time.perf_counter()
        verdict = english_model_verdict(model, first_speech(samples)[0])
        took = time.perf_counter() - started
        print(
            f"{name[:30]:30} {truth:5} {verdict.probability:5.2f} {'YES' if verdict.not_english else 'no':4} "
            f"{took:4.1f}s  {verdict.evidence}",
            flush=True,
        )
        if truth == "en":
            english += 1
            false_alarms += verdict.not_english
            scores["en"].append(verdict.probability)
        else:
            other += 1
            detected += verdict.not_english
            scores["other"].append(verdict.probability)
    print(
        f"\nEnglish recordings flagged (false alarms): {false_alarms} of {english}; "
        f"highest score {max(scores['en']):.2f}"
    )
    if other:
        print(f"other-language recordings flagged: {detected} of {other}; lowest score {min(scores['other']):.2f}")


if __name__ == "__main__":
    main()
