"""Audio heard more than once (an intro, an ad, a replayed clip) counts once as evidence of a voice.

Issue 17: on the long-file material, whose rounds repeat their audio, the repeated windows made the noise
correction vanish and each repeated passage of one voice became a speaker of its own (DER 0.62 on an hour)."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.engine.diarize.windows import repeat_groups

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers

WINDOW = 150
STEP = 75


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_the_same_audio_far_apart_shares_a_group_and_other_audio_does_not() -> None:
    rng = np.random.default_rng(7)
    passage = _unit(rng.normal(size=(6, 32)))  # six windows of one stretch of audio
    other = _unit(rng.normal(size=(6, 32)))  # six windows of other audio
    heard_again = _unit(passage + rng.normal(scale=0.01, size=passage.shape))  # re-embedded: nearly equal
    embeddings = np.concatenate([passage, other, heard_again])
    starts = np.concatenate([np.arange(6) * STEP, 10_000 + np.arange(6) * STEP, 50_000 + np.arange(6) * STEP])
    groups = repeat_groups(embeddings, starts, WINDOW, noise=0.3, repeat_distance=0.3)
    assert list(groups[12:]) == list(groups[:6])  # each repeated window joins its first hearing
    assert len(set(groups[:12])) == 12  # distinct audio: every window its own
    # Computed a few rows at a time (long recordings): the same answer.
    assert list(repeat_groups(embeddings, starts, WINDOW, 0.3, 0.3, cells=4 * 18)) == list(groups)
    assert len(set(repeat_groups(embeddings, starts, WINDOW, 0.3, repeat_distance=0.0))) == 18


def test_windows_that_overlap_in_time_are_not_repeats() -> None:
    rng = np.random.default_rng(8)
    vector = _unit(rng.normal(size=(1, 32)))
    # Alike because they share audio (a step apart: half of it), not because the audio came again.
    embeddings = np.repeat(vector, 2, axis=0)
    assert len(set(repeat_groups(embeddings, np.array([0, STEP]), WINDOW, 0.3, 0.3))) == 2
    assert len(set(repeat_groups(embeddings, np.array([0, WINDOW - 1]), WINDOW, 0.3, 0.3))) == 2
    assert len(set(repeat_groups(embeddings, np.array([0, WINDOW]), WINDOW, 0.3, 0.3))) == 1


def test_chains_of_repeats_are_one_stretch() -> None:
    # A heard again as B, B again as C, but A and C a little further apart than the limit: all one stretch.
    embeddings = _unit(np.array([[1.0, 0.0], [1.0, 0.2], [1.0, 0.4]]))
    squared = np.sum((embeddings[0] - embeddings[2]) ** 2)
    starts = np.array([0, 1000, 2000])
    limit = 0.3 * 0.3
    assert squared > limit > np.sum((embeddings[0] - embeddings[1]) ** 2)
    assert len(set(repeat_groups(embeddings, starts, WINDOW, noise=0.3, repeat_distance=0.3))) == 1
