"""The whole job: decode once, transcribe, diarize, merge, and return a :class:`Transcript`.

:class:`Engine` keeps loaded models between jobs (the queue worker and the remote worker run many files
with one engine).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.cancel import CancelToken
from app.core.engine.audio import Audio, decode_audio, probe_duration
from app.core.engine.diarize import DiarizerChoice, DiarizerOptions, choose_backend
from app.core.engine.diarize.base import DiarizationResult, Diarizer, Turn
from app.core.engine.merge import assign_speakers
from app.core.engine.models import BUNDLED_MODEL
from app.core.engine.stage_costs import StageCosts, job_fraction, model_cost, stage_layout
from app.core.engine.transcribe import Transcriber, TranscriptionOptions, TranscriptionResult, resolve_device
from app.core.errors import CancelledError, DiarizationError, UsageError
from app.core.gpu.faults import classify, record_fault
from app.core.transcript.document import PARTIAL_PREFIX, DiarizationInfo, Transcript

if TYPE_CHECKING:
    from app.core.engine.diarize.encoder import SpeakerEncoder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Progress:
    stage: str  # decode | transcribe | diarize | merge
    stage_fraction: float
    fraction: float  # of the whole job
    audio_seconds: float  # audio duration (0 until decoded)


PipelineProgress = Callable[[Progress], None]


@dataclass(frozen=True)
class PipelineOptions:
    transcription: TranscriptionOptions = field(default_factory=TranscriptionOptions)
    diarize: bool = True
    diarizer: DiarizerOptions = field(default_factory=DiarizerOptions)
    # Known speakers: name diarized speakers whose voice is in the library folder (None: no library).
    identify: bool = True
    speaker_library: str | None = None
    # Before an English-only model transcribes a recording of undeclared language, check that it is English
    # (app.core.engine.language_check); a mismatch fails the job at once, naming a multilingual model.
    check_language: bool = True
    # Only this stretch of the recording (seconds; None: from the start, to the end). The transcript's times
    # are the recording's, so subtitles and the player line up with the whole file.
    start: float | None = None
    end: float | None = None
    # On a CPU, find the speakers while the words are transcribed, each on its share of the cores (see
    # :func:`alongside_threads`), rather than one after the other with all of them.
    diarize_alongside: bool = True


def alongside_threads(cores: int, transcription_threads: int = 0) -> tuple[int, int]:
    """(transcription, diarization) CPU threads when the two run at once: the transcription keeps the threads the
    user gave it (0: half the cores), the diarization takes the rest, and each has at least one.

    Why together: on a 2-core CPU with tiny.en, CTranslate2 decodes no faster on two threads than on one (2.9-3.5
    against 2.6-2.7 s per audio minute), while the diarizer's ONNX networks gain 1.5x from the second thread. One
    thread each, side by side, the real-speech benchmark's jobs took 4.04 s per audio minute against 5.30 one
    stage after the other with both threads (docs/benchmarks.md), every speaker and word figure the same."""
    transcription = transcription_threads if transcription_threads > 0 else max(1, cores // 2)
    return transcription, max(1, cores - transcription)


class DiarizeAlongside:
    """Runs ``diarize(fraction_callback, cancel)`` in a thread of its own from the moment it is made.

    Only the calling thread reports progress (``fraction`` is read from there), so a progress callback never
    runs on two threads at once. Its cancel token is linked to the job's: cancelling the job stops it, and so
    does :meth:`stop`, for when the transcription beside it failed. Should it fail, ``on_error`` is called
    from its thread (to stop the transcription early) and :meth:`result` raises its error."""

    def __init__(
        self,
        diarize: Callable[[Callable[[float], None], CancelToken], DiarizationResult],
        cancel: CancelToken | None,
        on_error: Callable[[], None] | None = None,
    ) -> None:
        self.fraction = 0.0
        self.seconds = 0.0
        self.error: BaseException | None = None
        self._cancel = cancel.linked() if cancel is not None else CancelToken()
        self._result: DiarizationResult | None = None
        self._on_error = on_error
        self._diarize = diarize
        self._thread = threading.Thread(target=self._work, name="scriba-diarize", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        started = time.perf_counter()
        try:
            self._result = self._diarize(self._progress, self._cancel)
        except BaseException as error:  # handed to the job's thread, which raises it
            self.error = error
            if self._on_error is not None and not isinstance(error, CancelledError):
                self._on_error()
        finally:
            self.seconds = time.perf_counter() - started

    def _progress(self, fraction: float) -> None:
        self.fraction = fraction

    def stop(self) -> None:
        """Cancel the diarization and wait for its thread to end (the transcription beside it failed)."""
        self._cancel.cancel()
        self._thread.join()

    def result(self, waiting: Callable[[], None], poll_s: float = 0.25) -> DiarizationResult:
        """Wait for the diarization, calling ``waiting`` every ``poll_s`` meanwhile; its result, or its error."""
        while self._thread.is_alive():
            waiting()
            self._thread.join(poll_s)
        if self.error is not None:
            raise self.error
        assert self._result is not None
        return self._result


class Engine:
    """Runs jobs; keeps the Whisper model and the diarizers loaded while their options stay the same."""

    def __init__(self) -> None:
        self._transcriber: Transcriber | None = None
        self._diarizers: dict[tuple[str, str, str, int | None], Diarizer] = {}
        self._speaker_encoder: SpeakerEncoder | None = None
        self._language_detector: tuple[Path, Any] | None = None  # (model folder, loaded multilingual model)
        self.stage_costs = StageCosts()  # what each stage costs here, for an even progress bar and an honest ETA

    def transcriber(self, options: TranscriptionOptions) -> Transcriber:
        if self._transcriber is None or not self._transcriber.matches(options):
            if self._transcriber is not None:
                self._transcriber.unload()
            self._transcriber = Transcriber(options)
        return self._transcriber

    def unload(self) -> None:
        if self._transcriber is not None:
            self._transcriber.unload()
        self._transcriber = None
        self._diarizers.clear()
        self._speaker_encoder = None
        self._language_detector = None

    def run(
        self,
        source: Path | str,
        options: PipelineOptions,
        progress: PipelineProgress | None = None,
        cancel: CancelToken | None = None,
    ) -> Transcript:
        if self.stage_threads(options)[1] is not None:
            import torch  # noqa: F401  (the diarizer beside the transcription imports it anyway)

        torch_module = sys.modules.get("torch")
        torch_threads = torch_module.get_num_threads() if torch_module is not None else None
        try:
            return self._run(source, options, progress, cancel)
        finally:
            # CTranslate2 sets OpenMP's thread count, which torch shares, in the thread that loads a model: a
            # transcription given fewer threads would otherwise leave its count as this thread's torch count.
            if torch_module is not None and torch_threads is not None:
                torch_module.set_num_threads(torch_threads)

    def _run(
        self,
        source: Path | str,
        options: PipelineOptions,
        progress: PipelineProgress | None,
        cancel: CancelToken | None,
    ) -> Transcript:
        timings: dict[str, float] = {}
        started = time.perf_counter()
        duration = 0.0

        transcription_options, diarize_threads = self.stage_threads(options)
        alongside = diarize_threads is not None
        transcriber = self.transcriber(transcription_options)
        diarizer_name = choose_backend(options.diarizer).backend if options.diarize else None
        diarize_device = transcriber.device if options.diarizer.device == "auto" else options.diarizer.device
        cost_key = (transcriber.model_ref.name, transcriber.device, diarizer_name, diarize_device)
        rates = self.stage_costs.rates(*cost_key, alongside=alongside)
        if alongside:
            # The two stages are one stretch of the job, as long as the longer of them.
            offsets, shares = stage_layout(
                {**rates, "transcribe": max(rates["transcribe"], rates["diarize"]), "diarize": 0.0}
            )
        else:
            offsets, shares = stage_layout(rates)

        def report(stage: str, fraction: float) -> None:
            if progress is not None:
                overall = job_fraction(offsets, shares, stage, fraction)
                progress(Progress(stage, fraction, overall, duration))

        together_done = [0.0]  # the furthest point reported: a diarizer that starts over (pyannote falling back
        # to the built-in one) must not move the bar back

        def report_together(transcribed: float, diarized: float) -> None:
            """Progress while both run: the stretch is done when the one with more work left is."""
            if progress is not None:
                longest = max(rates["transcribe"], rates["diarize"]) or 1.0
                left = max((1 - transcribed) * rates["transcribe"], (1 - diarized) * rates["diarize"]) / longest
                together_done[0] = max(together_done[0], 1.0 - left)
                stage, fraction = ("transcribe", transcribed) if transcribed < 1.0 else ("diarize", diarized)
                overall = job_fraction(offsets, shares, "transcribe", together_done[0])
                progress(Progress(stage, fraction, overall, duration))

        report("decode", 0.0)
        whole = decode_audio(source)
        audio, offset = time_range(whole, options.start, options.end)
        duration = audio.duration
        timings["decode"] = time.perf_counter() - started
        report("decode", 1.0)
        if cancel:
            cancel.raise_if_cancelled()

        mark = time.perf_counter()
        language_warnings: tuple[str, ...] = ()
        if options.check_language:
            try:
                language_warnings = self.check_language(audio, transcriber, options.transcription.language)
            except Exception as error:
                # English-only models are run on the recording here first: a GPU fault shows here, not later.
                if not transcriber.fall_back_after(error):
                    raise
                language_warnings = self.check_language(audio, transcriber, options.transcription.language)
        diarization: DiarizationResult | None = None
        if diarize_threads is not None:
            # A diarization that fails stops the transcription at once (its own token), and its error is the job's.
            transcribing = cancel.linked() if cancel is not None else CancelToken()
            # The first job's imports and loads happen here, one thread at a time: two threads importing
            # modules that import each other can deadlock on Python's import locks.
            transcriber.load()
            import torch  # noqa: F401  (what every diarizer imports first)

            beside = DiarizeAlongside(
                lambda fraction, stop: self.diarize(audio, options.diarizer, fraction, stop, diarize_threads),
                cancel,
                on_error=transcribing.cancel,
            )
            try:
                transcription = transcriber.transcribe(
                    audio, progress=lambda f: report_together(f, beside.fraction), cancel=transcribing
                )
                timings["transcribe"] = time.perf_counter() - mark
                waiting = time.perf_counter()
                diarization = beside.result(lambda: report_together(1.0, beside.fraction))
            except BaseException as error:
                # A failed or cancelled transcription, or a progress callback that raised while waiting: no
                # diarization may outlive the job (the next one would find it still running).
                beside.stop()
                if isinstance(error, CancelledError) and beside.error is not None and not (cancel and cancel.cancelled):
                    raise beside.error from None
                raise
            timings["diarize"] = beside.seconds
            timings["diarize_wait"] = time.perf_counter() - waiting  # what finding the speakers added to the job
        else:
            transcription = transcriber.transcribe(audio, progress=lambda f: report("transcribe", f), cancel=cancel)
            timings["transcribe"] = time.perf_counter() - mark
            mark = time.perf_counter()
            if options.diarize:
                diarization = self.diarize(audio, options.diarizer, lambda f: report("diarize", f), cancel)
            timings["diarize"] = timings["diarize_wait"] = time.perf_counter() - mark

        mark = time.perf_counter()
        transcript = build_transcript(audio, transcription, diarization).shifted(offset)
        if diarization is not None and options.identify and options.speaker_library:
            if cancel:
                cancel.raise_if_cancelled()
            transcript = self.identify(transcript, whole, Path(options.speaker_library))
        timings["merge"] = time.perf_counter() - mark
        timings["total"] = time.perf_counter() - started
        # Under the devices the stages ran on: a stage a GPU fault moved to the CPU took a CPU's time.
        ran_on = (transcription.device, "cpu" if diarization is not None and diarization.gpu_fault else diarize_device)
        self.stage_costs.record(
            timings, duration, transcription.model, ran_on[0], diarizer_name, ran_on[1], alongside=alongside
        )
        report("merge", 1.0)
        gpu_faults = tuple(
            note
            for note in (transcription.gpu_fault, diarization.gpu_fault if diarization is not None else None)
            if note
        )
        warnings = input_warnings(whole, probe_duration(source)) + language_warnings + gpu_faults
        return replace(transcript, timings=timings, warnings=warnings + transcript.warnings)

    @staticmethod
    def stage_threads(options: PipelineOptions) -> tuple[TranscriptionOptions, int | None]:
        """The transcription options a job runs with, and the diarizer's CPU threads when it runs beside the
        transcription (None: one after the other).

        Side by side only where it was measured to pay: both stages on the CPU, and a tiny model decoded
        sequentially, which gains nothing from a second thread. A larger model's decoding would (and takes far
        longer than the speakers): halving its threads for the whole job could cost more than the diarization it
        hides, and was not measured, nor were a GPU's stages side by side. Batched decoding does gain from it
        (the ten-minute meeting: 29.4 s on one thread, 16.1 s on two), so side by side it saved 2 s of 39 for
        750 MB more memory: it keeps every core too. So does a transcription the user gave every core."""
        cores = os.cpu_count() or 1
        transcription = options.transcription
        if not (
            options.diarize
            and options.diarize_alongside
            and 0 <= transcription.cpu_threads < cores
            and transcription.batch_size <= 0  # sequential decoding (on a CPU, "auto" is sequential)
            and options.diarizer.device in ("auto", "cpu")
            and resolve_device(transcription.device) == "cpu"
        ):
            return transcription, None
        model = Transcriber(transcription).model_ref  # resolves the model the job will load; loads nothing
        if model_cost(model.name) > model_cost(BUNDLED_MODEL):
            return transcription, None
        threads, diarize_threads = alongside_threads(cores, transcription.cpu_threads)
        return replace(transcription, cpu_threads=threads), diarize_threads

    def check_language(self, audio: Audio, transcriber: Transcriber, language: str | None) -> tuple[str, ...]:
        """Raise :class:`LanguageMismatchError` when ``transcriber``'s model cannot transcribe ``audio``'s language
        (``language``: the one the user declared, None when undeclared) and a language detector or the user says
        so; the transcript's warning when only the English model's own confidence suggests it.

        The confidence route warns and never stops a job: its margin on the recordings here is thin (highest
        English score 0.69, lowest other-language score 0.74, limit 0.72), and a noisy English meeting it wrongly
        flagged would be a job lost, where a German file it lets through costs a warning and a second run."""
        from app.core.engine import language_check

        if language is not None and language.lower() == "en":
            return ()  # declared English: nothing to check, and no model to load for it
        model = transcriber.whisper_model
        if not language_check.is_english_only(transcriber.model_ref.name, model):
            return ()
        verdict = language_check.check_language(
            audio.samples, transcriber.model_ref.name, model, language, self.language_detector()
        )
        if verdict is None or not verdict.not_english:
            return ()
        error = language_check.LanguageMismatchError(
            audio.source, transcriber.model_ref.name, verdict, language_check.suggest_multilingual()
        )
        if verdict.method == "english-model-confidence":
            log.info("%s", error.as_warning())
            return (error.as_warning(),)
        raise error

    def language_detector(self) -> Any | None:
        """The smallest multilingual model on disk, loaded once on the CPU for language detection; None without one."""
        from app.core.engine.language_check import detector_model_path

        path = detector_model_path()
        if path is None:
            self._language_detector = None
            return None
        if self._language_detector is None or self._language_detector[0] != path:
            from faster_whisper import WhisperModel

            # One 30 s window of a small model: the CPU does it in about a second, and the GPU stays free.
            self._language_detector = (path, WhisperModel(str(path), device="cpu", compute_type="int8"))
        return self._language_detector[1]

    def identify(self, transcript: Transcript, audio: Audio, library_dir: Path) -> Transcript:
        """Name the speakers the library knows. A library that cannot be read costs the names, not the job."""
        from app.core.engine.speakers import SpeakerLibrary, SpeakerLibraryError, identify_transcript

        try:
            library = SpeakerLibrary.load(library_dir)
        except SpeakerLibraryError as error:
            log.warning("known speakers not matched: %s", error)
            return replace(transcript, warnings=(*transcript.warnings, f"known speakers not named: {error}"))
        # A voiceprint set aside (wrong length, NaN) or made by an earlier encoder costs its own name only: the
        # job's notes say which. A job only reads the library: remaking voiceprints is the CLI's and the window's.
        notes = tuple(f"known speakers: {problem}" for problem in library.problems)
        notes += tuple(f"known speakers: '{name}' cannot be named: {why}" for name, why in library.waiting().items())
        for note in notes:
            log.warning("%s", note)
        transcript = replace(transcript, warnings=(*transcript.warnings, *notes))
        known = library.known()
        if not known:
            return transcript
        return identify_transcript(transcript, audio, known, self.speaker_encoder())

    def speaker_encoder(self) -> SpeakerEncoder:
        if self._speaker_encoder is None:
            from app.core.engine.diarize.encoder import SpeakerEncoder

            self._speaker_encoder = SpeakerEncoder()
        return self._speaker_encoder

    def diarize(
        self,
        audio: Audio,
        options: DiarizerOptions,
        progress: Callable[[float], None] | None = None,
        cancel: CancelToken | None = None,
        threads: int | None = None,
    ) -> DiarizationResult:
        """Who speaks when; ``threads``: how many CPU threads the diarizer's networks use (None: torch's count)."""
        if threads is None:
            return self._diarize(audio, options, progress, cancel, None)
        import torch  # every diarizer runs on it

        previous = torch.get_num_threads()
        torch.set_num_threads(threads)  # process-wide, and what pyannote's networks use; given back after
        try:
            return self._diarize(audio, options, progress, cancel, threads)
        finally:
            torch.set_num_threads(previous)

    def _diarize(
        self,
        audio: Audio,
        options: DiarizerOptions,
        progress: Callable[[float], None] | None,
        cancel: CancelToken | None,
        threads: int | None,
    ) -> DiarizationResult:
        choice = choose_backend(options)
        try:
            turns, ran, fault = self._run_on_device(choice, audio, options, progress, cancel, threads)
        except CancelledError:
            raise
        except DiarizationError as error:
            if options.backend != "auto" or choice.backend == "embedded":
                raise
            # Automatic choice: a pyannote failure (offline, licence not accepted) must not lose the job.
            log.warning("pyannote failed, falling back to the built-in diarizer: %s", error)
            choice = DiarizerChoice("embedded", f"pyannote could not run ({error}): used the built-in diarizer")
            turns, ran, fault = self._run_on_device(choice, audio, options, progress, cancel, threads)
        diarizer = self._diarizers[self._diarizer_key(choice, ran, threads)]
        device = str(getattr(diarizer, "device", "cpu"))
        note = f"on CPU: {fault}" if fault else getattr(diarizer, "device_note", f"on {device.upper()}")
        return DiarizationResult(
            turns=turns, backend=choice.backend, reason=f"{choice.reason} ({note})", device=device, gpu_fault=fault
        )

    def _run_on_device(
        self,
        choice: DiarizerChoice,
        audio: Audio,
        options: DiarizerOptions,
        progress: Callable[[float], None] | None,
        cancel: CancelToken | None,
        threads: int | None,
    ) -> tuple[tuple[Turn, ...], DiarizerOptions, str | None]:
        """The backend's turns on the options' device; after a known GPU fault, on the CPU. Returns the turns, the
        options they were found with, and the fault's note (None: no fault)."""
        diarizer = self._diarizer(choice, options, threads)
        loading = True
        try:
            load = getattr(diarizer, "load", None)
            if load is not None:
                load()  # the move onto the GPU, where most faults show (and where out of memory is one)
            loading = False
            return diarizer.diarize(audio, options.hints, progress, cancel), options, None
        except CancelledError:
            raise
        except Exception as error:
            on_gpu = str(getattr(diarizer, "device", options.device)) == "cuda"
            fault = classify(error, loading=loading) if on_gpu else None
            if fault is None:
                raise
            note = fault.note("speakers found")
            log.warning("%s (%s; see %s)", note, fault.text, fault.fault.peer_issue)
            record_fault(fault, "diarization", note)
            # The half-moved diarizer is dropped: the next job tries the GPU afresh.
            del self._diarizers[self._diarizer_key(choice, options, threads)]
            on_cpu = replace(options, device="cpu")
            return self._run_backend(choice, audio, on_cpu, progress, cancel, threads), on_cpu, note

    @staticmethod
    def _diarizer_key(
        choice: DiarizerChoice, options: DiarizerOptions, threads: int | None
    ) -> tuple[str, str, str, int | None]:
        source = (options.pyannote_source or "") if choice.backend == "pyannote" else ""
        return (choice.backend, source, options.device, threads)

    def _run_backend(
        self,
        choice: DiarizerChoice,
        audio: Audio,
        options: DiarizerOptions,
        progress: Callable[[float], None] | None,
        cancel: CancelToken | None,
        threads: int | None = None,
    ) -> tuple[Turn, ...]:
        return self._diarizer(choice, options, threads).diarize(audio, options.hints, progress, cancel)

    def _diarizer(self, choice: DiarizerChoice, options: DiarizerOptions, threads: int | None) -> Diarizer:
        """The diarizer for ``choice`` and ``options``, made (nothing loaded) the first time."""
        key = self._diarizer_key(choice, options, threads)
        diarizer = self._diarizers.get(key)
        if diarizer is None:
            if choice.backend == "pyannote":
                from app.core.engine.diarize.pyannote_backend import PyannoteDiarizer

                diarizer = PyannoteDiarizer(options.pyannote_source, options.hf_token, options.device)
            else:
                from app.core.engine.diarize.embedded import EmbeddedDiarizer

                # Its networks' sessions keep the thread count they were made with: one diarizer per count.
                diarizer = EmbeddedDiarizer(device=options.device, threads=threads)
            self._diarizers[key] = diarizer
        return diarizer


