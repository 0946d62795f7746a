"""Issue 16's scenario, measured: six recordings and one 10-minute four-voice recording on two rented machines,
one of which is killed mid-run.

    .venv/bin/python benchmarks/fleet_scenario.py      (as root: two real sshds; ~10 min on 2 cores)

The two "machines" are real OpenSSH servers on this computer, rented through RunPod's documented API replayed
by a local HTTP server (tests/cloud/replay_server.py), so the ledger, the verified teardown and the idle release
are the real ones. The long recording (two readers and pyannote's call, four real voices; who spoke when from
benchmarks/long_material.py) is cut across the machines; when its second piece starts, that machine's worker
is SIGKILLed. Printed: every file answered once or not, the long file's DER (strict) against the truth for the
fleet and for one local run over the whole file, speakers found, what is left running, the ledger, the pods.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_engine import sample_dir
from benchmarks.bench_pieces import material
from benchmarks.long_material import SAMPLE_RATE, build
from tests import metrics


def main() -> None:
    from app.cloud.fleet.rented import RentedFleet
    from app.cloud.fleet.run import FleetTiming
    from app.cloud.offload.base import OffloadConfig, RemoteSetup
    from app.cloud.offload.ledger import Ledger
    from app.cloud.providers import RunPod
    from app.cloud.types import Offer
    from app.core.engine.pipeline import Engine
    from app.core.queue.jobs import JobOptions
    from tests.cloud.replay_server import ReplayServer
    from tests.cloud.runpod_pods import ReplayedPods
    from tests.cloud.sshd import LoopbackSshd, host_environment
    from tests.synth import write_wav

    options = JobOptions(model="tiny.en", language="en", diarize=True, diarizer="embedded", formats=("json",))
    folder = Path(tempfile.mkdtemp(prefix="scriba-scenario-"))
    real = metrics.real_speech_dir()
    assert real is not None, metrics.REAL_SPEECH_HINT
    samples, truth, _ = build(material("voices"), 2)
    length = 10 * 60 * SAMPLE_RATE
    samples = samples[:length]
    truth = [(s, min(e, 600.0), who) for s, e, who in truth if s < 600.0]
    long_file = write_wav(folder / "four voices.wav", samples)
    six = [real / f"{name}.wav" for name in ("gentle_lucier", "mfa_en_spontaneous_a", "mfa_en_spontaneous_b")]
    six += [real / "ami_ES2003a_0-30.wav", real / "ami_EN2002a_0-30.wav", sample_dir() / "sample.wav"]
    files = [long_file, *six]

    servers = [LoopbackSshd(folder / f"host{index}") for index in range(2)]
    servers[0].start()
    servers[1].directory.mkdir(parents=True)
    for name in ("client_key", "client_key.pub", "authorized_keys"):
        shutil.copy(servers[0].directory / name, servers[1].directory / name)
    servers[1].start()
    pods = ReplayedPods([server.port for server in servers])
    said: list[str] = []
    killed: list[str] = []
    fleet_box: list[Any] = []

    def status(text: str) -> None:
        said.append(text)
        print(f"  [fleet] {text}", flush=True)
        started = re.fullmatch(r"(node\d+): four voices\.wav \(part 2 of \d+\) started", text)
        if started and not killed and fleet_box and fleet_box[0]._fleet is not None:
            node = next(node for node in fleet_box[0]._fleet.nodes if node.name == started.group(1))
            os.kill(node.pid, signal.SIGKILL)
            killed.append(node.name)

    try:
        with ReplayServer() as api:
            pods.route(api)
            offer = Offer(
                "runpod", "NVIDIA GeForce RTX 4090", "RTX 4090", 1, 24.0, 0.69, None, "per-second", 1.0,
                "api:runpod", "2026-11-24", True,
            )  # fmt: skip
            ledger = Ledger(folder / "ledger.sqlite3")
            config = OffloadConfig(
                options=options,
                key_file=servers[0].client_key,
                public_key=servers[0].client_key.with_suffix(".pub").read_text().strip(),
                known_hosts=folder / "pinned_hosts",
                pin_new_host=True,
                setup=RemoteSetup((sys.executable, "-m", "app"), tuple(host_environment(folder, numeric=True).items())),
                budget_usd=5.0,
            )
            fleet = RentedFleet(
                RunPod("runpod-key", base_url=api.url + "/v2"), [offer, offer], ledger, config, status,
                FleetTiming(connect_wait_s=30.0),
            )  # fmt: skip
            fleet_box.append(fleet)
            started = time.perf_counter()
            result = fleet.run(files)
            fleet_seconds = time.perf_counter() - started
            open_entries = len(ledger.open_entries())
    finally:
        for server in servers:
            server.stop()

    answered = {
        name: sum(1 for line in said if re.fullmatch(rf"node\d: {re.escape(name)} done", line))
        for name in (path.name for path in files)
    }
    local = Engine().run(long_file, options.to_pipeline(None))
    reference = metrics.turns_annotation(truth)

    def der(transcript: Any) -> tuple[float, int]:
        turns = [(t.start, t.end, t.speaker) for t in transcript.diarization.turns]
        return metrics.der(reference, metrics.turns_annotation(turns)), len({who for _, _, who in turns})

    left = subprocess.run(["pgrep", "-af", "worker fleet-node"], capture_output=True, text=True).stdout
    print("\nscenario: 6 recordings + a 10-minute four-voice recording on 2 rented machines (RunPod replayed)")
    print(f"  files done: {len(result.transcripts)} of {len(files)}; failed: {len(result.failures)}")
    print(f"  answers per file: {answered}")
    print(f"  node killed mid-run: {killed or 'none'}; re-sent: {sum('goes to another node' in s for s in said)}")
    if 0 in result.transcripts:
        (fleet_der, found), (local_der, local_found) = der(result.transcripts[0]), der(local)
        print(f"  long file DER, fleet: {fleet_der:.3f} ({found} speakers); one local run: {local_der:.3f} "
              f"({local_found} speakers); true speakers: {len(reference.labels())}")  # fmt: skip
        print(f"  {result.transcripts[0].diarization.reason}")
    print(f"  workers left running: {len([line for line in left.splitlines() if 'pgrep' not in line])}")
    print(f"  ledger entries open: {open_entries}; pods created {pods.created}, destroyed {sorted(pods.ended_at)}")
    print(f"  teardowns: {[item.state for item in fleet.teardowns]}; fleet wall time {fleet_seconds:.0f} s")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
