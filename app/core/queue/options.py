"""The options of one job, declared once.

Each :class:`Option` in :data:`OPTIONS` names a field of :class:`JobOptions` with its default, its kind of value
(how a command-line word and a stored JSON value are read), its help text and the faces that show it. The CLI's
flags (app/cli/common.py), the settings file's job part (app/core/config/settings.py), the Settings form
(app/gui/settings/dialog.py) and the queue's JSON are made from this list; :class:`JobOptions` and
``JobDefaults`` repeat the fields for the type checker, and tests/core/test_job_options.py holds them equal to it.

Adding an option: an :class:`Option` here, its field in :class:`JobOptions` (and ``JobDefaults`` unless it is
``per_file``), its use in :meth:`JobOptions.to_pipeline`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.transcript.formats import DEFAULT_FORMATS, FORMATS
from app.core.transcript.times import parse_time

if TYPE_CHECKING:
    from app.core.engine.diarize import Backend
    from app.core.engine.pipeline import PipelineOptions
    from app.core.engine.transcribe import Device, Task

# The most speakers a count can ask for: the built-in diarizer tells at most 20 voices apart
# (app/core/engine/diarize/embedded.py), and asked for more it made up speakers who say nothing (a two-person
# call asked for 1000 came back with 21).
MOST_SPEAKERS = 20


@dataclass(frozen=True)
class Kind:
    """A kind of value. ``parse`` reads a command-line word (ValueError, in words for the user, when it is not
    one); ``valid`` checks a value read from a file; ``to_json``/``from_json`` are its stored shape. This base
    kind is free text."""

    # What the Settings form offers in a list (free text on the command line).
    suggestions: tuple[str, ...] = ()

    def parse(self, text: str) -> Any:
        return text

    def from_cli(self, value: Any) -> Any:
        """What the command line stored (``parse``'s result or the flag's default) as the option's value."""
        return value

    def valid(self, value: Any) -> bool:
        return isinstance(value, str)

    def to_json(self, value: Any) -> Any:
        return value

    def from_json(self, value: Any) -> Any:
        return value


@dataclass(frozen=True)
class Flag(Kind):
    """On or off: ``--name`` and ``--no-name`` on the command line, a check box in the form."""

    def valid(self, value: Any) -> bool:
        return isinstance(value, bool)


@dataclass(frozen=True)
class Choice(Kind):
    """One of ``values``; ``labels``: the form's words for each (the values themselves when empty)."""

    values: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()

    def parse(self, text: str) -> str:
        if text not in self.values:
            raise ValueError(f"invalid choice: '{text}' (choose from {', '.join(self.values)})")
        return text

    def valid(self, value: Any) -> bool:
        return value in self.values


# The language codes Whisper knows (faster-whisper's tokenizer list, sorted), here so that the window can list
# them without importing faster-whisper and CTranslate2; tests/core/queue/test_job_options.py holds them equal.
_WHISPER_CODES = (
    "af am ar as az ba be bg bn bo br bs ca cs cy da de el en es et eu fa fi fo fr gl gu ha haw he hi hr "
    "ht hu hy id is it ja jw ka kk km kn ko la lb ln lo lt lv mg mi mk ml mn mr ms mt my ne nl nn no oc "
    "pa pl ps pt ro ru sa sd si sk sl sn so sq sr su sv sw ta te tg th tk tl tr tt uk ur uz vi yi yo yue "
    "zh"
)
WHISPER_LANGUAGES: tuple[str, ...] = tuple(_WHISPER_CODES.split())


@dataclass(frozen=True)
class Language(Kind):
    def codes(self) -> tuple[str, ...]:
        """Every code Whisper knows, sorted (the list a form offers)."""
        return WHISPER_LANGUAGES

    def parse(self, text: str) -> str:
        """A code Whisper knows (``en``, ``de`` …), refused at once otherwise: the job would fail later, as a
        mismatch with what the recording sounds like."""
        known = self.codes()
        code = text.strip().lower()
        if code not in known:
            raise ValueError(
                f"unknown language code '{text}': give a code such as en, de, fr or es, or leave the option out to "
                f"detect the language (known codes: {', '.join(known)})"
            )
        return code

    # A stored code is taken as text: checking it would import faster_whisper each time the settings are read.


