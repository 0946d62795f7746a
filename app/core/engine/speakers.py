"""Known speakers: a local library of voiceprints, and naming the diarized speakers it recognises.

A voiceprint is the mean CAM++ embedding (:class:`app.core.engine.diarize.encoder.SpeakerEncoder`, the built-in
diarizer's network) of ~1.5 s windows taken inside a speaker's turns. Enrollment and identification compute it the
same way, whatever diarizer found the turns, so a voice enrolled from one recording is compared in the same space
in every other one.

The library is one JSON file in Scriba's data folder. It holds vectors, and where in which recording each was
made (so that another encoder can make it again), but no audio, and never leaves the machine.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.core.engine.diarize.encoder import DIMENSION, ENCODER_NAME, ENCODER_VERSION
from app.core.errors import ScribaError
from app.core.transcript.document import Identification, SpeakerIdentity, Transcript

if TYPE_CHECKING:
    from app.core.engine.audio import Audio
    from app.core.engine.diarize.encoder import SpeakerEncoder

LIBRARY_FILE = "speakers.json"
# Format 2 names the encoder its voiceprints were made by; format 1 held GE2E voiceprints (256 numbers) only.
LIBRARY_VERSION = 2
VOICEPRINT_SIZE = DIMENSION
CURRENT_ENCODER = {"name": ENCODER_NAME, "version": ENCODER_VERSION}
GE2E_ENCODER = {"name": "ge2e", "version": 1}

# Voiceprint windows: as long as the built-in diarizer's, because turns in conversation are short; a turn (minus
# other speakers' speech) shorter than one window is not used.
WINDOW_S = 1.5
STEP_S = 0.5
# Turns of one speaker this close together, with nobody else speaking between them, are one stretch of
# speech (diarizers and word-level references cut at every pause).
BRIDGE_S = 0.5
# One sample needs at least one whole window of solo speech, the least a voiceprint can be computed from.
# Repeating enrollment adds samples: the centroid of several seconds is what recognises a voice reliably
# (the CLI and the window say so below RECOMMENDED_SPEECH_S).
MIN_ENROLL_SPEECH_S = WINDOW_S
RECOMMENDED_SPEECH_S = 5.0
# Cosine similarity from which a diarized speaker takes an enrolled name, measured with
# benchmarks/speaker_similarity.py (CAM++ voiceprints of every speaker of the real recordings, every pair across two
# recordings): different people reach at most 0.716 from reference turns (0.696 from the built-in diarizer's), the
# same person in another AMI meeting 0.825-0.889, with a cold in another room 0.800. The threshold sits in the
# middle of that gap: a wrong name is worse than none, and a margin is kept on both sides. (Two espeak-ng voices,
# one synthesiser, reach 0.82: synthetic voices are not told apart by name.)
MATCH_THRESHOLD = 0.77

_GENERIC_NAME = re.compile(r"^SPEAKER_\d+$")


class SpeakerLibraryError(ScribaError):
    """The speaker library cannot do what was asked (unknown name, too little speech, damaged file)."""


@dataclass(frozen=True)
class Voiceprint:
    vector: np.ndarray  # unit vector, one float per dimension of the encoder
    seconds: float  # speech the windows covered
    spans: tuple[tuple[float, float], ...] = ()  # where in the recording (seconds): to make it again later


@dataclass(frozen=True)
class Sample:
    vector: tuple[float, ...]
    seconds: float
    source: str
    added: str
    recording: str = ""  # the recording's path, with the spans of it the voiceprint was made from
    spans: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class KnownSpeaker:
    name: str
    samples: tuple[Sample, ...]

    @property
    def seconds(self) -> float:
        return sum(sample.seconds for sample in self.samples)

    def centroid(self) -> np.ndarray:
        # Weighted by speech duration: a long enrollment says more about the voice than a short one.
        total = np.sum([np.asarray(s.vector) * s.seconds for s in self.samples], axis=0)
        return _unit(np.asarray(total, dtype=np.float32))


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


# --- voiceprints ---------------------------------------------------------------------------------------


def _merge_spans(spans: Iterable[tuple[float, float]], gap: float = 0.0) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if end <= start:
            continue
        if merged and start - merged[-1][1] <= gap:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _subtract(spans: list[tuple[float, float]], cuts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    result: list[tuple[float, float]] = []
    for start, end in spans:
        pieces = [(start, end)]
        for cut_start, cut_end in cuts:
            if cut_end <= start or cut_start >= end:
                continue
            next_pieces = []
            for a, b in pieces:
                if cut_start > a:
                    next_pieces.append((a, min(b, cut_start)))
                if cut_end < b:
                    next_pieces.append((max(a, cut_end), b))
            pieces = [(a, b) for a, b in next_pieces if b > a]
        result.extend(pieces)
    return result


def solo_spans(turns: Sequence[tuple[float, float, str]], speaker: str) -> list[tuple[float, float]]:
    """Where ``speaker`` speaks and nobody else does: their turns, bridged over short pauses that no one
    else fills, minus every other speaker's turns (overlapped speech would mix two voices)."""
    others = _merge_spans((start, end) for start, end, who in turns if who != speaker)
    own = _merge_spans((start, end) for start, end, who in turns if who == speaker)
    bridged: list[tuple[float, float]] = []
    for start, end in own:
        if bridged and start - bridged[-1][1] <= BRIDGE_S:
            gap = (bridged[-1][1], start)
            if not any(o_start < gap[1] and o_end > gap[0] for o_start, o_end in others):
                bridged[-1] = (bridged[-1][0], end)
                continue
        bridged.append((start, end))
    return _subtract(bridged, others)


