"""Is this recording in a language the chosen model can transcribe? Asked before the job's transcription.

An English-only Whisper model (tiny.en, the bundled default) given German does not fail: it writes fluent,
invented English ("I am going to go to a house in the city of the town…"). So before such a model transcribes
a recording whose language the user did not name, the first :data:`CHECK_SECONDS` of speech are checked:

* with faster-whisper's own language detection, when a multilingual model is on disk (the smallest one, kept
  loaded by the caller between jobs);
* otherwise with the English-only model's own confidence on that speech. Whisper's English models, hearing
  another language, either hear "no speech" where the voice-activity detector hears speech, or write words
  they give low probability. :func:`english_model_verdict` turns the two into one score (no-speech probability
  of the first window + 1 - mean word probability). The reading forbids repeating any three words: a model that
  does not understand what it hears can fall into a loop ("I'm going to go to the…" over and over) whose words
  it then gives high probability, each repeat making the next likelier, which says nothing about the audio
  (measured: German with tiny.en read as 187 words at 91 % on one machine, as 1 word at 3 % on another; a real
  English meeting looped too). The threshold sits between what was measured with tiny.en
  (``benchmarks/bench_language_check.py``): 14 real English recordings (meetings, readings, spontaneous speech,
  a phone call) scored at most 0.80, espeak-ng speech in German, French, Spanish, Italian and Dutch in three
  voices each at least 1.01. No real non-English recording was at hand: it is a heuristic that says "probably
  not English", never which language; it only warns, and the window offers "it is English" as the way out.

A recording the user declared English (``language="en"``) is not checked: that is the way out of a false alarm.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from app.core.engine.models import CATALOG, installed_models
from app.core.errors import ScribaError

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000
CHECK_SECONDS = 30.0  # what Whisper sees in one window; its own detection uses the same
MIN_SPEECH_SECONDS = 3.0  # less speech than this says too little to judge (a cough, a name)
# Between the highest English score (0.80) and the lowest other-language score (1.01) measured; see above.
NOT_ENGLISH_SCORE = 0.9
# A reading may not repeat any run of this many tokens (the loop that fakes confidence; see above).
NO_REPEAT_TOKENS = 3
# faster-whisper's detection: a language other than English at least this probable is a mismatch.
DETECTION_THRESHOLD = 0.5
# Offered when no multilingual model is on disk: the smallest one that transcribes German, French or Spanish
# usefully (tiny and base make many errors outside English) at a download most connections manage.
SUGGESTED_DOWNLOAD = "small"
NOT_ENGLISH_WARNING = "This may not be English"  # how a transcript's warning of that finding starts

Method = Literal["detected", "english-model-confidence", "declared"]


@dataclass(frozen=True)
class LanguageVerdict:
    """What the check found: whether the speech is (probably) not English, how it knows, and the evidence."""

    not_english: bool
    method: Method
    language: str | None = None  # the detected language code (method "detected" only)
    probability: float = 0.0  # of ``language`` (detected), or the heuristic's score
    speech_seconds: float = 0.0  # how much speech was judged
    evidence: str = ""


@dataclass(frozen=True)
class ModelSuggestion:
    name: str
    on_disk: bool
    size_mb: int


class LanguageMismatchError(ScribaError):
    """The chosen model cannot transcribe the recording's language; the message names a model that can."""

    def __init__(self, source: Path | str, model: str, verdict: LanguageVerdict, suggestion: ModelSuggestion) -> None:
        self.source = Path(source)
        self.model = model
        self.verdict = verdict
        self.suggestion = suggestion
        heard = (
            f"it sounds like {verdict.language} ({verdict.evidence})"
            if verdict.language
            else f"it does not sound like English ({verdict.evidence})"
        )
        # In words (the window shows them, and offers the model as a button); the commands are the CLI's hint.
        if suggestion.on_disk:
            remedy = f"transcribe it with the multilingual model {suggestion.name} (on disk)"
        else:
            remedy = (
                f"download a multilingual model such as {suggestion.name} ({suggestion.size_mb} MB) and "
                "transcribe it with that"
            )
        self.cli_hint = language_cli_hint(suggestion)
        self.heard, self.remedy = heard, remedy
        super().__init__(
            f"{self.source}: {model} transcribes English only, and {heard}; it would write invented English. "
            f"To transcribe it, {remedy}. If the recording is English, set its language to English."
        )

    def as_warning(self) -> str:
        """The same finding as a transcript's warning, for a verdict too unsure to stop the job."""
        return (
            f"{NOT_ENGLISH_WARNING}: {self.model} transcribes English only, and {self.heard}. If it is not "
            f"English, the text is invented: {self.remedy}."
        )


def language_cli_hint(suggestion: ModelSuggestion) -> str:
    """The commands that transcribe a recording an English-only model cannot, for the command line."""
    if suggestion.on_disk:
        return f"On the command line: `--model {suggestion.name}`, or `--language en` for English."
    return (
        f"On the command line: `scriba models download {suggestion.name}`, then `--model {suggestion.name}`; or "
        "`--language en` for English."
    )


def is_english_only(model_name: str, loaded_model: Any | None = None) -> bool:
    """Whether a model transcribes English only: from the catalog, else from the loaded faster-whisper model."""
    if model_name in CATALOG:
        return not CATALOG[model_name].multilingual
    if loaded_model is not None:
        return not bool(loaded_model.model.is_multilingual)
    return model_name.endswith(".en")


