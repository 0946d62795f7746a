"""The one cancel token: set from any thread, checked between steps, and waited on by a thread whose only work
is to wait for the stop."""

from __future__ import annotations

import threading

import pytest

from app.core.cancel import CancelToken
from app.core.errors import CancelledError

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers


def test_a_token_is_cancelled_once_from_any_thread_and_wakes_its_waiter() -> None:
    token = CancelToken()
    assert not token.cancelled and not token.wait(0)
    token.raise_if_cancelled()  # nothing to raise yet
    other = threading.Thread(target=token.cancel)
    other.start()
    assert token.wait(60)  # a bound for a thread that must end, not a latency
    other.join()
    assert token.cancelled
    with pytest.raises(CancelledError):
        token.raise_if_cancelled()


def test_a_linked_token_stops_with_its_job_and_alone_without_stopping_the_job() -> None:
    """Work beside a job (its diarization) gets a linked token: cancelling the job stops it, and it can be
    stopped on its own (the transcription beside it failed) while the job's token stays as it was."""
    job = CancelToken()
    part = job.linked()
    part.cancel()
    assert part.cancelled and not job.cancelled
    with pytest.raises(CancelledError):
        part.raise_if_cancelled()
    job.raise_if_cancelled()

    job = CancelToken()
    part = job.linked()
    assert not part.wait(0)
    other = threading.Thread(target=job.cancel)
    other.start()
    assert part.wait(60)  # woken by the job's cancel, which never sets the part's own event
    other.join()
    with pytest.raises(CancelledError):
        part.raise_if_cancelled()