def voiceprint(
    encoder: SpeakerEncoder,
    samples: np.ndarray,
    spans: Sequence[tuple[float, float]],
    window_s: float = WINDOW_S,
    step_s: float = STEP_S,
) -> Voiceprint | None:
    """The mean embedding of windows inside ``spans`` (seconds) of ``samples`` (16 kHz); None when no span
    holds one window."""
    from app.core.engine.diarize.encoder import HOP_SAMPLES, SAMPLE_RATE

    frame_s = HOP_SAMPLES / SAMPLE_RATE
    window = round(window_s / frame_s)
    step = max(1, round(step_s / frame_s))
    total = len(samples) // HOP_SAMPLES
    starts: list[int] = []
    used: list[tuple[float, float]] = []
    for start_s, end_s in spans:
        first = max(0, round(start_s / frame_s))
        last = min(total, round(end_s / frame_s))
        if last - first < window:
            continue
        positions = list(range(first, last - window + 1, step))
        if positions[-1] != last - window:
            positions.append(last - window)  # the end of the span counts as much as its start
        starts.extend(positions)
        used.append((first * frame_s, last * frame_s))
    if not starts:
        return None
    embeddings = encoder.embed(samples, np.asarray(starts, dtype=np.int64), window)
    return Voiceprint(_unit(embeddings.mean(axis=0)), sum(b - a for a, b in used), tuple(used))


def speaker_voiceprints(
    encoder: SpeakerEncoder, audio: Audio, turns: Sequence[tuple[float, float, str]]
) -> dict[str, Voiceprint | None]:
    """One voiceprint per speaker in ``turns`` (start, end, speaker), from their solo speech."""
    speakers = list(dict.fromkeys(who for _, _, who in turns))
    return {who: voiceprint(encoder, audio.samples, solo_spans(turns, who)) for who in speakers}


