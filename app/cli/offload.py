"""`scriba offload`: run (this machine's side of an offload), sweep and key; `estimate` is in offload_estimate.py
and the remote machine's side, `scriba worker`, in remote_worker.py."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.cloud.offload.base import OffloadEvent, OffloadResult
    from app.cloud.offload.run import Offload
    from app.cloud.providers import Provider
    from app.core.queue.jobs import JobOptions

from app.cli.common import add_job_options, job_options_from_args
from app.core.errors import ExitCode

PROVIDERS = ("ssh", "lambda", "vast", "runpod")


def add_run_parser(offload_commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``offload run``, with the job options `transcribe` and `queue add` take too."""
    run = offload_commands.add_parser("run", help="run files on a rented GPU or your own SSH host, then tear down")
    run.add_argument("inputs", nargs="+", type=Path, metavar="FILE")
    run.add_argument("--provider", choices=PROVIDERS, required=True)
    run.add_argument("--gpu", default=None, help="the GPU to rent (e.g. A10, 'RTX 4090'); default: the cheapest fit")
    run.add_argument("--budget", type=float, default=None, metavar="USD", help="refuse estimates above; hard stop")
    run.add_argument(
        "--host",
        action="append",
        default=[],
        help="--provider ssh: ssh://user@host:port; give it again for a fleet over several hosts at once",
    )
    run.add_argument("--identity", type=Path, default=None, help="private key for the SSH host")
    run.add_argument(
        "--known-hosts",
        type=Path,
        default=Path("~/.ssh/known_hosts").expanduser(),
        help="known-hosts file with the SSH host's key (default: ~/.ssh/known_hosts)",
    )
    run.add_argument(
        "--remote-command",
        default="scriba",
        help="how to run Scriba on the remote (default: scriba), e.g. '/opt/venv/bin/python -m app'; leading "
        "NAME=VALUE words set its environment, as in the window",
    )
    run.add_argument("--remote-env", action="append", default=[], metavar="NAME=VALUE", help="remote environment")
    run.add_argument(
        "--install-remote",
        action="store_true",
        help="--provider ssh: where Scriba is missing, install it there (a private venv under the remote user's "
        "cache folder, reused next time; nothing else on the host changes)",
    )
    run.add_argument(
        "--remote-python",
        default="python3",
        metavar="COMMAND",
        help="with --install-remote: the host's Python 3.11 or 3.12 to install into (default: python3)",
    )
    run.add_argument(
        "--send-hf-token",
        action="store_true",
        help="let this job's remote use your Hugging Face token (for pyannote); never sent otherwise",
    )
    run.add_argument(
        "--gpus",
        type=_machine_count,
        default=1,
        metavar="N",
        help="rent N machines that share the files (one queue; each machine ended as soon as it has nothing left)",
    )
    run.add_argument("-y", "--yes", action="store_true", help="do not ask before renting")
    add_job_options(run)


def _machine_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of machines") from None
    if not 1 <= count <= 64:
        raise argparse.ArgumentTypeError(f"{count} machines: give 1 to 64")
    return count


def _print_event(event: OffloadEvent) -> None:
    if event.kind in ("status", "started", "done", "failed", "finished"):
        cost = f" · ${event.cost_usd:.3f}" if event.cost_usd else ""
        print(f"[{event.elapsed_s:6.0f} s{cost}] {event.message}", file=sys.stderr, flush=True)