@dataclass(frozen=True)
class SpeakerCount(Kind):
    """A number of speakers the diarizer is asked for: 1 to ``most`` (None: no upper limit)."""

    most: int | None = None

    def parse(self, text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            raise ValueError(f"'{text}' is not a number of speakers") from None
        if number < 1:
            raise ValueError(f"must be at least 1, not {number}")
        if self.most is not None and number > self.most:
            raise ValueError(
                f"{number} speakers is more than Scriba can tell apart in one recording (at most {self.most}); "
                "leave the option out to let Scriba count them"
            )
        return number

    def valid(self, value: Any) -> bool:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return False
        return self.most is None or value <= self.most


@dataclass(frozen=True)
class Moment(Kind):
    """A time in the recording: ``90``, ``1:30``, ``1:02:03.5`` (seconds)."""

    def parse(self, text: str) -> float:
        seconds = parse_time(text)
        if not math.isfinite(seconds):  # float() reads "nan" and "inf"
            raise ValueError(
                f"'{text}' is not a time: give seconds (90), M:SS (1:30) or H:MM:SS, a finite number of 0 or more"
            )
        return seconds

    def valid(self, value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


@dataclass(frozen=True)
class BatchSize(Kind):
    """``auto`` (-1: sized from free GPU memory, sequential on CPU), 0 (sequential) or a batch size."""

    def parse(self, text: str) -> int:
        if text == "auto":
            return -1
        try:
            value = int(text)
        except ValueError:
            value = -2
        if value < 0:
            raise ValueError(f"'{text}' is not a batch size: give auto, 0 or a positive number")
        return value

    def valid(self, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= -1


@dataclass(frozen=True)
class Formats(Kind):
    """Export formats: comma-separated on the command line, a list in JSON, a tuple in the program."""

    def parse(self, text: str) -> tuple[str, ...]:
        chosen = tuple(dict.fromkeys(part.strip().lower() for part in text.split(",") if part.strip()))
        unknown = [fmt for fmt in chosen if fmt not in FORMATS]
        if unknown or not chosen:
            raise ValueError(f"unknown format {', '.join(unknown) or text!r}: choose from {','.join(FORMATS)}")
        return chosen

    def valid(self, value: Any) -> bool:
        return isinstance(value, list | tuple) and bool(value) and all(item in FORMATS for item in value)

    def to_json(self, value: Any) -> Any:
        return list(value)

    def from_json(self, value: Any) -> Any:
        return tuple(value)


@dataclass(frozen=True)
class Folder(Kind):
    """A folder: a path on the command line, stored absolute (a job runs from wherever the worker started)."""

    def parse(self, text: str) -> Path:
        return Path(text)

    def from_cli(self, value: Any) -> str | None:
        return str(Path(value).absolute()) if value else None


@dataclass(frozen=True)
class Option:
    """One job option and where it shows."""

    name: str  # the field of JobOptions (and of JobDefaults)
    default: Any
    kind: Kind = Kind()
    help: str = ""  # the command line's help, the form's tooltip
    flags: tuple[str, ...] = ()  # on the command line (none: not there)
    label: str | None = None  # the Settings form's words for it (None: not in the form)
    placeholder: str = ""  # what an empty field in the form says
    # One file's own (a stretch of it): never a default kept in the settings file.
    per_file: bool = False
    # Settings-file keys earlier versions wrote for it: still read.
    aliases: tuple[str, ...] = ()

    @property
    def persisted(self) -> bool:
        """A default kept in the settings file (Settings' job part)."""
        return not self.per_file


OPTIONS: tuple[Option, ...] = (
    Option(
        "model",
        None,
        help="catalog name or CTranslate2 directory (default: best on disk)",
        flags=("--model",),
        label="Model",
    ),
    Option(
        "language",
        None,
        Language(),
        help="language code, e.g. en; default: detect",
        flags=("--language",),
        label="Language",
        placeholder="detect (or a code: en, de, fr …)",
    ),
    Option("diarize", True, Flag(), "label speakers (default: on)", ("--diarize",), "Label who speaks (diarization)"),
    Option(
        "diarizer",
        "auto",
        Choice(values=("auto", "pyannote", "embedded")),
        help="diarization backend (default: pyannote once downloaded, else the built-in one)",
        flags=("--diarizer",),
        label="Diarizer",
    ),
    Option(
        "identify",
        True,
        Flag(),
        help="name known speakers (`scriba speakers`; default: on)",
        flags=("--identify",),
        label="Name known speakers (Edit › Known speakers…)",
        aliases=("identify_speakers",),
    ),
    Option(
        "num_speakers",
        None,
        SpeakerCount(most=MOST_SPEAKERS),
        help="exactly this many speakers (default: let the diarizer count)",
        flags=("--num-speakers",),
        label="exactly",
    ),
    Option(
        "min_speakers",
        None,
        SpeakerCount(most=MOST_SPEAKERS),
        help="at least this many speakers",
        flags=("--min-speakers",),
        label="min",
    ),
    Option(
        "max_speakers",
        None,
        SpeakerCount(),
        help="at most this many speakers",
        flags=("--max-speakers",),
        label="max",
    ),
    Option(
        "prompt",
        None,
        help="names, jargon and spellings to expect, e.g. 'Scriba, Okafor'; the model reads them before the audio",
        flags=("--prompt",),
        label="Vocabulary",
        placeholder="names and jargon to expect, e.g. Okafor, Scriba, EBITDA",
    ),
    Option(
        "hotwords",
        None,
        help="words the model should favour",
        flags=("--hotwords",),
        label="Hotwords",
        placeholder="words to favour",
    ),
    Option(
        "task",
        "transcribe",
        Choice(values=("transcribe", "translate"), labels=("Transcribe", "Translate into English")),
        help="translate: into English (multilingual models only)",
        flags=("--task",),
        label="Task",
    ),
    Option(
        "start",
        None,
        Moment(),
        help="transcribe from here: seconds, M:SS or H:MM:SS",
        flags=("--start",),
        per_file=True,
    ),
    Option("end", None, Moment(), help="… to here (default: the end)", flags=("--end",), per_file=True),
    Option(
        "device",
        "auto",
        Choice(values=("auto", "cpu", "cuda")),
        help="where the model runs (default auto: a usable CUDA GPU, else the CPU)",
        flags=("--device",),
        label="Device",
    ),
    Option(
        "compute_type",
        "auto",
        Kind(suggestions=("auto", "int8", "int8_float16", "float16", "int8_float32", "float32")),
        help="auto, int8, int8_float16, float16, float32 …",
        flags=("--compute-type",),
        label="Compute type",
    ),
    Option(
        "batch_size",
        -1,
        BatchSize(),
        help="batched decoding with this batch size; 0: sequential; auto (default): from free GPU memory, "
        "sequential on CPU",
        flags=("--batch-size",),
    ),
    Option(
        "formats",
        DEFAULT_FORMATS,
        Formats(),
        help=f"comma-separated, from {','.join(FORMATS)} (qda: a .qda.txt for MAXQDA, ATLAS.ti, NVivo; "
        f"default: {','.join(DEFAULT_FORMATS)})",
        flags=("-f", "--formats"),
        label="Export formats",
    ),
    Option(
        "output_dir",
        None,
        Folder(),
        help="export here when done (default: keep in the queue)",
        flags=("-o", "--output-dir"),
        label="Export finished jobs to",
        placeholder="none: export on request only",
    ),
)

OPTION: dict[str, Option] = {option.name: option for option in OPTIONS}


@dataclass(frozen=True)
class JobOptions:
    """What to do with one file; stored as JSON with the job, so the queue survives option changes. The fields
    are :data:`OPTIONS`' (help and kinds there)."""

    model: str | None = None
    language: str | None = None
    diarize: bool = True
    diarizer: Backend = "auto"
    identify: bool = True
    num_speakers: int | None = None
    min_speakers: int | None = None
    max_speakers: int | None = None
    device: Device = "auto"
    compute_type: str = "auto"
    batch_size: int = -1
    formats: tuple[str, ...] = DEFAULT_FORMATS
    output_dir: str | None = None  # None: kept only in the queue
    prompt: str | None = None
    hotwords: str | None = None
    task: Task = "transcribe"
    start: float | None = None
    end: float | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {name: OPTION[name].kind.to_json(value) for name, value in data.items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobOptions:
        known = {item.name for item in fields(cls)}
        # Keys written by a newer Scriba are ignored rather than refused: an old version can still run the job.
        values = {key: OPTION[key].kind.from_json(value) for key, value in data.items() if key in known}
        return cls(**values)

    def to_pipeline(self, hf_token: str | None, speaker_library: Path | None = None) -> PipelineOptions:
        """The engine's options for this job. ``speaker_library``: the folder of the known-speaker library (None:
        speakers are not named; a remote machine never gets the library, so voiceprints stay on this one)."""
        from app.core.engine.diarize import DiarizerOptions, SpeakerHints
        from app.core.engine.pipeline import PipelineOptions
        from app.core.engine.transcribe import TranscriptionOptions, resolve_device

        device = resolve_device(self.device)
        return PipelineOptions(
            transcription=TranscriptionOptions(
                model=self.model,
                device=device,
                compute_type=self.compute_type,
                language=self.language,
                batch_size=self.batch_size,
                initial_prompt=self.prompt,
                hotwords=self.hotwords,
                task=self.task,
            ),
            diarize=self.diarize,
            diarizer=DiarizerOptions(
                backend=self.diarizer,
                hints=SpeakerHints(self.num_speakers, self.min_speakers, self.max_speakers),
                hf_token=hf_token if self.diarize and self.diarizer != "embedded" else None,
                device=device,
            ),
            identify=self.identify,
            speaker_library=str(speaker_library) if speaker_library is not None else None,
            start=self.start,
            end=self.end,
        )