def speech_spans(audio: Audio, start: float = 0.0, end: float | None = None) -> list[tuple[float, float]]:
    """Speech inside [start, end] by Silero VAD (shipped with faster-whisper): enrollment embeds speech,
    not the silences of the stretch the user picked."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    rate = audio.sample_rate
    start = max(0.0, start)  # a stretch that begins before the recording begins at its start
    first = int(start * rate)
    last = len(audio.samples) if end is None else min(len(audio.samples), int(end * rate))
    if last <= first:
        return []
    # Pauses under half a second stay inside the speech: they are part of one person's talking.
    vad = VadOptions(threshold=0.5, min_silence_duration_ms=500, speech_pad_ms=100, min_speech_duration_ms=250)
    chunks = get_speech_timestamps(audio.samples[first:last], vad)
    return [(start + chunk["start"] / rate, start + chunk["end"] / rate) for chunk in chunks]


# --- identification -----------------------------------------------------------------------------------


def identify(
    prints: dict[str, Voiceprint | None],
    library: Sequence[KnownSpeaker],
    threshold: float = MATCH_THRESHOLD,
) -> dict[str, SpeakerIdentity]:
    """Name diarized speakers from the library: the one-to-one assignment that maximises total similarity
    (two diarized speakers never share a name), kept only where the similarity reaches ``threshold``."""
    labels = list(prints)
    usable = [label for label in labels if prints[label] is not None]
    result: dict[str, SpeakerIdentity] = {}
    for label in labels:
        voice = prints[label]
        result[label] = SpeakerIdentity(label, label, None, None, None, voice.seconds if voice else 0.0)
    if not usable or not library:
        return result
    centroids = np.stack([known.centroid() for known in library])
    similarity = np.stack([centroids @ prints[label].vector for label in usable])  # type: ignore[union-attr]
    from scipy.optimize import linear_sum_assignment

    rows, columns = linear_sum_assignment(similarity, maximize=True)
    assigned = dict(zip(rows.tolist(), columns.tolist(), strict=True))
    for row, label in enumerate(usable):
        voice = prints[label]
        assert voice is not None
        column = assigned.get(row)
        if column is not None and similarity[row, column] >= threshold:
            name: str | None = library[column].name
            best = column
        else:
            name = None
            best = int(similarity[row].argmax())
        result[label] = SpeakerIdentity(
            speaker=name or label,
            diarized=label,
            name=name,
            similarity=float(similarity[row, best]),
            closest=library[best].name,
            speech_seconds=voice.seconds,
        )
    return result


# --- the library file ---------------------------------------------------------------------------------


def check_name(name: str) -> str:
    cleaned = " ".join(name.split())
    if not cleaned:
        raise SpeakerLibraryError("A speaker's name cannot be empty.")
    if _GENERIC_NAME.match(cleaned):
        raise SpeakerLibraryError(
            f"'{cleaned}' is the form of the labels the diarizer gives unknown speakers; choose a real name."
        )
    return cleaned


@dataclass
class SpeakerLibrary:
    """The enrolled voices, in ``directory / speakers.json``. Every change is written at once (atomically).

    Voiceprints made by another encoder than :class:`SpeakerEncoder` (GE2E, in library format 1) cannot be
    compared with a voice; they are kept as read, under their names, until :func:`reenroll_earlier` makes them
    again from the recordings they came from, or the user enrolls that person once more."""

    directory: Path
    speakers: dict[str, KnownSpeaker] = field(default_factory=dict)
    # What loading set aside, one sentence each (which voiceprint, what is wrong with it, what to do).
    problems: list[str] = field(default_factory=list)
    # The samples set aside, as read: written back unchanged (never dropped unasked), by speaker name.
    _set_aside: dict[str, list[object]] = field(default_factory=dict, repr=False)
    # Samples of an earlier encoder, as read (each with an "encoder" entry), by speaker name.
    _earlier: dict[str, list[dict[str, object]]] = field(default_factory=dict, repr=False)
    # Why :func:`reenroll_earlier` could not make a name's voiceprints again, by name.
    _remake_failed: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def path(self) -> Path:
        return Path(self.directory) / LIBRARY_FILE

    @classmethod
    def load(cls, directory: Path) -> SpeakerLibrary:
        """The library in ``directory``. A voiceprint that cannot be compared (wrong length, NaN) is set aside,
        named in :attr:`problems` and kept in the file as it is; one of an earlier encoder is kept to be made
        again (:meth:`waiting`); the file as a whole refused only when it cannot be read at all."""
        library = cls(Path(directory))
        try:
            data = json.loads(library.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return library
        except (OSError, ValueError) as error:
            raise SpeakerLibraryError(
                f"The speaker library {library.path} cannot be read ({error}). Move it away to start a new one."
            ) from None
        version = data.get("version") if isinstance(data, dict) else None
        if isinstance(version, int) and not isinstance(version, bool) and version > LIBRARY_VERSION:
            raise SpeakerLibraryError(
                f"The speaker library {library.path} was written by a newer version of Scriba (library format "
                f"{version}; this version reads format {LIBRARY_VERSION}). It is left untouched: update Scriba to "
                "use it."
            )
        try:
            if version == 1:
                encoder: object = dict(GE2E_ENCODER)  # format 1 held GE2E voiceprints only
            elif version == LIBRARY_VERSION:
                encoder = data["encoder"]
            else:
                raise ValueError(f"version {version!r}")
            current = encoder == CURRENT_ENCODER
            for name, entry in data["speakers"].items():
                for raw in entry.get("earlier", []):
                    library._earlier.setdefault(name, []).append(dict(raw))
                if not current:
                    for raw in entry["samples"]:
                        library._earlier.setdefault(name, []).append({**raw, "encoder": encoder})
                    continue
                library._read_samples(name, entry["samples"])
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            raise SpeakerLibraryError(
                f"The speaker library {library.path} is damaged ({error}). Move it away to start a new one."
            ) from None
        return library

    def _read_samples(self, name: str, raws: list[object]) -> None:
        samples: list[Sample] = []
        for number, raw in enumerate(raws, start=1):
            sample, problem = _read_sample(raw)
            if sample is not None:
                samples.append(sample)
                continue
            self._set_aside.setdefault(name, []).append(raw)
            self.problems.append(
                f"the voiceprint of '{name}' (sample {number} of {len(raws)}) in {self.path} was set aside: "
                f"{problem}. Forget '{name}' and enroll that voice again."
            )
        if samples:
            self.speakers[name] = KnownSpeaker(name, tuple(samples))

    def save(self) -> None:
        from app.core.files import write_atomic

        names = dict.fromkeys([*self.speakers, *self._set_aside, *self._earlier])
        speakers: dict[str, dict[str, object]] = {}
        for name in names:
            speakers[name] = {"samples": self._stored_samples(name)}
            if name in self._earlier:
                speakers[name]["earlier"] = self._earlier[name]
        data = {"version": LIBRARY_VERSION, "encoder": CURRENT_ENCODER, "speakers": speakers}
        write_atomic(self.path, json.dumps(data, ensure_ascii=False), private=True)  # voiceprints: personal data

    def _stored_samples(self, name: str) -> list[object]:
        known = self.speakers.get(name)
        stored: list[object] = []
        for sample in known.samples if known else ():
            entry: dict[str, object] = {
                "vector": [round(x, 6) for x in sample.vector],
                "seconds": round(sample.seconds, 2),
                "source": sample.source,
                "added": sample.added,
            }
            if sample.recording:
                entry["recording"] = sample.recording
                entry["spans"] = [[round(a, 2), round(b, 2)] for a, b in sample.spans]
            stored.append(entry)
        return [*stored, *self._set_aside.get(name, ())]

    def known(self) -> list[KnownSpeaker]:
        return sorted(self.speakers.values(), key=lambda known: known.name.casefold())

    def waiting(self) -> dict[str, str]:
        """The names whose only voiceprints were made by an earlier encoder, each with why they cannot be named
        and what to do (damaged voiceprints are in :attr:`problems`)."""
        result: dict[str, str] = {}
        for name in sorted(set(self._earlier) - set(self.speakers), key=str.casefold):
            reasons = [_why_not_remade(raw) for raw in self._earlier[name]]
            if name in self._remake_failed:
                reasons = [self._remake_failed[name]]
            elif not all(reasons):
                result[name] = (
                    "its voiceprints were made by an earlier voice encoder; they are made again from the recordings "
                    "they came from when the speaker library is next opened (`scriba speakers list`, or "
                    "Edit › Known speakers… in the window)"
                )
                continue
            result[name] = (
                f"its voiceprints were made by an earlier voice encoder and {'; '.join(dict.fromkeys(reasons))}. "
                f"Enroll one new sample of {name} to name that voice again"
            )
        return result

    def remakeable(self) -> list[tuple[str, dict[str, object]]]:
        """The earlier-encoder samples that can be made again now: not yet made, their recording still there."""
        return [
            (name, raw)
            for name, raws in self._earlier.items()
            for raw in raws
            if not raw.get("remade") and not _why_not_remade(raw)
        ]

    def get(self, name: str) -> KnownSpeaker:
        known = self.speakers.get(" ".join(name.split()))
        if known is None:
            listing = ", ".join(k.name for k in self.known()) or "none enrolled yet"
            raise SpeakerLibraryError(f"No speaker named '{name}' in the library (known: {listing}).")
        return known

    def add(self, name: str, print_: Voiceprint, source: str, recording: str = "", save: bool = True) -> KnownSpeaker:
        """Add one sample of a voice; a name enrolled before gets one more sample. ``recording`` (a path) with
        the print's spans lets a later encoder make the sample again."""
        name = check_name(name)
        if print_.seconds < MIN_ENROLL_SPEECH_S or not math.isfinite(float(print_.vector.sum())):
            raise SpeakerLibraryError(
                f"Too little speech to remember {name}: {print_.seconds:.1f} s found, at least "
                f"{MIN_ENROLL_SPEECH_S:g} s of that person speaking alone is needed."
            )
        sample = Sample(
            tuple(float(x) for x in print_.vector),
            print_.seconds,
            source,
            datetime.now(timezone.utc).isoformat(timespec="seconds"),
            recording,
            print_.spans if recording else (),
        )
        previous = self.speakers.get(name)
        known = KnownSpeaker(name, (*(previous.samples if previous else ()), sample))
        self.speakers[name] = known
        if save:
            self.save()
        return known

    def _names(self, name: str) -> list[dict[str, Any]]:
        """The stores of unusable samples (set aside, earlier encoder) that hold ``name``."""
        stores: tuple[dict[str, Any], ...] = (self._set_aside, self._earlier)
        return [kept for kept in stores if name in kept]

    def rename(self, old: str, new: str) -> None:
        known = self.get(old)
        new = check_name(new)
        if new == known.name:
            return
        if new in self.speakers:
            raise SpeakerLibraryError(f"'{new}' is already in the library; merge the two instead.")
        self.speakers = {
            (new if name == known.name else name): (KnownSpeaker(new, entry.samples) if name == known.name else entry)
            for name, entry in self.speakers.items()
        }
        for kept in self._names(known.name):
            kept[new] = kept.pop(known.name)
        self.save()

    def merge(self, names: Sequence[str], into: str) -> KnownSpeaker:
        """Several names that are one person become ``into`` (which may be one of them or a new name)."""
        sources = [self.get(name) for name in names]
        into = check_name(into)
        if into in self.speakers and into not in {known.name for known in sources}:
            sources.append(self.speakers[into])
        samples = tuple(sample for known in sources for sample in known.samples)
        for known in sources:
            self.speakers.pop(known.name, None)
            for kept in self._names(known.name):
                kept.setdefault(into, []).extend(kept.pop(known.name))
        merged = KnownSpeaker(into, samples)
        self.speakers[into] = merged
        self.save()
        return merged

    def forget(self, name: str) -> None:
        """Remove a voice, with any voiceprint of it set aside or made by an earlier encoder (a name that has only
        those included)."""
        cleaned = " ".join(name.split())
        if cleaned not in self.speakers and self._names(cleaned):
            for kept in self._names(cleaned):
                del kept[cleaned]
            self.save()
            return
        known = self.get(name)
        del self.speakers[known.name]
        for kept in self._names(known.name):
            del kept[known.name]
        self.save()


