"""What every GPU rental adapter offers Scriba, and the typed errors it raises.

An adapter turns one provider's HTTP API into five questions: what can be rented and at what price
(:meth:`Provider.offers`), rent this (:meth:`Provider.launch`), is it up yet (:meth:`Provider.wait_ready`),
end it (:meth:`Provider.terminate` / :meth:`Provider.terminate_verified`), and which of our machines exist
(:meth:`Provider.list_ours`). Every machine Scriba rents carries a label starting with ``scriba-`` so that one
whose id was never recorded (a crash between "create" and "got the id") can still be found and ended.

Errors say what happened and what to do, and never contain the API key: the HTTP layer redacts it from
everything a provider sends back, and the key is kept out of every ``repr``.
"""

from __future__ import annotations

import abc
import logging
import re
import time
from collections.abc import Callable
from typing import Any

from app.cloud.types import Instance, Offer
from app.core.cancel import CancelToken
from app.core.errors import CancelledError, ScribaError
from app.core.secrets import KEYRING_SERVICE

log = logging.getLogger(__name__)

LABEL_PREFIX = "scriba-"
# Lambda caps instance names at 64 characters; the other providers accept at least that.
MAX_LABEL_LENGTH = 64
_LABEL_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

Sleep = Callable[[float], None]
Clock = Callable[[], float]


# ------------------------------------------------------------------------------------------------- errors


class ProviderError(ScribaError):
    """Something a provider did or refused. ``maybe_created`` is True when a launch request got no answer:
    a machine may exist that nobody knows the id of, so the ledger keeps the intent open until a sweep
    has looked for it by label."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        instance_id: str | None = None,
        status: int | None = None,
        maybe_created: bool = False,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.instance_id = instance_id
        self.status = status
        self.maybe_created = maybe_created


class RateLimited(ProviderError):
    """HTTP 429 that did not clear within the retries (or asked for a longer wait than Scriba will sleep)."""

    def __init__(
        self, message: str, *, provider: str = "", retry_after_s: float | None = None, maybe_created: bool = False
    ) -> None:
        super().__init__(message, provider=provider, status=429, maybe_created=maybe_created)
        self.retry_after_s = retry_after_s


class NoCapacity(ProviderError):
    """The offer cannot be rented right now (sold out, taken by someone else, quota): try another offer."""


class InsufficientBalance(ProviderError):
    """The provider account has no credit left: no other offer from this provider will succeed either."""


class AuthError(ProviderError):
    """The API key is missing, wrong, expired or lacks permission (HTTP 401/403)."""

    def __init__(self, message: str, *, provider: str = "", key_name: str = "", status: int | None = None) -> None:
        super().__init__(message, provider=provider, status=status)
        self.key_name = key_name


class LaunchTimeout(ProviderError):
    """The machine did not become reachable in time. It exists and bills until terminated."""

    def __init__(
        self, message: str, *, provider: str = "", instance_id: str | None = None, last_state: str = ""
    ) -> None:
        super().__init__(message, provider=provider, instance_id=instance_id)
        self.last_state = last_state


class LaunchFailed(ProviderError):
    """The machine went to a failed, stopped or terminated state (or vanished) while booting."""


class TerminateFailed(ProviderError):
    """Termination could not be confirmed: the machine may still be billing."""


class ApiError(ProviderError):
    """Any other 4xx answer; ``body`` is the provider's parsed JSON so adapters can classify it."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = None,
        body: object = None,
        detail: str = "",
        maybe_created: bool = False,
    ) -> None:
        super().__init__(message, provider=provider, status=status, maybe_created=maybe_created)
        self.body = body
        self.detail = detail


class NotFound(ApiError):
    """HTTP 404: for an instance, usually means it is gone."""


def missing_key_error(title: str, key_name: str, provider: str) -> AuthError:
    return AuthError(
        f"No {title} API key is set. Store it with `scriba offload key set {provider}` (it goes to the system "
        f"keyring, service '{KEYRING_SERVICE}', entry '{key_name}'), or on a machine without a keyring set "
        f"SCRIBA_{provider.upper()}_API_KEY in the environment.",
        key_name=key_name,
        provider=provider,
    )


def rejected_key_error(title: str, key_name: str, provider: str, status: int, detail: str) -> AuthError:
    why = f": {detail}" if detail else ""
    return AuthError(
        f"{title} rejected the API key (HTTP {status}{why}). Check that the key is valid and may create and "
        f"delete machines, then store it in the system keyring under service '{KEYRING_SERVICE}', entry "
        f"'{key_name}' (for example: keyring set {KEYRING_SERVICE} {key_name}).",
        key_name=key_name,
        provider=provider,
        status=status,
    )


# ------------------------------------------------------------------------------------------------- helpers


