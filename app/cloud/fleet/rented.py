"""A fleet on N rented machines: each one rented, watched and ended exactly as a single offload's machine is.

Every node is an :class:`~app.cloud.offload.run.Offload`'s :meth:`machine`: in the ledger before the provider hears
of it, its id recorded the moment it exists, terminated and verified terminated on the way out whatever happens,
and found by the sweep at the next start if this process dies. The machines boot together; those that come up
run :class:`~app.cloud.fleet.run.Fleet`'s queue. A node the queue has nothing left for is ended at once (its
machine stops billing while the others finish); the rest are ended when the fleet ends. On each machine the
node's own watchdog ends the work (and, where the provider allows it, the machine) when the queue stops
answering or the budget's deadline passes.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app.cloud.fleet.run import Fleet, FleetConfig, FleetTiming
from app.cloud.offload.base import (
    BudgetExceeded,
    LedgerLike,
    OffloadCancelled,
    OffloadConfig,
    OffloadError,
    OffloadEvent,
    OffloadResult,
    ProviderLike,
    Teardown,
    TeardownState,
)
from app.cloud.offload.run import Offload, signals_held
from app.cloud.remote.transport import SshEndpoint
from app.cloud.types import Instance, Offer
from app.core.cancel import CancelToken
from app.core.queue.jobs import JobOptions


@dataclass
class RentedNode:
    offload: Offload
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    instance: Instance | None = None
    failure: str | None = None
    ended: bool = False

    @property
    def billed_s(self) -> float:
        started = self.offload._launched_at
        if started is None:
            return 0.0
        return (self.offload.ended_at or time.monotonic()) - started


class RentedFleet:
    """``run(files)`` on ``len(offers)`` machines of ``provider`` (one offer each; a provider whose offers are
    single machines, Vast.ai's, needs as many distinct offers)."""

    def __init__(
        self,
        provider: ProviderLike,
        offers: Sequence[Offer],
        ledger: LedgerLike,
        config: OffloadConfig,
        status: Callable[[str], None] = lambda text: None,
        timing: FleetTiming | None = None,
    ) -> None:
        if not offers:
            raise OffloadError("a fleet needs at least one machine")
        self.provider = provider
        self.offer = offers[0]  # what the queue's rows say the jobs ran on
        self.config = config
        self.status = status
        self.timing = timing or FleetTiming(connect_wait_s=300.0)
        self.nodes = [RentedNode(Offload(provider, offer, ledger, config)) for offer in offers]
        self._lock = threading.Lock()
        self._closing = False
        self._fleet: Fleet | None = None
        self._on_event: Callable[[OffloadEvent], None] | None = None
        self._started = time.monotonic()

    def cancel(self) -> None:
        for node in self.nodes:
            node.offload.cancel()
        if self._fleet is not None:
            self._fleet.cancel()

    @property
    def teardowns(self) -> list[Teardown]:
        return [node.offload.teardown for node in self.nodes]

    @property
    def teardown(self) -> Teardown:
        """All machines' teardowns as one, as a single offload's reads: confirmed only when every one is."""
        states = [item.state for item in self.teardowns]
        if "unconfirmed" in states:
            state: TeardownState = "unconfirmed"
        elif "terminated" in states:
            state = "terminated"
        elif "not_started" in states:
            state = "not_started"
        else:
            state = "nothing_to_end"
        return Teardown(
            state=state,
            machines=tuple(machine for item in self.teardowns for machine in item.machines),
            message=" ".join(item.message for item in self.teardowns if item.state == "unconfirmed"),
            ledger_errors=[error for item in self.teardowns for error in item.ledger_errors],
        )

    @property
    def cost_usd(self) -> float:
        return sum(node.offload.offer.usd_per_hour * node.billed_s / 3600 for node in self.nodes)

    def run(
        self,
        files: Sequence[Path],
        job_ref: str = "",
        file_options: Sequence[JobOptions] | None = None,
        on_event: Callable[[OffloadEvent], None] | None = None,
        cancel: CancelToken | None = None,
    ) -> OffloadResult:
        """As :meth:`Offload.run`: ``on_event`` hears status lines and each file's started/done/failed, with the
        cost of all machines so far; ``cancel`` (the caller's token) stops every machine's part."""
        self._on_event = on_event
        budget, estimate = self.config.budget_usd, self.config.estimate_usd
        if budget is not None and estimate is not None and estimate > budget:
            raise BudgetExceeded(
                f"the estimate for {len(self.nodes)} machines (${estimate:.2f}) is over the budget "
                f"(${budget:.2f}): nothing was launched. Raise --budget, or use fewer machines."
            )
        for path in files:
            if not path.is_file():
                raise OffloadError(f"{path}: no such file; nothing was launched")
        if cancel is not None:  # after the checks above: the thread ends with the run (_closing)
            threading.Thread(target=self._follow_cancel, args=(cancel,), daemon=True, name="fleet-cancel").start()
        started = self._started = time.monotonic()
        launches = [
            threading.Thread(target=self._launch, args=(node, job_ref), name=f"launch-{index + 1}")
            for index, node in enumerate(self.nodes)
        ]
        try:
            for thread in launches:
                thread.start()
            for thread in launches:
                thread.join()
            ready = [node for node in self.nodes if node.instance is not None]
            if not ready:
                reasons = "; ".join(sorted({node.failure or "not ready" for node in self.nodes}))
                raise OffloadError(f"no machine could be rented: {reasons}")
            if len(ready) < len(self.nodes):
                self._say(f"{len(ready)} of {len(self.nodes)} machines are up; the fleet runs on those")
            result = self._run_fleet(ready, files, file_options)
        except BaseException as error:
            self.cancel()  # machines still booting stop at their next step instead of joining a fleet that ended
            if cancel is not None and cancel.cancelled:
                raise OffloadCancelled("cancelled by the user") from error
            raise
        finally:
            self._end_all(launches)
            self._say(f"{len(self.nodes)} machine(s) billed about ${self.cost_usd:.2f} in all")
        result.seconds = time.monotonic() - started
        result.cost_usd = self.cost_usd  # now that every machine's bill has ended
        return result

    def _follow_cancel(self, cancel: CancelToken) -> None:
        while not cancel.wait(0.5):
            if self._closing:
                return
        self.cancel()

    def _say(self, text: str, kind: str = "status", index: int | None = None) -> None:
        self.status(text)
        if self._on_event is not None:
            elapsed = time.monotonic() - self._started
            self._on_event(OffloadEvent(kind, text, index=index, elapsed_s=elapsed, cost_usd=self.cost_usd))

    # ------------------------------------------------------------------------------------------- machines

    def _launch(self, node: RentedNode, job_ref: str) -> None:
        def event(item: OffloadEvent) -> None:
            if item.kind == "status" and item.message:
                self._say(item.message)

        try:
            instance = node.stack.enter_context(node.offload.machine(job_ref, on_event=event))
        except BaseException as error:  # this machine is left out (and already torn down); the others go on
            node.failure = str(error) or type(error).__name__
            self._say(f"a machine could not be rented: {node.failure}")
            return
        with self._lock:
            closing = self._closing
            if not closing:
                node.instance = instance
        if closing:  # the fleet ended (Ctrl-C, an error) while this one was still booting
            self._end(node)

    def _end(self, node: RentedNode) -> None:
        """Tear the node's machine down (verified, recorded); once only, whoever asks first."""
        with self._lock:
            if node.ended:
                return
            node.ended = True
        node.stack.close()

    def _end_all(self, launches: Sequence[threading.Thread]) -> None:
        """Every machine ended, in parallel; Ctrl-C and SIGTERM are held back until the providers confirm it."""
        with signals_held(self._still_tearing_down):
            with self._lock:
                self._closing = True
            enders = [
                threading.Thread(target=self._end, args=(node,), name="teardown")
                for node in self.nodes
                if node.instance is not None
            ]
            for thread in enders:
                thread.start()
            for thread in [*enders, *launches]:
                thread.join()

    def _still_tearing_down(self) -> None:
        import sys

        sys.stderr.write(
            f"scriba: still tearing down {len(self.nodes)} {self.provider.name} machine(s): waiting until the provider "
            "confirms each one gone, so that nothing keeps billing. Interrupting is held back until then.\n"
        )

    # ------------------------------------------------------------------------------------------- the queue

    def _run_fleet(
        self, ready: list[RentedNode], files: Sequence[Path], file_options: Sequence[JobOptions] | None
    ) -> OffloadResult:
        config = self.config
        deadline = None
        if config.budget_usd is not None:
            per_hour = sum(node.offload.offer.usd_per_hour for node in ready)
            if per_hour > 0:
                # Every node stops when the whole budget would be spent with all of them running.
                deadline = time.time() + (config.budget_usd - self.cost_usd) / per_hour * 3600
        endpoints = []
        expire = []
        for node in ready:
            assert node.instance is not None
            if not node.instance.host:
                raise OffloadError(f"{self.provider.name} reported {node.instance.instance_id} ready with no address")
            endpoints.append(SshEndpoint(node.instance.host, node.instance.port, node.instance.user, config.key_file))
            expire.append(self.provider.self_terminate_command(node.instance.instance_id))
        fleet = Fleet(
            endpoints,
            FleetConfig(
                config.options, config.known_hosts, config.setup, self.timing, pin_new_host=True, deadline=deadline
            ),
            status=self._say,
            release=lambda index: self._end(ready[index]),
            on_expire=expire,
        )
        fleet.on_file = lambda kind, index, text: self._say(text, kind, index)
        self._fleet = fleet
        return fleet.run(files, file_options)


def build_rented_fleet(
    provider_name: str,
    chosen: Offer,
    count: int,
    data_dir: Path,
    *,
    options: JobOptions,
    budget_usd: float | None,
    estimate_usd: float | None,
    status: Callable[[str], None],
) -> RentedFleet:
    """``count`` machines like ``chosen`` running one queue, each rented as a single offload's is."""
    from app.cloud.offload.launch import ledger_for, live_offers_for, rented_config
    from app.cloud.providers import provider_from_keyring

    provider = provider_from_keyring(provider_name)
    config = rented_config(data_dir, options, budget_usd, estimate_usd)
    offers = live_offers_for(provider, chosen, count)
    if len(offers) < count:
        status(f"{provider.title} has {len(offers)} {chosen.gpu} machine(s) free, not {count}: renting those")
    return RentedFleet(provider, offers, ledger_for(data_dir), config, status)