def _read_sample(raw: object) -> tuple[Sample | None, str]:
    """One stored sample, or None and what is wrong with it (a voiceprint that cannot be compared with a voice)."""
    if not isinstance(raw, dict):
        return None, "it is not a voiceprint entry"
    vector, seconds = raw.get("vector"), raw.get("seconds")
    if not isinstance(vector, list) or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in vector):
        return None, "its vector is not a list of numbers"
    if len(vector) != VOICEPRINT_SIZE:
        return None, f"its vector has {len(vector)} numbers, not {VOICEPRINT_SIZE}"
    if not all(math.isfinite(x) for x in vector):
        return None, "its vector holds numbers that are not finite (NaN or infinity)"
    if not any(vector):
        return None, "its vector is all zeros"
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or not 0 < seconds < math.inf:
        return None, f"its length of speech ({seconds!r}) is not a positive number of seconds"
    recording, spans = _recording_and_spans(raw)
    sample = Sample(
        tuple(float(x) for x in vector),
        float(seconds),
        str(raw.get("source", "")),
        str(raw.get("added", "")),
        recording if spans else "",
        spans,
    )
    return sample, ""


def _recording_and_spans(raw: dict[str, Any]) -> tuple[str, tuple[tuple[float, float], ...]]:
    """Where a stored sample's speech is: its recording and spans (seconds), or ("", ()) where it was not kept."""
    recording, spans = raw.get("recording"), raw.get("spans")
    try:
        if isinstance(recording, str) and recording and isinstance(spans, list) and spans:
            return recording, tuple((float(a), float(b)) for a, b in spans)
    except (TypeError, ValueError):
        pass
    return "", ()


