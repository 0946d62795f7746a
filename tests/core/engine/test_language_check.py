"""The language check before an English-only model transcribes: German is caught before any invented English
is written; real English recordings pass; a declared language is taken at its word.

Judged by the bundled tiny.en (no multilingual model is on disk here). Other-language speech is espeak-ng's
(no real non-English recording is available); the English is every real recording in ../shared/real-speech
plus pyannote's sample call. ``benchmarks/bench_language_check.py`` prints the scores behind the threshold.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile

from app.core.engine.audio import decode_audio
from app.core.engine.language_check import (
    NOT_ENGLISH_SCORE,
    SUGGESTED_DOWNLOAD,
    LanguageMismatchError,
    check_language,
    english_model_verdict,
    first_speech,
    suggest_multilingual,
    verdict_from_detection,
)
from app.core.engine.models import CATALOG, bundled_model_path
from app.core.engine.pipeline import Engine, PipelineOptions, Progress
from app.core.engine.transcribe import TranscriptionOptions
from tests.real_speech import real_speech_dir
from tests.synth import SAMPLE_RATE, other_language_speech
from tests.test_cli import scriba


@pytest.fixture(scope="module")
def tiny_en() -> object:
    from faster_whisper import WhisperModel

    return WhisperModel(str(bundled_model_path()), device="cpu", compute_type="int8", cpu_threads=2)


def test_german_with_the_english_model_is_said_in_the_transcript_and_names_a_multilingual_model(
    tmp_path: Path,
) -> None:
    """With only the English model's confidence to go on (no multilingual model on disk), the finding is a
    warning on the transcript, never a stopped job: the confidence margin is too thin to refuse English."""
    german = tmp_path / "besprechung.wav"
    soundfile.write(german, other_language_speech("de", "de+m3"), SAMPLE_RATE)
    options = PipelineOptions(transcription=TranscriptionOptions(model="tiny.en", device="cpu"), diarize=False)
    transcript = Engine().run(german, options)
    [warning] = [w for w in transcript.warnings if w.startswith("This may not be English")]
    assert "tiny.en transcribes English only" in warning
    # Nothing here is multilingual, so the way out is a download, said in words (the window shows warnings too).
    assert f"download a multilingual model such as {SUGGESTED_DOWNLOAD}" in warning and "`" not in warning
    assert CATALOG[SUGGESTED_DOWNLOAD].multilingual


def test_a_declared_other_language_with_the_english_model_fails_at_once(tmp_path: Path) -> None:
    german = tmp_path / "besprechung.wav"
    soundfile.write(german, other_language_speech("de", "de+m3"), SAMPLE_RATE)
    stages: list[str] = []

    def progress(update: Progress) -> None:
        stages.append(update.stage)

    options = PipelineOptions(
        transcription=TranscriptionOptions(model="tiny.en", device="cpu", language="de"), diarize=False
    )
    with pytest.raises(LanguageMismatchError) as caught:
        Engine().run(german, options, progress)
    error = caught.value
    assert error.model == "tiny.en" and error.verdict.method == "declared"
    assert error.suggestion.name == SUGGESTED_DOWNLOAD and not error.suggestion.on_disk
    message = str(error)
    assert "besprechung.wav" in message and "English only" in message
    assert f"scriba models download {SUGGESTED_DOWNLOAD}" in message and "--language en" in message
    assert "transcribe" not in stages  # caught before the transcription started, not after it


def test_declared_english_is_not_checked_and_is_transcribed(tmp_path: Path) -> None:
    german = tmp_path / "besprechung.wav"
    soundfile.write(german, other_language_speech("de", "de+m3"), SAMPLE_RATE)
    options = PipelineOptions(
        transcription=TranscriptionOptions(model="tiny.en", device="cpu", language="en"), diarize=False
    )
    transcript = Engine().run(german, options)
    # The user's word overrides the check (the way out of a false alarm): no warning, and the job ran through.
    assert not [w for w in transcript.warnings if w.startswith("This may not be English")]
    assert transcript.model == "tiny.en" and any(segment.text.strip() for segment in transcript.segments)


def test_no_real_english_recording_is_flagged(tiny_en: object, sample_dir: Path) -> None:
    recordings = [*sorted(real_speech_dir().glob("*.wav")), sample_dir / "sample.wav"]
    assert len(recordings) >= 10
    scores = {}
    for path in recordings:
        speech, seconds = first_speech(decode_audio(path).samples)
        assert seconds >= 3.0, path.name
        verdict = english_model_verdict(tiny_en, speech)
        scores[path.stem] = round(verdict.probability, 2)
    print(f"English scores (threshold {NOT_ENGLISH_SCORE}): {scores}")
    assert [name for name, score in scores.items() if score >= NOT_ENGLISH_SCORE] == []


@pytest.mark.parametrize("voice", ["de", "de+f2", "fr+m3", "es+m3", "it", "nl+f2"])
def test_other_languages_are_flagged(tiny_en: object, voice: str) -> None:
    verdict = check_language(other_language_speech(voice.split("+")[0], voice), "tiny.en", tiny_en, None)
    assert verdict is not None and verdict.not_english, verdict


def test_silence_and_a_declared_language_need_no_listening(tiny_en: object) -> None:
    silence = np.zeros(20 * SAMPLE_RATE, dtype=np.float32)
    assert check_language(silence, "tiny.en", tiny_en, None) is None  # nothing to judge: the job runs
    declared = check_language(silence, "tiny.en", tiny_en, "de")
    assert declared is not None and declared.not_english and declared.method == "declared"
    assert check_language(silence, "tiny.en", tiny_en, "EN") is None


@pytest.mark.unit
def test_detection_verdicts_and_the_suggestion_from_disk(tmp_path: Path) -> None:
    assert verdict_from_detection("de", 0.97, 30).not_english
    assert not verdict_from_detection("en", 0.99, 30).not_english
    assert not verdict_from_detection("de", 0.3, 30).not_english  # unsure: let the job run
    assert suggest_multilingual(tmp_path).name == SUGGESTED_DOWNLOAD
    # A multilingual model in the cache is preferred to a download (the cache is a folder per model).
    base = tmp_path / "base"
    base.mkdir()
    for name in ("model.bin", "config.json"):
        (base / name).write_bytes(b"{}")
    suggestion = suggest_multilingual(tmp_path)
    assert suggestion.name == "base" and suggestion.on_disk


def test_the_command_warns_and_names_a_multilingual_model(tmp_path: Path) -> None:
    german = tmp_path / "besprechung.wav"
    soundfile.write(german, other_language_speech("de", "de"), SAMPLE_RATE)
    result = scriba("transcribe", str(german), "--no-diarize", "-o", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "This may not be English" in result.stderr
    assert f"scriba models download {SUGGESTED_DOWNLOAD}" in result.stderr
    declared = scriba("transcribe", str(german), "--no-diarize", "--language", "de", "-o", str(tmp_path / "de"))
    assert declared.returncode == 1 and "English only" in declared.stderr
    assert not (tmp_path / "de").exists() or list((tmp_path / "de").iterdir()) == []