def cmd_offload_run(args: argparse.Namespace, data_dir: Path) -> int:
    from app.cloud.offload.base import OffloadConfig, OffloadError, RemoteSetup
    from app.cloud.offload.controller import parse_remote_command
    from app.cloud.offload.launch import ledger_for
    from app.cloud.offload.queue_offload import resolved_options
    from app.cloud.offload.results import results_dir
    from app.cloud.offload.run import Offload
    from app.cloud.providers.ssh_host import SshHostProvider
    from app.cloud.remote.transport import TransportError, parse_ssh_url

    missing = [path for path in args.inputs if not path.is_file()]
    if missing:
        print(f"scriba: error: {missing[0]}: no such file; nothing was launched", file=sys.stderr)
        return ExitCode.USAGE
    from app.core.queue.jobs import data_folder_problem

    # The ledger, the transcripts stored before the remote copy goes and what -o refuses all live there.
    problem = data_folder_problem(data_dir)
    if problem:
        print(f"scriba: error: {problem}; nothing was launched", file=sys.stderr)
        return ExitCode.FAILED
    if args.provider != "ssh":
        return _run_rented(args, _job_model_options(job_options_from_args(args)), data_dir)
    if args.gpus > 1:
        print("scriba: error: --gpus is for renting; for your own machines give --host once per host", file=sys.stderr)
        return ExitCode.USAGE
    if not args.host:
        print("scriba: error: --provider ssh needs --host ssh://user@host:port", file=sys.stderr)
        return ExitCode.USAGE
    try:
        endpoints = [parse_ssh_url(host, args.identity) for host in args.host]
    except TransportError as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return ExitCode.USAGE
    endpoint = endpoints[0]
    try:
        # The window's own reading: leading NAME=VALUE words are the remote environment, as with env(1).
        parsed = parse_remote_command(args.remote_command)
    except ValueError as error:
        print(f"scriba: error: --remote-command {args.remote_command!r}: {error}", file=sys.stderr)
        return ExitCode.USAGE
    env = list(parsed.env)
    for item in args.remote_env:
        name, separator, value = item.partition("=")
        if not separator or not name:
            print(f"scriba: error: --remote-env {item!r}: write NAME=VALUE", file=sys.stderr)
            return ExitCode.USAGE
        env.append((name, value))
    token = None
    if args.send_hf_token:
        from app.core.secrets import huggingface_token

        token, _ = huggingface_token()
    options = resolved_options(job_options_from_args(args))
    setup = RemoteSetup(
        parsed.command,
        tuple(env),
        install_missing=args.install_remote,
        python=args.remote_python,
    )
    if len(endpoints) > 1:
        if token:
            print("scriba: error: --send-hf-token is for one host; a fleet runs the built-in diarizer", file=sys.stderr)
            return ExitCode.USAGE
        return _run_fleet(args, endpoints, setup, options)
    provider = SshHostProvider(endpoint)
    try:
        ledger = ledger_for(data_dir)
    except OffloadError as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return ExitCode.FAILED
    config = OffloadConfig(
        options=options,
        key_file=args.identity,
        known_hosts=args.known_hosts,
        pin_new_host=False,
        setup=setup,
        hf_token=token,
        budget_usd=args.budget,
        keep_dir=results_dir(data_dir),
    )
    offload = Offload(provider, provider.offer(), ledger, config)
    status, result = run_offload(offload, args.inputs, on_event=_print_event)
    if result is None:
        return status
    return _export_results(args, options, result)


def _run_fleet(args: argparse.Namespace, endpoints: Sequence[Any], setup: Any, options: JobOptions) -> int:
    """Several --host: one queue, each host pulls the next file (app/cloud/fleet/)."""
    from app.cloud.fleet.run import Fleet, FleetConfig
    from app.core.errors import ScribaError

    fleet = Fleet(
        endpoints,
        FleetConfig(options, args.known_hosts, setup),
        status=lambda text: print(f"[fleet] {text}", file=sys.stderr, flush=True),
    )
    with _stop_signals_interrupt() as received:
        try:
            result = fleet.run(args.inputs)
        except KeyboardInterrupt:
            which = received[0] if received else signal.SIGINT
            print(
                f"scriba: {'cancelled' if which is signal.SIGINT else f'stopped by {which.name}'}; every host's "
                "worker was stopped",
                file=sys.stderr,
            )
            return _STOP_SIGNALS[which]
        except ScribaError as error:
            print(f"scriba: error: {error}", file=sys.stderr)
            return ExitCode.FAILED
    return _export_results(args, options, result)