# Where format 1 kept a sample's stretch: the source ``"<recording> [<start>-<end> s]"`` written by enroll().
_STRETCH_SOURCE = re.compile(r"^(?P<recording>.+) \[(?P<start>\d+(?:\.\d+)?)-(?P<end>\d+(?:\.\d+)?) s\]$")


def _earlier_speech(raw: dict[str, Any]) -> tuple[Path, tuple[float, float] | None, tuple[tuple[float, float], ...]]:
    """An earlier-encoder sample's recording, and either the stretch the user chose or the spans it was made from
    (Path("") where neither was kept)."""
    recording, spans = _recording_and_spans(raw)
    if spans:
        return Path(recording), None, spans
    stretch = _STRETCH_SOURCE.match(str(raw.get("source", "")))
    if stretch is None:
        return Path(""), None, ()
    return Path(stretch["recording"]), (float(stretch["start"]), float(stretch["end"])), ()


def _why_not_remade(raw: dict[str, Any]) -> str:
    """Why an earlier-encoder sample cannot be made again from its recording ("" when it can)."""
    if raw.get("remade"):
        return ""
    recording, stretch, spans = _earlier_speech(raw)
    if stretch is None and not spans:
        return f"it was made from {raw.get('source') or 'a transcript'}, whose turns were not kept"
    if not recording.is_file():
        return f"its recording {recording} is no longer there"
    return ""


