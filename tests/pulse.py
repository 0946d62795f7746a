"""A private PulseAudio server with a null sink, so that audio played into it can be captured through the
real PortAudio/ALSA/PulseAudio path that a microphone takes (no sound card on CI machines).

The server listens on its own socket in a temporary directory (``PULSE_SERVER`` points clients at it), so
it never touches a user's running PulseAudio, and it is stopped by its pid afterwards.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SINK = "scriba_test"


def missing_tools() -> list[str]:
    return [tool for tool in ("pulseaudio", "pactl", "paplay") if shutil.which(tool) is None]


@contextmanager
def pulse_loopback(directory: Path) -> Iterator[dict[str, str]]:
    """Start the server; yield the environment clients need (``PULSE_SERVER``); stop it on exit.

    The null sink's monitor is the default source: what ``paplay`` plays is what a capture stream hears.
    """
    socket = directory / "native"
    env = {
        **os.environ,
        "PULSE_SERVER": f"unix:{socket}",
        "PULSE_RUNTIME_PATH": str(directory),
        "PULSE_STATE_PATH": str(directory),
        "HOME": str(directory),  # the server writes its cookie and state under HOME
    }
    server = subprocess.Popen(
        [
            "pulseaudio",
            "-n",  # no default.pa: only the modules below, so nothing probes for real hardware
            "--daemonize=no",
            "--exit-idle-time=-1",
            "--disallow-exit",
            "--log-target=stderr",
            "-L",
            f"module-native-protocol-unix socket={socket} auth-anonymous=1",
            "-L",
            f"module-null-sink sink_name={SINK} rate=16000 channels=1",
            "-L",
            "module-always-sink",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            info = subprocess.run(["pactl", "info"], env=env, capture_output=True, text=True)
            if info.returncode == 0:
                break
            if server.poll() is not None or time.monotonic() > deadline:
                stderr = server.stderr.read() if server.stderr and server.poll() is not None else ""
                raise RuntimeError(f"PulseAudio did not start: {info.stderr.strip()} {stderr.strip()}")
            time.sleep(0.1)
        for command in (["pactl", "set-default-sink", SINK], ["pactl", "set-default-source", f"{SINK}.monitor"]):
            subprocess.run(command, env=env, check=True, capture_output=True)
        yield {key: env[key] for key in ("PULSE_SERVER", "PULSE_RUNTIME_PATH")}
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def play(path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Play a file into the null sink (it comes out of the default source, its monitor)."""
    return subprocess.Popen(["paplay", f"--device={SINK}", str(path)], env={**os.environ, **env})