def suggest_multilingual(cache: Path | None = None) -> ModelSuggestion:
    """The most accurate multilingual model on disk, else :data:`SUGGESTED_DOWNLOAD` to download."""
    for model in installed_models(cache):  # most accurate first
        entry = CATALOG[model.name]
        if entry.multilingual:
            return ModelSuggestion(model.name, True, entry.size_mb)
    return ModelSuggestion(SUGGESTED_DOWNLOAD, False, CATALOG[SUGGESTED_DOWNLOAD].size_mb)


def detector_model_path(cache: Path | None = None) -> Path | None:
    """The smallest multilingual model on disk (detection needs one window of it, not its accuracy)."""
    multilingual = [model for model in installed_models(cache) if CATALOG[model.name].multilingual]
    if not multilingual:
        return None
    return min(multilingual, key=lambda model: CATALOG[model.name].size_mb).path


def first_speech(samples: np.ndarray, seconds: float = CHECK_SECONDS) -> tuple[np.ndarray, float]:
    """The ``seconds`` of the recording from where its speech starts (by Silero VAD), and how much of them is
    speech. The audio is taken as it is, pauses included: speech cut out and joined end to end changes what
    Whisper thinks of it (its no-speech probability rose from 0.41 to 0.57 on a real English reading)."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    # Only the start of a long file is looked at: VAD over two hours would cost more than the check.
    head = samples[: int(seconds * 4 * SAMPLE_RATE)]
    chunks = get_speech_timestamps(head, VadOptions())
    if not chunks:
        return np.zeros(0, dtype=np.float32), 0.0
    first = int(chunks[0]["start"])
    end = first + int(seconds * SAMPLE_RATE)
    speech = sum(min(chunk["end"], end) - chunk["start"] for chunk in chunks if chunk["start"] < end)
    return head[first:end].astype(np.float32, copy=False), speech / SAMPLE_RATE


def english_model_verdict(english_model: Any, speech: np.ndarray) -> LanguageVerdict:
    """Judge ``speech`` (a stretch of audio that starts with speech) with an English-only faster-whisper model's
    own confidence.

    Greedy decoding with every fallback and skip turned off, so that the statistics are those of the model's
    first, unretouched reading of each window (temperature fallback would hide low confidence by resampling,
    and the no-speech skip would drop exactly the windows that tell); no run of tokens repeated, so that a loop
    cannot lend its words a confidence the audio never gave.
    """
    seconds = len(speech) / SAMPLE_RATE
    segments, _ = english_model.transcribe(
        speech,
        language="en",
        beam_size=1,
        temperature=0.0,
        vad_filter=False,
        condition_on_previous_text=False,
        no_speech_threshold=None,
        log_prob_threshold=None,
        compression_ratio_threshold=None,
        word_timestamps=True,
        no_repeat_ngram_size=NO_REPEAT_TOKENS,
    )
    segments = list(segments)
    words = [word for segment in segments for word in (segment.words or ())]
    # The first window's: it starts where the speech starts. Later windows start wherever the first one's last
    # segment ended, often in a pause, and their no-speech probability says more about that pause.
    no_speech = float(segments[0].no_speech_prob) if segments else 1.0
    # Speech that yields no word at all is the strongest sign: the model found nothing it could say.
    word_probability = float(np.mean([word.probability for word in words])) if words else 0.0
    return score_verdict(no_speech, word_probability, len(words), seconds)


def score_verdict(no_speech: float, word_probability: float, words: int, seconds: float) -> LanguageVerdict:
    score = no_speech + (1.0 - word_probability)
    return LanguageVerdict(
        not_english=score >= NOT_ENGLISH_SCORE,
        method="english-model-confidence",
        probability=score,
        speech_seconds=seconds,
        evidence=(
            f"the English model's own confidence on {seconds:.0f} s of speech: "
            f"{words} word{'' if words == 1 else 's'} at "
            f"{word_probability:.0%} mean probability, {no_speech:.0%} no-speech probability"
        ),
    )


def detected_verdict(multilingual_model: Any, speech: np.ndarray) -> LanguageVerdict:
    """Judge ``speech`` with faster-whisper's language detection on a multilingual model."""
    language, probability, _ = multilingual_model.detect_language(speech, vad_filter=False)
    seconds = len(speech) / SAMPLE_RATE
    return verdict_from_detection(str(language), float(probability), seconds)


def verdict_from_detection(language: str, probability: float, seconds: float) -> LanguageVerdict:
    return LanguageVerdict(
        not_english=language != "en" and probability >= DETECTION_THRESHOLD,
        method="detected",
        language=language,
        probability=probability,
        speech_seconds=seconds,
        evidence=f"faster-whisper's language detection on {seconds:.0f} s of speech: {language} at {probability:.0%}",
    )


def check_language(
    samples: np.ndarray,
    model_name: str,
    english_model: Any,
    language: str | None,
    multilingual_model: Any | None = None,
) -> LanguageVerdict | None:
    """The verdict on ``samples`` (16 kHz) for ``model_name``, or None when there is nothing to check.

    Nothing is checked for a multilingual model (it detects and transcribes the language itself) or for a
    recording declared English. A language declared as something else, with an English-only model, is a
    mismatch without listening. ``english_model`` is the loaded faster-whisper model that will transcribe;
    ``multilingual_model``, when given, judges by detection instead of confidence.
    """
    if not is_english_only(model_name, english_model):
        return None
    if language is not None:
        if language.lower() == "en":
            return None
        return LanguageVerdict(True, "declared", language, 1.0, 0.0, f"the language was set to {language}")
    speech, speech_seconds = first_speech(samples)
    if speech_seconds < MIN_SPEECH_SECONDS:
        return None
    if multilingual_model is not None:
        verdict = detected_verdict(multilingual_model, speech)
    else:
        verdict = english_model_verdict(english_model, speech)
    log.info("language check for %s: %s", model_name, verdict.evidence)
    return verdict