@dataclass(frozen=True)
class Remade:
    """What :func:`reenroll_earlier` did: the names made again, and those still waiting for a new sample."""

    names: tuple[str, ...]
    waiting: dict[str, str]

    def messages(self) -> list[str]:
        """One sentence per change and per name still unnamed, for the CLI, the window and the job's notes."""
        lines = []
        if self.names:
            lines.append(
                f"{', '.join(self.names)}: voiceprints made again with the current voice encoder from the "
                "recordings they were enrolled from"
            )
        lines.extend(f"'{name}' cannot be named: {why}" for name, why in self.waiting.items())
        return lines


def reenroll_earlier(library: SpeakerLibrary, encoder: SpeakerEncoder) -> Remade:
    """Make each earlier-encoder voiceprint again from the recording it came from, where the library says which
    and that recording is still there (the same stretch, or the same spans); the earlier ones stay in the file,
    marked as made again. Saved once at the end when anything changed."""
    from app.core.engine.audio import decode_audio
    from app.core.errors import MediaError

    remade: list[str] = []
    decoded: dict[Path, Audio | None] = {}
    for name, raw in library.remakeable():
        recording, stretch, spans = _earlier_speech(raw)
        if recording not in decoded:
            try:
                decoded[recording] = decode_audio(recording)
            except (MediaError, OSError) as error:
                library._remake_failed.setdefault(name, f"its recording {recording} cannot be read ({error})")
                decoded[recording] = None
        audio = decoded[recording]
        if audio is None:
            continue
        if stretch is not None:
            spans = tuple(_merge_spans(speech_spans(audio, *stretch), gap=BRIDGE_S))
        print_ = voiceprint(encoder, audio.samples, spans)
        if print_ is None or print_.seconds < MIN_ENROLL_SPEECH_S:
            library._remake_failed.setdefault(name, f"its stretch of {recording} no longer holds enough speech")
            continue
        library.add(name, print_, str(raw.get("source", recording)), str(recording), save=False)
        raw["remade"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        remade.append(name)
    if remade:
        library.save()
    return Remade(tuple(dict.fromkeys(remade)), library.waiting())


def enroll(
    library: SpeakerLibrary,
    name: str,
    encoder: SpeakerEncoder,
    audio: Audio,
    start: float = 0.0,
    end: float | None = None,
) -> KnownSpeaker:
    """Remember ``name`` from a stretch of ``audio`` where that person speaks alone."""
    if end is not None and end <= start:
        raise SpeakerLibraryError(f"The stretch is empty: it ends ({end:g} s) before it starts ({start:g} s).")
    if start >= audio.duration:
        raise SpeakerLibraryError(f"{audio.source}: the stretch starts at {start:g} s, after the end of the audio.")
    # The person speaks alone here: pauses as short as those bridged between diarized turns stay inside.
    spans = _merge_spans(speech_spans(audio, start, end), gap=BRIDGE_S)
    print_ = voiceprint(encoder, audio.samples, spans)
    speech = sum(b - a for a, b in spans)
    if print_ is None:
        raise SpeakerLibraryError(
            f"Too little speech to remember {name}: {speech:.1f} s of speech found in the stretch, at least "
            f"{MIN_ENROLL_SPEECH_S:g} s of that person speaking alone is needed."
        )
    return library.add(name, print_, _describe(audio, start, end), str(audio.source))


def enroll_from_turns(
    library: SpeakerLibrary,
    name: str,
    encoder: SpeakerEncoder,
    audio: Audio,
    turns: Sequence[tuple[float, float, str]],
    speaker: str,
) -> KnownSpeaker:
    """Remember ``name`` from one diarized speaker's solo speech in a transcribed recording."""
    prints = speaker_voiceprints(encoder, audio, [turn for turn in turns])
    print_ = prints.get(speaker)
    if print_ is None:
        raise SpeakerLibraryError(
            f"Too little speech to remember {name}: {speaker} never speaks alone for {WINDOW_S:g} s at a time."
        )
    return library.add(name, print_, f"{audio.source} ({speaker})", str(audio.source))


def _describe(audio: Audio, start: float, end: float | None) -> str:
    stop = audio.duration if end is None else min(end, audio.duration)
    return f"{audio.source} [{start:.1f}-{stop:.1f} s]"


def identify_transcript(
    transcript: Transcript,
    audio: Audio,
    library: Sequence[KnownSpeaker],
    encoder: SpeakerEncoder,
    threshold: float = MATCH_THRESHOLD,
) -> Transcript:
    """Give the diarized speakers of ``transcript`` the enrolled names they match, in every segment, word
    and turn, and record each speaker's similarity. Unchanged when nothing was diarized or nobody is known."""
    if transcript.diarization is None or not library:
        return transcript
    turns = [(turn.start, turn.end, turn.speaker) for turn in transcript.diarization.turns]
    prints: dict[str, Voiceprint | None] = dict.fromkeys(transcript.speakers)
    prints.update(speaker_voiceprints(encoder, audio, turns))
    matches = identify(prints, library, threshold)
    for label, match in matches.items():
        if match.name is not None:
            transcript = transcript.rename_speaker(label, match.name)
    from dataclasses import replace

    return replace(transcript, identification=Identification(threshold, tuple(matches.values())))
