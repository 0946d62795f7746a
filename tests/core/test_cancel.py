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
