"""The built-in diarizer: offline, no token, from the pip install alone.

Why it is built this way (measured on the nine real AMI meeting openings, pyannote's phone call, espeak-ng
voices and four single-speaker recordings; docs/benchmarks.md "Speakers and words on real recordings"):

1. **Who is talking, and how many at once**: pyannote's segmentation-3.0 network over sliding 10 s chunks.
   It finds speech that voice activity detection misses inside turns, and it hears overlapped speech, which
   alone is about 12 % of a meeting's speaking time.
2. **Voices**: CAM++ embeddings of 1.5 s windows every 0.75 s inside speech. 1.5 s is about the shortest
   stretch that still says who is speaking; shorter windows made the clustering worse on every meeting.
3. **How many speakers** (the hard part): agglomerative clustering of the windows that merges the two
   closest clusters while the squared distance of their mean vectors, *less the part of it that noise alone
   explains*, stays under ``merge_distance``. The noise is measured in each recording: windows one window
   apart inside one stretch of speech are nearly always the same person, and their spread says how far apart
   two halves of one voice drift in this room, on this microphone. A fixed cosine threshold (the previous
   design) had to be retuned per recording: espeak-ng voices wanted 0.25, meetings 0.35 and a phone call
   0.32, and a single reader was split at 0.3. Corrected for noise, one setting holds for all of them.
   Speakers with under ``min_speaker_s`` of speech are given to the nearest real voice: with less than two
   seconds nobody can be told apart reliably, and a back-channel ("mm-hmm") is not a new person. And where
   the segmentation hears a second or more of two voices at once, there are at least two people, even when
   no clean stretch of either voice tells them apart.
4. **When**: each 10 ms speech frame scores every speaker by the similarity of the windows covering it; a
   Viterbi path with a cost per speaker change picks the labels (no flicker); each voice is measured again
   from the windows inside its own turns and the frames are labelled once more; pauses of one speaker under
   ``bridge_s`` are closed, and where the segmentation hears two people at once the second-best speaker is
   added, so overlapped speech is attributed to both.
5. **Interjections**: an utterance shorter than a window ("Hello?", "mm-hmm") has no window of its own, so the
   voices give it to whoever spoke around it. The segmentation hears each 10 s chunk whole and numbers its
   speakers within it: where most chunks hear such an utterance as another person than its neighbours, it goes
   to the speaker given to the rest of that person's talk in the chunk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from app.core.cancel import CancelToken
from app.core.engine.diarize.base import SpeakerHints, Turn
from app.core.engine.diarize.bundled_models import Segmentation, SpeakerEmbedding
from app.core.engine.diarize.clustering import HeardApart, _two_voices_at_once, cluster, drop_small_speakers
from app.core.engine.diarize.frame_labels import (
    _absorb_short_turns,
    _bridge_pauses,
    _frame_scores,
    _frames_to_turns,
    _overlap_turns,
    _turn_centroids,
    _viterbi,
)
from app.core.engine.diarize.frames import FRAME_S, _unit
from app.core.engine.diarize.interjections import interjections
from app.core.engine.diarize.options import EmbeddedDiarizerOptions
from app.core.engine.diarize.windows import (
    _window_starts,
    local_voice_spread,
    repeat_groups,
    reported_speech,
    same_voice_spread,
    speech_regions,
)
from app.core.progress import FractionProgress

if TYPE_CHECKING:
    from app.core.engine.audio import Audio


class EmbeddedDiarizer:
    name = "embedded"

    def __init__(
        self, options: EmbeddedDiarizerOptions | None = None, threads: int | None = None, device: str = "cpu"
    ) -> None:
        self.options = options or EmbeddedDiarizerOptions()
        self._threads = threads
        self.device = device
        self._segmentation: Segmentation | None = None
        self._embedding: SpeakerEmbedding | None = None

    def load(self) -> None:
        """Load the networks onto the device now (the move onto a GPU is where its faults show)."""
        self._load()

    def _load(self) -> tuple[Segmentation, SpeakerEmbedding]:
        import torch

        if self._threads:
            torch.set_num_threads(self._threads)
        if self.device == "cuda" and not torch.cuda.is_available():
            # CTranslate2 (CUDA 12) can see a GPU that torch (CUDA 13) cannot use: diarize on the CPU rather
            # than fail the job; the transcript's reason then says "on CPU".
            self.device = "cpu"
        if self._segmentation is None:
            self._segmentation = Segmentation(self.device, self.options.segmentation_step_s)
        if self._embedding is None:
            self._embedding = SpeakerEmbedding(self.device)
        return self._segmentation, self._embedding

    def diarize(
        self,
        audio: Audio,
        hints: SpeakerHints,
        progress: FractionProgress | None = None,
        cancel: CancelToken | None = None,
    ) -> tuple[Turn, ...]:
        options = self.options
        samples: np.ndarray = audio.samples
        segmentation, embedding = self._load()
        # Progress: in ONNX Runtime the segmentation is about a quarter of the time, the speaker embeddings 70 %,
        # the rest 5 % (three AMI clips, cProfile: 22 / 75 / 3 %; the clustering's share grows with the length).
        activity = segmentation.local_activity(samples, cancel, _scaled(progress, 0.0, 0.25))
        count = activity.count()
        regions = speech_regions(count, options)
        if not regions:
            return ()
        # The filterbank stops 25 ms short of the end (Kaldi's edge snipping); the count covers every 10 ms, so
        # frames are counted by it and a window reaching past the filterbank embeds its last whole window.
        n_frames = len(count)
        window = round(options.window_s / FRAME_S)
        step = max(1, round(options.step_s / FRAME_S))
        starts, spans = _window_starts(regions, n_frames, window, step)
        embeddings = embedding.embed_windows(
            samples, starts, window, progress=_scaled(progress, 0.25, 0.7), cancel=cancel
        )
        if cancel:
            cancel.raise_if_cancelled()

        independent = min(1.0, step / window)  # overlapping windows are not independent samples of a voice
        overall_noise = same_voice_spread(embeddings, starts, window)
        noise: float | np.ndarray = overall_noise
        if options.noise_neighbours:
            noise = local_voice_spread(embeddings, starts, window, options.noise_neighbours, overall_noise)
        groups = repeat_groups(embeddings, starts, window, noise, options.repeat_distance, cancel)
        hints = _two_voices_at_once(count[:n_frames], hints, options)
        heard_apart = HeardApart(activity, starts, window) if options.split_heard_apart else None
        labels = cluster(embeddings, noise, independent, hints, options, groups, heard_apart)
        labels = drop_small_speakers(embeddings, labels, spans, hints, options.min_speaker_s)
        centroids = np.stack([_unit(embeddings[labels == k].mean(axis=0)) for k in range(labels.max() + 1)])

        if progress:
            progress(0.95)
        speech = reported_speech(count[:n_frames], regions)
        scores, covered = _frame_scores((embeddings @ centroids.T).astype(np.float32), spans, n_frames)
        frame_labels = _viterbi(scores, speech & covered, options.change_penalty)
        pure_window = 1.0 - options.min_turn_s / options.window_s  # no whole other turn fits in the rest
        for _ in range(options.resegment_rounds):
            centroids = _turn_centroids(embeddings, spans, frame_labels, centroids, pure_window)
            scores, covered = _frame_scores((embeddings @ centroids.T).astype(np.float32), spans, n_frames)
            relabelled = _viterbi(scores, speech & covered, options.change_penalty)
            settled = np.array_equal(relabelled, frame_labels)
            frame_labels = relabelled
            if settled:
                break
        if options.interjections and len(centroids) > 1:
            frame_labels = interjections(activity, frame_labels, window)
        frame_labels = _absorb_short_turns(frame_labels, round(options.min_turn_s / FRAME_S))
        frame_labels = _bridge_pauses(frame_labels, round(options.bridge_s / FRAME_S))
        turns = _frames_to_turns(frame_labels)
        if len(centroids) > 1:
            turns += _overlap_turns(scores, frame_labels, count[:n_frames] >= options.overlap_count, options)
        if progress:
            progress(1.0)
        return tuple(sorted(turns, key=lambda turn: (turn.start, turn.speaker)))


def _scaled(progress: FractionProgress | None, offset: float, share: float) -> FractionProgress | None:
    if progress is None:
        return None
    return lambda fraction: progress(offset + share * min(1.0, max(0.0, fraction)))