# Decoded audio shorter than the container says by more than this is reported as partial. Generous, because
# some headers only estimate (an MP3 without a VBR header: bit rate of its first frame times its size).
_SHORTFALL_SECONDS = 1.0
_SHORTFALL_FRACTION = 0.02
_DECODE_STOPPED = "decoding stopped after "
_DECODE_SKIPPED = "could not decode "
NO_SPEECH = "no speech found: nothing in the recording was heard as words (it is silent, or holds only noise or music)"


def time_range(audio: Audio, start: float | None, end: float | None) -> tuple[Audio, float]:
    """The stretch of ``audio`` from ``start`` to ``end`` (a view: no copy), and where it starts. An end past
    the recording's is its end; a range that holds no audio is the user's mistake, said in one line."""
    if start is None and end is None:
        return audio, 0.0
    from app.core.transcript.times import clock

    first = max(0.0, start or 0.0)
    last = audio.duration if end is None else min(end, audio.duration)
    if first >= audio.duration:
        length = clock(audio.duration)
        raise UsageError(f"{audio.source.name}: the range starts at {clock(first)}, but the recording is {length} long")
    if last <= first:
        raise UsageError(f"{audio.source.name}: the range ends ({clock(end or 0)}) before it starts ({clock(first)})")
    rate = audio.sample_rate
    samples = audio.samples[round(first * rate) : round(last * rate)]
    return replace(audio, samples=samples), first


