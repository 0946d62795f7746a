"""One root for the errors a user can cause or meet, and the exit codes `scriba` maps them to."""

from __future__ import annotations

import signal

import pytest

from app.core.errors import ExitCode, MediaError, ScribaError, UsageError

pytestmark = pytest.mark.unit  # `make test-fast`: no model, no spawned scriba, no servers


def test_the_exit_codes_keep_their_numbers() -> None:
    # Scripts test these numbers: changing one breaks them silently.
    assert {code.name: int(code) for code in ExitCode} == {
        "OK": 0,
        "FAILED": 1,
        "USAGE": 2,
        "HANGUP": 129,
        "INTERRUPTED": 130,
        "BROKEN_PIPE": 141,
        "TERMINATED": 143,
    }
    assert ExitCode.for_signal(signal.SIGINT) is ExitCode.INTERRUPTED
    assert ExitCode.for_signal(signal.SIGTERM) is ExitCode.TERMINATED


def test_every_error_written_for_a_user_has_one_root_and_an_exit_code() -> None:
    from app.cloud.offload.base import BudgetExceeded, OffloadError
    from app.cloud.offload.controller import ChoiceError
    from app.cloud.pricing.prices import PriceTableError
    from app.cloud.providers import AuthError, ProviderError
    from app.cloud.remote.transport import HostKeyError, TransportError

    for kind in (OffloadError, BudgetExceeded, ChoiceError, PriceTableError, ProviderError, AuthError):
        assert issubclass(kind, ScribaError), kind
    for kind in (TransportError, HostKeyError, MediaError):
        assert issubclass(kind, ScribaError), kind
    from app.cloud.offload.ledger import LedgerEntryNotFound, LedgerStateError
    from app.core.queue.jobs import JobNotFoundError, JobStateError
    from app.core.queue.sqlite_db import NewerFileError

    for kind in (JobNotFoundError, JobStateError, NewerFileError, LedgerEntryNotFound, LedgerStateError):
        assert issubclass(kind, ScribaError), kind
    assert JobNotFoundError(7).exit_code is ExitCode.FAILED and "scriba queue list" in str(JobNotFoundError(7))
    # Still caught where a lookup or a state error was caught before they had one root.
    assert issubclass(JobNotFoundError, LookupError) and issubclass(JobStateError, RuntimeError)
    assert issubclass(NewerFileError, RuntimeError)
    assert issubclass(PriceTableError, ValueError), "still caught where a bad value is"
    assert OffloadError("x").exit_code is ExitCode.FAILED
    assert UsageError("x").exit_code is ExitCode.USAGE


def test_a_command_line_hint_is_said_by_the_command_line_only() -> None:
    from app.core.errors import ModelNotFoundError, ScribaError

    plain = ScribaError("the file is empty (0 bytes)")
    assert str(plain) == plain.words == "the file is empty (0 bytes)"
    missing = ModelNotFoundError("Model 'small' is not downloaded yet (485 MB).")
    missing.cli_hint = "Download it once with `scriba models download small`."
    assert (
        str(missing)
        == "Model 'small' is not downloaded yet (485 MB). Download it once with `scriba models download small`."
    )
    assert missing.words == "Model 'small' is not downloaded yet (485 MB)."
