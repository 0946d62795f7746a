"""The real engine (bundled tiny.en, built-in diarizer) on real and synthesized speech."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from app.core.cancel import CancelToken
from app.core.engine.audio import Audio
from app.core.engine.diarize import DiarizerOptions, SpeakerHints
from app.core.engine.pipeline import PipelineOptions
from app.core.engine.transcribe import TranscriptionOptions, resolve_device
from app.core.errors import CancelledError
from tests import metrics, synth


@pytest.fixture(scope="module")
def sample_json(sample_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """`scriba transcribe sample.wav -f json`, as a user runs it (offline, defaults)."""
    out = tmp_path_factory.mktemp("sample")
    subprocess.run(
        [sys.executable, "-m", "app", "transcribe", str(sample_dir / "sample.wav"), "-f", "json", "-o", str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads((out / "sample.json").read_text())


def test_sample_wer(sample_json: dict, sample_dir: Path) -> None:
    reference = metrics.stm_text(sample_dir / "sample.stm")
    hypothesis = " ".join(segment["text"] for segment in sample_json["segments"])
    assert metrics.wer(reference, hypothesis) <= 0.17


def test_sample_two_speakers_and_strict_der(sample_json: dict, sample_dir: Path) -> None:
    assert sample_json["speakers"] == ["SPEAKER_00", "SPEAKER_01"]
    assert sample_json["diarization"]["backend"] == "embedded"
    # In words: the reason is shown in the window too, where a command to type means nothing.
    reason = sample_json["diarization"]["reason"]
    assert reason.startswith("pyannote community-1 is not downloaded: used the built-in diarizer") and "`" not in reason
    reference = metrics.rttm_annotation(sample_dir / "sample.rttm")
    turns = metrics.turns_annotation((t["start"], t["end"], t["speaker"]) for t in sample_json["diarization"]["turns"])
    assert metrics.der(reference, turns, strict=True) <= 0.15
    # The speaker-labelled segments inherit word timestamps (coarser with tiny.en): scored with a collar.
    assert metrics.der(reference, metrics.transcript_annotation(sample_json), strict=False) <= 0.15


def test_sample_json_contract(sample_json: dict) -> None:
    assert sample_json["version"] == 1
    assert sample_json["model"] == "tiny.en" and sample_json["device"] == "cpu"
    assert sample_json["compute_type"] == "int8" and sample_json["language"] == "en"
    assert sample_json["duration"] == pytest.approx(30.0, abs=0.01)
    assert set(sample_json["timings"]) == {"decode", "transcribe", "diarize", "diarize_wait", "merge", "total"}
    assert sample_json["segments"]
    for segment in sample_json["segments"]:
        assert segment["speaker"] in sample_json["speakers"]
        assert segment["words"] and all(word["speaker"] == segment["speaker"] for word in segment["words"])
        assert segment["start"] <= segment["end"]


@pytest.fixture(scope="module")
def three_voices(tmp_path_factory: pytest.TempPathFactory, espeak: str) -> tuple[Path, list[synth.Utterance]]:
    samples, utterances = synth.meeting(n_speakers=3, n_turns=9)
    path = synth.write_wav(tmp_path_factory.mktemp("meeting") / "meeting.wav", samples)
    return path, utterances


def test_three_synthetic_voices_are_never_merged_and_turns_stay_whole(engine, three_voices) -> None:  # type: ignore[no-untyped-def]
    """Three espeak-ng voices: no two voices share a speaker, and each utterance's words go to one speaker.

    The built-in diarizer's CAM++ embeddings hear espeak's "en-us+m3" as two voices on some sentences (its
    utterances split into two groups of similar size), so three or four speakers are found here; on real
    recordings single voices stay whole (tests/core/engine/diarize/test_diarize_real.py)."""
    path, utterances = three_voices
    transcript = engine.run(path, PipelineOptions(transcription=TranscriptionOptions(language="en")))
    assert len(transcript.speakers) in (3, 4)
    owner: dict[str, set[str]] = {}
    for utterance in utterances:
        spoken = [
            w.speaker
            for s in transcript.segments
            for w in s.words
            if utterance.start - 0.2 <= (w.start + w.end) / 2 <= utterance.end + 0.2
        ]
        assert spoken, utterance
        majority = max(set(spoken), key=spoken.count)
        assert spoken.count(majority) / len(spoken) >= 0.8
        owner.setdefault(utterance.speaker, set()).add(str(majority))
    # Different voices never end up with the same speaker.
    labels = [label for names in owner.values() for label in names]
    assert len(labels) == len(set(labels))
    reference = metrics.turns_annotation((u.start, u.end, u.speaker) for u in utterances)
    turns = [(t.start, t.end, t.speaker) for t in transcript.diarization.turns]
    assert metrics.der(reference, metrics.turns_annotation(turns)) <= 0.25
    assert metrics.wer(" ".join(u.text for u in utterances), transcript.text) <= 0.25


def test_speaker_hints_are_obeyed(engine, three_voices) -> None:  # type: ignore[no-untyped-def]
    from app.core.engine.audio import decode_audio

    audio = decode_audio(three_voices[0])
    two = engine.diarize(audio, DiarizerOptions(backend="embedded", hints=SpeakerHints(num_speakers=2)))
    assert len({t.speaker for t in two.turns}) == 2
    at_most = engine.diarize(audio, DiarizerOptions(backend="embedded", hints=SpeakerHints(max_speakers=2)))
    assert len({t.speaker for t in at_most.turns}) == 2
    assert two.reason == "the built-in diarizer was requested (on CPU)"


def test_one_voice_is_one_speaker(engine, espeak: str) -> None:  # type: ignore[no-untyped-def]
    samples, _ = synth.conversation([(1, text) for text in synth.SENTENCES[:5]])
    audio = Audio(samples, synth.SAMPLE_RATE, Path("monologue.wav"))
    result = engine.diarize(audio, DiarizerOptions(backend="embedded"))
    assert len({t.speaker for t in result.turns}) == 1


def test_silence_has_no_speakers(engine) -> None:  # type: ignore[no-untyped-def]
    audio = Audio(np.zeros(16000 * 5, dtype=np.float32), 16000, Path("silence.wav"))
    assert engine.diarize(audio, DiarizerOptions(backend="embedded")).turns == ()


def test_progress_rises_to_one_and_cancel_stops_the_job(engine, three_voices) -> None:  # type: ignore[no-untyped-def]
    path, _ = three_voices
    seen: list[float] = []
    engine.run(path, PipelineOptions(diarize=False), progress=lambda p: seen.append(p.fraction))
    assert seen[-1] == 1.0 and seen == sorted(seen)

    token = CancelToken()
    stages: list[str] = []

    def cancel_during_transcription(progress) -> None:  # type: ignore[no-untyped-def]
        stages.append(progress.stage)
        if progress.stage == "transcribe" and progress.stage_fraction > 0:
            token.cancel()

    with pytest.raises(CancelledError):
        engine.run(path, PipelineOptions(), progress=cancel_during_transcription, cancel=token)
    assert "diarize" not in stages


def test_pyannote_not_downloaded_or_broken_falls_back_to_the_built_in_diarizer(engine, three_voices) -> None:  # type: ignore[no-untyped-def]
    from app.core.engine.audio import decode_audio
    from app.core.engine.diarize.pyannote_models import _REQUIRED_FILES, pipeline_dir

    audio = decode_audio(three_voices[0])
    # A token alone no longer reaches for the hub: pyannote runs only from a downloaded copy.
    result = engine.diarize(audio, DiarizerOptions(hf_token="hf_not_a_real_token"))
    assert result.backend == "embedded"
    assert "pyannote community-1 is not downloaded" in result.reason
    assert "hf_not_a_real_token" not in result.reason
    # A damaged download (every file there, none of them loadable) must not lose the job either.
    for name in _REQUIRED_FILES:
        path = pipeline_dir() / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("damaged")
    result = engine.diarize(audio, DiarizerOptions())
    assert result.backend == "embedded"
    assert result.reason.startswith("pyannote could not run")


def test_the_split_of_the_cores_between_transcription_and_diarization() -> None:
    from app.core.engine.pipeline import alongside_threads

    assert alongside_threads(2) == (1, 1)
    assert alongside_threads(3) == (1, 2)
    assert alongside_threads(8) == (4, 4)
    assert alongside_threads(8, 6) == (6, 2)  # the user's own count for the transcription is kept
    assert alongside_threads(2, 2) == (2, 1)  # and the diarization still gets a thread


def test_the_stages_run_side_by_side_only_where_that_was_measured_to_pay(tmp_path: Path) -> None:
    """A tiny model decoded sequentially on the CPU, with the speakers wanted, and cores to share. A larger model
    keeps every core (its decoding uses them; side by side was never measured for it), and so do batched
    decoding (which uses them too), a transcription the user gave every core, and a job without speakers."""
    from app.core.engine.pipeline import Engine

    cores = os.cpu_count() or 1
    cpu = TranscriptionOptions(device="cpu")
    tiny = PipelineOptions(transcription=cpu)
    if cores > 1:
        transcription, diarize_threads = Engine.stage_threads(tiny)
        assert diarize_threads is not None and transcription.cpu_threads + diarize_threads == cores
    larger = tmp_path / "whisper-small-ct2"  # a converted model folder, as `--model PATH` takes it
    larger.mkdir()
    for name in ("model.bin", "config.json"):
        (larger / name).write_bytes(b"")
    for options in (
        PipelineOptions(transcription=TranscriptionOptions(device="cpu", model=str(larger))),
        PipelineOptions(transcription=TranscriptionOptions(device="cpu", cpu_threads=cores)),
        PipelineOptions(transcription=TranscriptionOptions(device="cpu", batch_size=8)),
        PipelineOptions(transcription=cpu, diarize=False),
        PipelineOptions(transcription=cpu, diarize_alongside=False),
    ):
        assert Engine.stage_threads(options) == (options.transcription, None)


def test_speakers_found_beside_the_transcription_give_the_job_its_progress_and_its_threads_back(  # type: ignore[no-untyped-def]
    engine, three_voices
) -> None:
    """On a CPU the diarization runs in a thread of its own while the words are transcribed. Progress is reported
    from the job's thread alone: it only rises, says "transcribe" until the words are done and "diarize" after,
    and ends at 1. The speakers are those of the one-after-the-other run, torch's thread count is given back,
    and no diarization thread is left behind."""
    import torch

    path, truth = three_voices
    threads_before = torch.get_num_threads()
    seen: list[tuple[str, float, float]] = []

    def record(progress) -> None:  # type: ignore[no-untyped-def]
        seen.append((progress.stage, progress.stage_fraction, progress.fraction))

    beside = engine.run(path, PipelineOptions(), progress=record)
    on_cpu = resolve_device("auto") == "cpu"
    assert (engine.stage_threads(PipelineOptions())[1] is not None) == ((os.cpu_count() or 1) > 1 and on_cpu)
    fractions = [fraction for _, _, fraction in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    stages = [stage for stage, _, _ in seen]
    assert stages.index("transcribe") < len(stages) - 1 - stages[::-1].index("transcribe")  # several reports
    if "diarize" in stages:  # reported only once the words are done
        assert "transcribe" not in stages[stages.index("diarize") :]
    assert 0.0 <= beside.timings["diarize_wait"] <= beside.timings["diarize"]
    assert torch.get_num_threads() == threads_before
    assert not [thread for thread in threading.enumerate() if thread.name == "scriba-diarize"]

    after = engine.run(path, PipelineOptions(diarize_alongside=False))
    assert after.timings["diarize_wait"] == after.timings["diarize"]
    assert len(beside.speakers) == len(after.speakers) >= len({u.speaker for u in truth})  # never merged
    assert [segment.text for segment in beside.segments] == [segment.text for segment in after.segments]


def test_a_diarization_that_fails_beside_the_transcription_fails_the_job_with_its_own_error(  # type: ignore[no-untyped-def]
    engine, three_voices
) -> None:
    """pyannote asked for by name and never downloaded: the job fails with what to do, whether the transcription
    beside it had finished or was stopped for it, and leaves no thread running."""
    from app.core.errors import DiarizationError

    options = PipelineOptions(diarizer=DiarizerOptions(backend="pyannote"))
    # The path under test: side by side wherever this machine runs the stages so.
    side_by_side = (os.cpu_count() or 1) > 1 and resolve_device("auto") == "cpu"
    assert (engine.stage_threads(options)[1] is not None) == side_by_side
    with pytest.raises(DiarizationError, match="scriba models download pyannote"):
        engine.run(three_voices[0], options)
    assert not [thread for thread in threading.enumerate() if thread.name == "scriba-diarize"]


def test_a_failing_diarization_stops_the_work_beside_it_at_once() -> None:
    """The helper that runs the diarization beside the transcription: its error reaches the job's thread, and
    ``on_error`` (which stops the transcription) is called as soon as it fails, not when the words are done."""
    from app.core.engine.pipeline import DiarizeAlongside

    transcribing = CancelToken()

    def failing(progress, cancel):  # type: ignore[no-untyped-def]
        progress(0.5)
        raise ValueError("the speaker model could not be read")

    beside = DiarizeAlongside(failing, None, on_error=transcribing.cancel)
    assert transcribing.wait(60)  # a bound for a thread that must end, not a latency
    with pytest.raises(ValueError, match="could not be read"):
        beside.result(lambda: None)
    assert beside.fraction == 0.5

    # Stopped from the job's thread (its transcription failed): the diarization sees its token cancelled.
    started = threading.Event()

    def waiting_for_stop(progress, cancel):  # type: ignore[no-untyped-def]
        started.set()
        cancel.wait()
        cancel.raise_if_cancelled()

    job = CancelToken()
    beside = DiarizeAlongside(waiting_for_stop, job, on_error=transcribing.cancel)
    assert started.wait(60)
    beside.stop()
    assert not job.cancelled
    with pytest.raises(CancelledError):
        beside.result(lambda: None)
