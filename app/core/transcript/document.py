"""The transcript model: what the engine produces and every exporter, the queue and the GUI consume.

``Transcript.to_dict()`` is the JSON contract (version 1) shared with the remote worker and benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

TRANSCRIPT_VERSION = 1
# Warnings that say the transcript misses part of the recording start with this (the queue and the window
# show such a job as "done — partial").
PARTIAL_PREFIX = "partial:"


@dataclass(frozen=True)
class Word:
    start: float
    end: float
    word: str  # as Whisper emits it, with its leading space
    probability: float
    speaker: str | None = None


@dataclass(frozen=True)
class Segment:
    start: float
    end: float
    text: str
    words: tuple[Word, ...] = ()
    speaker: str | None = None


@dataclass(frozen=True)
class SpeakerTurn:
    start: float
    end: float
    speaker: str


@dataclass(frozen=True)
class DiarizationInfo:
    backend: str
    reason: str
    # Who spoke when, as the diarizer found it (speakers named as in the transcript). Words inherit their
    # speakers from these turns; they are kept because word timestamps are coarser than the turns.
    turns: tuple[SpeakerTurn, ...] = ()


@dataclass(frozen=True)
class SpeakerIdentity:
    """How a diarized speaker was matched against the known-speaker library (see app.core.engine.speakers)."""

    speaker: str  # the label in the segments and words: the enrolled name when recognised
    diarized: str  # the diarizer's label (SPEAKER_00 …)
    name: str | None  # the enrolled name, None when no known voice was close enough
    similarity: float | None  # cosine similarity to ``closest`` (None: too little solo speech to compare)
    closest: str | None  # the nearest enrolled voice
    speech_seconds: float  # solo speech the voiceprint was computed from


@dataclass(frozen=True)
class Identification:
    threshold: float
    speakers: tuple[SpeakerIdentity, ...] = ()


@dataclass(frozen=True)
class Transcript:
    source: str
    duration: float
    language: str
    model: str
    device: str
    compute_type: str
    segments: tuple[Segment, ...]
    diarization: DiarizationInfo | None = None
    speakers: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    version: int = TRANSCRIPT_VERSION
    identification: Identification | None = None  # None: known-speaker matching did not run
    # What went wrong with the input without stopping the job, for the person reading the transcript: a file
    # that decoded only part-way ("partial: decoding stopped at 30.9 s of 91.0 s"). Empty: nothing to report.
    warnings: tuple[str, ...] = ()

    @property
    def partial(self) -> bool:
        """Whether the transcript covers less than the whole recording (see ``warnings``)."""
        return any(warning.startswith(PARTIAL_PREFIX) for warning in self.warnings)

    @property
    def text(self) -> str:
        return " ".join(segment.text.strip() for segment in self.segments if segment.text.strip())

    def shifted(self, offset: float) -> Transcript:
        """The same transcript ``offset`` seconds later: a stretch of a recording, in the recording's time."""
        if offset == 0:
            return self

        def later(item: Any) -> Any:
            return replace(item, start=item.start + offset, end=item.end + offset)

        segments = tuple(
            replace(later(segment), words=tuple(later(word) for word in segment.words)) for segment in self.segments
        )
        diarization = self.diarization
        if diarization is not None:
            diarization = replace(diarization, turns=tuple(later(turn) for turn in diarization.turns))
        return replace(self, segments=segments, diarization=diarization)

    def rename_speaker(self, old: str, new: str) -> Transcript:
        """One rename changes every segment, every word and the speaker list."""

        def swap(name: str | None) -> str | None:
            return new if name == old else name

        def renamed(segment: Segment) -> Segment:
            if segment.speaker != old and all(word.speaker != old for word in segment.words):
                return segment  # the same object: editors and savers pass over what an edit left alone
            words = tuple(word if word.speaker != old else replace(word, speaker=new) for word in segment.words)
            return replace(segment, speaker=swap(segment.speaker), words=words)

        segments = tuple(renamed(segment) for segment in self.segments)
        speakers = tuple(dict.fromkeys(new if name == old else name for name in self.speakers))
        diarization = self.diarization
        if diarization is not None:
            turns = tuple(replace(turn, speaker=swap(turn.speaker) or turn.speaker) for turn in diarization.turns)
            diarization = replace(diarization, turns=turns)
        identification = self.identification
        if identification is not None:
            identification = replace(
                identification,
                speakers=tuple(
                    replace(item, speaker=swap(item.speaker) or item.speaker) for item in identification.speakers
                ),
            )
        return replace(
            self, segments=segments, speakers=speakers, diarization=diarization, identification=identification
        )

    def with_segment_text(self, index: int, text: str) -> Transcript:
        """The user corrected one segment. Its word timings described the old words, so they are dropped
        (exports then cue the segment as a whole) unless the text is unchanged."""
        segment = self.segments[index]
        if text == segment.text:
            return self
        edited = replace(segment, text=text, words=())
        return replace(self, segments=(*self.segments[:index], edited, *self.segments[index + 1 :]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "source": self.source,
            "duration": round(self.duration, 3),
            "language": self.language,
            "model": self.model,
            "device": self.device,
            "compute_type": self.compute_type,
            "diarization": (
                {
                    "backend": self.diarization.backend,
                    "reason": self.diarization.reason,
                    "turns": [
                        {"start": round(turn.start, 3), "end": round(turn.end, 3), "speaker": turn.speaker}
                        for turn in self.diarization.turns
                    ],
                }
                if self.diarization
                else None
            ),
            "speakers": list(self.speakers),
            "identification": (
                {
                    "threshold": self.identification.threshold,
                    "speakers": [
                        {
                            "speaker": item.speaker,
                            "diarized": item.diarized,
                            "name": item.name,
                            "similarity": None if item.similarity is None else round(item.similarity, 4),
                            "closest": item.closest,
                            "speech_seconds": round(item.speech_seconds, 2),
                        }
                        for item in self.identification.speakers
                    ],
                }
                if self.identification
                else None
            ),
            "segments": [
                {
                    "start": round(segment.start, 3),
                    "end": round(segment.end, 3),
                    "speaker": segment.speaker,
                    "text": segment.text,
                    "words": [
                        {
                            "start": round(word.start, 3),
                            "end": round(word.end, 3),
                            "word": word.word,
                            "probability": round(word.probability, 4),
                            "speaker": word.speaker,
                        }
                        for word in segment.words
                    ],
                }
                for segment in self.segments
            ],
            "timings": {name: round(value, 3) for name, value in self.timings.items()},
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Transcript:
        version = data.get("version")
        if version != TRANSCRIPT_VERSION:
            raise ValueError(
                f"unsupported transcript version {version!r} (this Scriba reads version {TRANSCRIPT_VERSION})"
            )
        diarization = data.get("diarization")
        identification = data.get("identification")
        return cls(
            version=version,
            source=str(data["source"]),
            duration=float(data["duration"]),
            language=str(data["language"]),
            model=str(data["model"]),
            device=str(data["device"]),
            compute_type=str(data["compute_type"]),
            diarization=(
                DiarizationInfo(
                    str(diarization["backend"]),
                    str(diarization["reason"]),
                    tuple(
                        SpeakerTurn(float(turn["start"]), float(turn["end"]), str(turn["speaker"]))
                        for turn in diarization.get("turns", [])
                    ),
                )
                if diarization
                else None
            ),
            speakers=tuple(str(name) for name in data.get("speakers", [])),
            identification=(
                Identification(
                    float(identification["threshold"]),
                    tuple(
                        SpeakerIdentity(
                            speaker=str(item["speaker"]),
                            diarized=str(item.get("diarized", item["speaker"])),
                            name=item.get("name"),
                            similarity=None if item.get("similarity") is None else float(item["similarity"]),
                            closest=item.get("closest"),
                            speech_seconds=float(item.get("speech_seconds", 0.0)),
                        )
                        for item in identification.get("speakers", [])
                    ),
                )
                if identification
                else None
            ),
            segments=tuple(
                Segment(
                    start=float(segment["start"]),
                    end=float(segment["end"]),
                    text=str(segment["text"]),
                    speaker=segment.get("speaker"),
                    words=tuple(
                        Word(
                            start=float(word["start"]),
                            end=float(word["end"]),
                            word=str(word["word"]),
                            probability=float(word["probability"]),
                            speaker=word.get("speaker"),
                        )
                        for word in segment.get("words", [])
                    ),
                )
                for segment in data["segments"]
            ),
            timings={str(name): float(value) for name, value in data.get("timings", {}).items()},
            # Absent in transcripts written before warnings were kept: nothing was reported then.
            warnings=tuple(str(warning) for warning in data.get("warnings", [])),
        )