def check_label(label: str) -> None:
    """Labels travel as instance names: keep them short and plain so every provider accepts them as given."""
    if not label.startswith(LABEL_PREFIX):
        raise ValueError(f"instance label {label!r} must start with {LABEL_PREFIX!r}, so that orphans can be found")
    if len(label) > MAX_LABEL_LENGTH or not _LABEL_PATTERN.match(label):
        raise ValueError(
            f"instance label {label!r} must be at most {MAX_LABEL_LENGTH} letters, digits, '.', '_' or '-'"
        )


def normalize_gpu_name(raw: str) -> str:
    """Providers spell one card several ways ("NVIDIA GeForce RTX 4090", "RTX_4090", "A100 SXM4"); the
    throughput table uses the short form ("RTX 4090", "A100 SXM")."""
    name = re.sub(r"[\s_]+", " ", raw).strip()
    name = re.sub(r"^(?:(?:NVIDIA|GeForce|Tesla)\s+)+", "", name, flags=re.IGNORECASE)
    # SXM4 and SXM5 are the same form factor as far as speed estimates go.
    name = re.sub(r"\bSXM\d\b", "SXM", name, flags=re.IGNORECASE)
    return name


def unexpected_answer(title: str, provider: str, where: str) -> ProviderError:
    return ProviderError(
        f"{title} answered {where} in a shape Scriba does not know; its API may have changed. Update Scriba, and "
        "meanwhile check the provider's console for machines Scriba started.",
        provider=provider,
    )


def field(answer: object, key: str, kind: type, *, title: str, provider: str, where: str) -> Any:
    """``answer[key]`` checked to be a ``kind``. A list call must never read a changed API as "no machines":
    that is how an orphan stays invisible and billing (SkyPilot issue 10517), so shape changes raise."""
    value = answer.get(key) if isinstance(answer, dict) else None
    if not isinstance(value, kind):
        raise unexpected_answer(title, provider, where)
    return value


# ------------------------------------------------------------------------------------------------- provider