def input_warnings(audio: Audio, claimed_duration: float | None) -> tuple[str, ...]:
    """The decoder's warnings, in words for the transcript and the queue, plus a check of the decoded length
    against the length the container claims (a truncated copy decodes without any error, only shorter)."""
    decoded = audio.duration
    of_claimed = f" of {claimed_duration:.1f} s" if claimed_duration else ""
    short = claimed_duration is not None and claimed_duration - decoded > max(
        _SHORTFALL_SECONDS, _SHORTFALL_FRACTION * claimed_duration
    )
    warnings: list[str] = []
    reported = False  # a damaged stretch already said, which the shortfall would only repeat wrongly
    for warning in audio.warnings:
        if warning.startswith(_DECODE_STOPPED):
            # "decoding stopped after 30.9 s: <reason>": the decoder gave up part-way; only the audio before
            # the damage is in the transcript.
            reported = True
            reason = warning.split(": ", 1)[1] if ": " in warning else ""
            warnings.append(
                f"{PARTIAL_PREFIX} decoding stopped at {decoded:.1f} s{of_claimed}"
                + (f" ({reason})" if reason else "")
                + "; the rest of the file is damaged and is not in the transcript"
            )
        elif warning.startswith(_DECODE_SKIPPED):
            # "could not decode 23.9 s to 36.0 s: <reason>": a damaged stretch inside the file, skipped (silent in
            # the transcript); the audio after it was decoded.
            reported = True
            stretch, _, reason = warning.removeprefix(_DECODE_SKIPPED).partition(": ")
            warnings.append(
                f"{PARTIAL_PREFIX} {stretch}{of_claimed} could not be decoded"
                + (f" ({reason})" if reason else "")
                + "; that stretch is damaged and is not in the transcript, the rest of the file is"
            )
        else:
            warnings.append(warning)
    if short and not reported:
        warnings.append(
            f"{PARTIAL_PREFIX} only {decoded:.1f} s{of_claimed} could be decoded; the rest of the file is missing "
            "or damaged and is not in the transcript"
        )
    return tuple(warnings)


def build_transcript(
    audio: Audio, transcription: TranscriptionResult, diarization: DiarizationResult | None
) -> Transcript:
    segments = transcription.segments
    speakers: tuple[str, ...] = ()
    info = None
    if diarization is not None:
        segments, speakers, turns = assign_speakers(segments, diarization.turns)
        info = DiarizationInfo(diarization.backend, diarization.reason, turns)
    return Transcript(
        source=str(audio.source),
        duration=audio.duration,
        language=transcription.language,
        model=transcription.model,
        device=transcription.device,
        compute_type=transcription.compute_type,
        segments=segments,
        diarization=info,
        speakers=speakers,
        # An empty transcript marked done, without a word, reads as a failure of Scriba's: say what was found.
        warnings=transcription.notes + (() if segments else (NO_SPEECH,)),
    )
