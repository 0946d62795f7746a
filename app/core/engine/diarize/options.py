"""The built-in diarizer's settings, read by every stage."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EmbeddedDiarizerOptions:
    """Durations in seconds. Each value was chosen on all development recordings together (AMI meetings, a phone
    call, single readers, espeak-ng voices, the long-file material); docs/benchmarks.md has today's figures."""

    window_s: float = 1.5  # about the shortest stretch that still says who is speaking
    step_s: float = 0.75
    segmentation_step_s: float = 2.5  # 10 s chunks every 2.5 s: each frame is judged four times
    # Windows go where the averaged speaker count reaches this (half of the chunks hearing a frame: its voice is
    # still evidence); a frame is reported as speech only above half (``reported_speech``), as a tie is most often
    # a breath, a chair or a laugh that no reference marks.
    speech_count: float = 0.5
    overlap_count: float = 1.5  # ... and where it reaches this, two people talk at once
    min_region_s: float = 0.1
    region_gap_s: float = 0.1
    # Merge clusters while |mean_a - mean_b|^2 - noise * (1/n_a + 1/n_b) stays below this (n in independent
    # windows): the one value that neither splits a stuttering reader nor merges distinct voices.
    merge_distance: float = 0.17
    max_speakers: int = 20
    # More windows than this (about 20 minutes of speech) are clustered block by block, then the blocks' clusters
    # together, so time and memory grow linearly with the length.
    cluster_block: int = 1600
    # The noise around each window: the median of this many window pairs nearest to it (about 30 s of speech on
    # either side; 0: one median for the whole recording), as a long recording changes rooms and microphones.
    noise_neighbours: int = 40
    # Inside a block only merges well under the final threshold are made: a wrong one there cannot be undone.
    block_merge_fraction: float = 0.5
    # Windows closer than this fraction of the same-voice spread to a window elsewhere in time are the same audio
    # heard again (an intro, a jingle, a replay) and count as one sample of the voice (``repeat_groups``).
    repeat_distance: float = 0.3
    # With less speech than this nobody can be told apart reliably (and a back-channel is not a new person).
    min_speaker_s: float = 2.0
    # Two voices heard at once are two people: with this much overlapped speech in all, at least two speakers
    # are found. None: off.
    two_voices_overlap_s: float | None = 1.0
    change_penalty: float = 2.0  # Viterbi cost of a speaker change, in units of per-frame similarity
    min_turn_s: float = 0.3
    # A pause of one speaker shorter than this is closed: it still closes a stop's silence inside a word, while
    # the pauses the segmentation hears are pauses in the references too.
    bridge_s: float = 0.25
    min_overlap_s: float = 0.1
    # Rounds of measuring each voice again from the windows inside its own turns and labelling again; on long
    # recordings the labels never settle, and each round costs a Viterbi pass.
    resegment_rounds: int = 1
    # Short utterances the segmentation hears as another person than their neighbours go to that person.
    interjections: bool = True
    # Extra speakers a count asks for are split off where the segmentation hears two people, not where the voice
    # prints drift, which halved the main speaker (``split_heard_apart``).
    split_heard_apart: bool = True