class Provider(abc.ABC):
    """One GPU rental API. Adapters implement the five abstract methods; waiting and verified termination
    are written once here, on top of :meth:`get_instance`.

    ``sleep`` and ``clock`` are injected so that tests can run a fifteen-minute boot in no time.
    """

    # Set once per adapter class. Plain (not ClassVar) annotations, so that adapters also satisfy protocols that
    # declare ``name: str``, like the offload's ProviderLike.
    name: str  # "lambda", "vast", "runpod": the Offer.provider value and the ledger's key
    title: str  # "Lambda Cloud": for messages
    key_name: str  # keyring entry under service "scriba"
    console_url: str  # where a person can see and end machines by hand
    ssh_user: str = "root"
    rents_machines = True  # as the offload reads it: these machines bill until terminated
    # True where an offer is one particular machine (Vast.ai's asks): N machines need N offers. Elsewhere an offer
    # is a kind of machine that can be rented again and again.
    offer_is_one_machine = False

    def __init__(self, *, sleep: Sleep = time.sleep, clock: Clock = time.monotonic) -> None:
        self._sleep = sleep
        self._clock = clock

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    # ------------------------------------------------------------------------------------- the adapter part

    @abc.abstractmethod
    def offers(self) -> list[Offer]:
        """What can be rented now, at the provider's live price."""

    @abc.abstractmethod
    def launch(self, offer: Offer, ssh_public_key: str, label: str) -> Instance:
        """Rent ``offer``; returns as soon as the provider has given an instance id (the machine is booting).

        Raises :class:`NoCapacity` when the offer is gone. When the request got no answer the adapter looks
        for a machine with ``label`` once; if it finds none it raises with ``maybe_created`` set.
        """

    @abc.abstractmethod
    def get_instance(self, instance_id: str) -> Instance | None:
        """The machine as the provider describes it now, or None when the provider no longer knows it."""

    @abc.abstractmethod
    def terminate(self, instance_id: str) -> None:
        """Ask the provider to end the machine for good (never "stop": stopped machines still bill storage).
        An instance the provider no longer knows counts as terminated."""

    def self_terminate_command(self, instance_id: str) -> list[str] | None:
        """A command that, run on the machine itself, ends it (for the watchdog when this computer is gone).

        None where ending it from inside would need the user's API key on a machine we do not own (Lambda,
        Vast): there the client's teardown and the ledger's sweep at the next start end it.
        """
        return None

    @abc.abstractmethod
    def list_ours(self, label_prefix: str = LABEL_PREFIX) -> list[Instance]:
        """Every machine on the account whose label starts with ``label_prefix``."""

    # ------------------------------------------------------------------------------------- shared behaviour

    def is_terminated(self, instance_id: str) -> bool:
        instance = self.get_instance(instance_id)
        return instance is None or instance.state == "terminated"

    def wait_ready(
        self, instance_id: str, timeout_s: float = 900.0, poll_s: float = 10.0, cancel: CancelToken | None = None
    ) -> Instance:
        """Poll until the machine is running with an SSH endpoint (host, port, user); ``cancel`` ends the wait
        (CancelledError) within one poll, so that a machine the user no longer wants is torn down at once.

        "Running" is not "sshd answers": the transport still retries its first connection. A provider API
        that flaps during a long boot (429, 5xx, a dropped connection) does not end the wait; an instance that
        fails, stops or disappears does (:class:`LaunchFailed`), and so does the deadline (:class:`LaunchTimeout`).
        """
        deadline = self._clock() + timeout_s
        last_state = "unknown"
        while True:
            try:
                instance = self.get_instance(instance_id)
            except (AuthError, ApiError):
                raise
            except ProviderError as error:  # rate limit, 5xx, network: transient while a machine boots
                log.info("%s: status of %s not read (%s); still waiting", self.name, instance_id, error)
            else:
                if instance is None:
                    raise LaunchFailed(
                        f"{self.title} no longer knows instance {instance_id}: it disappeared while booting. "
                        "Try another offer.",
                        provider=self.name,
                        instance_id=instance_id,
                    )
                last_state = instance.state
                if instance.state in ("failed", "terminated", "stopping"):
                    raise LaunchFailed(
                        f"{self.title} instance {instance_id} went to '{instance.state}' while booting. "
                        "Terminate it (it may still bill) and try another offer.",
                        provider=self.name,
                        instance_id=instance_id,
                    )
                if instance.state == "running" and instance.host:
                    return instance
            if cancel is not None and cancel.cancelled:
                raise CancelledError()
            now = self._clock()
            if now >= deadline:
                raise LaunchTimeout(
                    f"{self.title} instance {instance_id} was not ready after {timeout_s:.0f} s "
                    f"(last state: {last_state}). It bills until terminated: terminate it and try another offer.",
                    provider=self.name,
                    instance_id=instance_id,
                    last_state=last_state,
                )
            self._sleep(max(0.0, min(poll_s, deadline - now)))

    def terminate_verified(
        self, instance_id: str, timeout_s: float = 300.0, poll_s: float = 5.0, resend_every: int = 6
    ) -> None:
        """Terminate, then poll until the provider says the machine is gone.

        A terminate request that fails is sent again on the next round; one that is accepted but changes
        nothing ("terminate that does nothing") is sent again every ``resend_every`` polls. Raises
        :class:`TerminateFailed` at the deadline, naming where to end the machine by hand.
        """
        deadline = self._clock() + timeout_s
        last_error: ProviderError | None = None
        polls_since_request: int | None = None  # None: no request accepted yet
        while True:
            if polls_since_request is None or polls_since_request >= resend_every:
                try:
                    self.terminate(instance_id)
                    polls_since_request = 0
                except AuthError:
                    raise
                except ProviderError as error:
                    last_error = error
                    log.info("%s: terminate %s failed (%s); retrying", self.name, instance_id, error)
            # Checked even after a failed request: a machine that is already gone needs no terminate.
            try:
                if self.is_terminated(instance_id):
                    return
            except AuthError:
                raise
            except ProviderError as error:
                last_error = error
            if polls_since_request is not None:
                polls_since_request += 1
            now = self._clock()
            if now >= deadline:
                why = f" Last error: {last_error}" if last_error else " It still reports the machine as present."
                raise TerminateFailed(
                    f"{self.title} did not confirm that instance {instance_id} is terminated after "
                    f"{timeout_s:.0f} s.{why} It may still be billing: end it at {self.console_url}. "
                    "Scriba tries again the next time it starts.",
                    provider=self.name,
                    instance_id=instance_id,
                    status=last_error.status if last_error else None,
                )
            self._sleep(max(0.0, min(poll_s, deadline - now)))

    def _field(self, answer: object, key: str, kind: type, where: str) -> Any:
        return field(answer, key, kind, title=self.title, provider=self.name, where=where)

    def _recover_launch(self, label: str, error: ProviderError) -> Instance:
        """A launch request went unanswered: the machine may exist. Look for it by its label once, so that the
        caller gets its id now rather than at the next start-up sweep."""
        try:
            found = [instance for instance in self.list_ours(label) if instance.label == label]
        except ProviderError as lookup_error:
            log.warning("%s: looking for %s after an unanswered launch failed: %s", self.name, label, lookup_error)
            found = []
        if found:
            log.warning("%s: launch of %s got no answer, but the machine exists: %s", self.name, label, found[0])
            return found[0]
        raise ProviderError(
            f"{error} A machine labelled '{label}' may have been created anyway: Scriba looks for it and "
            f"terminates it at its next start (or check {self.console_url}).",
            provider=self.name,
            status=error.status,
            maybe_created=True,
        ) from None
