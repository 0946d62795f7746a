"""`scriba models` and `scriba token`: the speech models on disk and the Hugging Face token for pyannote."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from app.core.errors import ExitCode

if TYPE_CHECKING:
    from app.core.engine.models import ResolvedModel


def add_models_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    models = commands.add_parser("models", help="list, download or remove Whisper models and pyannote")
    model_commands = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    model_commands.add_parser("list", help="the catalog and what is on disk")
    download = model_commands.add_parser("download", help="download a catalog model, or pyannote")
    download.add_argument("name")
    remove = model_commands.add_parser("remove", help="delete a downloaded model")
    remove.add_argument("name")
    recommend = model_commands.add_parser(
        "recommend", help="the model this computer should use (fast, balanced, accurate) and why; downloads nothing"
    )
    recommend.add_argument("--json", action="store_true", help="print the recommendation as JSON")


def add_token_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    token = commands.add_parser("token", help="the Hugging Face token for pyannote (kept in the system keyring)")
    token_commands = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    token_commands.add_parser("set", help="store a token (read from standard input, never echoed)")
    token_commands.add_parser("clear", help="delete the stored token")
    token_commands.add_parser("status", help="say whether a token is available and from where")


def cmd_models(args: argparse.Namespace) -> int:
    from app.core.engine.models import (
        CATALOG,
        SPEED_SOURCE,
        default_model,
        download_model,
        installed_models,
        relative_speed,
        remove_model,
    )
    from app.core.errors import ModelError

    if getattr(args, "name", None) == "pyannote":
        from app.cli import pyannote_download

        return pyannote_download.download() if args.models_command == "download" else pyannote_download.remove()
    if args.models_command == "recommend":
        return _recommend(bool(args.json))
    try:
        if args.models_command == "list":
            on_disk = {model.name: model for model in installed_models()}
            chosen = default_model().name
            print(f"{'model':18} {'size':>8} {'VRAM':>6} {'languages':12} {'speed':>10}  status")
            for name, entry in CATALOG.items():
                model = on_disk.get(name)
                status = _status(model) if model else "not downloaded"
                if name == chosen:
                    status += "  (default)"
                languages = "multilingual" if entry.multilingual else "English only"
                speed = f"{relative_speed(name):g}x large"
                print(f"{name:18} {entry.size_mb:>5} MB {entry.vram_gb:>4.0f} GB {languages:12} {speed:>10}  {status}")
            print(f"speed: relative to large; {SPEED_SOURCE}")
            from app.cli.pyannote_download import list_line

            print(list_line())
            return ExitCode.OK
        if args.models_command == "download":
            wanted = CATALOG.get(args.name)
            if wanted is not None:
                print(f"downloading {args.name} ({wanted.size_mb} MB) …", file=sys.stderr)
            from app.cli.progress import DownloadBar

            with DownloadBar(f"downloading {args.name}", sys.stderr) as bar:
                model = download_model(args.name, progress=bar)
            print(f"{model.name}: {model.path}")
            return ExitCode.OK
        if args.models_command == "remove":
            print(f"removed {remove_model(args.name)}")
            return ExitCode.OK
    except ModelError as error:
        print(f"scriba: error: {error}", file=sys.stderr)
        return ExitCode.FAILED
    return ExitCode.USAGE


def _status(model: ResolvedModel) -> str:
    """Where a model on disk comes from: the built-in one by that name (its folder is inside the package that
    ships it, a path that means nothing to the user), the others by their folder."""
    if model.origin == "bundled":
        return "built in (comes with Scriba)"
    return f"{'downloaded' if model.origin == 'cache' else model.origin}: {model.path}"


def _recommend(as_json: bool) -> int:
    """The first screen's recommendation on standard output, from doctor's checks of this computer."""
    import json

    from app.core.engine.recommend import read_machine, recommend

    advice = recommend(read_machine())
    if as_json:
        print(json.dumps(advice.to_dict(), indent=2))
        return ExitCode.OK
    print(advice.format())
    best = advice.best
    if not best.on_disk:
        print(f"\nTo use it: scriba models download {best.model}, then pick it in Settings (or --model {best.model}).")
    return ExitCode.OK


def cmd_token(args: argparse.Namespace) -> int:
    from app.core.secrets import HF_TOKEN_KEY, huggingface_token, set_secret

    if args.token_command == "status":
        token, origin = huggingface_token()
        if token:
            print(f"a Hugging Face token is available (from {origin}); `scriba models download pyannote` uses it")
        else:
            print(
                "no Hugging Face token. `scriba token set` stores one; `scriba models download pyannote` asks for it."
            )
        return ExitCode.OK
    try:
        if args.token_command == "set":
            if sys.stdin.isatty():
                import getpass

                value = getpass.getpass("Hugging Face token (input hidden): ").strip()
            else:
                value = sys.stdin.readline().strip()
            if not value:
                print("scriba: error: empty token; nothing stored", file=sys.stderr)
                return ExitCode.FAILED
            set_secret(HF_TOKEN_KEY, value)
            print("token stored in the system keyring")
        else:
            set_secret(HF_TOKEN_KEY, None)
            print("token removed from the system keyring")
    except Exception as error:
        from app.core.secrets import keyring_problem

        problem = keyring_problem() or f"the system keyring is not usable ({type(error).__name__}: {error})"
        print(f"scriba: error: the token was not stored: {problem}", file=sys.stderr)
        return ExitCode.FAILED
    return ExitCode.OK