def _job_model_options(options: JobOptions) -> JobOptions:
    """The options with the model a job would run, as `offload estimate` prices it (--model, else the model in
    Settings, else the best on disk), so that what is estimated is what the rented machine runs."""
    from app.cli.offload_estimate import job_model

    given = options.model if options.model not in (None, "auto") else None
    model, chosen_by = job_model(given)
    print(f"estimated for {model}: {chosen_by}", file=sys.stderr)
    return replace(options, model=model)


def _choose_option(args: argparse.Namespace, options: Any) -> Any:
    """The cheapest launchable row of the chosen provider (and GPU, when given) from the estimate."""
    from app.cli.offload_estimate import job_model
    from app.cloud.pricing.estimate import Assumptions, Job, estimate
    from app.cloud.pricing.prices import MeasuredSpeeds, Throughput
    from app.cloud.providers import normalize_gpu_name
    from app.core.engine.audio import media_seconds
    from app.core.engine.models import CATALOG

    seconds = sum(media_seconds(path) for path in args.inputs)
    size = sum(path.stat().st_size for path in args.inputs)
    job = Job(
        audio_seconds=seconds,
        # A model folder of the user's own has no speed figures: priced as the model a job would otherwise use.
        model=options.model if options.model in CATALOG else job_model(None)[0],
        diarize=options.diarize,
        upload_bytes=size,
        files=len(args.inputs),
    )
    measured = MeasuredSpeeds()
    measured.records()  # a damaged file or an implausible record is set aside now, and said once
    for warning in measured.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    result = estimate(job, assumptions=Assumptions(include_local=False), throughput=Throughput(measured=measured))
    rows = [
        option
        for option in result.options
        if option.offer.provider == args.provider
        and option.offer.launchable
        and (args.gpu is None or normalize_gpu_name(option.offer.gpu) == normalize_gpu_name(args.gpu))
    ]
    refused = [item for item in result.excluded if item.offer.provider == args.provider]
    return (min(rows, key=lambda option: option.est_cost_usd) if rows else None), refused


def _run_rented(args: argparse.Namespace, options: Any, data_dir: Path) -> int:
    from app.cloud.offload.launch import build_rented_offload
    from app.core.errors import MediaError, ScribaError
    from app.core.transcript.times import format_duration

    try:
        option, refused = _choose_option(args, options)
    except MediaError as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return ExitCode.USAGE
    if option is None:
        why = "; ".join(f"{item.offer.gpu}: {item.reason}" for item in refused[:3])
        print(
            f"scriba: error: no {args.gpu or 'GPU'} offer of {args.provider} fits this job"
            + (f" ({why})" if why else ""),
            file=sys.stderr,
        )
        return ExitCode.USAGE
    offer = option.offer
    seconds, cost = option.est_seconds, option.est_cost_usd
    machines = f"{args.gpus} x " if args.gpus > 1 else ""
    if args.gpus > 1:
        from app.cloud.pricing.spread import spread_over

        if args.send_hf_token:
            print("scriba: error: --send-hf-token is for one machine, not a fleet", file=sys.stderr)
            return ExitCode.USAGE
        spread = spread_over(option, args.gpus, len(args.inputs))
        seconds, cost = spread.wall_s, spread.cost_usd
        if spread.useful_nodes < args.gpus:
            print(
                f"note: about {spread.useful_nodes} machine(s) are enough here: with more, the upload (or the number "
                "of files) sets the pace, and the others cost their start-up for little",
                file=sys.stderr,
            )
    summary = (
        f"{args.provider} {machines}{offer.gpu} ({offer.vram_gb:.0f} GB) at ${option.usd_per_hour:.3f}/h each: about "
        f"{format_duration(seconds)}, about ${cost:.2f} (price of {offer.price_date})"
    )
    print(f"estimate: {summary}", file=sys.stderr)
    if args.budget is not None and cost > args.budget:
        print(
            f"scriba: error: the estimate (${cost:.2f}) is over the budget (${args.budget:.2f}): nothing was launched",
            file=sys.stderr,
        )
        return ExitCode.FAILED
    if not args.yes:
        if not sys.stdin.isatty():
            print("scriba: error: renting needs a yes: run in a terminal, or pass --yes", file=sys.stderr)
            return ExitCode.USAGE
        answer = input(f"Rent {'them' if args.gpus > 1 else 'it'}? Each machine is destroyed when the job ends. [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing was launched", file=sys.stderr)
            return ExitCode.FAILED
    token = None
    if args.send_hf_token:
        from app.core.secrets import huggingface_token

        token, _ = huggingface_token()
    if not sweep_at_start(data_dir):
        return ExitCode.INTERRUPTED
    if args.gpus > 1:
        return _run_rented_fleet(args, options, data_dir, offer, cost)
    try:
        offload = build_rented_offload(
            args.provider,
            offer,
            data_dir,
            options=options,
            budget_usd=args.budget,
            estimate_usd=option.est_cost_usd,
            hf_token=token,
        )
    except KeyboardInterrupt:
        print("scriba: cancelled; nothing was launched", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except ScribaError as error:  # the offload's, the provider's, the connection's: one line each
        print(f"scriba: error: {error}", file=sys.stderr)
        return ExitCode.FAILED
    status, result = run_offload(offload, args.inputs, on_event=_print_event)
    if result is None:
        return status
    return _export_results(args, options, result)


def _run_rented_fleet(args: argparse.Namespace, options: JobOptions, data_dir: Path, offer: Any, cost: float) -> int:
    """--gpus N: N machines, one queue (app/cloud/fleet/rented.py); what is said of each machine is what its
    provider confirmed."""
    from app.cloud.fleet.rented import build_rented_fleet
    from app.core.errors import ScribaError

    def status(text: str) -> None:
        print(f"[fleet] {text}", file=sys.stderr, flush=True)

    fleet = None
    with _stop_signals_interrupt() as received:
        try:
            fleet = build_rented_fleet(
                args.provider,
                offer,
                args.gpus,
                data_dir,
                options=options,
                budget_usd=args.budget,
                estimate_usd=cost,
                status=status,
            )
            result = fleet.run(args.inputs)
        except KeyboardInterrupt:
            which = received[0] if received else signal.SIGINT
            why = "cancelled" if which is signal.SIGINT else f"stopped by {which.name}"
            print(f"scriba: {why}; {_fleet_teardown_words(fleet)}", file=sys.stderr)
            return _STOP_SIGNALS[which]
        except ScribaError as error:
            print(f"scriba: error: {error}", file=sys.stderr)
            if fleet is not None:
                print(f"scriba: {_fleet_teardown_words(fleet)}", file=sys.stderr)
            return ExitCode.FAILED
    print(f"scriba: {_fleet_teardown_words(fleet)}", file=sys.stderr)
    code = _export_results(args, options, result)
    unconfirmed = [item for item in fleet.teardowns if item.state == "unconfirmed"]
    return ExitCode.FAILED if unconfirmed else code


def _fleet_teardown_words(fleet: Any) -> str:
    """What became of each machine, as its provider confirmed it: never "torn down" on a guess."""
    if fleet is None:
        return "nothing was launched"
    unconfirmed = [item.message for item in fleet.teardowns if item.state == "unconfirmed"]
    if unconfirmed:
        return " ".join(unconfirmed)
    ended = [machine for item in fleet.teardowns if item.state == "terminated" for machine in item.machines]
    if not ended:
        return "no machine was launched"
    return f"{len(ended)} machine(s) terminated (verified): {', '.join(ended)}"


# Signals that end `offload run` the way Ctrl-C does, so the machine is torn down: a service manager's stop or
# `kill` (SIGTERM) and a closed terminal (SIGHUP). Exit statuses as a shell reports them.
_STOP_SIGNALS = {
    getattr(signal, name): ExitCode.for_signal(getattr(signal, name))
    for name in ("SIGINT", "SIGTERM", "SIGHUP")
    if hasattr(signal, name)  # SIGHUP does not exist on Windows
}


@contextlib.contextmanager
def _stop_signals_interrupt() -> Iterator[list[signal.Signals]]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt like Ctrl-C (the default for both is to die without a teardown);
    the list says which arrived."""
    received: list[signal.Signals] = []

    def interrupt(signum: int, frame: Any) -> None:
        received.append(signal.Signals(signum))
        raise KeyboardInterrupt

    previous = {which: signal.signal(which, interrupt) for which in _STOP_SIGNALS if which is not signal.SIGINT}
    try:
        yield received
    finally:
        for which, handler in previous.items():
            signal.signal(which, handler if handler is not None else signal.SIG_DFL)


def teardown_words(offload: Offload) -> str:
    """What became of the machine, as far as the provider confirmed it: never "torn down" on a guess."""
    teardown = offload.teardown
    rents = offload.provider.rents_machines
    if teardown.state == "terminated":
        return (
            f"{offload.provider.name} machine {', '.join(teardown.machines)} was terminated (the provider confirmed it)"
        )
    if teardown.state == "nothing_to_end":
        return "the remote work was removed" if not rents else "no machine was running (the provider confirmed it)"
    if teardown.state == "unconfirmed":
        if not teardown.machines:  # an unclear launch: no machine is known, none is known not to exist
            return f"no machine could be confirmed either way: {teardown.message}"
        return f"the machine was NOT confirmed terminated: {teardown.message}"
    return "nothing was launched"


def run_offload(
    offload: Offload,
    files: Sequence[Path],
    file_options: Sequence[JobOptions] | None = None,
    on_event: Callable[[OffloadEvent], None] | None = None,
) -> tuple[int, OffloadResult | None]:
    """Run ``offload`` as `offload run` does: Ctrl-C, SIGTERM and SIGHUP all tear down, and what is said about
    the machine afterwards is what the provider confirmed. Returns (exit status, result or None)."""
    from app.core.errors import ScribaError

    with _stop_signals_interrupt() as received:
        try:
            return ExitCode.OK, offload.run(files, file_options=file_options, on_event=on_event)
        except KeyboardInterrupt:
            which = received[0] if received else signal.SIGINT
            why = "cancelled" if which is signal.SIGINT else f"stopped by {which.name}"
            print(f"scriba: {why}; {teardown_words(offload)}", file=sys.stderr)
            return _STOP_SIGNALS[which], None
        except ScribaError as error:  # the offload's, the provider's, the connection's: one line each
            print(f"scriba: error: {error}", file=sys.stderr)
            if offload.teardown.state == "unconfirmed":
                print(f"scriba: {teardown_words(offload)}", file=sys.stderr)
            return ExitCode.FAILED, None


def sweep_at_start(data_dir: Path) -> bool:
    """Before renting: end what earlier runs left behind (killed, stopped by a watchdog that could not end the
    machine, a reboot) and check the ledger against each provider's own list. A sweep that fails never stops the
    new run; one the user interrupts does (False), before anything is rented."""
    from app.cloud.offload.launch import sweep_left_behind

    with _stop_signals_interrupt():
        try:
            sweep_left_behind(data_dir, lambda message: print(message, file=sys.stderr))
        except KeyboardInterrupt:
            print(
                "scriba: stopped while checking for machines left by earlier runs; nothing was launched (the check "
                "runs again at the next start, or with `scriba offload sweep`)",
                file=sys.stderr,
            )
            return False
        except Exception as error:  # tried again at the next start and by `offload sweep`
            print(f"scriba: could not check for machines left by earlier runs ({error})", file=sys.stderr)
    return True


def add_sweep_and_key_parsers(offload_commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    offload_commands.add_parser(
        "sweep", help="find machines a crashed run left behind (in the ledger) and terminate them"
    )
    key = offload_commands.add_parser("key", help="a provider's API key, kept in the system keyring")
    key.add_argument("key_action", choices=("set", "clear", "status"))
    key.add_argument("provider", choices=PROVIDERS[1:])


def cmd_offload_sweep(
    data_dir: Path,
    providers: Mapping[str, Provider] | None = None,
    notify: Callable[[str], None] | None = None,
) -> int:
    """``providers``: default, every provider whose key is set; ``notify`` hears what the sweep finds and does
    (default: standard error)."""
    from app.cloud.offload.launch import ledger_for_sweep
    from app.cloud.providers import configured_providers

    tell = notify or (lambda message: print(message, file=sys.stderr))
    opened = ledger_for_sweep(data_dir)
    if providers is None:
        providers = configured_providers()
    if not opened.readable:
        try:
            return _sweep_from_providers(opened, providers, tell)
        finally:
            if opened.ledger is not None:
                opened.ledger.close()
    ledger = opened.ledger
    assert ledger is not None
    if not ledger.open_entries() and not providers:
        print(
            "the ledger is clean: no machine was left running (no provider key is set, so no provider's list was read)"
        )
        return ExitCode.OK
    # Every provider with a key is asked for its own list, even when the ledger looks clean: a ledger that was
    # wrong or could not be written must not hide a machine that bills.
    results = ledger.sweep_orphans(providers, tell)
    still_open = ledger.open_entries()
    unknown = [result for result in results if result.outcome == "unknown_machine"]
    if not still_open and not unknown:
        checked = ", ".join(provider.title for provider in providers.values()) or "no provider"
        print(f"the ledger is clean: no machine was left running (checked against {checked})")
        return ExitCode.OK
    print(
        f"{len(results)} checked; {len(still_open)} still open"
        + (f"; {len(unknown)} machine(s) not in this ledger" if unknown else "")
    )
    return ExitCode.FAILED


def _sweep_from_providers(opened: Any, providers: Mapping[str, Provider], tell: Callable[[str], None]) -> int:
    """The ledger cannot be read: end every machine that carries Scriba's label in each provider's own list."""
    from app.cloud.offload.ledger import end_labelled_machines

    if not providers:
        print(
            f"scriba: error: {opened.problem}. No provider key is set, so no provider's own list of machines can be "
            "read either: set one with `scriba offload key set PROVIDER` and run `scriba offload sweep` again, or "
            "check each provider's console.",
            file=sys.stderr,
        )
        return ExitCode.FAILED
    checked = ", ".join(provider.title for provider in providers.values())
    tell(
        f"{opened.problem}. Without its entries, this sweep works from each provider's own list of machines "
        f"({checked}): every machine labelled scriba-… is ended, even one that a run of Scriba still uses."
    )
    results = end_labelled_machines(providers, tell, opened.ledger)
    ended = [result for result in results if result.outcome == "terminated"]
    failed = [result for result in results if result.outcome == "failed"]
    print(
        f"{len(ended)} machine(s) ended from the providers' own lists"
        + (f"; {len(failed)} could not be confirmed ended or checked" if failed else "")
    )
    return ExitCode.FAILED if failed else ExitCode.OK


def cmd_offload_key(args: argparse.Namespace) -> int:
    import getpass

    from app.cloud.providers import PROVIDER_CLASSES, api_key, key_env_name
    from app.core.secrets import get_secret, set_secret

    cls = PROVIDER_CLASSES[args.provider]
    env_name = key_env_name(cls.name)
    if args.key_action == "status":
        where = f"keyring: scriba/{cls.key_name}; environment: {env_name}"
        print(f"{cls.title}: {'a key is set' if api_key(cls) else 'no key'} ({where})")
        return ExitCode.OK
    if args.key_action == "set":
        value = getpass.getpass(f"{cls.title} API key: ") if sys.stdin.isatty() else sys.stdin.readline()
        if not value.strip():
            print("scriba: error: empty key; nothing stored", file=sys.stderr)
            return ExitCode.USAGE
    try:
        set_secret(cls.key_name, value.strip() if args.key_action == "set" else None)
    except Exception as error:  # keyring's NoKeyringError, a locked or broken backend: never a traceback
        print(
            f"scriba: error: the system keyring is not available ({type(error).__name__}), so the key was "
            f"{'not stored' if args.key_action == 'set' else 'not removed'}. Install or unlock a keyring "
            "(GNOME Keyring, KWallet, macOS Keychain, Windows Credential Manager), or for this shell only set "
            f"{env_name} in the environment.",
            file=sys.stderr,
        )
        return ExitCode.FAILED
    if args.key_action == "clear":
        print(f"{cls.title}: key removed from the keyring" + (f" ({env_name} is still set)" if api_key(cls) else ""))
        return ExitCode.OK
    # Some backends take a key without a word and keep nothing (keyring's null backend): read it back.
    try:
        kept = get_secret(cls.key_name) == value.strip()
    except Exception:
        kept = False
    if not kept:
        import keyring

        backend = type(keyring.get_keyring())
        print(
            f"scriba: error: the key was not stored: the keyring backend ({backend.__module__}.{backend.__name__}) "
            "took it but keeps nothing (reading it back found no key). Choose a keyring that stores secrets "
            "(GNOME Keyring, KWallet, macOS Keychain, Windows Credential Manager; check PYTHON_KEYRING_BACKEND and "
            f"keyringrc.cfg), or for this shell only set {env_name} in the environment.",
            file=sys.stderr,
        )
        return ExitCode.FAILED
    print(f"{cls.title}: key stored in the system keyring (never in a file or log)")
    return ExitCode.OK


def _export_results(args: argparse.Namespace, options: Any, result: Any) -> int:
    """Write what came back as `scriba transcribe` writes it (app/core/transcript/save.py's save_transcript): a file
    edited by hand, or a recording itself, is never replaced, and what -o refuses is kept in the data folder."""
    from app.cli.common import resolve_data_dir
    from app.cli.transcribe import export_record
    from app.cloud.offload.results import forget_stored
    from app.core.transcript.save import first_free_stem, save_transcript

    output = Path(options.output_dir) if options.output_dir else Path.cwd()
    record = export_record(args.data_dir)
    failed = bool(result.failures)
    used: dict[str, Path] = {}
    try:
        for index, transcript in sorted(result.transcripts.items()):
            source = args.inputs[index]
            # Two inputs of one name (a/talk.mp3, b/talk.wav) must not overwrite each other's transcript.
            # The same source again keeps its name; the test is called at once, so the loop variable cannot go stale.
            stem = first_free_stem(source.stem, lambda name: name in used and used[name] != source)  # noqa: B023
            used[stem] = source
            saved = save_transcript(
                transcript,
                output,
                stem,
                options.formats,
                record=record,
                protect=args.inputs,
                fallback=resolve_data_dir(args.data_dir) / "unsaved-exports",
            )
            speed = result.speeds.get(index)
            print(
                f"done: {source} -> {', '.join(str(path) for path in saved.written)}"
                + (f" [{speed:.1f}x]" if speed else "")
            )
            for line in saved.lines:
                print(line, file=sys.stderr)
            failed = failed or saved.failed
            stored = result.stored.get(index)
            if stored is not None and not saved.lost:
                forget_stored(stored)
            elif stored is not None:
                print(f"note: the transcript of {source} is kept in {stored}", file=sys.stderr)
    finally:
        if record is not None:
            record.close()
    for reason in result.failures.values():
        print(f"failed: {reason}", file=sys.stderr)
    return ExitCode.FAILED if failed else ExitCode.OK


def add_offload_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``offload`` group: run (here), estimate (offload_estimate.py), sweep and key."""
    from app.cli.offload_estimate import add_offload_estimate_parser

    offload = commands.add_parser("offload", help="estimate, then run jobs on a rented GPU or your own SSH host")
    actions = offload.add_subparsers(dest="offload_command", metavar="ACTION", required=True)
    add_run_parser(actions)
    add_offload_estimate_parser(actions)
    add_sweep_and_key_parsers(actions)
